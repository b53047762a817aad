//! `tcsparse reorder`: permutation and matrix outputs, and bad arguments.

use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

/// A scratch folder `name` of this suite holding `g.mtx`: two 4-cliques interleaved (vertices
/// 0,2,4,6 and 1,3,5,7), pattern, general storage.
fn interleaved(name: &str) -> PathBuf {
    let dir = common::workdir("cli_reorder", name);
    let mut s = String::from("%%MatrixMarket matrix coordinate pattern general\n8 8 24\n");
    for i in 0..8 {
        for j in 0..8 {
            if i != j && i % 2 == j % 2 {
                s.push_str(&format!("{} {}\n", i + 1, j + 1));
            }
        }
    }
    std::fs::write(dir.join("g.mtx"), s).unwrap();
    dir
}

/// Runs `tcsparse reorder <input> <args>` in `dir`.
fn reorder(dir: &Path, input: &str, args: &[&str]) -> Output {
    common::tcsparse(&[&["reorder", input][..], args].concat(), dir)
}

#[test]
fn writes_a_valid_permutation_for_every_method() {
    let dir = interleaved("perm");
    for method in ["affinity", "rabbit", "lsh", "degree", "rcm", "none"] {
        for mode in ["symmetric", "row"] {
            let o = reorder(
                &dir,
                "g.mtx",
                &["--method", method, "--mode", mode, "-o", "g.perm"],
            );
            assert!(
                o.status.success(),
                "{method}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let text = std::fs::read_to_string(dir.join("g.perm")).unwrap();
            let mut v: Vec<u32> = text.lines().map(|l| l.parse().unwrap()).collect();
            v.sort_unstable();
            assert_eq!(v, (0..8).collect::<Vec<_>>(), "{method} {mode}");
            assert!(String::from_utf8_lossy(&o.stdout).contains("MeanNNZTC 8×8"));
        }
    }
}

#[test]
fn affinity_groups_the_cliques_in_the_written_matrix() {
    let dir = interleaved("mtx");
    let o = reorder(&dir, "g.mtx", &["--method", "affinity", "-o", "r.mtx"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(dir.join("r.mtx")).unwrap();
    let entries: Vec<(u32, u32)> = text
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| {
            let mut it = l.split_whitespace().map(|x| x.parse::<u32>().unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect();
    assert_eq!(entries.len(), 24);
    // After reordering each clique occupies 4 consecutive indices: every entry stays in its half.
    assert!(
        entries.iter().all(|&(i, j)| (i - 1) / 4 == (j - 1) / 4),
        "{entries:?}"
    );
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let dir = interleaved("bad");
    let o = reorder(&dir, "g.mtx", &["--method", "nope", "-o", "g.perm"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown reordering method"));
    let o = reorder(&dir, "g.mtx", &["-o", "g.txt"]);
    assert!(!o.status.success());
    std::fs::write(
        dir.join("rect.mtx"),
        "%%MatrixMarket matrix coordinate real general\n2 3 1\n1 3 1.0\n",
    )
    .unwrap();
    let o = reorder(&dir, "rect.mtx", &["--mode", "symmetric", "-o", "r.perm"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("square"));
    let o = reorder(&dir, "rect.mtx", &["--mode", "row", "-o", "r.perm"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_gz_output_is_gzip_and_reads_back_as_the_plain_one() {
    let dir = interleaved("gz");
    for out in ["r.mtx", "r.mtx.gz"] {
        let o = reorder(&dir, "g.mtx", &["-o", out]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let gz = std::fs::read(dir.join("r.mtx.gz")).unwrap();
    assert_eq!(gz[..2], [0x1f, 0x8b], "not gzip");
    let read = |f: &str| tcsparse::formats::mtx::read_matrix(dir.join(f)).unwrap();
    assert_eq!(read("r.mtx.gz"), read("r.mtx"));
}
