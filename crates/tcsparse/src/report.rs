//! What [`Engine::prepare_spmm`](crate::Engine::prepare_spmm) did: [`PrepareReport`], the kernel
//! it set up ([`ExecKernel`]) and the tuning samples.

use tcsparse_gpu::baselines::cusparse::SpmmAlg;
use tcsparse_gpu::spmm::acc::AccVariant;
use tcsparse_gpu::spmm::row_tile::{RowTileArith, RowTileKernel, RowTileSchedule};
use tcsparse_reorder::{GateReport, Mode, ReorderReport};

use crate::{Backend, Precision};

/// Generates [`ExecKernel`] from the kernel-family registry (`spmm/family/`): the kernels
/// written out below, then one variant per family holding its parameters.
macro_rules! exec_kernel {
    ($( $(#[$doc:meta])* $req:ident $(($rty:ty))? => $kv:ident($kty:ident) in $module:ident; )*) => {
        /// What [`Prepared`](crate::Prepared) runs: a kernel written out here, or a kernel
        /// family's with its parameters.
        #[non_exhaustive]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ExecKernel {
            /// Acc-SpMM (BitTCF, TF32 tensor cores) with the given schedule kind.
            AccSpmm {
                /// How row windows map to thread blocks.
                schedule: ScheduleKind,
            },
            /// Acc-SpMM by the paper's own pipeline ([`AccVariant::Paper`]: shared-memory metadata
            /// by `cp.async`, B `ld.global.ca`, C `st.global.wt`) with the given schedule kind.
            AccSpmmPaper {
                /// How row windows map to thread blocks.
                schedule: ScheduleKind,
            },
            /// cuSPARSE SpMM (CSR, f32) with the given algorithm: [`SpmmAlg::Default`] unless a
            /// tuned preparation timed another of [`SpmmAlg::TUNED`] faster.
            Cusparse {
                /// cuSPARSE's SpMM algorithm.
                alg: SpmmAlg,
            },
            /// A row-tile tensor-core kernel (TF32, row-tile TCF): one gather of 8 B rows serves
            /// every row of a window (16 or 32 rows).
            RowTile {
                /// Window height and tile storage.
                kernel: RowTileKernel,
                /// How windows map to thread blocks.
                schedule: RowTileSchedule,
            },
            /// CPU: the BitTCF walk (`BitTcf::spmm_cpu`), f32.
            CpuBitTcf,
            $( $(#[$doc])* $kv(crate::spmm::family::$module::$kty), )*
        }
    };
}
crate::spmm::family::with_families!(exec_kernel);

impl ExecKernel {
    /// The arithmetic it uses: TF32 for the tensor-core kernels (3×TF32 for the row-tile kernels
    /// in it; the f16 / bf16 row-tile kernels are TF32's precision choice, their bound is
    /// [`crate::DType::rounded_a_bound`]), f32 for the others (the CSR kernel in f16 / bf16
    /// included: A in f32, f32 accumulation).
    pub fn precision(self) -> Precision {
        if let Some(k) = self.as_family() {
            return k.family().precision();
        }
        match self {
            ExecKernel::RowTile { kernel, .. } if kernel.arith == RowTileArith::Tf32x3 => {
                Precision::Tf32x3
            }
            ExecKernel::AccSpmm { .. }
            | ExecKernel::AccSpmmPaper { .. }
            | ExecKernel::RowTile { .. } => Precision::Tf32,
            ExecKernel::Cusparse { .. } | ExecKernel::CpuBitTcf => Precision::F32,
            // (A family's kernel: above.)
            _ => Precision::F32,
        }
    }
}

impl std::fmt::Display for ExecKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(k) = self.as_family() {
            return k.fmt(f);
        }
        match self {
            ExecKernel::AccSpmm { schedule } => write!(f, "Acc-SpMM ({schedule})"),
            ExecKernel::AccSpmmPaper { schedule } => {
                write!(f, "Acc-SpMM, paper pipeline ({schedule})")
            }
            // (The default as before, `cuSPARSE`; another algorithm by its name.)
            ExecKernel::Cusparse {
                alg: SpmmAlg::Default,
            } => write!(f, "cuSPARSE"),
            ExecKernel::Cusparse { alg } => write!(f, "cuSPARSE ({})", alg.name()),
            ExecKernel::RowTile { kernel, schedule } => {
                let storage = if kernel.dense_tiles {
                    "dense tiles, "
                } else {
                    ""
                };
                write!(
                    f,
                    "{} ({}-row tiles, {storage}{schedule})",
                    kernel.name(),
                    kernel.window_rows,
                )
            }
            ExecKernel::CpuBitTcf => write!(f, "CPU reference (BitTCF walk)"),
            // (A family's kernel: above.)
            _ => Ok(()),
        }
    }
}

/// How the Acc-SpMM schedule maps row windows to thread blocks.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// One thread block per row window.
    Unbalanced,
    /// Eq. 4 packing (heavy windows split with atomics, light ones packed).
    Balanced,
    /// This many consecutive windows per thread block, nothing split.
    Packed(u32),
    /// Packed windows run by the kernel variant with a per-warp B-row cache of `2^log2_rows` rows
    /// in shared memory.
    PackedCached {
        /// Consecutive row windows per thread block.
        windows: u32,
        /// log2 of the B rows cached per warp.
        log2_rows: u8,
    },
}

impl ScheduleKind {
    /// The kernel variant this kind runs.
    pub fn variant(self) -> AccVariant {
        match self {
            ScheduleKind::PackedCached { log2_rows, .. } => AccVariant::CachedRows {
                log2_slots: log2_rows,
            },
            _ => AccVariant::RegisterMeta,
        }
    }
}

impl std::fmt::Display for ScheduleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleKind::Unbalanced => write!(f, "unbalanced"),
            ScheduleKind::Balanced => write!(f, "balanced"),
            ScheduleKind::Packed(k) => write!(f, "{}", per_tb(*k)),
            ScheduleKind::PackedCached { windows, log2_rows } => {
                write!(f, "{}, {}-row B cache", per_tb(*windows), 1u32 << log2_rows)
            }
        }
    }
}

/// "1 window per TB", "4 windows per TB".
fn per_tb(k: u32) -> String {
    if k == 1 {
        "1 window per TB".into()
    } else {
        format!("{k} windows per TB")
    }
}

/// One measured candidate of a tuned [`Engine::prepare_spmm`](crate::Engine::prepare_spmm).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct TuneSample {
    /// What ran (kernel, order, schedule).
    pub candidate: String,
    /// Median time of the timed launches, milliseconds.
    pub ms: f64,
}

/// What [`Engine::prepare_spmm`](crate::Engine::prepare_spmm) did, with the time of each stage (seconds).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct PrepareReport {
    /// Backend the products run on.
    pub backend: Backend,
    /// The kernel set up.
    pub kernel: ExecKernel,
    /// Why that kernel (the plan's reason, plus any override).
    pub kernel_note: String,
    /// Rows, columns and nonzeros of A.
    pub rows: usize,
    /// Columns of A.
    pub cols: usize,
    /// Stored nonzeros of A.
    pub nnz: usize,
    /// Reordering report (method, its own time, MeanNNZTC before/after), when one was computed.
    pub reorder: Option<ReorderReport>,
    /// Whether the permutation was applied (Auto drops one that does not help).
    pub reordered: bool,
    /// Symmetric or row-only.
    pub mode: Mode,
    /// Reorder stage: computing and applying the permutation.
    pub reorder_s: f64,
    /// BitTCF build.
    pub build_s: f64,
    /// Planning.
    pub plan_s: f64,
    /// Upload (and kernel module load), until the device is idle again.
    pub upload_s: f64,
    /// TC blocks of the prepared BitTCF.
    pub blocks: usize,
    /// MeanNNZTC of the prepared matrix (nnz / blocks).
    pub mean_nnz_tc: f64,
    /// Thread blocks of the Acc-SpMM schedule (0 for other kernels).
    pub thread_blocks: usize,
    /// Split windows of the Acc-SpMM schedule.
    pub split_windows: usize,
    /// Tuning: every candidate timed, in the order measured (empty when not tuned).
    pub tuning: Vec<TuneSample>,
    /// Tuning stage: preparing the extra candidates and timing them.
    pub tune_s: f64,
    /// cuSPARSE's milliseconds per product at the prepared N, its fastest CSR algorithm timed in
    /// full by the tuning (the time every candidate was measured against): this preparation's
    /// tuning, or on a plan-cache hit the tuning that stored the entry; `None` where no tuning
    /// timed it.
    pub cusparse_ms: Option<f64>,
    /// The gate run before an automatic reordering (`None` when no automatic reordering was
    /// considered): when it says no reordering can make the blocks dense enough, none is computed.
    pub reorder_gate: Option<GateReport>,
    /// What the prepared-plan cache did (see `PrepareOptions::cache_dir`).
    pub cache: CacheOutcome,
    /// The cache's own work, seconds: the matrix's pattern checksum, reading and checking the
    /// entry, and storing it after a full preparation (0 without a cache directory).
    pub cache_s: f64,
    /// The whole preparation, every stage above included (tuning, cache look-up and store),
    /// seconds: what a caller pays before the first product.
    pub total_s: f64,
}

impl PrepareReport {
    /// Products after which this preparation has paid for itself against a baseline that needs
    /// no preparation: `total_s / (baseline_ms − ours_ms)`; `None` ("never") when ours is not
    /// faster. See [`break_even_calls`].
    pub fn break_even_calls(&self, baseline_ms: f64, ours_ms: f64) -> Option<f64> {
        break_even_calls(self.total_s, baseline_ms, ours_ms)
    }
}

/// Calls after which a preparation of `prepare_s` seconds is repaid by saving
/// `baseline_ms − ours_ms` per call; `None` ("never") when ours is not faster or an input is not a
/// finite number.
pub fn break_even_calls(prepare_s: f64, baseline_ms: f64, ours_ms: f64) -> Option<f64> {
    let saved_ms = baseline_ms - ours_ms;
    (prepare_s.is_finite() && saved_ms.is_finite() && saved_ms > 0.0)
        .then(|| (prepare_s * 1e3 / saved_ms).max(0.0))
}

/// "1234" (rounded up) or "never".
pub fn format_break_even(calls: Option<f64>) -> String {
    match calls {
        Some(c) if c < 1e15 => format!("{:.0}", c.ceil()),
        Some(_) | None => "never".to_string(),
    }
}

/// What the prepared-plan cache did for one preparation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheOutcome {
    /// No cache directory was given.
    #[default]
    Off,
    /// No entry for this key: prepared in full and stored.
    Miss,
    /// Permutation and kernel decision loaded from the entry.
    Hit,
    /// An entry was there but could not be trusted (corrupt, stale, unreadable): prepared in full
    /// and stored again. The reason is logged as a warning too.
    Rebuilt(String),
    /// Prepared in full, but the entry could not be written (the reason).
    StoreFailed(String),
}

impl PrepareReport {
    /// The arithmetic of the kernel products run on ([`ExecKernel::precision`]); its error bound is
    /// [`Precision::bound_text`] (per element: [`crate::Prepared::error_bound`]).
    pub fn precision(&self) -> Precision {
        self.kernel.precision()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cusparse_kernels_name_their_algorithm_unless_it_is_the_default() {
        // The default keeps the text it always had (CPU-path snapshots and notes do not change).
        let default = ExecKernel::Cusparse {
            alg: SpmmAlg::Default,
        };
        assert_eq!(default.to_string(), "cuSPARSE");
        let names: Vec<String> = SpmmAlg::CANDIDATES
            .into_iter()
            .map(|alg| ExecKernel::Cusparse { alg }.to_string())
            .collect();
        assert_eq!(
            names,
            [
                "cuSPARSE",
                "cuSPARSE (SPMM_CSR_ALG1)",
                "cuSPARSE (SPMM_CSR_ALG2)",
                "cuSPARSE (SPMM_CSR_ALG3)",
            ]
        );
        for alg in SpmmAlg::CANDIDATES {
            assert_eq!(ExecKernel::Cusparse { alg }.precision(), Precision::F32);
        }
    }
}
