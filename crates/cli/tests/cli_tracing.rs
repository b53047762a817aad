//! Tracing spans over the stages: with `RUST_LOG=tcsparse=info` (or `-v`) every stage's span logs
//! one line on standard error when it closes, with its time; without either, standard error stays
//! empty. The span names are read back from those lines.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

fn spmm(extra: &[&str], rust_log: Option<&str>) -> Output {
    spmm_with_cache(extra, rust_log, None)
}

fn spmm_with_cache(extra: &[&str], rust_log: Option<&str>, cache: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcsparse"));
    cmd.args(common::SPMM_WEST_N8)
        .args(["--iters", "2", "--reorder", "affinity"])
        .args(extra)
        .current_dir(common::repo_root())
        .env("TCSPARSE_FORCE_CPU", "1")
        .env_remove("TCSPARSE_CACHE_DIR")
        .env_remove("RUST_LOG");
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    if let Some(dir) = cache {
        cmd.env("TCSPARSE_CACHE_DIR", dir);
    }
    let out = cmd.output().expect("run tcsparse");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The innermost span of each `… LEVEL outer:inner{fields}: target: close time.busy=…` line, with
/// the path of spans around it (`prepare/reorder`).
fn closed_spans(stderr: &str) -> BTreeSet<String> {
    stderr
        .lines()
        .filter(|l| l.contains(": close time.busy="))
        .filter_map(|l| {
            let after_level = l.split_once(" INFO ")?.1;
            let path = after_level.split(": ").next()?;
            // Drop each span's `{fields}` (field values may hold `:`), keep the names.
            let mut names = Vec::new();
            let mut depth = 0;
            let mut name = String::new();
            for c in path.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ':' if depth == 0 => names.push(std::mem::take(&mut name)),
                    c if depth == 0 => name.push(c),
                    _ => {}
                }
            }
            names.push(name);
            Some(names.join("/"))
        })
        .collect()
}

#[test]
fn closed_spans_reads_nested_names_and_skips_fields() {
    let line = "2026-01-01T00:00:00Z  INFO prepare:build{layout=\"a:b\" nnz=3}: tcsparse_formats::bittcf: close time.busy=1ms time.idle=1µs";
    assert_eq!(
        closed_spans(line),
        BTreeSet::from(["prepare/build".to_string()])
    );
}

#[test]
fn rust_log_shows_a_span_per_stage_with_its_time() {
    let out = spmm(&[], Some("tcsparse=info"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let spans = closed_spans(&stderr);
    for want in [
        "read",
        "prepare/reorder",
        "prepare/plan",
        "prepare/build",
        "prepare",
        "first_product",
        "run",
    ] {
        assert!(
            spans.contains(want),
            "no `{want}` span in {spans:?}:\n{stderr}"
        );
    }
    // The read span carries the path.
    assert!(
        stderr.contains("read{path=datasets/west0067.mtx.gz}"),
        "{stderr}"
    );
}

#[test]
fn verbose_flag_shows_the_same_spans() {
    let out = spmm(&["-v"], None);
    let spans = closed_spans(&String::from_utf8_lossy(&out.stderr));
    assert!(
        spans.contains("read") && spans.contains("prepare") && spans.contains("run"),
        "{spans:?}"
    );
}

/// The stages of a `--json` document, by name.
fn stage_names(doc: &serde_json::Value) -> Vec<&str> {
    doc["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .map(|s| s["stage"].as_str().expect("stage name"))
        .collect()
}

/// The stages of `spmm` without the plan cache, in order.
const STAGES: [&str; 7] = [
    "read",
    "reorder",
    "build",
    "plan",
    "tune",
    "upload",
    "first_product",
];

#[test]
fn without_logging_standard_error_stays_empty() {
    let out = spmm(&["--json"], None);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(stage_names(&doc), STAGES);
}

#[test]
fn the_plan_cache_is_a_stage_where_it_is_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The cache stage stands between upload and the first product.
    let mut want = STAGES.to_vec();
    want.insert(6, "cache");
    for _ in 0..2 {
        let out = spmm_with_cache(&["--json"], None, Some(dir.path()));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(stage_names(&doc), want);
        assert!(doc["stages"][6]["ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    }
}
