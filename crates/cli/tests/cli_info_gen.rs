//! `tcsparse info` and `tcsparse gen`: output snapshots, round trips and errors.

use std::path::PathBuf;
use std::process::Output;

mod common;
use common::tcsparse;

fn workdir(name: &str) -> PathBuf {
    common::workdir("cli_info_gen", name)
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn info_prints_the_statistics_table() {
    let dir = workdir("info");
    // A 6×6 symmetric matrix stored as its lower triangle (expands to 10 entries), one empty row.
    std::fs::write(
        dir.join("small.mtx"),
        "%%MatrixMarket matrix coordinate real symmetric\n% tiny test matrix\n6 6 7\n\
         1 1 4.0\n2 1 -1.0\n2 2 4.0\n3 3 2.5\n5 1 0.5\n5 5 1.0\n6 2 -3.0\n",
    )
    .unwrap();
    insta::assert_snapshot!(
        "cli_info_small",
        stdout(&tcsparse(&["info", "small.mtx"], &dir))
    );
}

#[test]
fn info_reports_bad_files_with_the_line() {
    let dir = workdir("info_bad");
    std::fs::write(
        dir.join("bad.mtx"),
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
    )
    .unwrap();
    let o = tcsparse(&["info", "bad.mtx"], &dir);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 3") && err.contains("bad.mtx"), "{err}");
}

#[test]
fn gen_writes_a_matrix_that_reads_back_identically() {
    let dir = workdir("gen");
    let o = tcsparse(
        &[
            "gen",
            "clustered:n=500,bs=25,seed=1",
            "--seed",
            "7",
            "-o",
            "c.mtx.gz",
        ],
        &dir,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.contains("wrote c.mtx.gz") && log.contains("seed=7"),
        "{log}"
    );
    let back = tcsparse::formats::mtx::read_matrix(dir.join("c.mtx.gz")).unwrap();
    let spec: tcsparse::formats::generate::GeneratorSpec =
        "clustered:n=500,bs=25,seed=7".parse().unwrap();
    assert_eq!(back, spec.build().unwrap());
}

#[test]
fn gen_rejects_bad_specs() {
    let dir = workdir("gen_bad");
    let o = tcsparse(&["gen", "rmat:scale=4,bogus=1", "-o", "x.mtx"], &dir);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown parameter `bogus`"));
}

#[test]
fn help_texts() {
    let dir = workdir("help");
    insta::assert_snapshot!("cli_gen_help", stdout(&tcsparse(&["gen", "--help"], &dir)));
    insta::assert_snapshot!(
        "cli_info_help",
        stdout(&tcsparse(&["info", "--help"], &dir))
    );
}
