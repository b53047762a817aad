//! Every file the CLI writes reads back through the CLI: the layout files of `convert` are inputs
//! of `info`, `plan`, `spmm`, … (the same matrix, exactly), a damaged one is refused with the
//! cache reader's reason; and `demo` runs from an empty directory on its embedded matrix.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(dir)
        .env("TCSPARSE_FORCE_CPU", "1")
        .env_remove("TCSPARSE_CACHE_DIR")
        .output()
        .unwrap()
}

fn ok(args: &[&str], dir: &Path) -> String {
    let o = run(args, dir);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn workdir(name: &str) -> PathBuf {
    common::workdir_with_west("cli_files", name)
}

/// `info --json` without the path and the read's bytes and time: what the matrix is.
fn facts(input: &str, dir: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&ok(&["info", input, "--json"], dir)).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("input");
    o.remove("read");
    v
}

#[test]
fn layout_files_read_back_as_the_same_matrix() {
    let dir = workdir("layouts");
    let want = facts("west0067.mtx.gz", &dir);
    for layout in ["bittcf", "metcf", "hrpb", "bitbsr"] {
        let out = format!("w.{layout}");
        ok(
            &["convert", "west0067.mtx.gz", "--format", layout, "-o", &out],
            &dir,
        );
        assert_eq!(facts(&out, &dir), want, "{layout}");
    }
    let spmm = ok(&["spmm", "w.bittcf", "--n", "4", "--iters", "1"], &dir);
    assert!(spmm.contains("67 × 67, 294 nonzeros"), "{spmm}");
    let plan = ok(&["plan", "w.hrpb"], &dir);
    assert!(plan.contains("67 × 67, 294 nnz"), "{plan}");
}

#[test]
fn a_damaged_layout_file_is_refused_with_the_reason() {
    let dir = workdir("damaged");
    ok(
        &[
            "convert",
            "west0067.mtx.gz",
            "--format",
            "bittcf",
            "-o",
            "w.bittcf",
        ],
        &dir,
    );
    let mut bytes = std::fs::read(dir.join("w.bittcf")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    std::fs::write(dir.join("bad.bittcf"), &bytes).unwrap();
    let o = run(&["info", "bad.bittcf"], &dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "error: bad.bittcf: layout file: cache payload checksum mismatch (corrupted file)"
    );
    bytes.truncate(20);
    std::fs::write(dir.join("short.bittcf"), &bytes).unwrap();
    let o = run(&["info", "short.bittcf"], &dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("short.bittcf: layout file: truncated"),
        "{err}"
    );
}

#[test]
fn demo_runs_from_an_empty_directory_on_its_embedded_matrix() {
    let dir = common::workdir("cli_files", "empty");
    for e in std::fs::read_dir(&dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let out = ok(&["demo", "--cpu", "--iters", "1", "--n", "4"], &dir);
    assert!(out.contains("on cora.mtx.gz"), "{out}");
    assert!(out.contains("2708 × 2708, 10556 nonzeros"), "{out}");
    // The embedded bytes are the shipped file.
    let shipped = ok(
        &[
            "info",
            common::repo_root()
                .join("datasets/cora.mtx.gz")
                .to_str()
                .unwrap(),
            "--json",
        ],
        &dir,
    );
    let demo: serde_json::Value = serde_json::from_str(&ok(
        &["demo", "--cpu", "--iters", "1", "--n", "4", "--json"],
        &dir,
    ))
    .unwrap();
    let shipped: serde_json::Value = serde_json::from_str(&shipped).unwrap();
    assert_eq!(demo["matrix"], shipped["matrix"]);
}
