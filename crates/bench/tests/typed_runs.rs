//! The bench binary's f16, bf16 and 3×TF32 SpMM runs (`--dtype`, `--precision`): the flag
//! combinations it refuses (CPU, run in CI), and a smoke run per type on the shared `cora`
//! (ignored without a GPU; they FAIL under `--include-ignored` on a machine without one) that
//! writes `spmm-<type>-<device>.json` whose cases all ran and passed their bound.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcsparse-bench"))
        .args(args)
        // A run that finds no shared datasets fails instead of writing an empty report.
        .env("TCSPARSE_REQUIRE_DATA", "1")
        .output()
        .expect("running tcsparse-bench")
}

/// Runs `args`, which must fail with a message containing every one of `want`.
fn refused(args: &[&str], want: &[&str]) {
    let out = bench(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was accepted: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: `{w}` not in {err}");
    }
}

#[test]
fn flag_combinations_the_bench_does_not_measure_are_refused_by_name() {
    refused(
        &["--dtype", "f16", "--precision", "3xtf32"],
        &["--dtype f16", "--precision 3xtf32", "choose one"],
    );
    refused(
        &["--dtype", "bf16", "--precision", "f32"],
        &["--dtype bf16"],
    );
    refused(&["--precision", "f32"], &["--precision f32"]);
    refused(&["--dtype", "f64"], &["--dtype", "f32, f16 or bf16"]);
    refused(&["--precision", "fp8"], &["--precision", "3xtf32"]);
    refused(
        &["--op", "spmv", "--dtype", "f16"],
        &["--dtype and --precision apply to --op spmm only", "spmv"],
    );
    refused(
        &["--op", "spamm", "--precision", "3xtf32"],
        &["--op spmm only"],
    );
    refused(
        &["--dtype", "f16", "--backends", "acc/"],
        &["--backends", "tcsparse-f16"],
    );
}

/// A fresh output folder for one smoke run.
fn out_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tcsparse-bench-typed-{what}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `tcsparse-bench <flags> --only cora --no-generated --iters 3 --out DIR` on the GPU: exits 0,
/// writes `spmm-<name>-<device>.json`, every case ran and passed its bound, and every backend
/// of `backends` is there at N = 128.
fn smoke(flags: &[&str], name: &str, backends: &[&str]) {
    let _gpu = tcsparse::gpu::Gpu::require().expect("this test needs a CUDA GPU");
    let dir = out_dir(name);
    let mut args = flags.to_vec();
    let d = dir.to_string_lossy().into_owned();
    args.extend([
        "--only",
        "cora",
        "--no-generated",
        "--iters",
        "3",
        "--n",
        "128",
        "--out",
        &d,
    ]);
    let out = bench(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = {
        // The one spmm-<name>-<device>.json the run wrote.
        let found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let f = p.file_name().unwrap().to_string_lossy().into_owned();
                f.starts_with(&format!("spmm-{name}-")) && f.ends_with(".json")
            })
            .collect();
        assert_eq!(found.len(), 1, "{found:?} in {}", dir.display());
        found[0].clone()
    };
    let text = std::fs::read_to_string(&json).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = r["cases"].as_array().unwrap();
    assert!(!cases.is_empty(), "no case in {}", json.display());
    for c in cases {
        assert_eq!(c["status"], "ok", "{c}");
        assert!(c["ms"].as_f64().is_some_and(|t| t > 0.0), "{c}");
    }
    for b in backends {
        assert!(
            cases.iter().any(|c| c["backend"] == *b && c["n"] == 128),
            "no {b} case: {text}"
        );
    }
    let md = std::fs::read_to_string(json.with_extension("md")).unwrap();
    assert!(
        md.contains(&format!("geomean (shared datasets, {name} vs cuSPARSE")),
        "{md}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_smoke_on_cora_passes_its_bound() {
    smoke(
        &["--dtype", "f16"],
        "f16",
        &["cusparse", "cusparse-f16", "tcsparse-f16"],
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_smoke_on_cora_passes_its_bound() {
    smoke(
        &["--dtype", "bf16"],
        "bf16",
        &["cusparse", "cusparse-bf16", "tcsparse-bf16"],
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tf32x3_smoke_on_cora_passes_its_bound() {
    smoke(
        &["--precision", "3xtf32"],
        "3xtf32",
        &["cusparse", "tcsparse-3xtf32"],
    );
}
