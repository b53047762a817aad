//! Which vendor baseline a result file measured its speedups against, and the rule that results
//! measured against different baselines are never compared or merged.
//!
//! A speedup is only as honest as its baseline: against cuSPARSE's *default* SpMM algorithm
//! (`CUSPARSE_SPMM_ALG_DEFAULT`, which for row-major B and C is CSR_ALG2) the same kernels look
//! about 20 % faster than against cuSPARSE at its *fastest* CSR algorithm (each of
//! [`SpmmAlg::CANDIDATES`](tcsparse_gpu::SpmmAlg) timed, the fastest kept). The bench measures the
//! fastest and records it in the report's `baseline` field; files written before the field
//! existed are classified by [`VendorBaseline::of`].

use serde::{Deserialize, Serialize};

use crate::report::{Op, Report};

/// The vendor routine every speedup of one op in a report is measured against.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum VendorBaseline {
    /// cuSPARSE with its default algorithm only (SpMM files written before every CSR algorithm
    /// was timed).
    CusparseDefault,
    /// cuSPARSE at its fastest CSR algorithm for the case (every algorithm timed, the fastest
    /// that passes the accuracy check kept; its name in the case's plan).
    CusparseFastest,
    /// cuBLAS's TF32 GEMM (SpAMM).
    CublasTf32,
}

impl VendorBaseline {
    /// What the bench measures today for `op`.
    pub fn current(op: Op) -> Self {
        match op {
            Op::Spmm | Op::Spmv => Self::CusparseFastest,
            Op::Spamm => Self::CublasTf32,
        }
    }

    /// The baseline of `op`'s speedups in `report`: the recorded one, else (files written
    /// before the field existed) SpMM's is the fastest algorithm when some baseline case names
    /// an algorithm other than the default in its plan and the default otherwise (the bench timed
    /// only the default then); an SpMV file without the field counts as the fastest algorithm,
    /// which holds for the committed one (68604a9) but not for SpMV files before a50f5ed
    /// (2026-11-25), whose n = 8 cases ran cuSPARSE's default SpMM algorithm — compare with those
    /// only knowing that; SpAMM's baseline has always been cuBLAS TF32.
    pub fn of(report: &Report, op: Op) -> Self {
        if let Some(b) = report.baseline {
            return b;
        }
        match op {
            Op::Spmm => {
                let named_other = report.cases.iter().any(|c| {
                    c.op == Op::Spmm
                        && c.is_baseline()
                        && c.plan
                            .as_deref()
                            .is_some_and(|p| p.contains("ALG") && !p.contains("ALG_DEFAULT"))
                });
                if named_other {
                    Self::CusparseFastest
                } else {
                    Self::CusparseDefault
                }
            }
            Op::Spmv => Self::CusparseFastest,
            Op::Spamm => Self::CublasTf32,
        }
    }

    /// How tables and messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::CusparseDefault => "cuSPARSE's default algorithm",
            Self::CusparseFastest => "cuSPARSE at its fastest CSR algorithm",
            Self::CublasTf32 => "cuBLAS TF32 GEMM",
        }
    }
}

/// The baseline of each op present in `reports`, or why they disagree (two files of one op
/// measured against different baselines).
pub fn per_op(reports: &[Report]) -> Result<Vec<(Op, VendorBaseline)>, String> {
    let mut seen: Vec<(Op, VendorBaseline, &str)> = Vec::new();
    for r in reports {
        for op in ops_of(r) {
            let b = VendorBaseline::of(r, op);
            match seen.iter().find(|(o, _, _)| *o == op) {
                Some((_, other, cmd)) if *other != b => {
                    return Err(format!(
                        "{op} results measured against different baselines: `{cmd}` against {}, \
                         `{}` against {}",
                        other.describe(),
                        r.command,
                        b.describe()
                    ));
                }
                Some(_) => {}
                None => seen.push((op, b, r.command.as_str())),
            }
        }
    }
    Ok(seen.into_iter().map(|(o, b, _)| (o, b)).collect())
}

/// `Err` with a message naming both baselines when `base` and `new` measured one op against
/// different baselines: their speedups do not compare, and a comparison would report a
/// regression (or a gain) that is only the change of baseline.
pub fn check_comparable(base: &[Report], new: &[Report]) -> Result<(), String> {
    let (b, n) = (per_op(base)?, per_op(new)?);
    for (op, nb) in &n {
        if let Some((_, bb)) = b.iter().find(|(o, _)| o == op)
            && bb != nb
        {
            return Err(format!(
                "not comparable: the base measured {op} against {}, the new results against {}; \
                 re-record the base with this bench (docs/results/README.md, \"Regression gate\") \
                 instead of comparing across baselines",
                bb.describe(),
                nb.describe()
            ));
        }
    }
    Ok(())
}

fn ops_of(r: &Report) -> Vec<Op> {
    let mut ops: Vec<Op> = Vec::new();
    for c in &r.cases {
        if !ops.contains(&c.op) {
            ops.push(c.op);
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::refusal;
    use crate::report::{Case, Group, Status};

    fn case(op: Op, backend: &str, plan: &str) -> Case {
        let mut c = crate::report::tests::case("m", Group::Shared, 128, backend, 1.0, Status::Ok);
        c.op = op;
        c.plan = Some(plan.into());
        c
    }

    fn report(cases: Vec<Case>, baseline: Option<VendorBaseline>) -> Report {
        Report {
            command: format!("run {}", cases.len()),
            device: "H200".into(),
            started_unix: 0,
            cases,
            config: None,
            baseline,
        }
    }

    /// One SpMM cuSPARSE case whose plan names the default algorithm, with `baseline` recorded.
    fn default_spmm(baseline: Option<VendorBaseline>) -> Report {
        report(
            vec![case(Op::Spmm, "cusparse", "cuSPARSE CSR, SPMM_ALG_DEFAULT")],
            baseline,
        )
    }

    #[test]
    fn old_spmm_files_are_classified_by_the_algorithms_their_plans_name() {
        let default = default_spmm(None);
        let fastest = report(
            vec![
                case(Op::Spmm, "cusparse", "cuSPARSE CSR, SPMM_ALG_DEFAULT"),
                case(Op::Spmm, "cusparse", "cuSPARSE CSR, SPMM_CSR_ALG3"),
            ],
            None,
        );
        assert_eq!(
            VendorBaseline::of(&default, Op::Spmm),
            VendorBaseline::CusparseDefault
        );
        assert_eq!(
            VendorBaseline::of(&fastest, Op::Spmm),
            VendorBaseline::CusparseFastest
        );
        // A recorded baseline wins over the inference.
        let recorded = default_spmm(Some(VendorBaseline::CusparseFastest));
        assert_eq!(
            VendorBaseline::of(&recorded, Op::Spmm),
            VendorBaseline::CusparseFastest
        );
    }

    #[test]
    fn comparing_across_baselines_is_refused_with_both_named() {
        let old = default_spmm(None);
        let new = default_spmm(Some(VendorBaseline::current(Op::Spmm)));
        let err = refusal(check_comparable, &old, &new);
        assert!(
            err.contains("default algorithm") && err.contains("fastest"),
            "{err}"
        );
        assert!(check_comparable(std::slice::from_ref(&new), std::slice::from_ref(&new)).is_ok());
        // Other ops are unaffected: an old SpMV file compares with a new one.
        let spmv_old = report(vec![case(Op::Spmv, "cusparse", "cuSPARSE CSR")], None);
        let spmv_new = report(
            vec![case(Op::Spmv, "cusparse", "cuSPARSE CSR")],
            Some(VendorBaseline::current(Op::Spmv)),
        );
        assert!(check_comparable(&[spmv_old], &[spmv_new]).is_ok());
    }

    #[test]
    fn files_of_one_op_with_different_baselines_do_not_combine() {
        let a = default_spmm(None);
        let b = report(
            vec![case(Op::Spmm, "cusparse", "cuSPARSE CSR, SPMM_CSR_ALG1")],
            Some(VendorBaseline::CusparseFastest),
        );
        let err = per_op(&[a, b]).unwrap_err();
        assert!(err.contains("different baselines"), "{err}");
    }
}
