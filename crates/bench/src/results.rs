//! Result files: named after the operation and the device they came from (`spmm-h200.json` +
//! `spmm-h200.md`, `spmm-cpu.json`, …), so that a run on another machine never overwrites the
//! published H200 numbers; reading them back (files or folders); the Markdown of each op.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::report::{Op, Report};

/// Words of a GPU name that say nothing about the model.
const VENDOR_WORDS: [&str; 5] = ["nvidia", "geforce", "tesla", "quadro", "graphics"];

/// File-name slug of a device name: the model, lower case, letters and digits only, up to its first
/// word with a digit: `NVIDIA H200` → `h200`, `NVIDIA H100 80GB HBM3` → `h100`, `NVIDIA A100-SXM4-80GB`
/// → `a100`, `NVIDIA GeForce RTX 4090` → `rtx4090`; `gpu` when nothing is left.
pub fn device_slug(name: &str) -> String {
    let mut slug = String::new();
    for word in name
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_' || c == '/')
        .map(|w| {
            w.chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
                .to_ascii_lowercase()
        })
        .filter(|w| !w.is_empty() && !VENDOR_WORDS.contains(&w.as_str()))
    {
        slug.push_str(&word);
        if word.chars().any(|c| c.is_ascii_digit()) {
            break;
        }
    }
    if slug.is_empty() { "gpu".into() } else { slug }
}

/// Device line of a run without a GPU starts with this.
pub const NO_GPU: &str = "no GPU";

/// Slug of the device a report came from: `cpu` for a run without a GPU, else [`device_slug`] of
/// the name before the first ` (` of its device line.
pub fn report_slug(r: &Report) -> String {
    if r.device.starts_with(NO_GPU) {
        return "cpu".into();
    }
    device_slug(r.device.split(" (").next().unwrap_or(&r.device))
}

/// File stem of the results of `op` on the device of `r`: `<op>-<slug>`, or for a run in another
/// element type or precision ([`Report::numerics`]) `<op>-<numerics>-<slug>` (`spmm-f16-h200`),
/// so that it never overwrites the f32 results or joins their gate.
pub fn file_stem(op: Op, r: &Report) -> String {
    match r.numerics() {
        Some(v) => format!("{}-{v}-{}", op.name(), report_slug(r)),
        None => format!("{}-{}", op.name(), report_slug(r)),
    }
}

/// The ops a report holds, in order (SpMM for an empty report).
pub fn ops(r: &Report) -> Vec<Op> {
    let mut ops: Vec<Op> = r.cases.iter().map(|c| c.op).collect();
    ops.sort();
    ops.dedup();
    if ops.is_empty() {
        ops.push(Op::Spmm);
    }
    ops
}

/// The cases of one op, with the report's header.
pub fn only(r: &Report, op: Op) -> Report {
    Report {
        cases: r.cases.iter().filter(|c| c.op == op).cloned().collect(),
        ..r.clone()
    }
}

/// The Markdown of a report holding the cases of one op, from the report alone (deterministic:
/// the committed-results test re-renders every file): SpMM's table and summary
/// ([`Report::markdown`]), SpMV's per-n tables ([`crate::spmv::markdown`]) or SpAMM's
/// ([`crate::spamm::markdown`]). A report mixing ops (never written: [`write()`] splits by op) gets
/// the SpMM layout, whose table fits every op's cases.
pub fn render(r: &Report) -> String {
    match ops(r)[..] {
        [Op::Spmv] => crate::spmv::markdown(&r.device, &r.command, &r.cases),
        [Op::Spamm] => crate::spamm::markdown(r),
        _ => r.markdown(),
    }
}

/// Partial results, so that they survive an interrupted run: where `out` is given, [`write`]s
/// `r` (the cases so far) with its device marked " (partial: run in progress)". The op runners
/// take it as their `partial` callback, so that they never import this module.
pub fn write_partial(out: Option<&Path>, r: &Report) -> Result<()> {
    if let Some(out) = out {
        write(
            out,
            &Report {
                device: format!("{} (partial: run in progress)", r.device),
                ..r.clone()
            },
        )?;
    }
    Ok(())
}

/// `Err` naming them when `reports` are of different element types or precisions
/// ([`Report::numerics`]: f32, f16, bf16, 3xtf32) or one of them mixes several: their cases
/// belong in different files (`spmm-<numerics>-<device>`) and never in one table or gate.
pub fn same_numerics(reports: &[Report]) -> std::result::Result<(), String> {
    let name = |r: &Report| r.numerics().map_or("f32 (tf32)", |v| v.name());
    if let Some(r) = reports.iter().find(|r| r.numerics_mixed()) {
        return Err(format!(
            "`{}` mixes cases of several element types or precisions",
            r.command
        ));
    }
    match reports
        .iter()
        .find(|r| r.numerics() != reports[0].numerics())
    {
        Some(other) => Err(format!(
            "results of different element types or precisions: `{}` is {}, `{}` is {}",
            reports[0].command,
            name(&reports[0]),
            other.command,
            name(other)
        )),
        None => Ok(()),
    }
}

/// Writes `<op>-<slug>.json` and `<op>-<slug>.md` into `out` for every op of `r` (SpMM in f16,
/// bf16 or 3×TF32: `spmm-<numerics>-<slug>`, [`file_stem`]); returns the paths written.
pub fn write(out: &Path, r: &Report) -> Result<Vec<PathBuf>> {
    same_numerics(std::slice::from_ref(r)).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    for op in ops(r) {
        let part = only(r, op);
        let stem = file_stem(op, &part);
        let json = out.join(format!("{stem}.json"));
        let md = out.join(format!("{stem}.md"));
        std::fs::write(&json, serde_json::to_string_pretty(&part)?)
            .with_context(|| format!("writing {}", json.display()))?;
        std::fs::write(&md, render(&part)).with_context(|| format!("writing {}", md.display()))?;
        written.extend([json, md]);
    }
    Ok(written)
}

/// Reads result files: each path a JSON file or a folder whose `*.json` files are all read.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Report>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let in_dir = json_files(p)?;
            anyhow::ensure!(!in_dir.is_empty(), "no *.json in {}", p.display());
            files.extend(in_dir);
        } else {
            files.push(p.clone());
        }
    }
    files.iter().map(|f| read(f)).collect()
}

/// The `*.json` files of a folder, sorted.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.extension().is_some_and(|x| x == "json"))
        // `--op multi` results have their own schema (crate::multi), not the gate's.
        .filter(|f| {
            !f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("multi-gpu-"))
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Reads one result file.
pub fn read(f: &Path) -> Result<Report> {
    let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", f.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_slugs() {
        for (name, slug) in [
            ("NVIDIA H200", "h200"),
            ("NVIDIA H100 80GB HBM3", "h100"),
            ("NVIDIA H100 PCIe", "h100"),
            ("NVIDIA A100-SXM4-80GB", "a100"),
            ("NVIDIA GeForce RTX 4090", "rtx4090"),
            ("Tesla V100-SXM2-16GB", "v100"),
            ("NVIDIA GH200 480GB", "gh200"),
            ("NVIDIA L40S", "l40s"),
            ("NVIDIA", "gpu"),
            ("", "gpu"),
        ] {
            assert_eq!(device_slug(name), slug, "{name}");
        }
        let mut r = Report {
            command: "c".into(),
            device: "NVIDIA H200 (132 SMs, compute 9.0, 140 GiB, L2 60 MiB, driver CUDA 13.0)"
                .into(),
            started_unix: 0,
            cases: vec![],
            config: None,
            baseline: None,
        };
        assert_eq!(file_stem(Op::Spmm, &r), "spmm-h200");
        r.device = "NVIDIA H200 (partial: run in progress)".into();
        assert_eq!(file_stem(Op::Spmv, &r), "spmv-h200");
        r.device = "no GPU (no libcuda.so); CPU reference path only, no cuSPARSE baseline".into();
        assert_eq!(file_stem(Op::Spmm, &r), "spmm-cpu");
    }

    #[test]
    fn write_names_files_after_op_and_device() {
        let dir =
            std::env::temp_dir().join(format!("tcsparse-bench-results-{}", std::process::id()));
        let r = Report {
            command: "c".into(),
            device: "no GPU (test)".into(),
            started_unix: 0,
            cases: vec![],
            config: None,
            baseline: None,
        };
        let written = write(&dir, &r).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["spmm-cpu.json", "spmm-cpu.md"]);
        assert_eq!(load(std::slice::from_ref(&dir)).unwrap(), vec![r]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every committed result (docs/results/*.json, all measured on the H200, and
    /// docs/h100-results/*.json) agrees with its Markdown and plots: the file
    /// round-trips byte for byte through [`Report`] (so `--merge` re-writes it unchanged), is
    /// named after its op and device, holds one op, its .md is exactly what the bench renders from
    /// the JSON (summary lines included) and so are its SVG plots, so a hand edit or a stale render
    /// fails here. Re-render with `tcsparse-bench --merge docs/results/<file>.json --out
    /// docs/results` and `tcsparse-bench --plot docs/results/<file>.json`.
    #[test]
    fn committed_results_agree_with_their_markdown() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results");
        // docs/results: the H200 results (the regression gate's base); docs/h100-results: runs
        // for which the device tool lent an H100 (2026-11-28), kept out of docs/results so that
        // no gate or table mixes the two cards.
        for dir in [base.clone(), base.join("../h100-results")] {
            let files = json_files(&dir).unwrap();
            assert!(!files.is_empty(), "no result JSON in {}", dir.display());
            for f in files {
                let r = read(&f).unwrap();
                // docs/results is the H200 record: a run on another card goes elsewhere.
                assert!(
                    dir != base || r.device.contains("H200"),
                    "{}: measured on {:?}, but docs/results holds only H200 results",
                    f.display(),
                    r.device
                );
                // Written by the bench itself (`results::write`, or `--merge` to re-write it): every
                // field known, nothing lost or reformatted.
                let text = std::fs::read_to_string(&f).unwrap();
                assert!(
                    serde_json::to_string_pretty(&r).unwrap() == text,
                    "{}: does not round-trip byte for byte through the bench's Report (re-write it \
                 with tcsparse-bench --merge {} --out docs/results)",
                    f.display(),
                    f.display()
                );
                let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
                let ops = ops(&r);
                assert_eq!(
                    ops.len(),
                    1,
                    "{}: one op per file, found {ops:?}",
                    f.display()
                );
                assert_eq!(
                    stem,
                    file_stem(ops[0], &r),
                    "{}: named after another op or device than its content",
                    f.display()
                );
                let md_path = f.with_extension("md");
                let md = std::fs::read_to_string(&md_path)
                    .unwrap_or_else(|e| panic!("{}: {e}", md_path.display()));
                let want = render(&r);
                // The summary lines first, for a readable message; then every line.
                let summary: Vec<&str> = want
                    .lines()
                    .filter(|l| {
                        // SpMM: `geomean …`, `worst case …`, `failed cases …`; SpMV: the same as
                        // list items; SpAMM: `vs SGEMM at relerr ≤ …`.
                        let l = l.strip_prefix("- ").unwrap_or(l);
                        ["geomean", "worst", "failed", "vs "]
                            .iter()
                            .any(|p| l.starts_with(p))
                    })
                    .collect();
                assert!(
                    !summary.is_empty() || r.cases.is_empty(),
                    "{stem}: no summary lines"
                );
                for line in summary {
                    assert!(
                        md.lines().any(|l| l == line),
                        "{}: summary line `{line}` of the JSON is not in the .md (re-render it)",
                        md_path.display()
                    );
                }
                for (i, (got, want)) in md.lines().zip(want.lines()).enumerate() {
                    assert_eq!(
                        got,
                        want,
                        "{} line {}: differs from the JSON's render",
                        md_path.display(),
                        i + 1
                    );
                }
                assert!(
                    md == want,
                    "{}: differs from the JSON's render ({} lines, render {})",
                    md_path.display(),
                    md.lines().count(),
                    want.lines().count()
                );
                // The plots: each one present must be the JSON's render; SpMM's and SpMV's must all be
                // there (SpAMM has none).
                for (name, svg) in crate::plots::render(&r) {
                    let p = dir.join(&name);
                    match std::fs::read_to_string(&p) {
                        Ok(got) => assert!(
                            got == svg,
                            "{}: differs from the JSON's render (tcsparse-bench --plot {})",
                            p.display(),
                            f.display()
                        ),
                        Err(_) => assert!(
                            !matches!(ops[0], Op::Spmm | Op::Spmv),
                            "{} missing (tcsparse-bench --plot {})",
                            p.display(),
                            f.display()
                        ),
                    }
                }
            }
        }
    }
}
