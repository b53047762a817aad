//! Building one SpMM candidate: the reordering stage ([`Engine::reorder_stage`]) and the
//! preparation of a reordered matrix for one kernel (layout build, plan, kernel choice through
//! `choose.rs`, upload). The entry points (`prepare.rs`) and the tuned candidates
//! (`candidates.rs`) call it; it calls neither.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use std::time::Instant;

use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::metrics::{PlannerBlockCounts, planner_block_counts};
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::baselines::cusparse::CusparseCsr;
use tcsparse_gpu::device_csr::DeviceCsr;
use tcsparse_gpu::spmm::acc::{AccSpmmDevice, AccVariant};
use tcsparse_gpu::spmm::row_tile::RowTileDevice;
use tcsparse_planner::{AccSchedule, MatrixFeatures, plan_spmm};
use tcsparse_reorder::{Gate, GateReport, Mode, Permutation, ReorderReport};

use super::choose::{hrpb_alpha, nnz_per_block, runs_on_bittcf};
use super::family::{Build, EarlyWork};
use super::{DeviceState, Prepared, PreparedMatrix, Scratch};
use crate::{
    CacheOutcome, Engine, Error, ExecKernel, KernelRequest, Precision, PrepareOptions,
    PrepareReport, ReorderChoice,
};

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
    pub(super) kernel: ExecKernel,
    pub(super) note: String,
    /// The prepared matrix's stored block counts.
    pub(super) blocks: Option<[u64; 3]>,
    /// The row-tile device layout, already built (on the GPU, from the entry's skeleton).
    pub(super) row_tile: Option<Box<RowTileDevice>>,
    /// What the kernel's family made early for it (`FamilyKernel::early`, beside a cache hit's
    /// early upload).
    pub(super) early: Option<EarlyWork>,
}

impl Engine {
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
                if opts.kernel == KernelRequest::Cusparse
                    || opts.kernel.family().is_some_and(|f| f.original_order())
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
    pub(super) fn prepare_reordered_with(
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
    pub(super) fn prepare_in_place(
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
        let (fixed, mut prebuilt, mut early) = match fixed {
            Some(f) => (Some((f.kernel, f.note)), f.row_tile, f.early),
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
            && (matches!(kernel, ExecKernel::Cusparse { .. })
                || kernel
                    .as_family()
                    .is_some_and(|k| k.family().original_order()))
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
            (Some(gpu), ExecKernel::RowTile { kernel, schedule }) => {
                let d = match prebuilt.take() {
                    Some(d) => *d,
                    None => {
                        let m = RowTileTcf::from_csr(src, kernel.window_rows as usize)
                            .map_err(|e| Error::Format(e.to_string()))?;
                        RowTileDevice::upload_for(gpu, &m, kernel, schedule)?
                    }
                };
                gpu.synchronize()?;
                DeviceState::RowTile(Box::new(d))
            }
            (Some(gpu), kernel) => match kernel.as_family() {
                Some(k) => {
                    let mut b = Build {
                        gpu,
                        a: src,
                        device: if a_re.is_none() { device.take() } else { None },
                        early: early.take(),
                    };
                    let d = k.build(&mut b)?;
                    gpu.synchronize()?;
                    DeviceState::Family(d)
                }
                None => DeviceState::Cpu,
            },
            (None, _) => DeviceState::Cpu,
        };
        let (thread_blocks, split_windows) = dev.blocks(opts.n.max(1))?;
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
            cusparse_ms: None,
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
            dtype: opts.dtype,
            device_order: opts.device_order,
            device_perm: None,
            scratch: Scratch::default(),
            value_map: None,
            bittcf_slots: None,
            block_counts,
        };
        Ok((prepared, original))
    }
}
