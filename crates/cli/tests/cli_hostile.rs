//! Issue 21 from the command line: hostile files, generator specs and numbers give a non-zero exit
//! with a typed message — never a panic, an abort or the OOM killer. Every command runs under an
//! address-space limit (`ulimit -v`, 4 GiB), so the default memory budget (half of it) is the one a
//! constrained user gets, and an allocation that escaped the budget would abort the process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[allow(dead_code)] // the helpers other suites use
mod common;

const ULIMIT_KIB: u64 = 4 << 20;

fn bad_file(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tests/bad_files")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// Runs `tcsparse args…` under `ulimit -v`, with no budget override in the environment.
fn limited(args: &[&str], dir: &Path) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {ULIMIT_KIB} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(dir)
        .env_remove("TCSPARSE_MEMORY_BUDGET")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

/// Asserts a clean refusal: exit status 1 (anyhow's error exit, not a signal, abort or panic's
/// 101) and `needles` in stderr.
fn refused(args: &[&str], needles: &[&str]) {
    let dir = common::workdir("cli_hostile", "refused");
    let o = limited(args, &dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {:?}\n{err}", o.status);
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(
        !err.contains("memory allocation"),
        "{args:?} aborted:\n{err}"
    );
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in\n{err}");
    }
}

fn small_matrix(dir: &Path) -> String {
    let p = dir.join("small.mtx");
    std::fs::write(
        &p,
        "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.0\n2 3 2.0\n3 2 -1.0\n",
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn tiny_files_declaring_giant_shapes_are_refused_with_the_need() {
    for f in [
        "limits/max_u32_rows.mtx",
        "limits/two_billion_rows.mtx",
        "limits/symmetric_max_u32.mtx",
        "limits/declares_2e40_entries.mtx",
    ] {
        refused(
            &["info", &bad_file(f)],
            &["line 2:", "would need", "memory budget"],
        );
    }
    refused(
        &["info", &bad_file("npz/four_billion_rows.npz")],
        &["would need", "memory budget"],
    );
    refused(
        &["info", &bad_file("npz/member_claims_4gib.npz")],
        &["inflating npz member `data.npy` would need"],
    );
}

#[test]
fn npz_that_would_silently_change_is_refused() {
    refused(
        &["info", &bad_file("npz/indptr_starts_at_1.npz")],
        &["indptr[0] is 1, expected 0"],
    );
    refused(
        &["info", &bad_file("npz/zip64_directory_near_u64_max.npz")],
        &["bad zip container"],
    );
}

#[test]
fn huge_n_is_refused_before_allocating() {
    let dir = common::workdir("cli_hostile", "n");
    let m = small_matrix(&dir);
    for n in ["18446744073709551615", "4294967296"] {
        refused(
            &["spmm", "--cpu", "--n", n, &m],
            &[&format!("--n {n}: B (3 × {n})"), "would need"],
        );
    }
}

#[test]
fn generators_that_would_never_stop_are_refused_or_finish() {
    let dir = common::workdir("cli_hostile", "gen");
    refused(
        &["gen", "uniform:n=1,avg=1e9", "-o", "x.mtx"],
        &["nnz_per_row_avg"],
    );
    refused(
        &["gen", "exponential:n=4,rate=nan", "-o", "x.mtx"],
        &["`rate`"],
    );
    refused(
        &["gen", "algebraic:n=18446744073709551615", "-o", "x.mtx"],
        &["too large"],
    );
    let o = limited(
        &["gen", "banded:n=1000,hb=50,fill=1e-20", "-o", "tiny.mtx"],
        &dir,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = limited(
        &[
            "gen",
            "clustered:n=1000,density=1e-45,inter=0",
            "-o",
            "tiny2.mtx",
        ],
        &dir,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn nan_and_inf_values_are_accepted_and_said() {
    let dir = common::workdir("cli_hostile", "nan");
    let f = bad_file("values/nan_inf.mtx");
    let o = limited(&["info", &f], &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("non-finite values: 4 NaN or ±inf"), "{out}");
    let o = limited(&["spmm", "--cpu", "--n", "4", "--iters", "1", &f], &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("4 stored values are NaN or ±inf: the rows of C that use them are not finite"),
        "{out}"
    );
    // The same policy for SpMV: the note, the product, status 0.
    let o = limited(&["spmv", "--cpu", "--iters", "1", &f], &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("4 stored values are NaN or ±inf: the rows of y that use them are not finite"),
        "{out}"
    );
}

#[test]
fn dense_generators_are_refused_before_allocating() {
    refused(
        &[
            "--memory-budget",
            "1G",
            "spamm",
            "--gen",
            "algebraic:n=65536",
        ],
        &[
            "A = B (65536 × 65536) and C (65536 × 65536) would need 32.0 GiB",
            "1.0 GiB",
        ],
    );
    refused(
        &["spamm", "--gen", "exponential:n=18446744073709551615"],
        &["would need", "memory budget"],
    );
}

#[test]
fn memory_budget_option_overrides_and_is_checked() {
    let dir = common::workdir("cli_hostile", "budget");
    let m = small_matrix(&dir);
    refused(
        &["--memory-budget", "32", "info", &m],
        &["would need", "over the memory budget of 32 B"],
    );
    let o = limited(&["--memory-budget", "lots", "info", &m], &dir);
    assert_eq!(o.status.code(), Some(2), "clap usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("K, M, G or T suffix"));
    let o = limited(&["--memory-budget", "1M", "info", &m], &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The environment variable sets the default.
    let o = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(["info", &m])
        .env("TCSPARSE_MEMORY_BUDGET", "32")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("over the memory budget of 32 B"));
}
