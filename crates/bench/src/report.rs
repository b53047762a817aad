//! Benchmark results: the data model written to `bench.json`, the summary lines (geomeans, worst case)
//! and the Markdown report. Pure CPU code, independent of the GPU and of the library's API.
//!
//! Rules enforced here: a speedup is only ever computed for a case whose accuracy check passed and whose
//! cuSPARSE baseline (same matrix, same N, same process) passed too; failed cases show `FAILED` and
//! never a speedup; backends that could not run show `not available: <why>`.

use serde::{Deserialize, Serialize};

pub use crate::baseline::VendorBaseline;
pub use crate::numerics_kind::Numerics;

/// Name of the vendor baseline backend (cuSPARSE SpMM, CSR, the fastest of its algorithms).
pub const BASELINE: &str = "cusparse";
/// Name of our headline backend: the planner's choice (reordering and balancing as the planner decides).
pub const HEADLINE: &str = "tcsparse";

/// The operation a case measures. Old result files have no `op` field: they are SpMM.
#[derive(
    Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// C = αA·B + βC, A sparse, B and C dense `cols × n` / `rows × n`.
    #[default]
    Spmm,
    /// y = αA·x + βy for `n` right-hand sides.
    Spmv,
    /// Sparse approximate matrix multiplication of two `n × n` matrices.
    Spamm,
}

impl Op {
    /// Name used in file names and tables (`spmm`, `spmv`, `spamm`).
    pub fn name(self) -> &'static str {
        match self {
            Op::Spmm => "spmm",
            Op::Spmv => "spmv",
            Op::Spamm => "spamm",
        }
    }

    /// The vendor baseline every other backend of this op is compared with (same matrix, same
    /// `n`, same process): cuSPARSE for SpMM and SpMV, cuBLAS's TF32 GEMM (`cublas-tf32`, the
    /// same tensor-core precision as ours) for SpAMM.
    pub fn baseline(self) -> &'static str {
        match self {
            Op::Spmm | Op::Spmv => BASELINE,
            Op::Spamm => "cublas-tf32",
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a matrix comes from; the summary groups by it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// Small matrices shipped in `datasets/`.
    Shipped,
    /// Real matrices of the shared dataset folder.
    Shared,
    /// Large generated matrices (5–100M nonzeros).
    Large,
    /// Dense `n × n` decay matrices generated in the process (SpAMM: exp(−r|i−j|), algebraic, …).
    Decay,
}

impl Group {
    /// Name used in tables and file names (`shipped`, `shared`, `large`, `decay`).
    pub fn name(self) -> &'static str {
        match self {
            Group::Shipped => "shipped",
            Group::Shared => "shared",
            Group::Large => "large",
            Group::Decay => "decay",
        }
    }
}

/// Outcome of one case.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Status {
    /// Ran and passed its accuracy check.
    Ok,
    /// Ran but failed its accuracy check or errored while running.
    Failed {
        /// What went wrong.
        reason: String,
    },
    /// The backend could not run here (no GPU, API missing, unsupported shape).
    NotAvailable {
        /// Why.
        why: String,
    },
}

/// Preprocessing stage times in milliseconds (host wall clock); `None` = stage not run.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct PrepTimes {
    /// Reordering.
    pub reorder_ms: Option<f64>,
    /// Format build.
    pub build_ms: Option<f64>,
    /// Planning.
    pub plan_ms: Option<f64>,
    /// Upload to the device.
    pub upload_ms: Option<f64>,
    /// Tuning (timing the candidates), when the preparation was tuned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune_ms: Option<f64>,
    /// The whole preparation a user pays before the first product (every stage above, the
    /// reorder gate and the checks between them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_ms: Option<f64>,
}

/// One measured (matrix, N, backend) case.
///
/// SpAMM cases (two dense `n × n` factors) fill the matrix fields as a dense matrix: `group` is
/// [`Group::Decay`], `rows = cols = n`, `nnz = n²` (every entry is stored and read; so
/// [`Case::gflops`] is the dense 2n³/t), and carry the SpAMM fields below (`norms_ms`, `tau`,
/// `valid_ratio`, `rel_bound`, `target`); the precision is the backend's name (`spamm-tf32`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Case {
    /// The operation (`spmm` when absent: files written before SpMV and SpAMM joined the bench).
    #[serde(default)]
    pub op: Op,
    /// Matrix name.
    pub matrix: String,
    /// Matrix group.
    pub group: Group,
    /// Rows of A.
    pub rows: usize,
    /// Columns of A.
    pub cols: usize,
    /// Stored nonzeros of A (after symmetric expansion and de-duplication).
    pub nnz: usize,
    /// Width of B and C for SpMM, right-hand sides for SpMV, matrix size for SpAMM.
    pub n: usize,
    /// Backend name (`cusparse`, `tcsparse`, `acc/plain`, …, `cpu-reference`; [`Op::baseline`] is
    /// the vendor baseline).
    pub backend: String,
    /// Outcome.
    #[serde(flatten)]
    pub status: Status,
    /// Median kernel time in ms (CUDA events), when it ran.
    pub ms: Option<f64>,
    /// Bytes that must move once: compressed A + B + C.
    pub bytes: Option<u64>,
    /// Relative Frobenius error against the f64 reference (possibly on sampled rows).
    pub rel_err: Option<f64>,
    /// Largest element-wise error scaled by |A|·|B| (TF32 bound: a few × 2⁻¹⁰).
    pub scaled_err: Option<f64>,
    /// Preprocessing stage times.
    pub prep: Option<PrepTimes>,
    /// The kernel chosen (e.g. `Acc-SpMM (balanced)`), when the backend has one.
    pub plan: Option<String>,
    /// Why the planner chose it (JSON only; too long for the table).
    #[serde(default)]
    pub plan_note: Option<String>,
    /// SpAMM: time of the two norm maps alone, ms (included in [`Case::ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norms_ms: Option<f64>,
    /// SpAMM: the norm threshold τ (tile products with ‖A_ik‖·‖B_kj‖ < τ are skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tau: Option<f32>,
    /// SpAMM: fraction of the tile products computed (valid ratio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_ratio: Option<f64>,
    /// SpAMM: reported bound on ‖E‖F/‖C‖F from the skipped products; `null` in the JSON (which has
    /// no infinity) when a SpAMM case (τ set) has no finite bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_bound: Option<f64>,
    /// SpAMM: how τ was chosen (`RelError(1e-5)`, `ValidRatio(0.05)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// SpMM headline (tuned) cases: what the planner's model alone (an untuned preparation,
    /// `--no-tune`) runs for the same matrix and N, and its time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelPick>,
    /// SpMM vendor baseline cases: the time of cuSPARSE's default algorithm, ms, beside the
    /// fastest one in [`Case::ms`] (the table's "vs default" column divides by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ms: Option<f64>,
    /// SpMM runs in f16, bf16 or 3×TF32 (`--dtype`, `--precision`): the element type or
    /// precision of this case's product; absent for f32 operands at TF32 (the default run, and
    /// the f32 cuSPARSE row of the other runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numerics: Option<Numerics>,
}

/// The untuned (model-only) choice of a tuned case.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ModelPick {
    /// The kernel and its order, as the tuning samples name it (`CSR (CUDA cores, ≤ 64 nonzeros
    /// per warp) (original order)`).
    pub plan: String,
    /// Its median time, ms: the tuned case's own time when the model ran the same kernel in the
    /// same order, else timed in the same process the same way.
    pub ms: f64,
}

/// Model-only time within this factor of the tuned time counts as agreeing.
pub const MODEL_TOLERANCE: f64 = 1.1;

impl Case {
    /// A case of `op` on `matrix` (`rows × cols` with `nnz` stored nonzeros, as [`Case`] counts
    /// them) at width `n` on `backend`, with `status` and no measurement yet: every optional field
    /// `None`. Callers fill what they measured with struct update syntax.
    pub fn new(
        op: Op,
        matrix: &str,
        group: Group,
        (rows, cols, nnz): (usize, usize, usize),
        n: usize,
        backend: &str,
        status: Status,
    ) -> Self {
        Case {
            op,
            matrix: matrix.to_owned(),
            group,
            rows,
            cols,
            nnz,
            n,
            backend: backend.to_owned(),
            status,
            ms: None,
            bytes: None,
            rel_err: None,
            scaled_err: None,
            prep: None,
            plan: None,
            plan_note: None,
            norms_ms: None,
            tau: None,
            valid_ratio: None,
            rel_bound: None,
            target: None,
            model: None,
            default_ms: None,
            numerics: None,
        }
    }

    /// GFLOP/s = 2·nnz·N / t.
    pub fn gflops(&self) -> Option<f64> {
        let ms = self.ms.filter(|&t| t > 0.0)?;
        Some(2.0 * self.nnz as f64 * self.n as f64 / (ms * 1e-3) / 1e9)
    }

    /// Effective bandwidth in GB/s over [`Case::bytes`].
    pub fn gbps(&self) -> Option<f64> {
        let ms = self.ms.filter(|&t| t > 0.0)?;
        Some(self.bytes? as f64 / (ms * 1e-3) / 1e9)
    }

    /// Whether the case ran and passed its accuracy check.
    pub fn ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// Whether the case failed (accuracy check or an error while running).
    pub fn failed(&self) -> bool {
        matches!(self.status, Status::Failed { .. })
    }

    /// The backend this case's speedup is over: cuSPARSE in the same element type for an f16 or
    /// bf16 case ([`Numerics::same_type_baseline`]), else the vendor baseline of its op.
    pub fn baseline_backend(&self) -> &'static str {
        self.numerics
            .and_then(Numerics::same_type_baseline)
            .unwrap_or(self.op.baseline())
    }

    /// Whether this case is the vendor baseline of its op, or of its element type
    /// (`cusparse-f16` in an f16 run).
    pub fn is_baseline(&self) -> bool {
        self.backend == self.baseline_backend()
    }

    /// The status cell of a Markdown case table: `ok`, `FAILED: <reason>` or
    /// `not available: <why>`, a `|` in the text written `/`.
    pub fn status_cell(&self) -> String {
        match &self.status {
            Status::Ok => "ok".to_string(),
            Status::Failed { reason } => format!("FAILED: {}", reason.replace('|', "/")),
            Status::NotAvailable { why } => format!("not available: {}", why.replace('|', "/")),
        }
    }

    /// The cells every SpMM case table starts with, joined by ` | `: matrix, group, rows, nnz, N,
    /// backend, ms, GFLOP/s, GB/s, rel err, scaled err (`–` where there is no value).
    pub fn measure_cells(&self) -> String {
        let cell = |v: Option<String>| v.unwrap_or_else(|| "–".into());
        format!(
            "{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}",
            self.matrix,
            self.group.name(),
            self.rows,
            self.nnz,
            self.n,
            self.backend,
            cell(self.ms.map(|v| format!("{v:.3}"))),
            cell(self.gflops().map(|v| format!("{v:.2}"))),
            cell(self.gbps().map(|v| format!("{v:.2}"))),
            cell(self.rel_err.map(|v| format!("{v:.1e}"))),
            cell(self.scaled_err.map(|v| format!("{v:.1e}"))),
        )
    }

    /// Whether this case is a vendor library (`cusparse…`, `cublas…`: the baseline or another
    /// vendor routine such as SpAMM's `cublas-sgemm`), not one of ours: the regression gate
    /// compares only ours.
    pub fn is_vendor(&self) -> bool {
        self.backend.starts_with("cusparse") || self.backend.starts_with("cublas")
    }
}

/// A whole benchmark run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Report {
    /// The exact command line that produced it.
    pub command: String,
    /// Device description (name, SMs, driver), or why there is none.
    pub device: String,
    /// Unix time in seconds when the run started.
    pub started_unix: u64,
    /// Every case, in run order.
    pub cases: Vec<Case>,
    /// Configuration shared by every case, when the op has one (SpAMM: C block and balance
    /// parameter, e.g. `block B64, s = 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The vendor baseline every speedup was measured against; absent in files written before
    /// it was recorded ([`VendorBaseline::of`] classifies those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<VendorBaseline>,
}

/// The headline numbers of a report.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Summary {
    /// Geomean speedup of [`HEADLINE`] over [`BASELINE`] on large generated matrices.
    pub geomean_large: Option<f64>,
    /// Same on the large matrices with structure ([`is_structured`]: banded, clustered, R-MAT).
    pub geomean_structured: Option<f64>,
    /// Same on the shared real datasets.
    pub geomean_shared: Option<f64>,
    /// Smallest speedup over all groups, with its case label.
    pub worst: Option<(f64, String)>,
    /// Cases that failed (any backend).
    pub failed: usize,
    /// Median over the [`HEADLINE`] cases on large matrices of the whole preparation per
    /// nonzero, ns.
    #[serde(default)]
    pub prepare_large_ns_per_nnz: Option<f64>,
    /// Largest break-even call count of the [`HEADLINE`] cases on large matrices that kept a kernel
    /// other than cuSPARSE (`Some(None)`: one of them never breaks even).
    #[serde(default)]
    pub worst_break_even_large: Option<Option<f64>>,
}

/// Name prefixes of the generated matrices with structure (banded, clustered, R-MAT), as opposed
/// to uniformly random ones (`uniform…`, `reddit-like`): the issue's 2× goal is stated over these.
pub const STRUCTURED_PREFIXES: [&str; 3] = ["banded", "clustered", "rmat"];

/// Whether the generated matrix `name` is one with structure ([`STRUCTURED_PREFIXES`]).
pub fn is_structured(name: &str) -> bool {
    STRUCTURED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Geometric mean; `None` for an empty input or any non-positive value.
pub fn geomean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|&x| x.is_nan() || x <= 0.0 || !x.is_finite()) {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

impl Report {
    /// The passing case of backend `backend` at `case`'s op, matrix and N, if there is one.
    pub fn passing_peer(&self, case: &Case, backend: &str) -> Option<&Case> {
        self.cases.iter().find(|c| {
            c.op == case.op
                && c.backend == backend
                && c.matrix == case.matrix
                && c.n == case.n
                && c.ok()
        })
    }

    /// Speedup of `case` over its baseline ([`Case::baseline_backend`]: the vendor baseline of its
    /// op, cuSPARSE in the same type for an f16 or bf16 case) at the same matrix and N:
    /// baseline ms / case ms. `None` unless both ran and passed their accuracy checks.
    pub fn speedup(&self, case: &Case) -> Option<f64> {
        if !case.ok() || case.is_baseline() {
            return None;
        }
        self.speedup_over(case, case.baseline_backend())
    }

    /// Speedup of `case` over the case of backend `baseline` at the same op, matrix and N:
    /// baseline ms / case ms. `None` unless both ran and passed their accuracy checks.
    pub fn speedup_over(&self, case: &Case, baseline: &str) -> Option<f64> {
        if !case.ok() || case.backend == baseline {
            return None;
        }
        let base = self.passing_peer(case, baseline)?;
        let (b, t) = (base.ms?, case.ms?);
        (b > 0.0 && t > 0.0).then(|| b / t)
    }

    /// The element type or precision of the run ([`Numerics`]): the one its cases record, `None`
    /// for the default f32/TF32 run (or a report whose cases record several: never written, see
    /// [`Report::numerics_mixed`]).
    pub fn numerics(&self) -> Option<Numerics> {
        let mut it = self.cases.iter().filter_map(|c| c.numerics);
        let first = it.next()?;
        it.all(|v| v == first).then_some(first)
    }

    /// Whether the cases record more than one element type or precision.
    pub fn numerics_mixed(&self) -> bool {
        let mut it = self.cases.iter().filter_map(|c| c.numerics);
        it.next().is_some_and(|first| it.any(|v| v != first))
    }

    /// Products after which `case`'s preparation ([`PrepTimes::total_ms`]) is repaid against
    /// the baseline at the same matrix and N: `total / (baseline ms − case ms)`. `None`: no
    /// preparation total or no passing baseline; `Some(None)`: never (not faster).
    pub fn break_even(&self, case: &Case) -> Option<Option<f64>> {
        let total = case.prep.as_ref()?.total_ms?;
        let baseline = case.baseline_backend();
        if !case.ok() || case.backend == baseline {
            return None;
        }
        let base = self.passing_peer(case, baseline)?;
        let saved = base.ms? - case.ms?;
        Some((saved > 0.0 && total.is_finite()).then(|| total / saved))
    }

    /// Geomeans per group and the worst case, over the SpMM cases of the [`HEADLINE`] backend.
    pub fn summary(&self) -> Summary {
        let mut large = Vec::new();
        let mut structured = Vec::new();
        let mut shared = Vec::new();
        let mut worst: Option<(f64, String)> = None;
        for c in self
            .cases
            .iter()
            .filter(|c| c.op == Op::Spmm && c.backend == HEADLINE)
        {
            let Some(s) = self.speedup(c) else { continue };
            match c.group {
                Group::Large => {
                    large.push(s);
                    if is_structured(&c.matrix) {
                        structured.push(s);
                    }
                }
                Group::Shared => shared.push(s),
                Group::Shipped | Group::Decay => {}
            }
            if worst.as_ref().is_none_or(|(w, _)| s < *w) {
                worst = Some((s, format!("{} N={}", c.matrix, c.n)));
            }
        }
        let headline_large = || {
            self.cases
                .iter()
                .filter(|c| c.backend == HEADLINE && c.group == Group::Large && c.ok())
        };
        let mut prep_ns: Vec<f64> = headline_large()
            .filter_map(|c| Some(c.prep.as_ref()?.total_ms? * 1e6 / c.nnz.max(1) as f64))
            .collect();
        prep_ns.sort_by(f64::total_cmp);
        let prepare_large_ns_per_nnz = match prep_ns.len() {
            0 => None,
            k if k % 2 == 1 => Some(prep_ns[k / 2]),
            k => Some((prep_ns[k / 2 - 1] + prep_ns[k / 2]) / 2.0),
        };
        let mut worst_break_even_large: Option<Option<f64>> = None;
        for c in
            headline_large().filter(|c| !c.plan.as_deref().unwrap_or("").starts_with("cuSPARSE"))
        {
            let Some(be) = self.break_even(c) else {
                continue;
            };
            worst_break_even_large = Some(match (worst_break_even_large, be) {
                (Some(None), _) | (_, None) => None,
                (Some(Some(w)), Some(b)) => Some(w.max(b)),
                (None, Some(b)) => Some(b),
            });
        }
        Summary {
            prepare_large_ns_per_nnz,
            worst_break_even_large,
            geomean_large: geomean(&large),
            geomean_structured: geomean(&structured),
            geomean_shared: geomean(&shared),
            worst,
            failed: self.cases.iter().filter(|c| c.failed()).count(),
        }
    }

    /// Headline cases with a model-only time, and those whose model-only time is within
    /// [`MODEL_TOLERANCE`] of the tuned time: (within, of), per group in `groups` (all when empty).
    pub fn model_agreement(&self, groups: &[Group]) -> (usize, usize) {
        let mut within = 0;
        let mut of = 0;
        for c in self.cases.iter().filter(|c| {
            c.backend == HEADLINE && c.ok() && (groups.is_empty() || groups.contains(&c.group))
        }) {
            let (Some(m), Some(t)) = (&c.model, c.ms) else {
                continue;
            };
            of += 1;
            if m.ms <= MODEL_TOLERANCE * t {
                within += 1;
            }
        }
        (within, of)
    }

    /// Geomean over the (matrix, N) cases of `group` of the best speedup among the backends named
    /// `prefix…` (e.g. every `hrpb/…` variant); `None` when no such case passed.
    pub fn geomean_best_of(&self, prefix: &str, group: Group) -> Option<f64> {
        let mut best: Vec<((&str, usize), f64)> = Vec::new();
        for c in self.cases.iter() {
            let Some(s) = (c.group == group && c.backend.starts_with(prefix))
                .then(|| self.speedup(c))
                .flatten()
            else {
                continue;
            };
            match best
                .iter_mut()
                .find(|(k, _)| *k == (c.matrix.as_str(), c.n))
            {
                Some((_, b)) => *b = b.max(s),
                None => best.push(((c.matrix.as_str(), c.n), s)),
            }
        }
        geomean(&best.iter().map(|(_, s)| *s).collect::<Vec<_>>())
    }

    /// Merges reports of runs split to fit a time limit: cases concatenated in order, commands
    /// joined with `; `, the header of the first report unless one was cut off (its
    /// "(partial: …)" mark is kept). `None` for no report.
    pub fn merge(reports: Vec<Report>) -> Option<Report> {
        let first = reports.first()?;
        let device = reports
            .iter()
            .map(|r| r.device.as_str())
            .find(|d| d.contains("partial"))
            .unwrap_or(&first.device)
            .to_string();
        Some(Report {
            command: reports
                .iter()
                .map(|r| r.command.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            device,
            started_unix: first.started_unix,
            config: {
                let mut configs: Vec<&str> = Vec::new();
                for c in reports.iter().filter_map(|r| r.config.as_deref()) {
                    if !configs.contains(&c) {
                        configs.push(c);
                    }
                }
                (!configs.is_empty()).then(|| configs.join("; "))
            },
            // One recorded baseline when every part recorded the same; else none (classified
            // from the cases: `VendorBaseline::of`). Callers refuse parts of one op measured
            // against different baselines (`baseline::per_op`) before merging.
            baseline: {
                let b = first.baseline;
                reports
                    .iter()
                    .all(|r| r.baseline == b)
                    .then_some(b)
                    .flatten()
            },
            cases: reports.into_iter().flat_map(|r| r.cases).collect(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `check`'s refusal to compare `new` with base `base`, asserted to be one: its message.
    pub(crate) fn refusal(
        check: fn(&[Report], &[Report]) -> Result<(), String>,
        base: &Report,
        new: &Report,
    ) -> String {
        let e = check(std::slice::from_ref(base), std::slice::from_ref(new)).unwrap_err();
        assert!(e.starts_with("not comparable"), "{e}");
        e
    }

    /// An SpMM case for tests: 1000 × 1000, 50 000 nonzeros, 4 MB to move.
    pub(crate) fn case(
        matrix: &str,
        group: Group,
        n: usize,
        backend: &str,
        ms: f64,
        status: Status,
    ) -> Case {
        Case {
            ms: Some(ms),
            bytes: Some(4_000_000),
            rel_err: Some(1e-4),
            scaled_err: Some(5e-4),
            prep: (backend != BASELINE).then_some(PrepTimes {
                reorder_ms: Some(1.5),
                build_ms: Some(2.0),
                plan_ms: Some(0.25),
                upload_ms: Some(0.5),
                tune_ms: None,
                total_ms: Some(10.0),
            }),
            plan: (backend != BASELINE).then(|| "acc_spmm balanced".into()),
            ..Case::new(
                Op::Spmm,
                matrix,
                group,
                (1000, 1000, 50_000),
                n,
                backend,
                status,
            )
        }
    }

    #[test]
    fn break_even_and_prepare_summary() {
        let mut r = Report {
            command: "t".into(),
            device: "d".into(),
            started_unix: 0,
            config: None,
            baseline: None,
            cases: vec![
                case("rmat20", Group::Large, 128, BASELINE, 2.0, Status::Ok),
                case("rmat20", Group::Large, 128, HEADLINE, 1.5, Status::Ok),
                case("banded", Group::Large, 128, BASELINE, 1.0, Status::Ok),
                case("banded", Group::Large, 128, HEADLINE, 0.5, Status::Ok),
            ],
        };
        // 10 ms of preparation, 0.5 ms saved per call: 20 calls; the baseline has none.
        assert_eq!(r.break_even(&r.cases[1]), Some(Some(20.0)));
        assert_eq!(r.break_even(&r.cases[0]), None);
        let sm = r.summary();
        assert_eq!(sm.worst_break_even_large, Some(Some(20.0)));
        // 10 ms over 50,000 nonzeros on both matrices.
        assert_eq!(sm.prepare_large_ns_per_nnz, Some(200.0));
        // Slower than cuSPARSE: never; a case that kept cuSPARSE does not count.
        r.cases[3].ms = Some(1.2);
        assert_eq!(r.break_even(&r.cases[3]), Some(None));
        assert_eq!(r.summary().worst_break_even_large, Some(None));
        r.cases[3].plan = Some("cuSPARSE".into());
        assert_eq!(r.summary().worst_break_even_large, Some(Some(20.0)));
        let md = r.markdown();
        assert!(md.contains("prepare (large): 200.0 ns/nnz"), "{md}");
        assert!(md.contains("worst break-even (large): 20 calls"), "{md}");
        assert!(md.contains("| 10.00 | 20 |"), "{md}");
        assert!(md.contains("| 10.00 | never |"), "{md}");
        // Files written before these fields existed still read.
        let old = r#"{"reorder_ms":1.0,"build_ms":null,"plan_ms":null,"upload_ms":null}"#;
        let p: PrepTimes = serde_json::from_str(old).unwrap();
        assert_eq!(p.total_ms, None);
    }

    #[test]
    fn merge_concatenates_cases_and_keeps_a_partial_mark() {
        let full = sample();
        let (a, b) = full.cases.split_at(2);
        let part = |cases: &[Case], device: &str, command: &str| Report {
            command: command.into(),
            device: device.into(),
            started_unix: 7,
            config: None,
            baseline: None,
            cases: cases.to_vec(),
        };
        let merged = Report::merge(vec![
            part(a, "H200", "bench --only rmat20"),
            part(b, "H200 (partial: run in progress)", "bench --no-generated"),
        ])
        .unwrap();
        assert_eq!(merged.cases, full.cases);
        assert_eq!(merged.command, "bench --only rmat20; bench --no-generated");
        assert!(merged.device.contains("partial"));
        assert_eq!(merged.config, None);
        // SpAMM's configuration: kept once when the parts agree, joined when they differ.
        let with = |c: &str| Report {
            config: Some(c.into()),
            ..part(a, "H200", "x")
        };
        let one = Report::merge(vec![with("block B64, s = 1"), with("block B64, s = 1")]);
        assert_eq!(one.unwrap().config.as_deref(), Some("block B64, s = 1"));
        let two = Report::merge(vec![with("block B64, s = 1"), with("block B128, s = 2")]);
        assert_eq!(
            two.unwrap().config.as_deref(),
            Some("block B64, s = 1; block B128, s = 2")
        );
        assert_eq!(merged.summary(), full.summary());
        assert!(Report::merge(Vec::new()).is_none());
    }

    fn sample() -> Report {
        use Group::*;
        let failed = Status::Failed {
            reason: "scaled error 3.1e-1 > 4.0e-3".into(),
        };
        Report {
            command: "tcsparse-bench --quick --out docs/results".into(),
            device: "NVIDIA H200 (132 SMs), driver 13.0".into(),
            started_unix: 0,
            config: None,
            baseline: None,
            cases: vec![
                case("rmat20", Large, 128, BASELINE, 2.0, Status::Ok),
                case("rmat20", Large, 128, HEADLINE, 1.0, Status::Ok),
                case("banded", Large, 128, BASELINE, 3.0, Status::Ok),
                case("banded", Large, 128, HEADLINE, 0.75, Status::Ok),
                case("uniform2m", Large, 128, BASELINE, 1.0, Status::Ok),
                case("uniform2m", Large, 128, HEADLINE, 0.5, Status::Ok),
                case("cora", Shared, 128, BASELINE, 0.02, Status::Ok),
                case("cora", Shared, 128, HEADLINE, 0.04, Status::Ok),
                case(
                    "cora",
                    Shared,
                    128,
                    "tcsparse/no-reorder",
                    0.01,
                    failed.clone(),
                ),
                case("copter2", Shared, 256, BASELINE, 0.1, Status::Ok),
                case("copter2", Shared, 256, HEADLINE, 0.001, failed),
                case(
                    "west0067",
                    Shipped,
                    128,
                    "cpu-reference",
                    0.5,
                    Status::NotAvailable {
                        why: "no GPU".into(),
                    },
                ),
            ],
        }
    }

    #[test]
    fn geomean_basics() {
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[2.0, 0.0]), None);
        assert_eq!(geomean(&[-1.0]), None);
        assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((geomean(&[3.0]).unwrap() - 3.0).abs() < 1e-12);
    }

    #[test]
    fn summary_uses_only_passing_headline_cases() {
        let r = sample();
        let s = r.summary();
        // Large: 2.0, 4.0 and 2.0 -> geomean 16^(1/3); structured (rmat20, banded): sqrt(8).
        assert!((s.geomean_large.unwrap() - 16f64.cbrt()).abs() < 1e-12);
        assert!((s.geomean_structured.unwrap() - 8f64.sqrt()).abs() < 1e-12);
        // Shared: only cora (0.5); copter2 failed and its 100× must not count.
        assert!((s.geomean_shared.unwrap() - 0.5).abs() < 1e-12);
        let (w, label) = s.worst.unwrap();
        assert!((w - 0.5).abs() < 1e-12);
        assert_eq!(label, "cora N=128");
        assert_eq!(s.failed, 2);
    }

    #[test]
    fn failed_cases_never_get_a_speedup() {
        let r = sample();
        for c in &r.cases {
            if !c.ok() {
                assert_eq!(r.speedup(c), None, "{} {}", c.matrix, c.backend);
            }
        }
        // A failed baseline removes the speedup of a passing case too.
        let mut r2 = sample();
        r2.cases[0].status = Status::Failed { reason: "x".into() };
        assert_eq!(r2.speedup(&r2.cases[1].clone()), None);
        assert!((r2.summary().geomean_large.unwrap() - 8f64.sqrt()).abs() < 1e-12);
        assert_eq!(r2.summary().geomean_structured, Some(4.0));
        let md = r.markdown();
        for line in md.lines().filter(|l| l.contains("FAILED")) {
            assert!(!line.contains('×'), "a FAILED row shows a speedup: {line}");
        }
    }

    #[test]
    fn empty_report_says_na() {
        let r = Report {
            command: "c".into(),
            device: "none".into(),
            started_unix: 0,
            config: None,
            baseline: None,
            cases: vec![],
        };
        let md = r.markdown();
        assert!(md.contains("geomean (large): n/a"));
        assert!(md.contains("geomean (large, structured: banded, clustered, rmat): n/a"));
        assert!(md.contains("worst case: n/a"));
    }

    #[test]
    fn json_round_trip() {
        let mut r = sample();
        // Values whose shortest decimal form the default (fast) float parser reads back one ulp
        // off (seen in a real bench.json): --merge must not perturb them.
        r.cases[0].scaled_err = Some(2.2969900421142918e-7);
        r.cases[1].rel_err = Some(1.8375690365489487e-7);
        let j = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn ablation_pairs_paper_and_ours_on_the_same_cases() {
        let mut r = sample();
        r.cases.extend([
            case("rmat20", Group::Large, 128, "acc/plain", 1.0, Status::Ok),
            case("rmat20", Group::Large, 128, "paper/plain", 1.25, Status::Ok),
            case("banded", Group::Large, 128, "acc/plain", 1.5, Status::Ok),
        ]);
        let a = r.ablation();
        // rmat20 only (banded has no paper case): ours 2.00×, paper 1.60×, ratio 0.80.
        assert!(
            a.contains("| large | neither | 1 | 2.00× | 1.60× | 0.80 |"),
            "{a}"
        );
        assert!(a.contains("| large | reorder | 0") || !a.contains("large | reorder |"));
    }

    #[test]
    fn markdown_snapshot() {
        insta::assert_snapshot!(sample().markdown());
    }

    #[test]
    fn model_agreement_counts_headline_cases_within_ten_percent() {
        let mut r = sample();
        // No model pick recorded: no line.
        assert_eq!(r.model_agreement(&[]), (0, 0));
        assert!(!r.markdown().contains("model within"));
        let pick = |ms| {
            Some(ModelPick {
                plan: "CSR (CUDA cores, ≤ 64 nonzeros per warp) (original order)".into(),
                ms,
            })
        };
        let mut headline = r
            .cases
            .iter_mut()
            .filter(|c| c.backend == HEADLINE && c.ok());
        // 1.1 × the tuned time is within; just above is not.
        let a = headline.next().unwrap();
        a.model = pick(a.ms.unwrap() * MODEL_TOLERANCE);
        let b = headline.next().unwrap();
        b.model = pick(b.ms.unwrap() * 1.2);
        let groups = (a.group, b.group);
        drop(headline);
        assert_eq!(r.model_agreement(&[]), (1, 2));
        let line = r
            .markdown()
            .lines()
            .find(|l| l.starts_with("model within 10 % of tuned: 1 of 2 (50 %; "))
            .map(str::to_string);
        assert!(line.is_some(), "{}", r.markdown());
        let (w, o) = r.model_agreement(&[groups.0]);
        assert!(o >= 1 && w <= o);
        // A model pick on a non-headline case is ignored.
        let other = r.cases.iter_mut().find(|c| c.backend != HEADLINE).unwrap();
        other.model = pick(1e9);
        assert_eq!(r.model_agreement(&[]), (1, 2));
        // JSON: the field round-trips and is absent when None.
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
        assert!(
            !serde_json::to_string(&sample())
                .unwrap()
                .contains("\"model\"")
        );
    }
}
