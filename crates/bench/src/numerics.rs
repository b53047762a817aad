//! The element type or precision of an SpMM run besides the default (f32 operands, TF32 tensor
//! cores): `--dtype f16|bf16` (A, B and C in a 16-bit type, f32 accumulation) or `--precision
//! 3xtf32` (f32 operands, split-TF32 tensor-core products), each written to its own result file
//! (`spmm-f16-h200.json`, …) with its own backend names, so that the f32 file and its regression
//! gate are untouched and no f16 case is ever compared with an f32 one.
//!
//! Each case of such a run records its [`Numerics`] (the f32 cuSPARSE row of a half or 3×TF32
//! run records none: it is the f32 baseline); a half case's speedup is over cuSPARSE in the same
//! type ([`Numerics::same_type_baseline`]), and the report shows the speedup over cuSPARSE f32
//! beside it.

use std::fmt::Write as _;

use crate::report::{BASELINE, Group, Op, Report, geomean};

pub use crate::numerics_kind::Numerics;

/// One summary line of a run in f16, bf16 or 3×TF32: a geomean speedup with the count of cases
/// below 1.0×, or the worst error ratio with the count of cases above the goal.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryLine {
    /// The line's name, e.g. `geomean (shared datasets, f16 vs cuSPARSE f16)`.
    pub label: String,
    /// The geomean speedup, or the worst error ratio; `None` when no case qualifies.
    pub value: Option<f64>,
    /// Cases below 1.0× (speedups) or above [`ERROR_RATIO_GOAL`] (error ratios).
    pub off: usize,
    /// Cases the value is over.
    pub of: usize,
    /// The worst case (`matrix N=…`) of an error ratio line.
    pub worst: Option<String>,
}

/// The 3×TF32 goal: its error within this factor of cuSPARSE f32's on every case.
pub const ERROR_RATIO_GOAL: f64 = 2.0;

impl SummaryLine {
    /// The Markdown line (two trailing spaces: a line break).
    pub fn render(&self) -> String {
        let Some(v) = self.value else {
            return format!("{}: n/a  ", self.label);
        };
        match &self.worst {
            Some(w) => format!(
                "{}: {v:.2} (relative errors, {w}; cases above {ERROR_RATIO_GOAL:.1}: {} of {})  ",
                self.label, self.off, self.of
            ),
            None => format!(
                "{}: {v:.2}× (cases below 1.0×: {} of {})  ",
                self.label, self.off, self.of
            ),
        }
    }
}

impl Report {
    /// The summary lines of a run of `v`, from its cases alone: per group present (shared
    /// datasets always, large generated matrices when the run has them) the geomean speedup of
    /// [`Numerics::headline`] over cuSPARSE in the same type (f16, bf16) and over cuSPARSE f32;
    /// for 3×TF32 the worst ratio of its relative error to cuSPARSE f32's, over every case where
    /// both passed.
    pub fn numerics_summary(&self, v: Numerics) -> Vec<SummaryLine> {
        let mut lines = Vec::new();
        let groups = [Group::Shared, Group::Large]
            .into_iter()
            .filter(|&g| g == Group::Shared || self.cases.iter().any(|c| c.group == g));
        for g in groups {
            let place = match g {
                Group::Shared => "shared datasets",
                _ => g.name(),
            };
            let mut baselines: Vec<(&str, String)> = Vec::new();
            if let Some(b) = v.same_type_baseline() {
                baselines.push((b, format!("cuSPARSE {v}")));
            }
            baselines.push((BASELINE, "cuSPARSE f32".to_string()));
            for (backend, name) in baselines {
                let s: Vec<f64> = self
                    .cases
                    .iter()
                    .filter(|c| c.op == Op::Spmm && c.group == g && c.backend == v.headline())
                    .filter_map(|c| self.speedup_over(c, backend))
                    .collect();
                lines.push(SummaryLine {
                    label: format!("geomean ({place}, {v} vs {name})"),
                    value: geomean(&s),
                    off: s.iter().filter(|&&x| x < 1.0).count(),
                    of: s.len(),
                    worst: None,
                });
            }
        }
        if v == Numerics::Tf32x3 {
            let ratios: Vec<(f64, String)> = self
                .cases
                .iter()
                .filter(|c| c.op == Op::Spmm && c.backend == v.headline() && c.ok())
                .filter_map(|c| {
                    let base = self.passing_peer(c, BASELINE)?;
                    let ratio = error_ratio(c.rel_err?, base.rel_err?)?;
                    Some((ratio, format!("{} N={}", c.matrix, c.n)))
                })
                .collect();
            let worst = ratios.iter().max_by(|a, b| a.0.total_cmp(&b.0));
            lines.push(SummaryLine {
                label: format!("{v} error / cuSPARSE f32 error (worst case)"),
                value: worst.map(|w| w.0),
                off: ratios.iter().filter(|(r, _)| *r > ERROR_RATIO_GOAL).count(),
                of: ratios.len(),
                worst: Some(worst.map_or_else(String::new, |w| w.1.clone())),
            });
        }
        lines
    }
}

impl Report {
    /// The Markdown report of a run of `v` (`spmm-f16-h200.md`, …): header with the baselines and
    /// the bound, the summary lines ([`Report::numerics_summary`]), the failed-case count and the
    /// case table (speedup over the same-type baseline; for f16 / bf16 also over cuSPARSE f32,
    /// for 3×TF32 the error ratio to cuSPARSE f32's).
    pub fn numerics_markdown(&self, v: Numerics) -> String {
        let f2 = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
        let x = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}×"));
        let mut s = String::new();
        let half = v.same_type_baseline().is_some();
        let _ = writeln!(
            s,
            "# SpMM in {v}: tcsparse vs cuSPARSE{}\n",
            if half {
                format!(" {v} and f32")
            } else {
                " f32".into()
            }
        );
        let _ = writeln!(s, "Generated by `tcsparse-bench`; do not edit by hand.\n");
        let _ = writeln!(s, "- command: `{}`", self.command);
        let _ = writeln!(s, "- device: {}", self.device);
        if half {
            let f16 = if v == Numerics::F16 {
                "; A's values divided by the power of two that puts the largest in [2¹⁴, 2¹⁵) and \
                 α multiplied by it, as ours"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "- baselines: cuSPARSE at its fastest CSR algorithm with A, B and C in {v} and f32 \
                 compute (`{}`{f16}), and in f32 (`{BASELINE}`, on the same B widened to f32); \
                 the algorithm named per case in the plan column; \"vs default\" = cuSPARSE {v}'s \
                 default algorithm ms / ours",
                v.same_type_baseline().unwrap_or_default()
            );
            if v == Numerics::F16 {
                let _ = writeln!(
                    s,
                    "- f16 range: both f16 products compute C = α·A·B, α the power of two that \
                     keeps every row sum of |A| at most 2¹⁴ (|B| ≤ 1: C within f16's range), \
                     named in the plan column where it is not 1; the f32 row computes A·B"
                );
            }
        } else {
            let _ = writeln!(
                s,
                "- baseline: cuSPARSE f32 at its fastest CSR algorithm (`{BASELINE}`), the \
                 algorithm named per case in the plan column; \"err ratio\" = our relative error \
                 / cuSPARSE f32's"
            );
        }
        let _ = writeln!(
            s,
            "- bound ({}): {}; {}",
            v.headline(),
            v.bound_text(),
            if half {
                format!(
                    "B is rounded to {v} before the f64 reference is computed, so the reference \
                     is of the operands used"
                )
            } else {
                "A and B in f32, exact in the f64 reference".to_string()
            }
        );
        let _ = writeln!(
            s,
            "- method: median of CUDA-event-timed samples after warm-up (a launch shorter than 0.25 ms is \
             timed in batches, sample = batch time / launches), B buffers rotated when B fits in \
             L2; speedup = cuSPARSE ms / ours, same matrix, N and process; a case that fails its \
             accuracy check shows FAILED and no speedup\n"
        );
        for line in self.numerics_summary(v) {
            let _ = writeln!(s, "{}", line.render());
        }
        let failed = self.cases.iter().filter(|c| c.failed()).count();
        let _ = writeln!(s, "failed cases: {failed}\n");
        let extra = if half {
            "vs cuSPARSE f32 | vs default"
        } else {
            "err ratio"
        };
        let _ = writeln!(
            s,
            "| matrix | group | rows | nnz | N | backend | ms | GFLOP/s | GB/s | rel err | scaled err | speedup | {extra} | prep total ms | plan | status |"
        );
        let _ = writeln!(
            s,
            "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|{}---:|---|---|",
            if half { "---:|" } else { "" }
        );
        for c in &self.cases {
            let status = c.status_cell();
            let speedup = if c.failed() {
                "FAILED".to_string()
            } else {
                x(self.speedup(c))
            };
            let extra = if half {
                format!(
                    "{} | {}",
                    x(self.speedup_over(c, BASELINE)),
                    x(self.vs_default(c))
                )
            } else {
                let ratio = self
                    .passing_peer(c, BASELINE)
                    .filter(|_| c.ok() && c.backend != BASELINE)
                    .and_then(|b| error_ratio(c.rel_err?, b.rel_err?));
                f2(ratio)
            };
            let _ = writeln!(
                s,
                "| {} | {speedup} | {extra} | {} | {} | {status} |",
                c.measure_cells(),
                f2(c.prep.as_ref().and_then(|p| p.total_ms)),
                c.plan.as_deref().unwrap_or("–").replace('|', "/"),
            );
        }
        s
    }
}

/// `Err` with a message naming both when the SpMM results of `new` are of an element type or
/// precision ([`Report::numerics`]; f32 when none) that no SpMM result of `base` has: their speedups
/// are over other baselines in other types, so a comparison would compare nothing (backend names
/// differ: `tcsparse-f16` is never matched with `tcsparse`) or, worse, suggest a change that is
/// only the change of type. SpMV and SpAMM results are not concerned.
pub fn check_comparable(base: &[Report], new: &[Report]) -> Result<(), String> {
    let spmm = |r: &&Report| r.cases.iter().any(|c| c.op == Op::Spmm);
    let name = |v: Option<Numerics>| v.map_or("f32 (tf32)", Numerics::name);
    let have: Vec<Option<Numerics>> = base.iter().filter(spmm).map(Report::numerics).collect();
    if have.is_empty() {
        return Ok(());
    }
    for r in new.iter().filter(spmm) {
        let v = r.numerics();
        if !have.contains(&v) {
            let mut names: Vec<&str> = have.iter().map(|&h| name(h)).collect();
            names.dedup();
            return Err(format!(
                "not comparable: the new SpMM results are {} ({}), the base's are {}; a case \
                 is only ever compared with one of the same type: pass a base of that type \
                 (spmm-{}<device>.json)",
                name(v),
                v.map_or("tcsparse against cuSPARSE f32", Numerics::headline),
                names.join(", "),
                v.map_or(String::new(), |v| format!("{v}-"))
            ));
        }
    }
    Ok(())
}

/// `ours / base` of two errors; equal errors (both 0 included) give 1, a non-zero error over an
/// exact baseline ∞; `None` for a non-finite or negative error.
pub fn error_ratio(ours: f64, base: f64) -> Option<f64> {
    if !(ours.is_finite() && base.is_finite() && ours >= 0.0 && base >= 0.0) {
        return None;
    }
    Some(if ours == base {
        1.0
    } else if base == 0.0 {
        f64::INFINITY
    } else {
        ours / base
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Status;
    use crate::report::tests::refusal;

    #[test]
    fn flags_name_one_variant_or_are_refused_with_both_named() {
        assert_eq!(Numerics::from_flags("f32", "tf32"), Ok(None));
        assert_eq!(Numerics::from_flags("f16", "tf32"), Ok(Some(Numerics::F16)));
        assert_eq!(
            Numerics::from_flags("BF16", "tf32"),
            Ok(Some(Numerics::Bf16))
        );
        assert_eq!(
            Numerics::from_flags("f32", "3xtf32"),
            Ok(Some(Numerics::Tf32x3))
        );
        let e = Numerics::from_flags("f16", "3xtf32").unwrap_err();
        assert!(
            e.contains("--dtype f16") && e.contains("--precision 3xtf32"),
            "{e}"
        );
        assert!(e.contains("choose one"), "{e}");
        let e = Numerics::from_flags("bf16", "f32").unwrap_err();
        assert!(e.contains("--dtype bf16"), "{e}");
        assert!(Numerics::from_flags("f32", "f32").is_err());
        let e = Numerics::from_flags("f64", "tf32").unwrap_err();
        assert!(
            e.starts_with("--dtype") && e.contains("f32, f16 or bf16"),
            "{e}"
        );
        let e = Numerics::from_flags("f32", "fp8").unwrap_err();
        assert!(e.starts_with("--precision"), "{e}");
    }

    #[test]
    fn names_and_json_agree() {
        for v in [Numerics::F16, Numerics::Bf16, Numerics::Tf32x3] {
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                format!("\"{}\"", v.name())
            );
            assert_eq!(v.headline(), format!("tcsparse-{v}"));
            assert!(v.scaled_bound(16) > 0.0 && v.scaled_bound(16) < 0.01);
        }
        // f16's bound is tighter than bf16's (11 against 8 significant bits); 3×TF32's is
        // f32-grade.
        assert!(Numerics::F16.scaled_bound(64) < Numerics::Bf16.scaled_bound(64));
        assert!(Numerics::Tf32x3.scaled_bound(64) < 1e-4);
    }

    use crate::compare::{Comparison, Tolerances};
    use crate::report::tests::case;
    use crate::report::{Case, HEADLINE, VendorBaseline};

    /// A case of run `v` (`None`: the f32 cuSPARSE row) on `matrix` at N = 128.
    fn typed(matrix: &str, group: Group, backend: &str, ms: f64, v: Option<Numerics>) -> Case {
        let mut c = case(matrix, group, 128, backend, ms, Status::Ok);
        c.numerics = v;
        if backend.starts_with("cusparse") {
            c.prep = None;
            c.plan = Some(format!(
                "cuSPARSE CSR {}, SPMM_CSR_ALG2",
                v.map_or("f32", Numerics::name)
            ));
        }
        c
    }

    /// An f16 run on three shared matrices and one large one: speedups over cuSPARSE f16 of 2, 0.25
    /// and 4 (shared), over cuSPARSE f32 of 4, 1 and 8.
    fn f16_report() -> Report {
        let v = Some(Numerics::F16);
        let mut cases = Vec::new();
        for (m, g, f32_ms, f16_ms, ours) in [
            ("cora", Group::Shared, 0.04, 0.02, 0.01),
            ("cage10", Group::Shared, 0.02, 0.005, 0.02),
            ("bcsstk17", Group::Shared, 0.08, 0.04, 0.01),
            ("rmat20", Group::Large, 2.0, 1.0, 0.8),
        ] {
            cases.push(typed(m, g, BASELINE, f32_ms, None));
            let mut b = typed(m, g, "cusparse-f16", f16_ms, v);
            b.default_ms = Some(f16_ms * 2.0);
            cases.push(b);
            cases.push(typed(m, g, "tcsparse-f16", ours, v));
        }
        Report {
            command: "tcsparse-bench --dtype f16 --out docs/results".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            cases,
            config: None,
            baseline: Some(VendorBaseline::CusparseFastest),
        }
    }

    /// A 3×TF32 run on two shared matrices: 1.5× and 1.2× faster, errors 1.5× and 2.5× cuSPARSE
    /// f32's.
    fn tf32x3_report() -> Report {
        let v = Some(Numerics::Tf32x3);
        let mut cases = Vec::new();
        for (m, base, ours, err) in [("cora", 0.03, 0.02, 1.5), ("cage10", 0.012, 0.01, 2.5)] {
            let mut b = typed(m, Group::Shared, BASELINE, base, None);
            b.rel_err = Some(1e-7);
            let mut o = typed(m, Group::Shared, "tcsparse-3xtf32", ours, v);
            o.rel_err = Some(err * 1e-7);
            cases.extend([b, o]);
        }
        Report {
            command: "tcsparse-bench --precision 3xtf32".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            cases,
            config: None,
            baseline: Some(VendorBaseline::CusparseFastest),
        }
    }

    fn line<'a>(lines: &'a [SummaryLine], label: &str) -> &'a SummaryLine {
        lines
            .iter()
            .find(|l| l.label == label)
            .unwrap_or_else(|| panic!("no line {label}: {lines:?}"))
    }

    #[test]
    fn half_geomeans_are_over_the_same_type_and_over_f32() {
        let r = f16_report();
        assert_eq!(r.numerics(), Some(Numerics::F16));
        let lines = r.numerics_summary(Numerics::F16);
        let same = line(&lines, "geomean (shared datasets, f16 vs cuSPARSE f16)");
        // 2 · 0.25 · 4 = 2: cube root.
        assert!(
            (same.value.unwrap() - 2f64.cbrt()).abs() < 1e-12,
            "{same:?}"
        );
        assert_eq!((same.off, same.of), (1, 3));
        let f32_line = line(&lines, "geomean (shared datasets, f16 vs cuSPARSE f32)");
        assert!((f32_line.value.unwrap() - 32f64.cbrt()).abs() < 1e-12);
        // cage10 is exactly 1.0× cuSPARSE f32: not below.
        assert_eq!((f32_line.off, f32_line.of), (0, 3));
        let large = line(&lines, "geomean (large, f16 vs cuSPARSE f16)");
        assert!((large.value.unwrap() - 1.25).abs() < 1e-12);
        assert_eq!(
            same.render(),
            "geomean (shared datasets, f16 vs cuSPARSE f16): 1.26× (cases below 1.0×: 1 of 3)  "
        );
        // A failed case of ours, or a failed same-type baseline, drops out of both lines.
        let mut r2 = r.clone();
        r2.cases[2].status = Status::Failed { reason: "x".into() };
        r2.cases[4].status = Status::Failed { reason: "x".into() };
        let lines = r2.numerics_summary(Numerics::F16);
        assert_eq!(
            line(&lines, "geomean (shared datasets, f16 vs cuSPARSE f16)").of,
            1
        );
        assert_eq!(
            line(&lines, "geomean (shared datasets, f16 vs cuSPARSE f32)").of,
            2
        );
        // The f32 headline and summary ignore every f16 case.
        assert_eq!(r.summary().geomean_shared, None);
        assert!(r.cases.iter().all(|c| c.backend != HEADLINE));
        // A bf16 run with no shared case says n/a.
        let empty = Report { cases: vec![], ..r };
        let lines = empty.numerics_summary(Numerics::Bf16);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[0].render(),
            "geomean (shared datasets, bf16 vs cuSPARSE bf16): n/a  "
        );
    }

    #[test]
    fn tf32x3_lines_give_the_speedup_and_the_worst_error_ratio() {
        let r = tf32x3_report();
        let lines = r.numerics_summary(Numerics::Tf32x3);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let speed = line(&lines, "geomean (shared datasets, 3xtf32 vs cuSPARSE f32)");
        assert!((speed.value.unwrap() - 1.8f64.sqrt()).abs() < 1e-12);
        let err = line(&lines, "3xtf32 error / cuSPARSE f32 error (worst case)");
        assert!((err.value.unwrap() - 2.5).abs() < 1e-9, "{err:?}");
        assert_eq!((err.off, err.of), (1, 2));
        assert_eq!(
            err.render(),
            "3xtf32 error / cuSPARSE f32 error (worst case): 2.50 (relative errors, cage10 N=128; \
             cases above 2.0: 1 of 2)  "
        );
        assert_eq!(error_ratio(0.0, 0.0), Some(1.0));
        assert_eq!(error_ratio(1e-7, 0.0), Some(f64::INFINITY));
        assert_eq!(error_ratio(f64::NAN, 1e-7), None);
    }

    #[test]
    fn half_and_tf32x3_reports_render_with_their_summary_lines() {
        let md = f16_report().markdown();
        assert!(
            md.starts_with("# SpMM in f16: tcsparse vs cuSPARSE f16 and f32"),
            "{md}"
        );
        // cora: ours 0.01 ms, cuSPARSE f16 0.02 (its default 0.04), f32 0.04.
        assert!(
            md.contains("| cora | shared | 1000 | 50000 | 128 | tcsparse-f16 | 0.010 |"),
            "{md}"
        );
        assert!(md.contains("| 2.00× | 4.00× | 4.00× |"), "{md}");
        insta::assert_snapshot!("f16_report", md);
        insta::assert_snapshot!("tf32x3_report", tf32x3_report().markdown());
    }

    #[test]
    fn new_fields_round_trip_and_old_files_read_without_them() {
        let r = f16_report();
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert!(text.contains("\"numerics\": \"f16\""), "{text}");
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
        // The f32 row records none, so an f32 file is unchanged.
        let f32_case = serde_json::to_string(&r.cases[0]).unwrap();
        assert!(!f32_case.contains("numerics"), "{f32_case}");
        let old: Case = serde_json::from_str(&f32_case).unwrap();
        assert_eq!(old.numerics, None);
        let t = tf32x3_report();
        let back: Report = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.numerics(), Some(Numerics::Tf32x3));
    }

    #[test]
    fn files_are_named_after_the_type_and_never_mix_types() {
        let r = f16_report();
        assert_eq!(crate::results::file_stem(Op::Spmm, &r), "spmm-f16-h200");
        assert_eq!(
            crate::results::file_stem(Op::Spmm, &tf32x3_report()),
            "spmm-3xtf32-h200"
        );
        let f32_run = crate::report::Report {
            cases: vec![typed("cora", Group::Shared, BASELINE, 1.0, None)],
            ..r.clone()
        };
        assert_eq!(crate::results::file_stem(Op::Spmm, &f32_run), "spmm-h200");
        let e = crate::results::same_numerics(&[r.clone(), tf32x3_report()]).unwrap_err();
        assert!(e.contains("f16") && e.contains("3xtf32"), "{e}");
        let e = crate::results::same_numerics(&[f32_run, r.clone()]).unwrap_err();
        assert!(e.contains("f32 (tf32)"), "{e}");
        let mut mixed = r.clone();
        mixed.cases.extend(tf32x3_report().cases);
        assert!(mixed.numerics_mixed() && mixed.numerics().is_none());
        assert!(crate::results::same_numerics(&[mixed.clone()]).is_err());
        let dir =
            std::env::temp_dir().join(format!("tcsparse-bench-numerics-{}", std::process::id()));
        assert!(crate::results::write(&dir, &mixed).is_err());
        let written = crate::results::write(&dir, &r).unwrap();
        assert!(written[0].ends_with("spmm-f16-h200.json"), "{written:?}");
        // As committed: the JSON round-trips byte for byte and the .md is its render (what
        // `committed_results_agree_with_their_markdown` checks of every file in docs/results).
        let text = std::fs::read_to_string(&written[0]).unwrap();
        let back = crate::results::read(&written[0]).unwrap();
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
        assert_eq!(
            std::fs::read_to_string(&written[1]).unwrap(),
            crate::results::render(&back)
        );
        assert!(
            crate::plots::render(&back).is_empty(),
            "no plot of a typed run"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // Merged parts keep the type.
        let merged = Report::merge(vec![r.clone(), r]).unwrap();
        assert_eq!(merged.numerics(), Some(Numerics::F16));
    }

    /// The f32 results with every time of ours twice as slow: a gate that compared them with an
    /// f16 run would see a regression of ours; it must compare nothing instead.
    fn f32_base() -> Report {
        let mut cases = Vec::new();
        for (m, g) in [
            ("cora", Group::Shared),
            ("cage10", Group::Shared),
            ("rmat20", Group::Large),
        ] {
            cases.push(typed(m, g, BASELINE, 0.04, None));
            cases.push(typed(m, g, HEADLINE, 0.001, None));
        }
        Report {
            command: "tcsparse-bench".into(),
            cases,
            ..f16_report()
        }
    }

    #[test]
    fn the_gate_never_compares_a_half_case_with_an_f32_one() {
        let (base, new) = (f32_base(), f16_report());
        let e = refusal(check_comparable, &base, &new);
        assert!(
            e.contains("f16 (tcsparse-f16)") && e.contains("f32 (tf32)"),
            "{e}"
        );
        assert!(e.contains("spmm-f16-<device>.json"), "{e}");
        // The other way round too, and for 3×TF32.
        assert!(check_comparable(std::slice::from_ref(&new), std::slice::from_ref(&base)).is_err());
        assert!(check_comparable(std::slice::from_ref(&base), &[tf32x3_report()]).is_err());
        // Even past the refusal, the comparison matches nothing: no regression, and the gate's
        // message says nothing was compared.
        let c = Comparison::new(
            std::slice::from_ref(&base),
            std::slice::from_ref(&new),
            Tolerances::default(),
        );
        assert!(c.cases.is_empty() && c.groups.is_empty());
        assert_eq!(
            c.failures(),
            ["no case in common with the base: nothing was compared"]
        );
        // A base holding both files (docs/results) compares the f16 run with the f16 file
        // only: a 10 % slower f16 kernel is found, the f32 cases play no part.
        let mut slower = new.clone();
        for c in slower
            .cases
            .iter_mut()
            .filter(|c| c.backend == "tcsparse-f16")
        {
            c.ms = c.ms.map(|t| t * 1.1);
        }
        let both = [base.clone(), new.clone()];
        assert!(check_comparable(&both, std::slice::from_ref(&slower)).is_ok());
        let c = Comparison::new(&both, std::slice::from_ref(&slower), Tolerances::default());
        assert_eq!(c.cases.len(), 4, "{:?}", c.failures());
        assert!(c.cases.iter().all(|l| l.backend == "tcsparse-f16"));
        assert!(!c.passed());
        // And the f32 run against that folder compares its own cases only, unchanged: passes.
        let c = Comparison::new(&both, std::slice::from_ref(&base), Tolerances::default());
        assert!(c.passed(), "{:?}", c.failures());
        assert!(c.cases.iter().all(|l| l.backend == HEADLINE));
    }
}
