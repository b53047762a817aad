//! `tcsparse spamm` on the CPU reference path: output snapshotted with the times redacted.

mod common;

use std::process::Command;

use common::repo_root;

fn redact(s: &str) -> String {
    common::redact(s, &[])
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("run tcsparse");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn spamm_cpu_path_exponential() {
    let (ok, out, err) = run(&[
        "spamm",
        "--gen",
        "exponential:n=256,rate=0.1",
        "--target-error",
        "1e-4",
        "--cpu",
    ]);
    assert!(ok, "{err}\n{out}");
    insta::assert_snapshot!(redact(&out));
}

#[test]
fn spamm_valid_ratio_on_npy_and_bad_inputs() {
    // A 40×40 float64 .npy: diag-dominant decay written by hand.
    let n = 40usize;
    let header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n}, {n}), }}");
    let mut h = header.into_bytes();
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&h);
    for i in 0..n {
        for j in 0..n {
            let v = (-(0.3 * (i as f64 - j as f64).abs())).exp();
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    let dir = std::env::temp_dir().join(format!("tcsparse-spamm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.npy");
    std::fs::write(&path, &bytes).unwrap();
    let p = path.to_str().unwrap();
    let (ok, out, err) = run(&["spamm", p, "--valid-ratio", "0.5", "--cpu"]);
    assert!(ok, "{err}\n{out}");
    assert!(
        out.contains("spamm ") && out.contains("40×40 · 40×40"),
        "{out}"
    );
    assert!(out.contains("measured ‖E‖F/‖C‖F"), "{out}");
    // Wrong inputs are refused with a message.
    let (ok, _, err) = run(&["spamm", p, "--precision", "f8", "--cpu"]);
    assert!(
        !ok && err.contains("invalid value 'f8' for '--precision"),
        "{err}"
    );
    let (ok, _, err) = run(&["spamm", "--gen", "uniform:n=64", "--cpu"]);
    assert!(!ok && err.contains("--gen takes"), "{err}");
    std::fs::write(&path, b"not npy").unwrap();
    let (ok, _, err) = run(&["spamm", p, "--cpu"]);
    assert!(!ok && err.contains("not a .npy"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
