//! `tcsparse demo` and `tcsparse spmm` on the CPU reference path: the output is snapshotted with
//! every time and rate redacted (they vary run to run); densities, plan and errors must not change
//! silently.

mod common;

use std::process::Command;

use common::repo_root;

fn redact(s: &str) -> String {
    common::redact(s, &["GFLOP/s"])
}

fn run(args: &[&str]) -> String {
    common::run_cpu(args)
}

#[test]
fn redaction_keeps_structure() {
    assert_eq!(
        redact("read      12.5 ms  x: 3.0 GFLOP/s"),
        "read [t] ms  x: [rate] GFLOP/s\n"
    );
}

#[test]
fn demo_cpu_path() {
    let out = run(&["demo", "--cpu", "--iters", "1"]);
    assert!(out.contains("CPU reference path"), "{out}");
    insta::assert_snapshot!(redact(&out));
}

#[test]
fn spmm_cpu_path() {
    let out = common::spmm_west_cpu(&[]);
    assert!(out.contains("CPU reference path"), "{out}");
    insta::assert_snapshot!(redact(&out));
}

#[test]
fn csr_budget_without_the_csr_kernel_is_refused_before_reading() {
    // The file does not exist: the flag check must come first, with a message naming the fix.
    let out = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(["spmm", "missing.mtx", "--balance", "nnz:64"])
        .current_dir(repo_root())
        .env("TCSPARSE_FORCE_CPU", "1")
        .output()
        .expect("run tcsparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("use it with --kernel csr (got --kernel auto)"),
        "{stderr}"
    );
}

#[test]
fn help_of_the_matrix_commands_names_npz() {
    for cmd in ["plan", "spmm", "demo"] {
        let help = run(&[cmd, "--help"]);
        assert!(
            help.contains(".npz") && help.contains(".mtx"),
            "tcsparse {cmd} --help:\n{help}"
        );
    }
    assert!(run(&["spmm", "--help"]).contains("--precision"));
}

#[test]
fn spmm_with_f32_precision_prints_it() {
    let out = run(&[
        &common::SPMM_WEST_N8[..],
        &["--iters", "1", "--precision", "f32"],
    ]
    .concat());
    assert!(
        out.lines()
            .any(|l| l.starts_with("precision") && l.contains("F32")),
        "{out}"
    );
}

#[test]
fn spmm_uses_the_plan_cache_from_the_environment() {
    let dir = std::env::temp_dir().join(format!("tcsparse-cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spmm = || {
        let out = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
            .args(common::SPMM_WEST_N8)
            .args(["--cpu", "--iters", "1"])
            .current_dir(repo_root())
            .env("TCSPARSE_FORCE_CPU", "1")
            .env("TCSPARSE_CACHE_DIR", &dir)
            .output()
            .expect("run tcsparse");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = spmm();
    assert!(first.contains(" ms  miss: prepared in full"), "{first}");
    let second = spmm();
    assert!(second.contains(" ms  hit: permutation"), "{second}");
    assert!(
        second.contains("prepare ") && second.contains("total"),
        "{second}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
