//! `tcsparse spmm FILE --distributed` (and `spamm --distributed`) outside a launcher, or with a launcher environment that is
//! wrong: a typed message naming the variable, never a panic or a hang (here and on a GPU machine:
//! every case fails before a device or NCCL is needed, or at the first missing one).

use std::process::Command;

mod common;

const LAUNCHER_VARS: &[&str] = &[
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "TCSPARSE_STORE_PORT",
    "TCSPARSE_DIST_TIMEOUT",
    "TORCHELASTIC_USE_AGENT_STORE",
];

fn run(env: &[(&str, &str)], extra: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcsparse"));
    cmd.args(common::SPMM_WEST_N8)
        .arg("--distributed")
        .args(extra)
        .current_dir(common::repo_root());
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn distributed_without_a_launcher_says_which_variables_are_missing() {
    let (ok, err) = run(&[], &[]);
    assert!(!ok);
    assert!(err.contains("RANK/WORLD_SIZE (torchrun)"), "{err}");
    assert!(err.contains("SLURM_PROCID"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn spamm_distributed_without_a_launcher_is_the_same_error() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcsparse"));
    cmd.args([
        "spamm",
        "--gen",
        "exponential:n=64,rate=0.1",
        "--distributed",
    ]);
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("RANK/WORLD_SIZE (torchrun)"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let with_gpus = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args([
            "spamm",
            "--gen",
            "exponential:n=64,rate=0.1",
            "--distributed",
            "--gpus",
            "2",
        ])
        .output()
        .unwrap();
    assert!(!with_gpus.status.success());
    assert!(String::from_utf8_lossy(&with_gpus.stderr).contains("cannot be used with"));
}

#[test]
fn bad_launcher_variables_are_named() {
    for (env, want) in [
        (
            &[("RANK", "2"), ("WORLD_SIZE", "2")][..],
            "RANK=2 is not below WORLD_SIZE=2",
        ),
        (
            &[("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")][..],
            "LOCAL_RANK is not set",
        ),
        (
            &[("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")][..],
            "MASTER_ADDR is not set",
        ),
        (
            &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "x")][..],
            "SLURM_NTASKS=\"x\"",
        ),
    ] {
        let (ok, err) = run(env, &[]);
        assert!(!ok, "{env:?} succeeded");
        assert!(err.contains(want), "{env:?}: {err}");
        assert!(!err.contains("panicked"), "{env:?}: {err}");
    }
}

#[test]
fn distributed_conflicts_with_devices_and_cpu() {
    for extra in [&["--devices", "0"][..], &["--cpu"][..]] {
        let (ok, err) = run(&[("RANK", "0"), ("WORLD_SIZE", "1")], extra);
        assert!(!ok, "{extra:?}");
        assert!(err.contains("cannot be used with"), "{extra:?}: {err}");
    }
}
