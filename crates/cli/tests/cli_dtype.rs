//! `tcsparse spmm --dtype f16|bf16` and `--precision 3xtf32`: on the CPU path the product runs
//! in the type, and the text and JSON name the type and its bound (the error measured within
//! it); on a GPU engine the typed refusal (an ignored GPU test).

mod common;

use std::process::Command;

use common::repo_root;
use serde_json::Value;

fn spmm_json(extra: &[&str]) -> Value {
    let args = [&common::SPMM_WEST_N8[..], &["--iters", "1"], extra].concat();
    common::cpu_json(&args, repo_root())
}

#[test]
fn spmm_f16_cpu_path() {
    let out = common::spmm_west_cpu(&["--dtype", "f16"]);
    insta::assert_snapshot!(common::redact(&out, &["GFLOP/s"]));
}

#[test]
fn json_names_the_type_and_its_bound_and_the_error_is_within_it() {
    let f32_bound = spmm_json(&[])["product"]["error_bound"].as_f64().unwrap();
    for (dtype, u) in [
        ("f32", 0.0),
        ("f16", 2f64.powi(-11)),
        ("bf16", 2f64.powi(-8)),
    ] {
        let v = spmm_json(&["--dtype", dtype]);
        let p = &v["product"];
        assert_eq!(p["dtype"]["kind"], dtype, "{p}");
        assert!(
            p["dtype"]["bound"]
                .as_str()
                .unwrap()
                .starts_with(&format!("B and C in {dtype}, f32 accumulation")),
            "{p}"
        );
        let bound = p["error_bound"].as_f64().unwrap();
        assert_eq!(bound, f32_bound + u * (1.0 + f32_bound), "{dtype}");
        let err = p["max_scaled_error"].as_f64().unwrap();
        assert!(err <= bound, "{dtype}: {err} > {bound}");
        // f16 and bf16 round C: their error is above what f32 alone allows.
        if u > 0.0 {
            assert!(err > f32_bound, "{dtype}: {err} ≤ {f32_bound}");
        }
    }
}

#[test]
fn three_tf32_runs_as_exact_f32_on_the_cpu_path() {
    let v = spmm_json(&["--precision", "3xtf32"]);
    assert_eq!(v["prepare"]["precision"]["kind"], "f32", "{v}");
    let f32 = spmm_json(&["--precision", "f32"]);
    assert_eq!(
        v["product"]["max_scaled_error"],
        f32["product"]["max_scaled_error"]
    );
}

#[test]
fn unknown_types_and_precisions_are_refused_with_the_accepted_names() {
    for (flag, bad, accepted) in [
        ("--dtype", "f64", "f32, f16, bf16"),
        ("--precision", "f16", "tf32, f32, 3xtf32"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
            .args(["spmm", "missing.mtx", flag, bad])
            .current_dir(repo_root())
            .env("TCSPARSE_FORCE_CPU", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(accepted), "{stderr}");
    }
}

/// On a GPU engine (no `--cpu`), f16 and bf16 run on the GPU's half-precision row-tile kernels:
/// the command succeeds on the GPU backend and the product's error is within the bound it reports.
/// Without a GPU the command runs on the CPU path, so this test fails there. (The GPU bundle
/// carries only the gpu and tcsparse test binaries: run it with `cargo test -p tcsparse-cli --test
/// cli_dtype -- --include-ignored` on a GPU machine.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn half_types_run_on_the_gpu_within_their_bound() {
    for dtype in ["f16", "bf16"] {
        let o = Command::new(env!("CARGO_BIN_EXE_tcsparse"))
            .args(common::SPMM_WEST_N8)
            .args(["--iters", "1", "--dtype", dtype, "--json"])
            .current_dir(repo_root())
            .env_remove("TCSPARSE_FORCE_CPU")
            .env_remove("TCSPARSE_CACHE_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{dtype}: {stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
        assert_eq!(doc["backend"]["kind"], "gpu", "{doc}");
        let product = &doc["product"];
        let (err, bound) = (
            product["max_scaled_error"].as_f64().unwrap(),
            product["error_bound"].as_f64().unwrap(),
        );
        assert!(err <= bound, "{dtype}: error {err} above its bound {bound}");
    }
}
