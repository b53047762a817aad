//! Helpers shared by the CLI integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built `tcsparse` binary with `args` in `dir`.
#[allow(dead_code)]
pub fn tcsparse(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A fresh-or-reused scratch folder `<target tmp>/<suite>/<name>`.
#[allow(dead_code)]
pub fn workdir(suite: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(suite)
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// [`workdir`] holding a copy of the shipped west0067 (`west0067.mtx.gz`).
#[allow(dead_code)]
pub fn workdir_with_west(suite: &str, name: &str) -> PathBuf {
    let dir = workdir(suite, name);
    std::fs::copy(
        repo_root().join("datasets/west0067.mtx.gz"),
        dir.join("west0067.mtx.gz"),
    )
    .unwrap();
    dir
}

/// `tcsparse spmm` of the shipped west0067 with `--n 8`, from the repository root: the start of
/// most command lines these tests run.
#[allow(dead_code)]
pub const SPMM_WEST_N8: [&str; 4] = ["spmm", "datasets/west0067.mtx.gz", "--n", "8"];

/// Runs `tcsparse spmm` of west0067 with `--n 16 --cpu --iters 1 --reorder none` and `extra` as
/// [`run_cpu`] does, and returns its standard output.
#[allow(dead_code)]
pub fn spmm_west_cpu(extra: &[&str]) -> String {
    let base = [
        "spmm",
        "datasets/west0067.mtx.gz",
        "--n",
        "16",
        "--cpu",
        "--iters",
        "1",
        "--reorder",
        "none",
    ];
    run_cpu(&[&base[..], extra].concat())
}

/// The repository root (shipped datasets are read relative to it).
#[allow(dead_code)] // not every test binary that includes this module uses every helper
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Output made stable for a snapshot: every number directly followed by `ms` becomes `[t]`, by one
/// of `rates` (`GFLOP/s`, `GB/s`, …) `[rate]`; the reason the GPU is unavailable (machine-dependent)
/// becomes `[why]`; alignment padding before a redacted time collapses to one space.
#[allow(dead_code)]
pub fn redact(s: &str, rates: &[&str]) -> String {
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
            } else if is_num && next.is_some_and(|w| rates.contains(&w)) {
                words[i] = "[rate]".into();
            }
        }
        let mut l = words.join(" ");
        if let Some(i) = l.find("no GPU (")
            && let Some(j) = l[i..].find("): ")
        {
            l = format!("{}no GPU ([why]{}", &l[..i], &l[i + j..]);
        }
        while l.contains("  [t]") {
            l = l.replace("  [t]", " [t]");
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Runs `tcsparse args` from the repository root on the CPU path (`TCSPARSE_FORCE_CPU=1`), asserts
/// that it succeeded and returns its standard output.
#[allow(dead_code)]
pub fn run_cpu(args: &[&str]) -> String {
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

/// Runs `tcsparse args --json` in `dir` on the CPU path (`TCSPARSE_FORCE_CPU=1`, no plan cache),
/// asserts that it succeeded and returns its standard output parsed as one JSON document.
#[allow(dead_code)]
pub fn cpu_json(args: &[&str], dir: &Path) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .arg("--json")
        .current_dir(dir)
        .env("TCSPARSE_FORCE_CPU", "1")
        .env_remove("TCSPARSE_CACHE_DIR")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not one JSON document ({e}):\n{}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}
