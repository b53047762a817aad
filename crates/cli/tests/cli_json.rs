//! `--json` on every subcommand that reports results: one JSON document on standard output (and
//! nothing else), with `schema_version` and `command`, enums tagged by `kind`; snapshotted on the
//! CPU path with times, rates and the machine-dependent GPU message redacted and other reals
//! rounded to 6 significant digits.

mod common;

use serde_json::Value;

/// Keys whose values vary run to run.
fn volatile(key: &str) -> bool {
    key.ends_with("_ms") || matches!(key, "ms" | "gflops" | "gb_per_s" | "seconds" | "ns_per_nnz")
}

/// `no GPU (…): ` reasons differ between machines.
fn redact_text(s: &str) -> String {
    match (s.find("no GPU ("), s.find("): ")) {
        (Some(i), Some(j)) if j > i => format!("{}no GPU ([why]{}", &s[..i], &s[j..]),
        _ => s.to_string(),
    }
}

fn redact(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if volatile(k) && !x.is_null() {
                    *x = Value::String("[redacted]".into());
                } else {
                    redact(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact),
        Value::String(s) => *s = redact_text(s),
        // Sums may run in another order on another thread count: 6 significant digits.
        Value::Number(x) if x.is_f64() => {
            let f = x.as_f64().unwrap_or(f64::NAN);
            *v = Value::String(format!("{f:.5e}"));
        }
        _ => {}
    }
}

/// Runs `tcsparse args --json` in `dir` on the CPU path and returns its redacted document.
fn json(args: &[&str], dir: &std::path::Path) -> String {
    let mut v = common::cpu_json(args, dir);
    assert_eq!(v["schema_version"], 1, "{args:?}");
    assert_eq!(v["command"], args[0], "{args:?}");
    redact(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

/// A folder of the test's own (tests run in parallel) holding a copy of west0067.
fn workdir(test: &str) -> std::path::PathBuf {
    common::workdir_with_west("cli_json", test)
}

/// Snapshots `tcsparse args --json`, run in a folder of its own, under the test's name `test`.
fn assert_json(test: &str, args: &[&str]) {
    let dir = workdir(test);
    insta::assert_snapshot!(test, json(args, &dir));
}

#[test]
fn info_json() {
    assert_json("info_json", &["info", "west0067.mtx.gz", "--formats"]);
}

#[test]
fn plan_json() {
    assert_json("plan_json", &["plan", "west0067.mtx.gz", "--n", "64"]);
}

#[test]
fn convert_and_reorder_json() {
    let dir = workdir("convert_and_reorder_json");
    let convert = json(
        &[
            "convert",
            "west0067.mtx.gz",
            "--format",
            "hrpb",
            "-o",
            "w.hrpb",
        ],
        &dir,
    );
    let reorder = json(
        &[
            "reorder",
            "west0067.mtx.gz",
            "--mode",
            "row",
            "-o",
            "w.mtx.gz",
        ],
        &dir,
    );
    insta::assert_snapshot!(format!("{convert}\n---\n{reorder}"));
}

#[test]
fn spmm_json() {
    assert_json(
        "spmm_json",
        &["spmm", "west0067.mtx.gz", "--n", "8", "--iters", "1"],
    );
}

#[test]
fn spmv_json() {
    assert_json(
        "spmv_json",
        &["spmv", "west0067.mtx.gz", "--n", "2", "--iters", "1"],
    );
}

#[test]
fn spamm_json() {
    assert_json(
        "spamm_json",
        &[
            "spamm",
            "--gen",
            "exponential:n=128,rate=0.2",
            "--valid-ratio",
            "0.5",
        ],
    );
}

#[test]
fn demo_json() {
    assert_json(
        "demo_json",
        &["demo", "west0067.mtx.gz", "--n", "4", "--iters", "1"],
    );
}
