//! [`Engine::prepare_spmm`]: reorder, build, plan, choose the kernel and upload.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use std::time::Instant;

use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::metrics::{PlannerBlockCounts, planner_block_counts};
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, SpmmAlg};
use tcsparse_gpu::device_csr::DeviceCsr;
use tcsparse_gpu::spmm::acc::{AccSpmmDevice, AccVariant};
use tcsparse_gpu::spmm::csr::{CsrSpmm, CsrWorkPlan};
use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit, HrpbSpmm};
use tcsparse_gpu::spmm::row_tile::{RowTileDevice, RowTileKernel, RowTileSchedule};
use tcsparse_planner::{AccSchedule, Eq4Model, KernelChoice, MatrixFeatures, Plan, plan_spmm};
use tcsparse_reorder::{CheckedReorder, Gate, GateReport, Mode, Permutation, ReorderReport};

use super::cache::{
    PlanCache, PlanEntry, pattern_checksum, pattern_checksum_of_leaves, pattern_leaf,
};
use super::{DeviceState, Prepared, PreparedMatrix, Scratch};
use crate::{
    Balance, CacheOutcome, Engine, Error, ExecKernel, KernelRequest, Precision, PrepareOptions,
    PrepareReport, ReorderChoice, ScheduleKind,
};

/// Windows per thread block of an explicitly requested row-tile kernel without `Balance::Packed`
/// or `Balance::On`.
const ROW_TILE_DEFAULT_WINDOWS: u32 = 4;
/// Most blocks per thread block of an explicitly requested row-tile kernel with `Balance::On`.
pub const ROW_TILE_SPLIT_BLOCKS: u32 = 16;

/// The HRPB kernel a plain (untuned) preparation runs when the model picks HRPB, for a matrix of
/// `rows` rows on `sm_count` SMs: the wave-aware split, and [`HrpbMma::for_rows`]'s shape (the
/// lean k8wsc / k8sc from 4 panels per SM, k8w below: docs/kernels/hrpb.md v3–v5).
/// `KernelRequest::Hrpb` takes the same shape.
fn hrpb_default(rows: usize, sm_count: u32) -> ExecKernel {
    ExecKernel::Hrpb {
        mma: HrpbMma::for_rows(rows, sm_count),
        split: HrpbSplit::Wave,
    }
}

/// Warp items of the CSR kernel per SM below which an untuned preparation keeps cuSPARSE for a
/// CUDA-core plan: too little work to hide the kernel's load latency (citeseer, 9 k nonzeros:
/// 142 items for 132 SMs, 1.38× slower than cuSPARSE on the H200).
const CSR_MIN_ITEMS_PER_SM: usize = 8;

/// Whether `kernel` runs on BitTCF (the layout a preparation builds for it; the other kernels
/// build their own at upload).
fn runs_on_bittcf(kernel: ExecKernel) -> bool {
    matches!(
        kernel,
        ExecKernel::AccSpmm { .. } | ExecKernel::AccSpmmPaper { .. } | ExecKernel::CpuBitTcf
    )
}

/// MeanNNZTC: nonzeros per 8×8 block (0 without blocks).
fn nnz_per_block(nnz: usize, blocks_8x8: usize) -> f64 {
    if blocks_8x8 == 0 {
        0.0
    } else {
        nnz as f64 / blocks_8x8 as f64
    }
}

/// Whether `nnz` nonzeros make fewer than [`CSR_MIN_ITEMS_PER_SM`] warp items of 64 nonzeros per
/// SM on `sm_count` SMs: every kernel is then bound by its launch and longest thread block.
fn at_launch_floor(nnz: usize, sm_count: u32) -> bool {
    nnz / 64 < CSR_MIN_ITEMS_PER_SM * sm_count.max(1) as usize
}

/// The CUDA-core kernel an untuned preparation runs where the planner's model says "no tensor
/// cores" (cuSPARSE-class, e.g. Low TCU synergy): our CSR kernel at a nonzero budget per warp
/// giving about 16 items per resident warp (64..=1024 nonzeros; the tuned choice on the shared
/// datasets was 64, on R-MAT 256, on reddit-like 1024), where it was measured 1.1–4.3× faster
/// than cuSPARSE on 21 of 24 shared-dataset cases; `None` (cuSPARSE) when there are fewer than
/// [`CSR_MIN_ITEMS_PER_SM`] warp items of 64 nonzeros per SM.
fn csr_kernel_for(nnz: usize, sm_count: u32) -> Option<ExecKernel> {
    if at_launch_floor(nnz, sm_count) {
        return None;
    }
    let sms = sm_count.max(1) as usize;
    // 64 resident warps per SM, 16 items each.
    let chunk = (nnz / (sms * 64 * 16)).clamp(64, 1024) as u32;
    Some(ExecKernel::CsrCuda {
        chunk_nnz: chunk.next_power_of_two().min(1024),
    })
}

/// The kernel an untuned preparation runs where the planner picks ME-TCF (DTC-SpMM's 16×8
/// blocks): the row-tile kernel on the same blocks, TC16d (dense tiles) when its tile copy is at
/// most 16 slots per nonzero, else TC16, one window per thread block (the tuned choice on
/// bcsstk17 and PROTEINS_full).
fn metcf_kernel(nnz: usize, metcf_blocks: Option<u64>) -> ExecKernel {
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

/// α below which a balanced (split-window) tensor-core plan runs on CUDA cores instead: the
/// High-synergy boundary of cuTeSpMM (25 % of a 16×4 brick column filled).
const BALANCED_TC_MIN_ALPHA: f64 = 0.25;

/// The kernel an untuned preparation (`KernelRequest::Auto`, `Balance::Auto`, TF32: the planner's
/// model alone) runs for `plan` on a GPU of `sm_count` SMs, given the matrix's nonzeros, ME-TCF
/// block count and HRPB α (all of the matrix the plan was made on). Rules, in order, each with the
/// H200 measurements it rests on (docs/kernels/hrpb.md, "Model-only vs tuned choice"):
///
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
    metcf_blocks: Option<u64>,
    alpha: Option<f64>,
    sm_count: u32,
) -> ExecKernel {
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
fn hrpb_alpha(nnz: usize, bricks: usize) -> Option<f64> {
    (bricks > 0).then(|| nnz as f64 / (64.0 * bricks as f64))
}

/// A copy of `a`, its arrays copied in parallel (a plain clone of R-MAT scale 20's 134 MB took
/// 60 ms on the H200 host, most of it first-touch page faults on one thread).
pub(super) fn copy_csr(a: &Csr) -> Csr {
    fn copy<T: Copy + Default + Send + Sync>(src: &[T]) -> Vec<T> {
        const PIECE: usize = 1 << 16;
        let mut v = vec![T::default(); src.len()];
        v.par_chunks_mut(PIECE)
            .zip(src.par_chunks(PIECE))
            .for_each(|(d, s)| d.copy_from_slice(s));
        v
    }
    let indptr = a.indptr();
    Csr::try_new(
        (a.rows(), a.cols()),
        copy(indptr.raw_storage()),
        copy(a.indices()),
        copy(a.data()),
    )
    // (Cannot fail: the arrays are a valid matrix's.)
    .unwrap_or_else(|_| a.clone())
}

/// The matrix a preparation reads, and how the [`Prepared`] keeps it (reads go through `Deref`).
#[derive(Clone, Copy)]
pub(super) enum Source<'a> {
    /// Borrowed ([`Engine::prepare_spmm`]): the `Prepared` keeps a copy, made beside the rest of the
    /// preparation.
    Borrowed(&'a Csr),
    /// Shared ([`Engine::prepare_spmm_shared`]): the `Prepared` keeps another reference, no copy.
    Shared(&'a Arc<Csr>),
}

impl std::ops::Deref for Source<'_> {
    type Target = Csr;

    fn deref(&self) -> &Csr {
        match self {
            Source::Borrowed(a) => a,
            Source::Shared(a) => a,
        }
    }
}

impl Source<'_> {
    /// The matrix for a `Prepared` to keep: a copy, or the shared one.
    pub(super) fn keep(&self) -> Arc<Csr> {
        match self {
            Source::Borrowed(a) => Arc::new(copy_csr(a)),
            Source::Shared(a) => Arc::clone(a),
        }
    }
}

/// The output of [`Engine::reorder_stage`].
pub(super) struct Reordered {
    /// The reordered matrix; `None` when it runs in its original order (`a` itself: the copy the
    /// [`Prepared`] keeps is made while the rest of the preparation runs, see
    /// [`Engine::prepare_reordered`]).
    pub(super) a_re: Option<Csr>,
    pub(super) mode: Mode,
    pub(super) report: Option<ReorderReport>,
    pub(super) perm: Option<Permutation>,
    pub(super) forced: bool,
    pub(super) reorder_s: f64,
    pub(super) gate: Option<GateReport>,
    /// The planner's block counts of the ORIGINAL matrix when the gate counted them (reused
    /// wherever the matrix runs in its original order).
    pub(super) counts: Option<Arc<PlannerBlockCounts>>,
    /// The ORIGINAL matrix's arrays already on the GPU (uploaded during the plan-cache look-up),
    /// taken instead of a new upload by the first kernel set up on the original order.
    pub(super) device: Option<DeviceCsr>,
}

impl Reordered {
    /// Everything but the matrix (`a_re` = `None`), for a second preparation of the same stage.
    pub(super) fn without_matrix(&self) -> Reordered {
        Reordered {
            a_re: None,
            mode: self.mode,
            report: self.report.clone(),
            perm: self.perm.clone(),
            forced: self.forced,
            reorder_s: self.reorder_s,
            gate: self.gate.clone(),
            counts: self.counts.clone(),
            device: None,
        }
    }
}

/// A decision a preparation takes as given instead of choosing (a plan-cache entry's).
pub(super) struct Fixed {
    kernel: ExecKernel,
    note: String,
    /// The prepared matrix's stored block counts.
    blocks: Option<[u64; 3]>,
    /// The row-tile device layout, already built (on the GPU, from the entry's skeleton).
    row_tile: Option<Box<RowTileDevice>>,
    /// The CSR kernel's work list, packed and uploaded already (beside a cache hit's early upload).
    csr_work: Option<CsrWorkPlan>,
}

/// The CSR kernel's work list for a cache entry that keeps it on the matrix in its original
/// order (packed on the host, uploaded, and the modules loaded, while the matrix's values go up:
/// R-MAT scale 20 2.3 ms off the hit's critical path); `None` for other entries, or where it
/// fails (the upload stage then packs it again and reports the error).
fn cached_csr_work(gpu: &tcsparse_gpu::Gpu, a: &Csr, entry: &PlanEntry) -> Option<CsrWorkPlan> {
    match entry.kernel {
        ExecKernel::CsrCuda { chunk_nnz } if entry.perm.is_none() => {
            CsrWorkPlan::new(gpu, a, chunk_nnz).ok()
        }
        _ => None,
    }
}

/// The skeleton of `p`'s dense-tile row-tile layout (downloaded), for the plan cache, where a hit
/// cannot find it on the GPU (a symmetric reordering: its rows' columns are no longer sorted);
/// `None` for other kernels and orders or where the download fails.
fn dense_row_tile_structure(p: &Prepared) -> Option<tcsparse_formats::rowtile::RowTileStructure> {
    let symmetric = p.perm.is_some() && p.report.mode == Mode::Symmetric;
    match (&p.dev, &p.gpu) {
        (DeviceState::RowTile(d), Some(gpu)) if d.kernel().dense_tiles && symmetric => d
            .structure(gpu)
            .inspect_err(|e| tracing::warn!("plan cache: row-tile skeleton not stored: {e}"))
            .ok(),
        _ => None,
    }
}

impl Engine {
    /// Prepares `a` for SpMM: reorders, builds the layout, plans, tunes and uploads once. See
    /// [`PrepareOptions`]. The [`Prepared`]
    /// keeps its own copy of `a` (made while the rest of the preparation runs); see
    /// [`Engine::prepare_spmm_shared`] to share the caller's matrix instead.
    pub fn prepare_spmm(&self, a: &Csr, opts: &PrepareOptions) -> Result<Prepared, Error> {
        self.prepare_from(Source::Borrowed(a), opts)
    }

    /// [`Engine::prepare_spmm`] on a matrix the caller shares: where the matrix runs in its original
    /// order the [`Prepared`] keeps a reference to it instead of a copy (R-MAT scale 20: 134 MB
    /// and its page faults less). [`Prepared::update_values`] copies it first (copy on write), so
    /// the caller's matrix never changes.
    pub fn prepare_spmm_shared(
        &self,
        a: &Arc<Csr>,
        opts: &PrepareOptions,
    ) -> Result<Prepared, Error> {
        self.prepare_from(Source::Shared(a), opts)
    }

    fn prepare_from(&self, a: Source<'_>, opts: &PrepareOptions) -> Result<Prepared, Error> {
        if let Balance::PackedCached { cache_rows, .. } = opts.balance {
            let max = 1u32 << tcsparse_gpu::acc_spmm::MAX_CACHE_LOG2;
            if !cache_rows.is_power_of_two() || !(8..=max).contains(&cache_rows) {
                return Err(Error::InvalidArgs(format!(
                    "B-row cache of {cache_rows} rows: must be a power of two from 8 to {max}"
                )));
            }
        }
        if matches!(opts.balance, Balance::NnzPerWarp(_)) && opts.kernel != KernelRequest::Csr {
            return Err(Error::InvalidArgs(format!(
                "a nonzero budget per warp applies only to the CSR kernel, not to {:?}",
                opts.kernel
            )));
        }
        if !matches!(opts.precision, Precision::Tf32 | Precision::F32) {
            return Err(Error::InvalidArgs(format!(
                "SpMM runs in TF32 or F32, not {}",
                opts.precision
            )));
        }
        if opts.precision == Precision::F32
            && matches!(
                opts.kernel,
                KernelRequest::AccSpmm
                    | KernelRequest::AccSpmmPaper
                    | KernelRequest::RowTile(_)
                    | KernelRequest::Hrpb
            )
        {
            return Err(Error::InvalidArgs(format!(
                "{:?} runs on TF32 tensor cores, but F32 precision was asked for: use \
                 KernelRequest::Auto, Cusparse or Csr (f32 rounding), or Precision::Tf32",
                opts.kernel
            )));
        }
        let t = Instant::now();
        // With a cache and a GPU, the matrix's arrays go up from the start (a hit's kernels and
        // a miss's cuSPARSE stage take them), and the pattern checksum's leaves are hashed by
        // the threads that copy them, as they go: the key is known once the column indices are
        // up, and the entry is read and its work list packed while the values go up (R-MAT
        // scale 20: the checksum was a second pass over 49 MB beside the upload, 1.5–2.8 ms).
        let (cache, loaded, mut device) = match (&opts.cache_dir, &self.gpu) {
            (None, _) => (None, None, None),
            (Some(dir), gpu) => std::thread::scope(|s| {
                let (upload, leaves) = match gpu {
                    Some(gpu) if cfg!(target_endian = "little") => {
                        let (tx, rx) = std::sync::mpsc::sync_channel(1);
                        let a: &Csr = &a;
                        let up = s.spawn(move || {
                            DeviceCsr::upload_inspecting_pattern(
                                gpu,
                                a,
                                pattern_leaf,
                                |row_offsets, indices| {
                                    // (The receiver waits for it, or has gone: nothing to do.)
                                    let _ = tx.send((row_offsets, indices));
                                },
                            )
                        });
                        (Some(up), Some(rx))
                    }
                    Some(gpu) => {
                        let a: &Csr = &a;
                        (Some(s.spawn(move || DeviceCsr::upload(gpu, a))), None)
                    }
                    None => (None, None),
                };
                // (An upload that failed before its pattern was read sends nothing: the
                // checksum is then computed here.)
                let pattern = match leaves.map(|rx| rx.recv()) {
                    Some(Ok((row_offsets, indices))) => {
                        pattern_checksum_of_leaves(&a, row_offsets, indices)
                    }
                    _ => pattern_checksum(&a),
                };
                let c = PlanCache::new(dir, pattern, opts, self);
                tracing::debug!(
                    "plan cache key (pattern checksum) in {:.1} ms",
                    t.elapsed().as_secs_f64() * 1e3
                );
                let loaded = c.load(&a);
                // A hit on the CSR kernel packs its work list while the matrix is still going up.
                let csr_work = match (&loaded, gpu) {
                    (Ok(Some(entry)), Some(gpu)) => cached_csr_work(gpu, &a, entry),
                    _ => None,
                };
                let device = match upload.map(|h| h.join()) {
                    Some(Ok(Ok(d))) => Some(d),
                    Some(Ok(Err(e))) => {
                        tracing::debug!("plan cache: the early upload failed ({e})");
                        None
                    }
                    _ => None,
                };
                (Some(c), Some((loaded, csr_work)), device)
            }),
        };
        let mut outcome = CacheOutcome::Off;
        let mut cache_s = 0.0;
        if let (Some(c), Some((loaded, csr_work))) = (&cache, loaded) {
            cache_s = t.elapsed().as_secs_f64();
            outcome = match loaded {
                Ok(Some(entry)) => {
                    match self.prepare_cached(a, opts, entry, device.take(), csr_work) {
                        Ok(mut p) => {
                            p.report.cache = CacheOutcome::Hit;
                            p.report.cache_s = cache_s;
                            p.report.total_s = t.elapsed().as_secs_f64();
                            return Ok(p);
                        }
                        Err(e) => CacheOutcome::Rebuilt(format!("entry could not be used: {e}")),
                    }
                }
                Ok(None) => CacheOutcome::Miss,
                Err(why) => CacheOutcome::Rebuilt(why),
            };
            if let CacheOutcome::Rebuilt(why) = &outcome {
                tracing::warn!(
                    "plan cache entry {} not trusted ({why}): preparing in full",
                    c.path().display()
                );
            }
        }
        let mut p =
            if let (Some(gpu), true, KernelRequest::Auto) = (&self.gpu, opts.tune, opts.kernel) {
                self.prepare_tuned(gpu, a, opts, device)?
            } else {
                let mut stage = self.reorder_stage(&a, opts)?;
                stage.device = device;
                self.prepare_reordered(a, stage, opts)?
            };
        if let Some(c) = &cache {
            let t_store = Instant::now();
            let entry = PlanEntry {
                mode: p.report.mode,
                kernel: p.report.kernel,
                perm: p.perm.clone(),
                blocks: Some(p.block_counts),
                row_tile: dense_row_tile_structure(&p),
                note: p.report.kernel_note.clone(),
            };
            if let Err(e) = c.store(&entry) {
                tracing::warn!("plan cache: could not store the entry: {e}");
                outcome = CacheOutcome::StoreFailed(e);
            }
            cache_s += t_store.elapsed().as_secs_f64();
        }
        p.report.cache = outcome;
        p.report.cache_s = cache_s;
        p.report.total_s = t.elapsed().as_secs_f64();
        Ok(p)
    }

    /// A preparation from a cache entry: the stored permutation applied, the stored kernel and
    /// schedule set up directly (no reordering, no tuning). A dense-tile row-tile kernel with its
    /// stored skeleton, on a shared matrix, builds its layout on the GPU from the uploaded CSR
    /// and leaves the reordered host copy to first use ([`RowTileDevice::build_dense`]).
    fn prepare_cached(
        &self,
        a: Source<'_>,
        opts: &PrepareOptions,
        entry: PlanEntry,
        mut device: Option<DeviceCsr>,
        csr_work: Option<CsrWorkPlan>,
    ) -> Result<Prepared, Error> {
        let t = Instant::now();
        let note = format!("from the plan cache: {}", entry.note);
        tracing::debug!("plan cache hit: setting up {:?}", entry.kernel);
        let dense_row_tile =
            matches!(entry.kernel, ExecKernel::RowTile { kernel, .. } if kernel.dense_tiles);
        if let (Some(gpu), Source::Shared(shared), true) = (&self.gpu, &a, dense_row_tile) {
            match self.prepare_cached_on_device(gpu, shared, opts, &entry, &note, &mut device) {
                Ok(p) => return Ok(p),
                Err(e) => tracing::warn!(
                    "plan cache: the layout could not be built on the GPU ({e}); building it on the host"
                ),
            }
        }
        let a_re = match &entry.perm {
            Some(p) => Some(tcsparse_reorder::apply(p, &a, entry.mode)?),
            None => None,
        };
        let stage = Reordered {
            a_re,
            mode: entry.mode,
            report: None,
            perm: entry.perm,
            forced: true,
            reorder_s: t.elapsed().as_secs_f64(),
            gate: None,
            counts: None,
            device,
        };
        let fixed = Fixed {
            kernel: entry.kernel,
            note,
            blocks: entry.blocks,
            row_tile: None,
            csr_work,
        };
        self.prepare_reordered_with(a, stage, opts, Some(fixed), true)
    }

    /// [`Engine::prepare_cached`] for a dense-tile row-tile entry: the layout built on the GPU
    /// from `a`'s CSR in its original order (`device` when it is uploaded already, taken only on
    /// success) and the entry's skeleton, or without one the skeleton found on the GPU too; the
    /// reordered host copy left to first use.
    fn prepare_cached_on_device(
        &self,
        gpu: &tcsparse_gpu::Gpu,
        a: &Arc<Csr>,
        opts: &PrepareOptions,
        entry: &PlanEntry,
        note: &str,
        device: &mut Option<DeviceCsr>,
    ) -> Result<Prepared, Error> {
        let ExecKernel::RowTile { kernel, schedule } = entry.kernel else {
            return Err(Error::Format(
                "a row-tile skeleton for another kernel".into(),
            ));
        };
        if entry.blocks.is_none() {
            // (The plan would count the blocks of the matrix in its original order.)
            return Err(Error::Format("no stored block counts".into()));
        }
        let t = Instant::now();
        let later = match &entry.perm {
            Some(p) => Some(CheckedReorder::new(Arc::clone(a), p.clone(), entry.mode)?),
            None => None,
        };
        let old_of_new = entry.perm.as_ref().map(Permutation::as_slice);
        let symmetric = entry.mode == Mode::Symmetric && old_of_new.is_some();
        if let Some(s) = &entry.row_tile
            && kernel.window_rows as usize != s.window_rows()
        {
            return Err(Error::Format(format!(
                "a {}-row skeleton for {}",
                s.window_rows(),
                kernel.name()
            )));
        }
        let uploaded;
        let csr = match device {
            Some(d) => &*d,
            None => {
                uploaded = DeviceCsr::upload(gpu, a)?;
                &uploaded
            }
        };
        let (d, how) = match &entry.row_tile {
            Some(s) => (
                RowTileDevice::build_dense(gpu, a, csr, old_of_new, symmetric, s, schedule)?,
                "the cached skeleton",
            ),
            None if !symmetric => (
                RowTileDevice::build_dense_derived(
                    gpu,
                    a,
                    csr,
                    old_of_new,
                    kernel.window_rows as usize,
                    schedule,
                )?,
                "its skeleton found there too",
            ),
            None => {
                return Err(Error::Format(
                    "a symmetric reordering without its cached skeleton".into(),
                ));
            }
        };
        let build_s = t.elapsed().as_secs_f64();
        tracing::debug!(
            "plan cache hit: {} layout built on the GPU in {:.1} ms",
            kernel.name(),
            1e3 * build_s
        );
        let stage = Reordered {
            a_re: None,
            mode: entry.mode,
            report: None,
            perm: entry.perm.clone(),
            forced: true,
            reorder_s: 0.0,
            gate: None,
            counts: None,
            device: None,
        };
        // (The layout is built: the CSR arrays are not needed any more.)
        *device = None;
        let fixed = Fixed {
            kernel: entry.kernel,
            note: format!("{note} (layout built on the GPU from {how})"),
            blocks: entry.blocks,
            row_tile: Some(Box::new(d)),
            csr_work: None,
        };
        // (`a` stands in for the reordered matrix: with the stored block counts the plan reads
        // only its shape and nonzero count, which a reordering keeps.)
        let (mut p, _) = self.prepare_in_place(a, stage, opts, Some(fixed), true)?;
        p.report.upload_s += build_s;
        p.a = match later {
            Some(r) => PreparedMatrix::reordered_later(r, a.rows(), a.cols(), a.nnz()),
            None => PreparedMatrix::held(Arc::clone(a)),
        };
        Ok(p)
    }

    /// Reordering, as `opts.reorder` asks (Auto keeps data-affinity only when it raises MeanNNZTC).
    pub(super) fn reorder_stage(&self, a: &Csr, opts: &PrepareOptions) -> Result<Reordered, Error> {
        let square = a.rows() == a.cols();
        let mode = opts.mode.unwrap_or(if square {
            Mode::Symmetric
        } else {
            Mode::RowOnly
        });
        if mode == Mode::Symmetric && !square {
            return Err(Error::InvalidArgs(format!(
                "symmetric reordering needs a square matrix, got {}×{}",
                a.rows(),
                a.cols()
            )));
        }

        // Reorder.
        let t = Instant::now();
        let (method, forced) = match &opts.reorder {
            ReorderChoice::None | ReorderChoice::Given(_) => (None, false),
            // CSR kernels run in the original order (prepare_reordered drops an automatic
            // reordering for them), so an automatic reordering would be computed for nothing.
            // (With F32 precision only CSR kernels may run.)
            ReorderChoice::Auto
                if matches!(opts.kernel, KernelRequest::Cusparse | KernelRequest::Csr)
                    || opts.precision == Precision::F32 =>
            {
                (None, false)
            }
            ReorderChoice::Auto => (Some("affinity".to_string()), false),
            ReorderChoice::Method(m) => (Some(m.clone()), true),
        };
        // An automatic reordering is computed only where the gate sees that a row order could
        // make the blocks dense enough to matter (not on R-MAT or uniform random matrices).
        let mut gate = None;
        let mut counts = None;
        let method = match method {
            Some(m) if !forced => {
                // The planner needs these block counts of the matrix anyway (when it runs in
                // this order): counted once, for the gate's current density and the plan.
                let c = planner_block_counts(a);
                tracing::debug!(
                    "prepare: counting pass {:.1} ms",
                    t.elapsed().as_secs_f64() * 1e3
                );
                let now = nnz_per_block(a.nnz(), c.blocks_8x8());
                counts = Some(Arc::new(c));
                let g = Gate::default().assess_with_density(a, now);
                let worth = g.worth_reordering;
                gate = Some(g);
                worth.then_some(m)
            }
            m => m,
        };
        let mut report = None;
        let mut perm = None;
        let mut a_re = None;
        if let ReorderChoice::Given(p) = &opts.reorder
            && p.len() != a.rows()
        {
            return Err(Error::InvalidArgs(format!(
                "the given permutation has {} entries, the matrix {} rows",
                p.len(),
                a.rows()
            )));
        }
        if let ReorderChoice::Given(p) = &opts.reorder
            && !p.is_identity()
        {
            a_re = Some(tcsparse_reorder::apply(p, a, mode)?);
            perm = Some(p.clone());
        }
        if let Some(m) = method {
            let r = tcsparse_reorder::by_name(&m, opts.seed)?.reorder(a, mode)?;
            let helps = r.report.mean_nnz_tc_after > r.report.mean_nnz_tc_before;
            if (forced || helps) && !r.perm.is_identity() {
                a_re = Some(tcsparse_reorder::apply(&r.perm, a, mode)?);
                perm = Some(r.perm);
            }
            report = Some(r.report);
        }
        let reorder_s = t.elapsed().as_secs_f64();
        Ok(Reordered {
            a_re,
            mode,
            report,
            perm,
            forced,
            reorder_s,
            gate,
            counts,
            device: None,
        })
    }

    /// Build, plan, choose and upload, after [`Engine::reorder_stage`].
    pub(super) fn prepare_reordered(
        &self,
        a: Source<'_>,
        stage: Reordered,
        opts: &PrepareOptions,
    ) -> Result<Prepared, Error> {
        self.prepare_reordered_with(a, stage, opts, None, true)
    }

    /// [`Engine::prepare_reordered`] without building BitTCF or uploading anything: plan,
    /// permutation and matrix only ([`DeviceState::Cpu`]), for a tuned preparation to set the
    /// device it times fastest into.
    pub(super) fn prepare_host(
        &self,
        a: Source<'_>,
        stage: Reordered,
        opts: &PrepareOptions,
    ) -> Result<Prepared, Error> {
        self.prepare_reordered_with(a, stage, opts, None, false)
    }

    /// [`Engine::prepare_reordered`], with the kernel (and its note) fixed instead of chosen
    /// (a cached decision). A matrix in its original order is read in place by the counting
    /// pass, the plan, the build and the upload, while another thread makes the copy that the
    /// [`Prepared`] keeps (R-MAT scale 20: a 24 ms copy that used to run before all of them).
    fn prepare_reordered_with(
        &self,
        a: Source<'_>,
        stage: Reordered,
        opts: &PrepareOptions,
        fixed: Option<Fixed>,
        upload: bool,
    ) -> Result<Prepared, Error> {
        if stage.a_re.is_some() || matches!(a, Source::Shared(_)) {
            let (mut p, original) = self.prepare_in_place(&a, stage, opts, fixed, upload)?;
            if original {
                // (Shared, or a dropped automatic reordering: the original order after all.)
                p.a = PreparedMatrix::held(a.keep());
            }
            return Ok(p);
        }
        std::thread::scope(|s| {
            let copy = s.spawn(|| copy_csr(&a));
            let prepared = self.prepare_in_place(&a, stage, opts, fixed, upload);
            // (The copy cannot panic short of running out of memory; a plain clone then.)
            let copied = copy.join().unwrap_or_else(|_| (*a).clone());
            let (mut p, _) = prepared?;
            p.a = PreparedMatrix::held(Arc::new(copied));
            Ok(p)
        })
    }

    /// [`Engine::prepare_reordered_with`] on `stage.a_re`, or on `a` itself where that is `None`;
    /// `true` with a [`Prepared`] whose matrix is still to be filled in with a copy of `a`.
    /// Without `upload`, nothing is built or uploaded ([`DeviceState::Cpu`] on any engine).
    fn prepare_in_place(
        &self,
        a: &Csr,
        stage: Reordered,
        opts: &PrepareOptions,
        fixed: Option<Fixed>,
        upload: bool,
    ) -> Result<(Prepared, bool), Error> {
        let Reordered {
            a_re,
            mode,
            report,
            mut perm,
            forced,
            reorder_s,
            gate,
            counts: original_counts,
            mut device,
        } = stage;
        let mut a_re = a_re;
        let src = a_re.as_ref().unwrap_or(a);
        // The block counts of `m` (the original matrix's from the gate when `m` is it).
        let counts_of = |m_is_original: bool, m: &Csr| match (&original_counts, m_is_original) {
            (Some(c), true) => c.clone(),
            _ => Arc::new(planner_block_counts(m)),
        };

        // Plan: one counting pass over the matrix gives every feature; no layout is built. A
        // cached decision for a kernel that needs no BitTCF schedule brings its counts along.
        let t = Instant::now();
        let stored = match &fixed {
            Some(Fixed {
                kernel,
                blocks: Some(b),
                ..
            }) if self.gpu.is_some() && !runs_on_bittcf(*kernel) => Some(*b),
            _ => None,
        };
        let (fixed, mut prebuilt, mut csr_work) = match fixed {
            Some(f) => (Some((f.kernel, f.note)), f.row_tile, f.csr_work),
            None => (None, None, None),
        };
        let mut counts: Option<Arc<PlannerBlockCounts>> = None;
        let [mut blocks, mut blocks_16x4, mut blocks_16x8] = match stored {
            Some(b) => b.map(|x| x as usize),
            None => {
                let c = counts_of(perm.is_none(), src);
                let b = [c.blocks_8x8(), c.blocks_16x4, c.blocks_16x8];
                counts = Some(c);
                b
            }
        };
        let mean_nnz_tc = nnz_per_block(src.nnz(), blocks);
        let features = MatrixFeatures {
            rows: src.rows(),
            cols: src.cols(),
            nnz: src.nnz() as u64,
            n: opts.n.max(1),
            blocks_8x8: blocks as u64,
            mean_nnz_tc,
            hrpb_alpha: hrpb_alpha(src.nnz(), blocks_16x4),
            metcf_blocks: Some(blocks_16x8 as u64),
            ibd: None,
        };
        let rwo: &[u32] = counts.as_deref().map_or(&[], |c| &c.row_window_offset);
        let plan = plan_spmm(&features, rwo, &self.device);
        let (kernel, mut kernel_note, schedule) = match fixed {
            Some((k, note)) if self.gpu.is_some() || k == ExecKernel::CpuBitTcf => {
                let sched = match k {
                    ExecKernel::AccSpmm { schedule } => Some(self.schedule(rwo, schedule, opts.n)),
                    _ => None,
                };
                (k, note, sched)
            }
            _ => self.choose(
                &plan,
                opts,
                rwo,
                src,
                features.metcf_blocks,
                features.hrpb_alpha,
            ),
        };
        let plan_s = t.elapsed().as_secs_f64();
        let mut build_s = 0.0;

        // A reordering chosen automatically only serves the tensor-core kernel: CSR kernels
        // (cuSPARSE, ours) lose the input's locality with it (H200, R-MAT scale 20, N = 128:
        // cuSPARSE 1.13 ms in the original order, 3.62 ms after affinity reordering). Keep the
        // original order for them unless the caller asked for the reordering.
        if !forced
            && perm.is_some()
            && matches!(
                kernel,
                ExecKernel::Cusparse { .. } | ExecKernel::CsrCuda { .. }
            )
        {
            let t = Instant::now();
            perm = None;
            a_re = None;
            let c = counts_of(true, a);
            [blocks, blocks_16x4, blocks_16x8] = [c.blocks_8x8(), c.blocks_16x4, c.blocks_16x8];
            counts = Some(c);
            build_s += t.elapsed().as_secs_f64();
            kernel_note.push_str(
                "; reordering dropped: CSR kernels run on the original order, which keeps its locality",
            );
        }
        let src = a_re.as_ref().unwrap_or(a);
        let mean_nnz_tc = nnz_per_block(src.nnz(), blocks);
        let rwo: &[u32] = counts.as_deref().map_or(&[], |c| &c.row_window_offset);
        let block_counts = [blocks as u64, blocks_16x4 as u64, blocks_16x8 as u64];

        // Build: BitTCF only for the kernels that run on it (and the CPU path); the others build
        // their own layout at upload, and `Prepared::bittcf` builds it on first use.
        let t = Instant::now();
        let bittcf = OnceLock::new();
        if upload && (runs_on_bittcf(kernel) || self.gpu.is_none()) {
            let built = BitTcf::from_csr(src).map_err(|e| Error::Format(e.to_string()))?;
            let _ = bittcf.set(built);
        }
        build_s += t.elapsed().as_secs_f64();

        // Upload.
        let t = Instant::now();
        tracing::debug!("preparation: plan and build done, uploading for {kernel:?}");
        let mut thread_blocks = 0;
        let mut split_windows = 0;
        let dev = match (&self.gpu, kernel) {
            _ if !upload => DeviceState::Cpu,
            (Some(gpu), ExecKernel::AccSpmm { .. } | ExecKernel::AccSpmmPaper { .. }) => {
                let sched = schedule.unwrap_or_else(|| AccSchedule::unbalanced(rwo));
                // Built above for the Acc-SpMM kernels.
                let Some(built) = bittcf.get() else {
                    return Err(Error::Format(
                        "BitTCF missing for an Acc-SpMM kernel".into(),
                    ));
                };
                let mut d = AccSpmmDevice::upload(gpu, built, &sched)?;
                match kernel {
                    ExecKernel::AccSpmm { schedule: kind } => d.set_variant(gpu, kind.variant())?,
                    _ => d.set_variant(gpu, AccVariant::Paper)?,
                }
                thread_blocks = d.num_tbs();
                split_windows = d.num_split_windows();
                gpu.synchronize()?;
                DeviceState::Acc(Box::new(d))
            }
            (Some(gpu), ExecKernel::Cusparse { alg }) => {
                let csr = match device.take() {
                    Some(d) if a_re.is_none() => CusparseCsr::from_device(gpu, src, d)?,
                    _ => CusparseCsr::new(gpu, src)?,
                };
                gpu.synchronize()?;
                DeviceState::Cusparse {
                    csr,
                    alg,
                    spmm: HashMap::new(),
                }
            }
            (Some(gpu), ExecKernel::CsrCuda { chunk_nnz }) => {
                let k = match (device.take(), csr_work.take()) {
                    (Some(d), Some(w)) if a_re.is_none() && w.chunk_nnz() == chunk_nnz.max(1) => {
                        CsrSpmm::with_work_on(gpu, src, w, d)?
                    }
                    (Some(d), _) if a_re.is_none() => {
                        CsrSpmm::with_chunk_on(gpu, src, chunk_nnz, d)?
                    }
                    _ => CsrSpmm::with_chunk(gpu, src, chunk_nnz)?,
                };
                gpu.synchronize()?;
                DeviceState::Csr(Box::new(k))
            }
            (Some(gpu), ExecKernel::RowTile { kernel, schedule }) => {
                let d = match prebuilt.take() {
                    Some(d) => *d,
                    None => {
                        let m = RowTileTcf::from_csr(src, kernel.window_rows as usize)
                            .map_err(|e| Error::Format(e.to_string()))?;
                        RowTileDevice::upload(gpu, &m, kernel.dense_tiles, schedule)?
                    }
                };
                thread_blocks = d.num_tbs();
                split_windows = d.num_split_windows();
                gpu.synchronize()?;
                DeviceState::RowTile(Box::new(d))
            }
            (Some(gpu), ExecKernel::Hrpb { mma, split }) => {
                let h = Hrpb::from_csr(src).map_err(|e| Error::Format(e.to_string()))?;
                let d = HrpbSpmm::from_hrpb(gpu, &h, mma, split)?;
                thread_blocks = d.wave_split(opts.n.max(1))?.panels.len();
                gpu.synchronize()?;
                DeviceState::Hrpb(Box::new(d))
            }
            _ => DeviceState::Cpu,
        };
        let upload_s = t.elapsed().as_secs_f64();

        let report = PrepareReport {
            backend: self.backend(),
            kernel,
            kernel_note,
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            reorder: report,
            reordered: perm.is_some(),
            mode,
            reorder_s,
            build_s,
            plan_s,
            upload_s,
            blocks,
            mean_nnz_tc,
            thread_blocks,
            split_windows,
            tuning: Vec::new(),
            tune_s: 0.0,
            reorder_gate: gate,
            cache: CacheOutcome::Off,
            cache_s: 0.0,
            total_s: 0.0,
        };
        let original = a_re.is_none();
        let prepared = Prepared {
            plan,
            report,
            perm,
            // (Filled in with `a` by the caller when `original`.)
            a: PreparedMatrix::held(Arc::new(
                a_re.unwrap_or_else(|| Csr::new((0, 0), vec![0], Vec::new(), Vec::new())),
            )),
            bittcf,
            gpu: self.gpu.clone(),
            dev,
            n: opts.n,
            device_order: opts.device_order,
            device_perm: None,
            scratch: Scratch::default(),
            value_map: None,
            bittcf_slots: None,
            block_counts,
        };
        Ok((prepared, original))
    }

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

    fn choose(
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
            KernelRequest::Csr => (
                ExecKernel::CsrCuda {
                    chunk_nnz: match opts.balance {
                        Balance::NnzPerWarp(k) => k.max(1),
                        _ => tcsparse_gpu::csr_spmm::DEFAULT_CHUNK_NNZ,
                    },
                },
                format!("CSR kernel requested (planner: {})", plan.reason),
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
            KernelRequest::Hrpb => (
                ExecKernel::Hrpb {
                    mma: HrpbMma::for_rows(rows, sms),
                    // Balance::Off keeps every panel whole; anything else splits wave-aware.
                    split: if opts.balance == Balance::Off {
                        HrpbSplit::None
                    } else {
                        HrpbSplit::Wave
                    },
                },
                format!("HRPB requested (planner: {})", plan.reason),
                None,
            ),
            KernelRequest::Auto => {
                let kernel = model_kernel(plan, rows, nnz, metcf_blocks, alpha, sms);
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

    #[test]
    fn hrpb_shape_follows_the_row_panels() {
        // REDDIT-BINARY (53.7 k panels on 132 SMs): k8ts, copter2 (3.5 k): k8wtd; the split kept.
        let wave = |mma| ExecKernel::Hrpb {
            mma,
            split: HrpbSplit::Wave,
        };
        let hrpb = plan(KernelChoice::HrpbSpmm);
        assert_eq!(
            model_kernel(&hrpb, 859_254, 1_991_016, None, Some(0.3), 132),
            wave(HrpbMma::K8TS)
        );
        assert_eq!(
            model_kernel(&hrpb, 55_476, 704_476, None, Some(0.3), 132),
            wave(HrpbMma::K8WTD)
        );
        // The launch-floor rule takes the same shape (cora: 170 panels → k8ts).
        assert_eq!(
            model_kernel(
                &plan(KernelChoice::Cusparse),
                2_708,
                10_556,
                None,
                Some(0.067),
                132
            ),
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
                Some(ExecKernel::CsrCuda { chunk_nnz: 64 })
            );
        }
        // R-MAT scale 20 (≈ 23 M) → 256; reddit-like (114 M) → 1024 (the tuned budgets).
        assert_eq!(
            csr_kernel_for(23_000_000, 132),
            Some(ExecKernel::CsrCuda { chunk_nnz: 256 })
        );
        assert_eq!(
            csr_kernel_for(114_000_000, 132),
            Some(ExecKernel::CsrCuda { chunk_nnz: 1024 })
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

    #[test]
    fn model_kernel_rules() {
        let tc16d = ExecKernel::RowTile {
            kernel: RowTileKernel::TC16D,
            schedule: RowTileSchedule::Packed(1),
        };
        let acc = |balanced| plan(KernelChoice::AccSpmm { balanced });
        // 1. Launch floor (cora: 10 556 nonzeros < 8 · 64 · 132): HRPB whatever the plan.
        for c in [
            KernelChoice::Cusparse,
            KernelChoice::MeTcfSpmm,
            KernelChoice::AccSpmm { balanced: true },
        ] {
            assert_eq!(
                model_kernel(&plan(c), 2_708, 10_556, Some(2000), Some(0.067), 132),
                hrpb_default(2_708, 132)
            );
        }
        // … but only where HRPB was built (α known); an empty matrix keeps the plan.
        assert_eq!(
            model_kernel(
                &plan(KernelChoice::Cusparse),
                2_708,
                10_556,
                None,
                None,
                132
            ),
            ExecKernel::Cusparse {
                alg: SpmmAlg::Default
            }
        );
        // 2. Balanced Acc-SpMM below α 0.25 → the CSR kernel (c-62: 559 343 nonzeros).
        assert_eq!(
            model_kernel(&acc(true), 41_731, 559_343, Some(40_000), Some(0.14), 132),
            ExecKernel::CsrCuda { chunk_nnz: 64 }
        );
        assert_eq!(
            model_kernel(&acc(true), 41_731, 559_343, Some(40_000), Some(0.3), 132),
            ExecKernel::AccSpmm {
                schedule: ScheduleKind::Balanced
            }
        );
        // 3. Unbalanced Acc-SpMM → TC16d, one window per thread block (PROTEINS_full).
        assert_eq!(
            model_kernel(&acc(false), 43_471, 162_088, Some(12_000), Some(0.15), 132),
            tc16d
        );
        // 4. The rest as planned.
        assert_eq!(
            model_kernel(
                &plan(KernelChoice::HrpbSpmm),
                100_000,
                1_000_000,
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
                None,
                Some(0.077),
                132
            ),
            ExecKernel::CsrCuda { chunk_nnz: 64 }
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
