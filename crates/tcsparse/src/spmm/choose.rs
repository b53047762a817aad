//! The kernel an SpMM preparation runs: the planner's class and the matrix's shape turned into
//! an [`ExecKernel`] ([`model_kernel`], `Engine::choose`) and the Acc-SpMM schedule of a kind.

use tcsparse_formats::Csr;
use tcsparse_gpu::baselines::cusparse::SpmmAlg;
use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit};
use tcsparse_gpu::spmm::row_tile::{RowTileKernel, RowTileSchedule};
use tcsparse_planner::{AccSchedule, Eq4Model, KernelChoice, Plan};

use super::family::Choice;
use crate::{CsrKernel, HrpbKernel, StagedKernel};

use crate::{Balance, Engine, ExecKernel, KernelRequest, Precision, PrepareOptions, ScheduleKind};

/// Windows per thread block of an explicitly requested row-tile kernel without `Balance::Packed`
/// or `Balance::On`.
const ROW_TILE_DEFAULT_WINDOWS: u32 = 4;
/// Most blocks per thread block of an explicitly requested row-tile kernel with `Balance::On`.
pub const ROW_TILE_SPLIT_BLOCKS: u32 = 16;

/// The HRPB kernel a plain (untuned) preparation runs when the model picks HRPB, for a matrix of
/// `rows` rows on `sm_count` SMs: the wave-aware split, and [`HrpbMma::for_rows`]'s shape (k8w
/// below one panel per SM, k8wtd at 16–31 panels per SM, k8ts otherwise: docs/kernels/hrpb.md).
/// `KernelRequest::Hrpb` takes the same shape.
pub(super) fn hrpb_default(rows: usize, sm_count: u32) -> ExecKernel {
    ExecKernel::Hrpb(HrpbKernel {
        mma: HrpbMma::for_rows(rows, sm_count),
        split: HrpbSplit::Wave,
    })
}

/// Warp items of the CSR kernel per SM below which an untuned preparation keeps cuSPARSE for a
/// CUDA-core plan: too little work to hide the kernel's load latency (citeseer, 9 k nonzeros:
/// 142 items for 132 SMs, 1.38× slower than cuSPARSE on the H200).
const CSR_MIN_ITEMS_PER_SM: usize = 8;

/// Whether `kernel` runs on BitTCF (the layout a preparation builds for it; the other kernels
/// build their own at upload).
pub(super) fn runs_on_bittcf(kernel: ExecKernel) -> bool {
    matches!(
        kernel,
        ExecKernel::AccSpmm { .. } | ExecKernel::AccSpmmPaper { .. } | ExecKernel::CpuBitTcf
    )
}

/// MeanNNZTC: nonzeros per 8×8 block (0 without blocks).
pub(super) fn nnz_per_block(nnz: usize, blocks_8x8: usize) -> f64 {
    if blocks_8x8 == 0 {
        0.0
    } else {
        nnz as f64 / blocks_8x8 as f64
    }
}

/// Whether `nnz` nonzeros make fewer than [`CSR_MIN_ITEMS_PER_SM`] warp items of 64 nonzeros per
/// SM on `sm_count` SMs: every kernel is then bound by its launch and longest thread block.
pub(super) fn at_launch_floor(nnz: usize, sm_count: u32) -> bool {
    nnz / 64 < CSR_MIN_ITEMS_PER_SM * sm_count.max(1) as usize
}

/// The CUDA-core kernel an untuned preparation runs where the planner's model says "no tensor
/// cores" (cuSPARSE-class, e.g. Low TCU synergy): our CSR kernel at a nonzero budget per warp
/// giving about 16 items per resident warp (64..=1024 nonzeros; the tuned choice on the shared
/// datasets was 64, on R-MAT 256, on reddit-like 1024), where it was measured 1.1–4.3× faster
/// than cuSPARSE on 21 of 24 shared-dataset cases; `None` (cuSPARSE) when there are fewer than
/// [`CSR_MIN_ITEMS_PER_SM`] warp items of 64 nonzeros per SM.
pub(super) fn csr_kernel_for(nnz: usize, sm_count: u32) -> Option<ExecKernel> {
    if at_launch_floor(nnz, sm_count) {
        return None;
    }
    let sms = sm_count.max(1) as usize;
    // 64 resident warps per SM, 16 items each.
    let chunk = (nnz / (sms * 64 * 16)).clamp(64, 1024) as u32;
    Some(ExecKernel::CsrCuda(CsrKernel {
        chunk_nnz: chunk.next_power_of_two().min(1024),
    }))
}

/// The kernel an untuned preparation runs where the planner picks ME-TCF (DTC-SpMM's 16×8
/// blocks): the row-tile kernel on the same blocks, TC16d (dense tiles) when its tile copy is at
/// most 16 slots per nonzero, else TC16, one window per thread block (the tuned choice on
/// bcsstk17 and PROTEINS_full).
pub(super) fn metcf_kernel(nnz: usize, metcf_blocks: Option<u64>) -> ExecKernel {
    let slots = metcf_blocks.unwrap_or(u64::MAX).saturating_mul(128) as f64;
    let dense = nnz > 0
        && slots / nnz as f64 <= tcsparse_gpu::spmm::row_tile::MAX_DENSE_SLOTS_PER_NNZ
        && slots * 4.0 <= tcsparse_gpu::spmm::row_tile::MAX_DENSE_TILE_BYTES as f64;
    ExecKernel::RowTile {
        kernel: if dense {
            RowTileKernel::TC16D
        } else {
            RowTileKernel::TC16
        },
        schedule: RowTileSchedule::Packed(1),
    }
}

/// Nonzeros at most which an untuned preparation runs the staged CSR kernel's light cut
/// ([`model_kernel`], rule 0): the largest of the matrices it was measured on (cora, 10 556) with
/// room to spare, below mbeacxc (49 920) and rajat01 (43 250), where HRPB and the row-tile
/// kernels stay faster.
pub const STAGED_MODEL_MAX_NNZ: usize = 16_384;

/// α below which a balanced (split-window) tensor-core plan runs on CUDA cores instead: the
/// High-synergy boundary of cuTeSpMM (25 % of a 16×4 brick column filled).
const BALANCED_TC_MIN_ALPHA: f64 = 0.25;

/// The kernel an untuned preparation (`KernelRequest::Auto`, `Balance::Auto`, TF32: the planner's
/// model alone) runs for `plan` on a GPU of `sm_count` SMs, given the matrix's nonzeros, ME-TCF
/// block count, longest row and HRPB α (all of the matrix the plan was made on). Rules, in order,
/// each with the H200 measurements it rests on (docs/kernels/hrpb.md, "Model-only vs tuned
/// choice"):
///
/// 0. **Few nonzeros** (at most [`STAGED_MODEL_MAX_NNZ`]): the staged CSR kernel's light window
///    cut, at 64-column slices where every row fits its slots, else 32
///    (`StagedKernel::light_cut_for`). On the tuning samples of the shared-dataset bench at
///    da41da3 (citeseer, cora, west0067 at N = 128, 256, 512) it was within 10 % of the tuned
///    kernel in 7 of the 9 cases, where rule 1's HRPB was in 2.
/// 1. **Launch floor** (fewer than `CSR_MIN_ITEMS_PER_SM` warp items of 64 nonzeros per SM,
///    under ≈ 68 k nonzeros on 132 SMs): every kernel's time is its longest thread block's
///    latency chain plus the launch, and cuSPARSE has a 12–16 µs floor. HRPB (k8 when this was
///    measured, k8w since 0e4a917) with its capped wave split bounds every thread block's
///    walk (pieces of 4–16 bricks, hub panels cut), so it runs whatever the planner's rate
///    model said (cora, citeseer, rajat01: within 10 % of the fastest tuned kernel on 7 of 9
///    cases, where the old choices, cuSPARSE and TC16d with one window per thread block, were
///    1.3–10× slower).
/// 2. **Acc-SpMM with the balanced schedule at α < 0.25**: the planner balanced because row
///    windows are very unequal (hub rows); with sparse bricks our CSR kernel splits hub rows by
///    nonzeros for free, without split windows' atomics and pre-scale (c-62: CSR 1.15–1.2×
///    faster than balanced Acc-SpMM; NotreDame_www: within 3 %).
/// 3. **Acc-SpMM unbalanced**: the same row windows as dense 16×8 tiles (`metcf_kernel`: no
///    bitmap decode, one vector load per tile row) — TC16d with one window per thread block was
///    within 10 % of the fastest on PROTEINS_full, copter2 and xenon1 where unbalanced Acc-SpMM
///    was 1.2–1.3× slower.
/// 4. Otherwise the planner's kernel: HRPB (capped wave split), our CSR kernel or cuSPARSE for
///    a CUDA-core plan (`csr_kernel_for`), the row-tile kernel on ME-TCF's blocks
///    (`metcf_kernel`), Acc-SpMM balanced at High α.
pub fn model_kernel(
    plan: &Plan,
    rows: usize,
    nnz: usize,
    longest_row: usize,
    metcf_blocks: Option<u64>,
    alpha: Option<f64>,
    sm_count: u32,
) -> ExecKernel {
    if nnz > 0
        && nnz <= STAGED_MODEL_MAX_NNZ
        && let Some(k) = StagedKernel::light_cut_for(longest_row)
    {
        return ExecKernel::Staged(k);
    }
    if nnz > 0 && alpha.is_some() && at_launch_floor(nnz, sm_count) {
        return hrpb_default(rows, sm_count);
    }
    let csr = || {
        csr_kernel_for(nnz, sm_count).unwrap_or(ExecKernel::Cusparse {
            alg: SpmmAlg::Default,
        })
    };
    match plan.choice {
        KernelChoice::AccSpmm { balanced: true }
            if alpha.is_some_and(|a| a < BALANCED_TC_MIN_ALPHA) =>
        {
            csr()
        }
        KernelChoice::AccSpmm { balanced: true } => ExecKernel::AccSpmm {
            schedule: ScheduleKind::Balanced,
        },
        KernelChoice::AccSpmm { balanced: false } | KernelChoice::MeTcfSpmm => {
            metcf_kernel(nnz, metcf_blocks)
        }
        KernelChoice::HrpbSpmm => hrpb_default(rows, sm_count),
        KernelChoice::Cusparse => csr(),
    }
}

/// cuTeSpMM's α of a matrix of `nnz` nonzeros in `bricks` 16×4 bricks over compacted columns
/// (nonzeros per brick slot), `None` when there is no brick.
pub(super) fn hrpb_alpha(nnz: usize, bricks: usize) -> Option<f64> {
    (bricks > 0).then(|| nnz as f64 / (64.0 * bricks as f64))
}

impl Engine {
    /// The Acc-SpMM schedule of `kind` for a matrix with these row windows at width `n`.
    pub(super) fn schedule(&self, rwo: &[u32], kind: ScheduleKind, n: usize) -> AccSchedule {
        match kind {
            ScheduleKind::Unbalanced => AccSchedule::unbalanced(rwo),
            ScheduleKind::Balanced => {
                AccSchedule::balanced(rwo, &Eq4Model::paper(&self.device), n.max(1))
            }
            ScheduleKind::Packed(k) | ScheduleKind::PackedCached { windows: k, .. } => {
                AccSchedule::packed(rwo, k)
            }
        }
    }

    pub(super) fn choose(
        &self,
        plan: &Plan,
        opts: &PrepareOptions,
        rwo: &[u32],
        src: &Csr,
        metcf_blocks: Option<u64>,
        alpha: Option<f64>,
    ) -> (ExecKernel, String, Option<AccSchedule>) {
        let (rows, nnz) = (src.rows(), src.nnz());
        let sms = self.gpu.as_ref().map_or(1, |g| g.info().sm_count.max(1));
        if self.gpu.is_none() {
            return (
                ExecKernel::CpuBitTcf,
                format!(
                    "CPU reference path ({}); on the GPU the plan would be: {}",
                    self.message, plan.reason
                ),
                None,
            );
        }
        let plan_balanced = match plan.choice {
            KernelChoice::AccSpmm { balanced } => Some(balanced),
            _ => plan.imbalance.as_ref().map(|d| d.balanced),
        };
        let acc = |note: String| {
            let kind = match opts.balance {
                Balance::On => ScheduleKind::Balanced,
                Balance::Off => ScheduleKind::Unbalanced,
                Balance::Packed(k) => ScheduleKind::Packed(k.max(1)),
                Balance::PackedCached {
                    windows,
                    cache_rows,
                } => ScheduleKind::PackedCached {
                    windows: windows.max(1),
                    log2_rows: cache_rows.max(1).ilog2() as u8,
                },
                // (NnzPerWarp is refused for every kernel but CSR in `prepare`.)
                Balance::Auto | Balance::NnzPerWarp(_) if plan_balanced.unwrap_or(false) => {
                    ScheduleKind::Balanced
                }
                Balance::Auto | Balance::NnzPerWarp(_) => ScheduleKind::Unbalanced,
            };
            let sched = match (&plan.schedule, kind) {
                (Some(s), ScheduleKind::Balanced) if s.is_balanced() => s.clone(),
                (Some(s), ScheduleKind::Unbalanced) if !s.is_balanced() => s.clone(),
                _ => self.schedule(rwo, kind, opts.n),
            };
            (ExecKernel::AccSpmm { schedule: kind }, note, Some(sched))
        };
        if let Some(family) = opts.kernel.family() {
            let c = Choice {
                opts,
                reason: &plan.reason,
                rows,
                sms,
            };
            if let Some((kernel, note)) = family.choose(opts.kernel, &c) {
                return (kernel, note, None);
            }
        }
        match opts.kernel {
            KernelRequest::AccSpmm => acc(format!("Acc-SpMM requested (planner: {})", plan.reason)),
            KernelRequest::AccSpmmPaper => {
                let (k, note, sched) = acc(format!(
                    "Acc-SpMM, paper pipeline requested (planner: {})",
                    plan.reason
                ));
                let schedule = match k {
                    // The paper's pipeline has no B-row cache: the same windows, packed.
                    ExecKernel::AccSpmm {
                        schedule: ScheduleKind::PackedCached { windows, .. },
                    } => ScheduleKind::Packed(windows),
                    ExecKernel::AccSpmm { schedule } => schedule,
                    _ => ScheduleKind::Unbalanced,
                };
                (ExecKernel::AccSpmmPaper { schedule }, note, sched)
            }
            KernelRequest::Cusparse => (
                ExecKernel::Cusparse {
                    alg: SpmmAlg::Default,
                },
                format!("cuSPARSE requested (planner: {})", plan.reason),
                None,
            ),
            KernelRequest::RowTile(rt) => {
                let kernel = ExecKernel::RowTile {
                    kernel: rt,
                    schedule: match opts.balance {
                        Balance::Packed(k) => RowTileSchedule::Packed(k.max(1)),
                        Balance::On => RowTileSchedule::Split {
                            max_blocks: ROW_TILE_SPLIT_BLOCKS,
                        },
                        _ => RowTileSchedule::Packed(ROW_TILE_DEFAULT_WINDOWS),
                    },
                };
                (
                    kernel,
                    format!("{kernel} requested (planner: {})", plan.reason),
                    None,
                )
            }
            KernelRequest::Auto if opts.precision == Precision::F32 => (
                ExecKernel::Cusparse {
                    alg: SpmmAlg::Default,
                },
                format!(
                    "F32 precision asked for: cuSPARSE (f32 rounding) instead of the tensor-core \
                     kernels (planner: {})",
                    plan.reason
                ),
                None,
            ),
            // Auto (a family's request was answered above).
            _ => {
                let kernel =
                    model_kernel(plan, rows, nnz, src.longest_row(), metcf_blocks, alpha, sms);
                let planned = match plan.choice {
                    KernelChoice::AccSpmm { .. } => "Acc-SpMM",
                    KernelChoice::HrpbSpmm => "HRPB",
                    KernelChoice::MeTcfSpmm => "ME-TCF",
                    KernelChoice::Cusparse => "cuSPARSE",
                };
                let floor = at_launch_floor(nnz, sms);
                let note = match kernel {
                    ExecKernel::AccSpmm { .. } => return acc(plan.reason.clone()),
                    ExecKernel::Cusparse { .. } => plan.reason.clone(),
                    ExecKernel::Staged(_) => format!(
                        "{} (few nonzeros: {nnz} ≤ {STAGED_MODEL_MAX_NNZ}; {kernel} stages each window's B rows once)",
                        plan.reason
                    ),
                    ExecKernel::Hrpb { .. } if plan.choice != KernelChoice::HrpbSpmm && floor => {
                        format!(
                            "{} (launch floor: {nnz} nonzeros, fewer than {CSR_MIN_ITEMS_PER_SM} warp items of 64 per SM; {kernel} bounds every thread block's walk)",
                            plan.reason
                        )
                    }
                    _ if plan.choice == KernelChoice::Cusparse => format!(
                        "{} (a CUDA-core kernel: ours, {kernel}, runs it)",
                        plan.reason
                    ),
                    ExecKernel::CsrCuda { .. } => format!(
                        "{} (balanced row windows at α < {BALANCED_TC_MIN_ALPHA}: our CSR kernel, {kernel}, splits the heavy rows instead)",
                        plan.reason
                    ),
                    _ => format!("{} ({planned} plan run by {kernel})", plan.reason),
                };
                (kernel, note, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_gpu::spmm::staged::{Slice, StageCopy};

    #[test]
    fn hrpb_shape_follows_the_row_panels() {
        // REDDIT-BINARY (53.7 k panels on 132 SMs): k8ts, copter2 (3.5 k): k8wtd; the split kept.
        let wave = |mma| {
            ExecKernel::Hrpb(HrpbKernel {
                mma,
                split: HrpbSplit::Wave,
            })
        };
        let hrpb = plan(KernelChoice::HrpbSpmm);
        assert_eq!(
            model_kernel(&hrpb, 859_254, 1_991_016, 30, None, Some(0.3), 132),
            wave(HrpbMma::K8TS)
        );
        assert_eq!(
            model_kernel(&hrpb, 55_476, 704_476, 30, None, Some(0.3), 132),
            wave(HrpbMma::K8WTD)
        );
        // The launch-floor rule takes the same shape (cora's size, with a row beyond the staged
        // light cuts: 170 panels → k8ts).
        assert_eq!(
            cora(KernelChoice::Cusparse, 257, None, Some(0.067)),
            wave(HrpbMma::K8TS)
        );
    }

    #[test]
    fn cuda_core_plans_run_our_csr_kernel_unless_the_matrix_is_tiny() {
        // citeseer (9104 nonzeros): 142 items of 64 for 132 SMs → cuSPARSE.
        assert_eq!(csr_kernel_for(9104, 132), None);
        // BlogCatalog, REDDIT-BINARY: 64 (the tuned budget on the H200).
        for nnz in [343_486, 1_991_016] {
            assert_eq!(
                csr_kernel_for(nnz, 132),
                Some(ExecKernel::CsrCuda(CsrKernel { chunk_nnz: 64 }))
            );
        }
        // R-MAT scale 20 (≈ 23 M) → 256; reddit-like (114 M) → 1024 (the tuned budgets).
        assert_eq!(
            csr_kernel_for(23_000_000, 132),
            Some(ExecKernel::CsrCuda(CsrKernel { chunk_nnz: 256 }))
        );
        assert_eq!(
            csr_kernel_for(114_000_000, 132),
            Some(ExecKernel::CsrCuda(CsrKernel { chunk_nnz: 1024 }))
        );
    }

    fn plan(choice: KernelChoice) -> Plan {
        Plan {
            choice,
            reason: String::new(),
            n: 128,
            device: "H200".into(),
            predicted_ms: 0.0,
            predictions: Vec::new(),
            imbalance: None,
            schedule: None,
        }
    }

    /// The kernel for cora (2 708 rows, 10 556 nonzeros) on 132 SMs under `choice`.
    /// cora's size (2 708 rows, 10 556 nonzeros) with a longest row of `longest`.
    fn cora(
        choice: KernelChoice,
        longest: usize,
        metcf_blocks: Option<u64>,
        alpha: Option<f64>,
    ) -> ExecKernel {
        model_kernel(
            &plan(choice),
            2_708,
            10_556,
            longest,
            metcf_blocks,
            alpha,
            132,
        )
    }

    #[test]
    fn model_kernel_rules() {
        let tc16d = ExecKernel::RowTile {
            kernel: RowTileKernel::TC16D,
            schedule: RowTileSchedule::Packed(1),
        };
        let acc = |balanced| plan(KernelChoice::AccSpmm { balanced });
        let plans = [
            KernelChoice::Cusparse,
            KernelChoice::MeTcfSpmm,
            KernelChoice::AccSpmm { balanced: true },
            KernelChoice::HrpbSpmm,
        ];
        // 0. Few nonzeros (cora: 10 556 ≤ 16 384): the staged kernel's light cut whatever the
        // plan, at 64-column slices where the longest row fits their 128 slots, else at 32
        // (256 slots; cora's longest row has 168 nonzeros).
        let staged = |slice: Slice| {
            ExecKernel::Staged(StagedKernel {
                slice,
                spec: slice.light_spec(),
                copy: StageCopy::Bulk,
            })
        };
        for c in plans {
            assert_eq!(cora(c, 128, Some(2000), Some(0.067)), staged(Slice::S64));
            assert_eq!(cora(c, 168, Some(2000), Some(0.067)), staged(Slice::S32));
            assert_eq!(cora(c, 256, None, None), staged(Slice::S32));
        }
        // A row beyond every light cut's slots: the rules below (here the launch floor).
        assert_eq!(
            cora(KernelChoice::Cusparse, 257, Some(2000), Some(0.067)),
            hrpb_default(2_708, 132)
        );
        // 1. Launch floor (rajat01: 43 250 nonzeros < 8 · 64 · 132): HRPB whatever the plan.
        let rajat01 = |c: KernelChoice, blocks: Option<u64>, alpha: Option<f64>| {
            model_kernel(&plan(c), 6_833, 43_250, 100, blocks, alpha, 132)
        };
        for c in plans {
            assert_eq!(rajat01(c, Some(8000), Some(0.1)), hrpb_default(6_833, 132));
        }
        // … but only where HRPB was built (α known); an empty matrix keeps the plan.
        assert_eq!(
            rajat01(KernelChoice::Cusparse, None, None),
            ExecKernel::Cusparse {
                alg: SpmmAlg::Default
            }
        );
        // 2. Balanced Acc-SpMM below α 0.25 → the CSR kernel (c-62: 559 343 nonzeros).
        let c62 = |alpha| model_kernel(&acc(true), 41_731, 559_343, 300, Some(40_000), alpha, 132);
        assert_eq!(
            c62(Some(0.14)),
            ExecKernel::CsrCuda(CsrKernel { chunk_nnz: 64 })
        );
        assert_eq!(
            c62(Some(0.3)),
            ExecKernel::AccSpmm {
                schedule: ScheduleKind::Balanced
            }
        );
        // 3. Unbalanced Acc-SpMM → TC16d, one window per thread block (PROTEINS_full).
        assert_eq!(
            model_kernel(
                &acc(false),
                43_471,
                162_088,
                30,
                Some(12_000),
                Some(0.15),
                132
            ),
            tc16d
        );
        // 4. The rest as planned.
        assert_eq!(
            model_kernel(
                &plan(KernelChoice::HrpbSpmm),
                100_000,
                1_000_000,
                40,
                None,
                Some(0.4),
                132
            ),
            hrpb_default(100_000, 132)
        );
        assert_eq!(
            model_kernel(
                &plan(KernelChoice::Cusparse),
                859_254,
                1_991_016,
                30,
                None,
                Some(0.077),
                132
            ),
            ExecKernel::CsrCuda(CsrKernel { chunk_nnz: 64 })
        );
    }

    #[test]
    fn metcf_plans_run_tc16_dense_only_where_the_tiles_stay_small() {
        let tc16 = |dense| ExecKernel::RowTile {
            kernel: if dense {
                RowTileKernel::TC16D
            } else {
                RowTileKernel::TC16
            },
            schedule: RowTileSchedule::Packed(1),
        };
        assert_eq!(metcf_kernel(428_650, Some(12_000)), tc16(true));
        assert_eq!(metcf_kernel(100_000, Some(100_000)), tc16(false));
        assert_eq!(metcf_kernel(100_000, None), tc16(false));
        assert_eq!(metcf_kernel(0, Some(0)), tc16(false));
    }
}
