//! `tcsparse spmv` on the CPU path (the kernel's bitBSR walk): output snapshotted with times and
//! rates redacted; the kernel line, sizes and errors must not change silently.

use std::path::Path;
use std::process::Command;

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Replaces every number directly followed by `ms`, `GB/s` or `GFLOP/s` with `[t]` / `[rate]`.
fn redact(s: &str) -> String {
    let mut out = String::new();
    for line in s.lines() {
        let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
        for i in 0..words.len() {
            let is_num = !words[i].is_empty()
                && words[i]
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == 'e' || c == '-');
            let next = words
                .get(i + 1)
                .map(|w| w.trim_end_matches([',', ';', ':']));
            if is_num && next == Some("ms") {
                words[i] = "[t]".into();
            } else if is_num && matches!(next, Some("GB/s" | "GFLOP/s")) {
                words[i] = "[rate]".into();
            }
        }
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(repo_root())
        .env("TCSPARSE_FORCE_CPU", "1")
        .output()
        .expect("run tcsparse");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "tcsparse {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn spmv_cpu_path() {
    let f16 = run(&[
        "spmv",
        "datasets/bcsstk17.mtx.gz",
        "--cpu",
        "--precision",
        "f16",
        "--rhs",
        "4",
        "--iters",
        "1",
    ]);
    let tf32 = run(&["spmv", "datasets/west0067.mtx.gz", "--cpu", "--iters", "1"]);
    insta::assert_snapshot!(format!("{}---\n{}", redact(&f16), redact(&tf32)));
}

#[test]
fn spmv_refuses_bad_options() {
    let out = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(["spmv", "datasets/west0067.mtx.gz", "--rhs", "9", "--cpu"])
        .current_dir(repo_root())
        .output()
        .expect("run tcsparse");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rhs takes 1..=8"));
}
