//! [`Engine::prepare_spmm`]: reorder, build, plan, choose the kernel and upload.

use std::sync::Arc;

use std::time::Instant;

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use tcsparse_formats::Csr;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::device_csr::DeviceCsr;
use tcsparse_gpu::spmm::csr::CsrSpmm;
use tcsparse_gpu::spmm::row_tile::{
    RowTileArith, RowTileDevice, RowTileHalf, RowTileKernel, RowTileSchedule,
};
use tcsparse_gpu::{Dense, DenseMut, DeviceProduct, Gpu, GpuError};

use crate::element::{bf16, f16};
use tcsparse_reorder::{CheckedReorder, Mode, Permutation};

use super::build::{Fixed, Reordered, Source};
use super::cache::{
    PlanCache, PlanEntry, pattern_checksum, pattern_checksum_of_leaves, pattern_leaf,
};
use super::family::EarlyWork;
use super::family::csr::{CSR_HALF_TUNED_CHUNKS, CsrKernel};
use super::tune::{median, time_samples};
use super::{DeviceState, Prepared, PreparedMatrix};
use crate::{
    Balance, CacheOutcome, DType, Engine, Error, ExecKernel, KernelRequest, Precision,
    PrepareOptions, Requested, TuneSample,
};

/// The work a cache entry's kernel family does early for an entry that keeps the matrix in its
/// original order (`FamilyKernel::early`: the CSR kernel's work list packed, uploaded and its
/// modules loaded while the matrix's values go up); `None` for other entries.
fn cached_early_work(gpu: &tcsparse_gpu::Gpu, a: &Csr, entry: &PlanEntry) -> Option<EarlyWork> {
    match entry.kernel.as_family() {
        Some(k) if entry.perm.is_none() => k.early(gpu, a),
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

/// The GPU's kernels for B and C in f16 / bf16 and for 3×TF32, as refusals name them.
pub(crate) const GPU_TYPED_SPMM_KERNELS: &str = "the row-tile kernels in f16, bf16 and 3xTF32 \
     (TC16, TC32; masked tiles) and the CSR kernel in f16 and bf16";

/// What no SpMM kernel of the engine (`gpu`: a GPU engine) can honour, refused before any work:
/// [`Precision::F16`] (f16 operands are [`PrepareOptions::dtype`]) anywhere; on a GPU, B and C
/// in f16 or bf16 at another precision than TF32 (their kernels round A's values to the type:
/// neither f32 nor 3×TF32 accuracy), and a kernel request other than [`KernelRequest::Auto`] or
/// a masked row-tile kernel for f16, bf16 or 3×TF32, or [`KernelRequest::Csr`] for f16 and bf16
/// (the CPU path runs every combination: 3×TF32 as exact f32, f16/bf16 with f32 accumulation).
fn refuse_unsupported(gpu: bool, opts: &PrepareOptions) -> Result<(), Error> {
    let refuse = |requested, kernels: &str, hint: &str| {
        Err(Error::Unsupported {
            requested,
            kernels: kernels.to_string(),
            hint: hint.to_string(),
        })
    };
    match opts.precision {
        Precision::F16 => {
            return refuse(
                Requested::Precision(Precision::F16),
                "SpMM's kernels",
                "; B and C in f16 are PrepareOptions::dtype (DType::F16), with f32 accumulation",
            );
        }
        Precision::Tf32 | Precision::Tf32x3 | Precision::F32 => {}
    }
    if !gpu {
        return Ok(());
    }
    if opts.dtype != DType::F32 && opts.precision != Precision::Tf32 {
        return refuse(
            Requested::ElementAt(opts.dtype, opts.precision),
            GPU_TYPED_SPMM_KERNELS,
            "; B and C in f16 or bf16 run at Precision::Tf32 on the GPU (A's values rounded to \
             the type, f32 accumulation), and the CPU path (Engine::cpu, `tcsparse spmm --cpu`) \
             takes every precision",
        );
    }
    let typed = opts.dtype != DType::F32 || opts.precision == Precision::Tf32x3;
    let kernel_ok = match opts.kernel {
        KernelRequest::Auto => true,
        KernelRequest::RowTile(k) => !k.dense_tiles,
        KernelRequest::Csr => opts.dtype != DType::F32,
        _ => false,
    };
    if typed && !kernel_ok {
        let requested = if opts.dtype != DType::F32 {
            Requested::Element(opts.dtype)
        } else {
            Requested::Precision(opts.precision)
        };
        return refuse(
            requested,
            &format!("{:?}", opts.kernel),
            &format!(
                "; on a GPU it runs on {GPU_TYPED_SPMM_KERNELS}: KernelRequest::Auto, \
                 RowTile(TC16 | TC32) or (f16, bf16) Csr"
            ),
        );
    }
    Ok(())
}

/// Windows per thread block the typed tuning times, beside a split schedule.
const TYPED_PACKINGS: [u32; 3] = [1, 4, 16];

/// Zero B (`cols × n`) and C (`rows × n`) of element `T`, allocated once for a typed tuning's
/// timings.
struct ZeroOperands<T> {
    b: CudaSlice<T>,
    c: CudaSlice<T>,
    n: usize,
}

impl<T: DeviceRepr + ValidAsZeroBits> ZeroOperands<T> {
    fn new(gpu: &Gpu, (rows, cols): (usize, usize), n: usize) -> Result<Self, Error> {
        Ok(Self {
            b: gpu.alloc_zeros::<T>((cols * n).max(1))?,
            c: gpu.alloc_zeros::<T>((rows * n).max(1))?,
            n,
        })
    }

    /// [`Gpu::time_launches`] of `launch` (α = 1, β = 0 are the caller's) on them: the median ms.
    fn time(
        &mut self,
        gpu: &Gpu,
        mut launch: impl FnMut(&Dense<'_, T>, &mut DenseMut<'_, T>) -> Result<(), GpuError>,
    ) -> Result<f64, Error> {
        let (b, c, n) = (&self.b, &mut self.c, self.n);
        let t = gpu.time_launches(1, 5, || {
            launch(&Dense::packed(b, n), &mut DenseMut::packed(c, n))
        })?;
        Ok(t.median_ms)
    }
}

/// The zero operands of a typed tuning, in its arithmetic's element type.
enum TypedOperands {
    F32(ZeroOperands<f32>),
    F16(ZeroOperands<f16>),
    Bf16(ZeroOperands<bf16>),
}

impl TypedOperands {
    fn new(gpu: &Gpu, arith: RowTileArith, shape: (usize, usize), n: usize) -> Result<Self, Error> {
        Ok(match arith {
            RowTileArith::F16 => Self::F16(ZeroOperands::new(gpu, shape, n)?),
            RowTileArith::Bf16 => Self::Bf16(ZeroOperands::new(gpu, shape, n)?),
            _ => Self::F32(ZeroOperands::new(gpu, shape, n)?),
        })
    }

    /// The median ms of `dev`'s kernel on them.
    fn time_row_tile(&mut self, gpu: &Gpu, dev: &mut RowTileDevice) -> Result<f64, Error> {
        match self {
            Self::F32(z) => z.time(gpu, |b, c| dev.enqueue(1.0, b, 0.0, c)),
            Self::F16(z) => z.time(gpu, |b, c| dev.enqueue_half(1.0, b, 0.0, c)),
            Self::Bf16(z) => z.time(gpu, |b, c| dev.enqueue_half(1.0, b, 0.0, c)),
        }
    }
}

/// The CSR kernel in `H` on `p`'s prepared matrix at each of [`CSR_HALF_TUNED_CHUNKS`] nonzeros per
/// warp on `ops` (recorded in the report's tuning samples): the fastest budget's kernel and its
/// time (`None` for a matrix without rows or one the kernel cannot take).
fn tune_csr_half<H: RowTileHalf>(
    gpu: &Gpu,
    p: &mut Prepared,
    ops: &mut ZeroOperands<H>,
) -> Result<Option<(f64, CsrSpmm)>, Error> {
    if p.a.rows() == 0 {
        return Ok(None);
    }
    let mut dev = match CsrSpmm::with_chunk(gpu, &p.a, CSR_HALF_TUNED_CHUNKS[0]) {
        Ok(d) => d,
        Err(e) => {
            // Skipped as a row-tile candidate that cannot be built is.
            tracing::warn!("CSR kernel in {} not timed: {e}", H::ARITH.name());
            return Ok(None);
        }
    };
    let mut best: Option<(f64, u32)> = None;
    for chunk_nnz in CSR_HALF_TUNED_CHUNKS {
        dev.set_chunk(chunk_nnz)?;
        let ms = ops.time(gpu, |b, c| dev.enqueue_half(1.0, b, 0.0, c))?;
        p.report.tuning.push(TuneSample {
            candidate: format!("{} in {}", CsrKernel { chunk_nnz }, H::ARITH.name()),
            ms,
        });
        if best.is_none_or(|b| ms < b.0) {
            best = Some((ms, chunk_nnz));
        }
    }
    let Some((ms, chunk_nnz)) = best else {
        return Ok(None);
    };
    dev.set_chunk(chunk_nnz)?;
    Ok(Some((ms, dev)))
}

/// Times the row-tile kernels of `arith` on `p`'s prepared matrix at width `n` (TC16 and TC32,
/// [`TYPED_PACKINGS`] windows per thread block and windows split at
/// [`super::ROW_TILE_SPLIT_BLOCKS`]) and, for f16 / bf16, the CSR kernel ([`tune_csr_half`]) on
/// zero operands of the element type, records each in the report's tuning samples and keeps the
/// fastest in `p` (uploaded again where it is not the one `p` runs). A candidate that cannot be
/// built is skipped. cuSPARSE in f16 / bf16 is not a candidate: it does not document its
/// arithmetic in these types, and on the H200 its products exceeded even twice C's rounding
/// beyond the f32-accumulation bound, data-dependently (ALG2 in
/// f16 at α = −0.5, β = 2: by 4.5 % at n = 1000 and by 23 % at n = 512 after a checked product
/// had passed; 2026-11-28, 826269a and 198f393), so no bound could be promised for it.
fn tune_typed(gpu: &Gpu, p: &mut Prepared, arith: RowTileArith, n: usize) -> Result<(), Error> {
    let (rows, cols) = (p.a.rows(), p.a.cols());
    let mut scheds: Vec<RowTileSchedule> = TYPED_PACKINGS
        .iter()
        .map(|&k| RowTileSchedule::Packed(k))
        .collect();
    scheds.push(RowTileSchedule::Split {
        max_blocks: super::ROW_TILE_SPLIT_BLOCKS,
    });
    let mut ops = TypedOperands::new(gpu, arith, (rows, cols), n)?;
    let mut best: Option<(f64, (usize, RowTileSchedule))> = None;
    for window_rows in [16usize, 32] {
        let Ok(m) = RowTileTcf::from_csr(&p.a, window_rows) else {
            continue;
        };
        let Ok(mut dev) = RowTileDevice::upload_as(gpu, &m, false, arith, scheds[0]) else {
            continue;
        };
        for &s in &scheds {
            dev.set_schedule(gpu, s)?;
            let ms = ops.time_row_tile(gpu, &mut dev)?;
            p.report.tuning.push(TuneSample {
                candidate: format!("{} ({s})", dev.kernel().name()),
                ms,
            });
            if best.is_none_or(|b| ms < b.0) {
                best = Some((ms, (window_rows, s)));
            }
        }
    }
    let csr = match &mut ops {
        TypedOperands::F16(z) => tune_csr_half(gpu, p, z)?,
        TypedOperands::Bf16(z) => tune_csr_half(gpu, p, z)?,
        TypedOperands::F32(_) => None,
    };
    if let Some((ms, dev)) = csr.filter(|(ms, _)| best.is_none_or(|b| *ms < b.0)) {
        p.install(DeviceState::Family(Box::new(dev)), n)?;
        p.report.kernel_note = format!(
            "{} asked for: the fastest kernel in it, {} ({ms:.4} ms at N = {n})",
            arith.name(),
            p.report.kernel
        );
        return Ok(());
    }
    let Some((ms, (window_rows, schedule))) = best else {
        return Ok(());
    };
    let m = RowTileTcf::from_csr(&p.a, window_rows).map_err(|e| Error::Format(e.to_string()))?;
    let d = RowTileDevice::upload_as(gpu, &m, false, arith, schedule)?;
    gpu.synchronize()?;
    p.install(DeviceState::RowTile(Box::new(d)), n)?;
    p.report.kernel_note = format!(
        "{} asked for: the fastest row-tile kernel in it ({ms:.4} ms at N = {n})",
        arith.name()
    );
    Ok(())
}

/// The row-tile arithmetic a GPU preparation of `opts` runs, `None` for the TF32 and f32 kernels
/// (the tuned or requested preparation): f16 and bf16 B and C on the f16 / bf16 kernels, 3×TF32
/// on the 3×TF32 kernels ([`refuse_unsupported`] ran first).
fn typed_arith(opts: &PrepareOptions) -> Option<RowTileArith> {
    match (opts.dtype, opts.precision) {
        (DType::F16, _) => Some(RowTileArith::F16),
        (DType::BF16, _) => Some(RowTileArith::Bf16),
        (_, Precision::Tf32x3) => Some(RowTileArith::Tf32x3),
        _ => None,
    }
}

impl Engine {
    /// A GPU preparation for f16 / bf16 B and C or for 3×TF32 ([`typed_arith`]): the masked
    /// row-tile kernel of that arithmetic or, for f16 / bf16, the CSR kernel, without the plan
    /// cache (its entries name TF32 and f32 kernels; the report says `Off`). With
    /// [`KernelRequest::Auto`] and `tune`, [`tune_typed`] times both window heights and their
    /// packings (for f16 / bf16 also the CSR kernel at each of its nonzero budgets) and keeps
    /// the fastest (3×TF32: then against the tuned f32 preparation, [`Engine::faster_of_f32`]);
    /// [`KernelRequest::Csr`] runs the CSR kernel at its default budget; otherwise TC16 (TC32
    /// when `opts` requests it) runs under the requested row-tile kernel's schedule rule
    /// ([`super::choose`]). 3×TF32 falls back to cuSPARSE in f32 where
    /// the row-tile kernel cannot take the matrix (a size beyond its u32 indices), with the
    /// reason in the report's note.
    fn prepare_typed(
        &self,
        a: Source<'_>,
        opts: &PrepareOptions,
        arith: RowTileArith,
    ) -> Result<Prepared, Error> {
        let t = Instant::now();
        if opts.kernel == KernelRequest::Csr {
            // f16 / bf16 on the CSR kernel (refuse_unsupported let no other arithmetic through):
            // its layout is f32's, its products take B and C in the type.
            let o = PrepareOptions {
                tune: false,
                cache_dir: None,
                ..opts.clone()
            };
            let stage = self.reorder_stage(&a, &o)?;
            let mut p = self.prepare_reordered(a, stage, &o)?;
            p.report.cache = CacheOutcome::Off;
            p.report.total_s = t.elapsed().as_secs_f64();
            return Ok(p);
        }
        let rt = match opts.kernel {
            KernelRequest::RowTile(k) => k,
            _ => RowTileKernel::TC16,
        }
        .with_arith(arith);
        let o = PrepareOptions {
            kernel: KernelRequest::RowTile(rt),
            tune: false,
            cache_dir: None,
            ..opts.clone()
        };
        let stage = self.reorder_stage(&a, &o)?;
        let mut p = match self.prepare_reordered(a, stage, &o) {
            Ok(p) => p,
            Err(e) if arith == RowTileArith::Tf32x3 => {
                tracing::warn!("3xTF32 row-tile kernel refused the matrix ({e}): cuSPARSE in f32");
                let o = PrepareOptions {
                    kernel: KernelRequest::Cusparse,
                    precision: Precision::F32,
                    ..o
                };
                let stage = self.reorder_stage(&a, &o)?;
                let mut p = self.prepare_reordered(a, stage, &o)?;
                p.report.kernel_note = format!(
                    "3xTF32 asked for; the {} kernel refused the matrix ({e}): cuSPARSE (f32)",
                    rt.name()
                );
                p
            }
            Err(e) => return Err(e),
        };
        if opts.tune && opts.kernel == KernelRequest::Auto {
            let t_tune = Instant::now();
            if let (Some(gpu), DeviceState::RowTile(_)) = (p.gpu.clone(), &p.dev) {
                tune_typed(&gpu, &mut p, arith, opts.n.max(1))?;
            }
            if arith == RowTileArith::Tf32x3 {
                p = self.faster_of_f32(a, opts, p)?;
            }
            p.report.tune_s = t_tune.elapsed().as_secs_f64();
        }
        if opts.cache_dir.is_some() {
            tracing::info!(
                "plan cache not used: it keeps TF32 and f32 kernels, not {}",
                rt.name()
            );
        }
        p.report.cache = CacheOutcome::Off;
        p.report.total_s = t.elapsed().as_secs_f64();
        Ok(p)
    }

    /// A tuned 3×TF32 preparation: `x3` (its 3×TF32 kernels tuned) or, where its product at
    /// width N is slower, the tuned f32 preparation of `a` (cuSPARSE at its fastest algorithm and
    /// the CUDA-core kernels, without the plan cache), whose bound γ_k is below 3×TF32's
    /// 2⁻²⁰ + γ_6k at every row length; the report then says f32, and its note both times. Both
    /// are timed through [`Prepared::spmm_device`] on the same zero operands (the row permutation
    /// of a reordered preparation included, as a caller's product pays it). An f32 preparation
    /// that fails keeps `x3` (with a warning).
    fn faster_of_f32(
        &self,
        a: Source<'_>,
        opts: &PrepareOptions,
        mut x3: Prepared,
    ) -> Result<Prepared, Error> {
        let Some(gpu) = x3.gpu.clone() else {
            return Ok(x3);
        };
        let o = PrepareOptions {
            precision: Precision::F32,
            kernel: KernelRequest::Auto,
            cache_dir: None,
            ..opts.clone()
        };
        let mut f32p = match self.prepare_from(a, &o) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("3xTF32 tuning: the f32 preparation failed ({e}); 3xTF32 kept");
                return Ok(x3);
            }
        };
        let n = opts.n.max(1);
        let b = gpu.alloc_zeros::<f32>((a.cols() * n).max(1))?;
        let mut c = gpu.alloc_zeros::<f32>((a.rows() * n).max(1))?;
        let mut time = |p: &mut Prepared| -> Result<f64, Error> {
            let samples = time_samples(&gpu, 1, 5, || p.spmm_device(1.0, &b, 0.0, &mut c))?;
            Ok(median(&samples))
        };
        let (t_x3, t_f32) = (time(&mut x3)?, time(&mut f32p)?);
        let (x3_kernel, f32_kernel) = (x3.report.kernel, f32p.report.kernel);
        let sample = |what: &str, kernel: ExecKernel, ms: f64| TuneSample {
            candidate: format!("{what}: {kernel} (the preparation's product)"),
            ms,
        };
        if t_f32 < t_x3 {
            f32p.report.kernel_note = format!(
                "3xTF32 asked for: {f32_kernel} in f32 (bound γ_k, below 3xTF32's) {t_f32:.4} ms \
                 at N = {n}, the 3xTF32 preparation's {x3_kernel} {t_x3:.4} ms; f32 tuning: {}",
                f32p.report.kernel_note
            );
            let mut tuning = std::mem::take(&mut x3.report.tuning);
            tuning.append(&mut f32p.report.tuning);
            tuning.push(sample("3xTF32", x3_kernel, t_x3));
            tuning.push(sample("f32", f32_kernel, t_f32));
            f32p.report.tuning = tuning;
            return Ok(f32p);
        }
        x3.report.tuning.push(sample("3xTF32", x3_kernel, t_x3));
        x3.report.tuning.push(sample("f32", f32_kernel, t_f32));
        Ok(x3)
    }

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
        refuse_unsupported(self.gpu.is_some(), opts)?;
        if let (Some(_), Some(arith)) = (&self.gpu, typed_arith(opts)) {
            return self.prepare_typed(a, opts, arith);
        }
        let tensor_cores = matches!(
            opts.kernel,
            KernelRequest::AccSpmm | KernelRequest::AccSpmmPaper | KernelRequest::RowTile(_)
        ) || opts
            .kernel
            .family()
            .is_some_and(|f| f.precision() == Precision::Tf32);
        if matches!(opts.precision, Precision::F32 | Precision::Tf32x3) && tensor_cores {
            return Err(Error::InvalidArgs(format!(
                "{:?} runs on TF32 tensor cores, but {} precision was asked for: use \
                 KernelRequest::Auto, Cusparse or Csr (f32 rounding), or Precision::Tf32",
                opts.kernel, opts.precision
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
                let early = match (&loaded, gpu) {
                    (Ok(Some(entry)), Some(gpu)) => cached_early_work(gpu, &a, entry),
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
                (Some(c), Some((loaded, early)), device)
            }),
        };
        let mut outcome = CacheOutcome::Off;
        let mut cache_s = 0.0;
        if let (Some(c), Some((loaded, early))) = (&cache, loaded) {
            cache_s = t.elapsed().as_secs_f64();
            outcome = match loaded {
                Ok(Some(entry)) => {
                    let cusparse_ms = entry.cusparse_ms;
                    match self.prepare_cached(a, opts, entry, device.take(), early) {
                        Ok(mut p) => {
                            p.report.cache = CacheOutcome::Hit;
                            p.report.cusparse_ms = cusparse_ms;
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
                cusparse_ms: p.report.cusparse_ms,
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
        early: Option<EarlyWork>,
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
            early,
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
                RowTileDevice::build_dense(
                    gpu, a, csr, old_of_new, symmetric, s, kernel, schedule,
                )?,
                "the cached skeleton",
            ),
            None if !symmetric => (
                RowTileDevice::build_dense_derived(gpu, a, csr, old_of_new, kernel, schedule)?,
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
            early: None,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dtype: DType, precision: Precision, kernel: KernelRequest) -> PrepareOptions {
        PrepareOptions::builder()
            .dtype(dtype)
            .precision(precision)
            .kernel(kernel)
            .build()
    }

    #[test]
    fn half_types_and_3xtf32_go_to_their_row_tile_kernels_on_a_gpu() {
        let cases = [
            (DType::F16, Precision::Tf32, Some(RowTileArith::F16)),
            (DType::BF16, Precision::Tf32, Some(RowTileArith::Bf16)),
            (DType::F32, Precision::Tf32x3, Some(RowTileArith::Tf32x3)),
            (DType::F32, Precision::Tf32, None),
            (DType::F32, Precision::F32, None),
        ];
        for (dtype, precision, want) in cases {
            for kernel in [
                KernelRequest::Auto,
                KernelRequest::RowTile(RowTileKernel::TC16),
                KernelRequest::RowTile(RowTileKernel::TC32),
            ] {
                let o = opts(dtype, precision, kernel);
                assert!(refuse_unsupported(true, &o).is_ok(), "{dtype} {precision}");
                assert_eq!(typed_arith(&o), want, "{dtype} {precision}");
            }
        }
        // The CSR kernel takes f16 and bf16 (and f32), not 3×TF32.
        for dtype in [DType::F16, DType::BF16, DType::F32] {
            let o = opts(dtype, Precision::Tf32, KernelRequest::Csr);
            assert!(refuse_unsupported(true, &o).is_ok(), "{dtype}");
        }
        let o = opts(DType::F32, Precision::Tf32x3, KernelRequest::Csr);
        assert!(refuse_unsupported(true, &o).is_err());
    }

    #[test]
    fn unsupported_gpu_combinations_name_both_and_the_cpu_path_takes_them() {
        for dtype in [DType::F16, DType::BF16] {
            for precision in [Precision::F32, Precision::Tf32x3] {
                let o = opts(dtype, precision, KernelRequest::Auto);
                let e = refuse_unsupported(true, &o).unwrap_err();
                assert!(
                    matches!(e, Error::Unsupported { requested: Requested::ElementAt(d, p), .. }
                        if d == dtype && p == precision),
                    "{e}"
                );
                let msg = e.to_string();
                assert!(
                    msg.contains(dtype.name()) && msg.contains(precision.name()),
                    "{msg}"
                );
                assert!(refuse_unsupported(false, &o).is_ok());
            }
            // Kernels without an f16 / bf16 version.
            for kernel in [
                KernelRequest::Cusparse,
                KernelRequest::AccSpmm,
                KernelRequest::RowTile(RowTileKernel::TC16D),
            ] {
                let o = opts(dtype, Precision::Tf32, kernel);
                let e = refuse_unsupported(true, &o).unwrap_err();
                assert!(
                    matches!(e, Error::Unsupported { requested: Requested::Element(d), .. } if d == dtype),
                    "{e}"
                );
                assert!(e.to_string().contains(&format!("{kernel:?}")), "{e}");
            }
        }
        let o = opts(DType::F32, Precision::Tf32x3, KernelRequest::Hrpb);
        let e = refuse_unsupported(true, &o).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Unsupported {
                    requested: Requested::Precision(Precision::Tf32x3),
                    ..
                }
            ),
            "{e}"
        );
        // F16 as an SpMM precision stays refused everywhere.
        for gpu in [false, true] {
            let o = opts(DType::F32, Precision::F16, KernelRequest::Auto);
            assert!(refuse_unsupported(gpu, &o).is_err());
        }
    }
}
