//! What `cargo install --path crates/cli` gives must work without the source tree: the built
//! binary, copied out of the target folder, runs `demo` from an empty directory with an
//! environment that holds no `TCSPARSE_*` variable (nor `CARGO_*`, nor a `RUST_LOG`), so the
//! demo's matrix can only come from the binary itself.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `bin args` in `cwd` with only `PATH` and `HOME` (a temporary one) in the environment.
fn run_bare(bin: &Path, args: &[&str], cwd: &Path, home: &Path) -> Output {
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .output()
        .expect("run the copied tcsparse")
}

#[test]
fn the_installed_binary_runs_the_demo_from_an_empty_directory() {
    let root = tempfile::tempdir().expect("temp dir");
    let (bin_dir, cwd, home) = (
        root.path().join("bin"),
        root.path().join("work"),
        root.path().join("home"),
    );
    for d in [&bin_dir, &cwd, &home] {
        std::fs::create_dir(d).expect("mkdir");
    }
    let bin = bin_dir.join("tcsparse");
    std::fs::copy(env!("CARGO_BIN_EXE_tcsparse"), &bin).expect("copy the binary");

    let out = run_bare(&bin, &["demo", "--iters", "1", "--n", "16"], &cwd, &home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed outside the tree: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("on cora.mtx.gz") && stdout.contains("2708 × 2708"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("spmm ")), "{stdout}");

    let out = run_bare(
        &bin,
        &["demo", "--iters", "1", "--n", "16", "--json"],
        &cwd,
        &home,
    );
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["input"], "cora.mtx.gz");
    assert_eq!(doc["matrix"]["nnz"], 10556);

    // It wrote nothing where it ran.
    assert_eq!(std::fs::read_dir(&cwd).expect("read cwd").count(), 0);
}
