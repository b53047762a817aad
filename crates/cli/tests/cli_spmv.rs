//! `tcsparse spmv` on the CPU path (the kernel's bitBSR walk): output snapshotted with times and
//! rates redacted; the kernel line, sizes and errors must not change silently.

mod common;

use std::process::Command;

use common::repo_root;

fn redact(s: &str) -> String {
    common::redact(s, &["GB/s", "GFLOP/s"])
}

fn run(args: &[&str]) -> String {
    common::run_cpu(args)
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
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("from 1 to 8, got `9`"), "{err}");
}
