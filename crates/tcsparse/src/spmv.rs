//! The SpMV room: `y = α·A·X + β·y` with 1 to 8 right-hand sides (X: `cols × n`, y: `rows × n`,
//! row-major f32) on Spaden's bitBSR and tensor cores, our CSR walk (2 to 8 right-hand sides) or
//! cuSPARSE, whichever is faster.
//!
//! [`Engine::prepare_spmv`] builds bitBSR once and, on a GPU, *tunes*: it times cuSPARSE CSR SpMV
//! (SpMM for n > 1) at each of its CSR algorithms ([`CusparseSpmvAlg::candidates`]), for n > 1 our
//! CSR walks ([`CsrSpmv`]: f32 products on the same CSR arrays, each [`CsrWalk`] at each budget of [`CSR_CHUNKS`])
//! and our bitBSR kernels (each allowed tile storage × tensor-core MMA or the CUDA-core
//! walk — every layout for one right-hand side, the set-bit walks [`MULTI_LAYOUTS`](tcsparse_gpu::spmv::MULTI_LAYOUTS) for 2 to 8; the
//! tensor-core walk [`TC_LAYOUTS`] only on the MMA kernels' storages; never [`UNTUNED_LAYOUTS`](tcsparse_gpu::spmv::UNTUNED_LAYOUTS) — ×
//! tile budgets per half) inside CUDA graphs and keeps the
//! fastest, so the prepared product is never slower than cuSPARSE (up to timing noise). Precision
//! ([`SpmvPrecision`]):
//!
//! * `Tf32` (default): TF32 tiles (f32 storage rounded to TF32, 11 significant bits of A and X), the
//!   CUDA-core walk on f32 tiles (f32 products, more accurate than asked) or cuSPARSE;
//! * `F16`: an explicit opt-in that also allows f16 tiles (2 bytes per value instead of 4; A scaled
//!   per tile-row and X per 8-element segment by powers of two, so nothing overflows f16 — never NaN
//!   from range), same 11-bit significands as TF32; where one tile-row's values span more than one
//!   f16 scale holds (`f16_unfit_tile_row`: e.g. an 8-row tile mixing magnitudes 1e12 apart,
//!   whose small rows f16 would flush to zero) no f16 tiles are used, only TF32/f32 ones;
//! * `F32`: f32 products only: cuSPARSE, the CSR walk or the CUDA-core walk on f32 tiles on the
//!   GPU, f32 CSR on the CPU.
//!
//! Without a GPU the product walks bitBSR on the CPU exactly as the kernel does (same roundings, same
//! tile order, split tile-rows summed over their chunks), so CPU and GPU results agree to f32
//! summation order.

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bitbsr_device::{DeviceBitBsr, TileStorage, f16_unfit_tile_row};
use tcsparse_gpu::baselines::cusparse::CusparseCsr;
use tcsparse_gpu::spmv::baseline::{CusparseSpmvAlg, CusparseSpmvGraphable};
use tcsparse_gpu::spmv::csr::{CSR_CHUNKS, CsrSpmv, CsrWalk};
use tcsparse_gpu::spmv::graph::time_spmv;
use tcsparse_gpu::spmv::{
    BitBsrSpmv, DEFAULT_CHUNK_TILES, DEFAULT_CORE_LAYOUT, MAX_RHS, MULTI_LAYOUT, TC_LAYOUTS,
    tuned_walk_layouts,
};
use tcsparse_gpu::{Gpu, Timing};
use tcsparse_planner::work::spmv::{SpmvWork, spmv_work};

use crate::{Engine, Error};

/// Arithmetic an SpMV may use (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SpmvPrecision {
    /// f16 tiles allowed (explicit opt-in), TF32 tiles, cuSPARSE.
    F16,
    /// TF32 tiles or cuSPARSE (default).
    #[default]
    Tf32,
    /// f32 only (cuSPARSE; CSR on the CPU).
    F32,
}

impl SpmvPrecision {
    /// Parses `f16`, `tf32`, `f32` (case-insensitive).
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "f16" => Ok(Self::F16),
            "tf32" => Ok(Self::Tf32),
            "f32" => Ok(Self::F32),
            _ => Err(Error::InvalidArgs(format!(
                "precision {s:?}: expected f16, tf32 or f32"
            ))),
        }
    }

    /// Tile storages our tensor-core kernels may use at this precision, cheapest first.
    pub fn storages(self) -> &'static [TileStorage] {
        match self {
            Self::F16 => &[TileStorage::F16, TileStorage::Tf32],
            Self::Tf32 => &[TileStorage::Tf32],
            Self::F32 => &[],
        }
    }

    /// Tile storages the CUDA-core walk (any n) may use at this precision: f32 tiles
    /// (as fast as TF32 ones on CUDA cores, and exact) at every precision, f16 tiles when allowed.
    pub fn core_storages(self) -> &'static [TileStorage] {
        match self {
            Self::F16 => &[TileStorage::F16, TileStorage::F32],
            Self::Tf32 | Self::F32 => &[TileStorage::F32],
        }
    }

    /// The walk storage an untuned preparation uses (the first of [`SpmvPrecision::core_storages`]).
    pub fn default_core_storage(self) -> TileStorage {
        match self {
            Self::F16 => TileStorage::F16,
            Self::Tf32 | Self::F32 => TileStorage::F32,
        }
    }

    /// Element-wise error bound relative to |α|·|A|·|X| (+ |β|·|y|): 2⁻⁹ for f16/TF32 (11-bit A and X,
    /// f32 sums), 2⁻¹⁷ for f32 (f32 products and sums, cuSPARSE or the CUDA-core walk).
    pub fn bound(self) -> f64 {
        match self {
            Self::F16 | Self::Tf32 => 2f64.powi(-9),
            Self::F32 => 2f64.powi(-17),
        }
    }

    /// Checks a product against its f64 reference with [`SpmvPrecision::bound`] plus the
    /// underflow term for rows of at most `k` nonzeros ([`crate::accuracy`]: the check SpMM uses
    /// too).
    pub fn check_products(
        self,
        got: &[f32],
        want: &[f64],
        scale: &[f64],
        k: usize,
    ) -> crate::accuracy::AccuracyCheck {
        crate::accuracy::check_products(got, want, scale, self.bound(), k)
    }
}

/// Options of [`Engine::prepare_spmv`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpmvOptions {
    /// Precision (default TF32).
    pub precision: SpmvPrecision,
    /// Right-hand sides per call, 1..=8 (default 1).
    pub rhs: usize,
    /// Tile budget per half when not tuning (default [`DEFAULT_CHUNK_TILES`]).
    pub chunk_tiles: u32,
    /// Time the candidates on the GPU and keep the fastest (default true); false keeps our kernel
    /// with the cheapest allowed storage (the CUDA-core walk: [`DEFAULT_CORE_LAYOUT`] for one
    /// right-hand side, [`MULTI_LAYOUT`] for more).
    pub tune: bool,
}

impl Default for SpmvOptions {
    fn default() -> Self {
        Self {
            precision: SpmvPrecision::Tf32,
            rhs: 1,
            chunk_tiles: DEFAULT_CHUNK_TILES,
            tune: true,
        }
    }
}

/// Tile budgets per half tried when tuning (and, for the layouts of
/// [`tcsparse_gpu::spmv::WAVE_FITTED_LAYOUTS`], the matrix's wave-fitted budget:
/// [`BitBsrSpmv::tuning_chunks`]).
pub const SPMV_TUNED_CHUNKS: [u32; 4] = [4, 8, 32, 128];

/// The product a prepared SpMV runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpmvKernel {
    /// Our bitBSR kernel.
    BitBsr {
        /// Tile storage.
        storage: TileStorage,
        /// Tile budget per half.
        chunk_tiles: u32,
        /// The CUDA-core walk's layout (a [`CORE_LAYOUTS`](tcsparse_gpu::spmv::CORE_LAYOUTS) name; one of [`MULTI_LAYOUTS`](tcsparse_gpu::spmv::MULTI_LAYOUTS) when n > 1)
        /// instead of the tensor-core MMA kernel (None).
        core: Option<&'static str>,
    },
    /// cuSPARSE CSR SpMV / SpMM.
    Cusparse {
        /// The cuSPARSE algorithm (the fastest of [`CusparseSpmvAlg::candidates`] when tuned).
        alg: CusparseSpmvAlg,
        /// Right-hand sides (names the algorithm: SpMV for 1, SpMM for more).
        n: usize,
    },
    /// Our CSR walk for 2 to 8 right-hand sides (`spmv_csr{n}` or `spmv_csrrows{n}`: an f32
    /// product on A's CSR arrays, 8 lanes per nonzero; for sparse tiles, where bitBSR's records
    /// outweigh the values).
    Csr {
        /// Nonzero budget per warp item.
        chunk_nnz: u32,
        /// How an item's nonzeros are spread over its lane groups.
        walk: CsrWalk,
    },
    /// CPU walk of bitBSR (the kernel's arithmetic).
    CpuBitBsr {
        /// Tile storage.
        storage: TileStorage,
    },
    /// CPU f32 CSR (precision F32 without a GPU).
    CpuCsr,
}

impl std::fmt::Display for SpmvKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpmvKernel::BitBsr {
                storage,
                chunk_tiles,
                core,
            } => write!(
                f,
                "bitBSR {storage:?} tiles on {}, {chunk_tiles} tiles per half (GPU)",
                match core {
                    Some(l) => format!("CUDA cores ({l})"),
                    None => "tensor cores".into(),
                }
            ),
            SpmvKernel::Cusparse { alg, n } => write!(f, "cuSPARSE CSR, {} (GPU)", alg.name(*n)),
            SpmvKernel::Csr { chunk_nnz, walk } => write!(
                f,
                "CSR walk ({}) on CUDA cores, {chunk_nnz} nonzeros per warp item (GPU)",
                walk.name()
            ),
            SpmvKernel::CpuBitBsr { storage } => write!(f, "bitBSR {storage:?} tiles (CPU walk)"),
            SpmvKernel::CpuCsr => write!(f, "CSR f32 (CPU)"),
        }
    }
}

/// One timed candidate of the tuning.
#[derive(Clone, Debug, PartialEq)]
pub struct SpmvSample {
    /// The candidate.
    pub kernel: SpmvKernel,
    /// Median per-call time in ms (CUDA graphs).
    pub ms: f64,
}

enum Exec {
    Ours(Box<BitBsrSpmv>),
    Csr(Box<CsrSpmv>),
    Cusparse(Box<CusparseSpmvGraphable>),
    Cpu(Box<CpuSpmv>),
}

/// The CPU path: the kernel's bitBSR walk, or f32 CSR at precision F32.
struct CpuSpmv {
    dev: Option<DeviceBitBsr>,
    work: Option<SpmvWork>,
    csr: Csr,
}

/// A matrix prepared for SpMV ([`Engine::prepare_spmv`]).
pub struct PreparedSpmv {
    rows: usize,
    cols: usize,
    nnz: usize,
    n: usize,
    kernel: SpmvKernel,
    samples: Vec<SpmvSample>,
    bytes: usize,
    exec: Exec,
    gpu: Option<Gpu>,
}

impl std::fmt::Debug for PreparedSpmv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSpmv")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("n", &self.n)
            .field("kernel", &self.kernel)
            .finish()
    }
}

fn fmt_err(e: impl std::fmt::Display) -> Error {
    Error::Format(e.to_string())
}

impl Engine {
    /// Prepares `a` for SpMV with `opts.rhs` right-hand sides (see the module docs).
    pub fn prepare_spmv(&self, a: &Csr, opts: &SpmvOptions) -> Result<PreparedSpmv, Error> {
        let n = opts.rhs;
        if n == 0 || n > MAX_RHS {
            return Err(Error::InvalidArgs(format!(
                "SpMV takes 1 to {MAX_RHS} right-hand sides, got {n}"
            )));
        }
        let bsr = BitBsr::from_csr(a).map_err(fmt_err)?;
        // f16 tiles only where one scale per tile-row holds every value (else a tile-row mixing
        // magnitudes far apart would flush its small rows to zero): TF32/f32 tiles instead.
        let f16_fits = match f16_unfit_tile_row(&bsr) {
            None => true,
            Some(u) => {
                tracing::info!(
                    "SpMV: no f16 tiles: tile-row {} spans {:e} to {:e}, beyond one f16 scale",
                    u.tile_row,
                    u.min_abs,
                    u.max_abs
                );
                false
            }
        };
        let allowed = |list: &[TileStorage]| -> Vec<TileStorage> {
            list.iter()
                .copied()
                .filter(|&s| s != TileStorage::F16 || f16_fits)
                .collect()
        };
        let storages = allowed(opts.precision.storages());
        let core_storages = allowed(opts.precision.core_storages());
        let base = |kernel, exec, bytes| PreparedSpmv {
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            n,
            kernel,
            samples: Vec::new(),
            bytes,
            exec,
            gpu: self.gpu.clone(),
        };
        let csr_bytes = 4 * (a.rows() + 1) + 8 * a.nnz() + 4 * n * (a.rows() + a.cols());
        let Some(gpu) = &self.gpu else {
            let Some(&st) = storages.first() else {
                return Ok(base(
                    SpmvKernel::CpuCsr,
                    Exec::Cpu(Box::new(CpuSpmv {
                        dev: None,
                        work: None,
                        csr: a.clone(),
                    })),
                    csr_bytes,
                ));
            };
            let dev = DeviceBitBsr::encode(&bsr, st).map_err(fmt_err)?;
            let work = spmv_work(dev.tile_row_ptr(), opts.chunk_tiles);
            let bytes = dev.bytes() + 4 * n * (a.rows() + a.cols());
            return Ok(base(
                SpmvKernel::CpuBitBsr { storage: st },
                Exec::Cpu(Box::new(CpuSpmv {
                    dev: Some(dev),
                    work: Some(work),
                    csr: a.clone(),
                })),
                bytes,
            ));
        };
        // The walk's layouts for n (tuned_walk_layouts); the tensor-core walks (TC_LAYOUTS:
        // TF32 products) only where the MMA kernels are allowed, and not at n = 1, where they use
        // 1/8 of each MMA and were never the fastest on the H200 bench (2026-11-25, 7a8a386): not timed
        // there, to keep the preparation short.
        let core_layouts = tuned_walk_layouts(n);
        let tc_layouts: &[&'static str] = if n == 1 { &[] } else { &TC_LAYOUTS };
        if !opts.tune {
            let default_layout = if n == 1 {
                DEFAULT_CORE_LAYOUT
            } else {
                MULTI_LAYOUT
            };
            // (The precision's first walk storage: every precision has one, and f32 tiles
            // always fit.)
            let st = core_storages.first().copied().unwrap_or(TileStorage::F32);
            let core = Some(default_layout);
            let dev = DeviceBitBsr::encode(&bsr, st).map_err(fmt_err)?;
            let mut k = BitBsrSpmv::with_chunk(gpu, &dev, opts.chunk_tiles)?;
            k.set_core_layout(core)?;
            k.load_walks(n)?;
            let bytes = k.min_bytes(n);
            return Ok(base(
                SpmvKernel::BitBsr {
                    storage: st,
                    chunk_tiles: k.chunk_tiles(),
                    core,
                },
                Exec::Ours(Box::new(k)),
                bytes,
            ));
        }
        // Tuning: scratch operands, every candidate timed in CUDA graphs, fastest kept.
        let x: Vec<f32> = (0..a.cols() * n)
            .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
            .collect();
        let dx = gpu.upload(&x)?;
        let mut dy: CudaSlice<f32> = gpu.alloc_zeros((a.rows() * n).max(1))?;
        let mut samples = Vec::new();
        let ca = CusparseCsr::new(gpu, a)?;
        // cuSPARSE's algorithms, each timed; the default's failure is an error, another's skips it.
        let mut cusparse_best: Option<(f64, CusparseSpmvGraphable)> = None;
        for &alg in CusparseSpmvAlg::candidates(n) {
            let timed = CusparseSpmvGraphable::with_alg(gpu, &ca, n, alg).and_then(|c| {
                let t = time_spmv(gpu, &c, &dx, &mut dy, n, 20, 5)?;
                Ok((t.median_ms, c))
            });
            let (ms, c) = match timed {
                Ok(t) => t,
                Err(e) if alg != CusparseSpmvAlg::Default => {
                    tracing::debug!("cuSPARSE {} skipped: {e}", alg.name(n));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            samples.push(SpmvSample {
                kernel: SpmvKernel::Cusparse { alg, n },
                ms,
            });
            if cusparse_best.as_ref().is_none_or(|b| ms < b.0) {
                cusparse_best = Some((ms, c));
            }
        }
        let (ms, c) = cusparse_best
            .ok_or_else(|| Error::Unavailable("no cuSPARSE algorithm could run".into()))?;
        let alg = c.alg();
        let mut best: (f64, Exec, SpmvKernel, usize) = (
            ms,
            Exec::Cusparse(Box::new(c)),
            SpmvKernel::Cusparse { alg, n },
            csr_bytes,
        );
        // Our CSR walks (n ≥ 2, f32 products: every precision), each at each budget.
        if n >= 2 {
            let mut k = CsrSpmv::new(gpu, a, &ca, CSR_CHUNKS[0])?;
            let (ms, walk, chunk) = k.tune(n, |k| {
                let t = time_spmv(gpu, k, &dx, &mut dy, n, 20, 5)?;
                samples.push(SpmvSample {
                    kernel: SpmvKernel::Csr {
                        chunk_nnz: k.chunk_nnz(),
                        walk: k.walk(),
                    },
                    ms: t.median_ms,
                });
                Ok::<f64, Error>(t.median_ms)
            })?;
            if ms < best.0 {
                let bytes = k.min_bytes(n);
                best = (
                    ms,
                    Exec::Csr(Box::new(k)),
                    SpmvKernel::Csr {
                        chunk_nnz: chunk,
                        walk,
                    },
                    bytes,
                );
            }
        }
        // Each storage once (uploaded once), with the MMA kernel and/or the CUDA-core walk.
        let mut all: Vec<TileStorage> = storages.clone();
        for &s in &core_storages {
            if !all.contains(&s) {
                all.push(s);
            }
        }
        for st in all {
            let mut modes: Vec<Option<&'static str>> = Vec::new();
            if storages.contains(&st) {
                modes.push(None);
                modes.extend(tc_layouts.iter().map(|&l| Some(l)));
            }
            if core_storages.contains(&st) {
                modes.extend(core_layouts.iter().map(|&l| Some(l)));
            }
            let dev = DeviceBitBsr::encode(&bsr, st).map_err(fmt_err)?;
            let mut k = BitBsrSpmv::with_chunk(gpu, &dev, SPMV_TUNED_CHUNKS[0])?;
            // The walks for n from their module before any graph is captured.
            k.load_walks(n)?;
            let mut kbest: Option<(f64, u32, Option<&'static str>)> = None;
            for core in modes {
                k.set_core_layout(core)?;
                for chunk in k.tuning_chunks(core, &SPMV_TUNED_CHUNKS)? {
                    k.set_chunk(chunk)?;
                    let t = time_spmv(gpu, &k, &dx, &mut dy, n, 20, 5)?;
                    samples.push(SpmvSample {
                        kernel: SpmvKernel::BitBsr {
                            storage: st,
                            chunk_tiles: chunk,
                            core,
                        },
                        ms: t.median_ms,
                    });
                    if kbest.is_none_or(|b| t.median_ms < b.0) {
                        kbest = Some((t.median_ms, chunk, core));
                    }
                }
            }
            if let Some((ms, chunk, core)) = kbest
                && ms < best.0
            {
                k.set_chunk(chunk)?;
                k.set_core_layout(core)?;
                let bytes = k.min_bytes(n);
                best = (
                    ms,
                    Exec::Ours(Box::new(k)),
                    SpmvKernel::BitBsr {
                        storage: st,
                        chunk_tiles: chunk,
                        core,
                    },
                    bytes,
                );
            }
        }
        drop(dy);
        let mut p = base(best.2, best.1, best.3);
        p.samples = samples;
        Ok(p)
    }
}

impl PreparedSpmv {
    /// Rows of A.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns of A.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Stored nonzeros of A.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// Right-hand sides per call.
    pub fn rhs(&self) -> usize {
        self.n
    }
    /// The product this prepared SpMV runs.
    pub fn kernel(&self) -> &SpmvKernel {
        &self.kernel
    }
    /// The tuning's timed candidates (empty without tuning or on the CPU).
    pub fn samples(&self) -> &[SpmvSample] {
        &self.samples
    }
    /// Bytes one call must move at least (A's arrays as the chosen product reads them, X, y).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn check(&self, x: usize, y: usize) -> Result<(), Error> {
        if x < self.cols * self.n || y < self.rows * self.n {
            return Err(Error::InvalidArgs(format!(
                "SpMV with {} right-hand sides needs X of {}·{n} and y of {}·{n} elements, got {x} and {y}",
                self.n,
                self.cols,
                self.rows,
                n = self.n
            )));
        }
        Ok(())
    }

    /// `y = α·A·X + β·y` on host slices (X: `cols × rhs`, y: `rows × rhs`, row-major). β = 0 never
    /// reads y.
    ///
    /// Non-finite X: the tensor-core kernels and the per-tile-row walks multiply a tile's absent
    /// entries (zeros) by its columns of X, so an ∞ or NaN in X can give NaN in a row of the same
    /// tile that has no entry in that column, where cuSPARSE and the set-bit walks give a finite
    /// value ([`PreparedSpmv::kernel`] names the kernel kept).
    pub fn spmv(&mut self, alpha: f32, x: &[f32], beta: f32, y: &mut [f32]) -> Result<(), Error> {
        self.check(x.len(), y.len())?;
        let n = self.n;
        match &mut self.exec {
            Exec::Cpu(c) => match (&c.dev, &c.work) {
                (Some(d), Some(w)) => d.spmv_cpu(w, alpha, x, beta, y, n).map_err(fmt_err),
                _ => {
                    csr_f32(&c.csr, alpha, x, beta, y, n);
                    Ok(())
                }
            },
            _ => {
                let gpu = self
                    .gpu
                    .clone()
                    .ok_or_else(|| Error::Unavailable("no GPU".into()))?;
                let dx = gpu.upload(&x[..self.cols * n])?;
                let mut dy = gpu.upload(&y[..self.rows * n])?;
                self.spmv_device(alpha, &dx, beta, &mut dy)?;
                let out = gpu.download(&dy)?;
                y[..self.rows * n].copy_from_slice(&out);
                Ok(())
            }
        }
    }

    /// `y = α·A·X + β·y` on device data, queued on the engine's GPU stream (the argument order
    /// of [`PreparedSpmv::spmv`] and of SpMM's `spmm_device`): X and y may be whole buffers
    /// ([`CudaSlice`]) or views into larger ones (`CudaView` / `CudaViewMut`, e.g.
    /// `buf.slice(..)`).
    pub fn spmv_device<X: DevicePtr<f32>, Y: DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        x: &X,
        beta: f32,
        y: &mut Y,
    ) -> Result<(), Error> {
        self.check(x.len(), y.len())?;
        match &mut self.exec {
            Exec::Ours(k) => Ok(k.run(alpha, x, beta, y, self.n)?),
            Exec::Csr(k) => Ok(k.run(alpha, x, beta, y, self.n)?),
            Exec::Cusparse(c) => Ok(c.run(alpha, x, beta, y)?),
            Exec::Cpu(_) => Err(Error::Unavailable(
                "spmv_device on an engine without a GPU".into(),
            )),
        }
    }

    /// Median per-call time in ms of the prepared product inside CUDA graphs of 20 calls
    /// (`samples` graph launches), on device buffers `x`, `y` (β = 0).
    pub fn time_device<X: DevicePtr<f32>, Y: DevicePtrMut<f32>>(
        &mut self,
        x: &X,
        y: &mut Y,
        samples: usize,
    ) -> Result<Timing, Error> {
        self.check(x.len(), y.len())?;
        let gpu = self
            .gpu
            .clone()
            .ok_or_else(|| Error::Unavailable("no GPU".into()))?;
        let n = self.n;
        match &self.exec {
            Exec::Ours(k) => Ok(time_spmv(&gpu, k.as_ref(), x, y, n, 20, samples)?),
            Exec::Csr(k) => Ok(time_spmv(&gpu, k.as_ref(), x, y, n, 20, samples)?),
            Exec::Cusparse(c) => Ok(time_spmv(&gpu, c.as_ref(), x, y, n, 20, samples)?),
            Exec::Cpu(_) => Err(Error::Unavailable("no GPU".into())),
        }
    }
}

/// y = α·A·X + β·y in f32 on CSR (X, y row-major with n columns).
fn csr_f32(a: &Csr, alpha: f32, x: &[f32], beta: f32, y: &mut [f32], n: usize) {
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let mut acc = vec![0f32; n];
    for r in 0..a.rows() {
        acc.fill(0.0);
        for p in ip[r] as usize..ip[r + 1] as usize {
            let (c, v) = (a.indices()[p] as usize, a.data()[p]);
            for j in 0..n {
                acc[j] += v * x[c * n + j];
            }
        }
        for j in 0..n {
            let o = &mut y[r * n + j];
            *o = if beta == 0.0 {
                alpha * acc[j]
            } else {
                beta.mul_add(*o, alpha * acc[j])
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_formats::csr::csr_from_triplets;
    use tcsparse_formats::reference::spmm_f64;

    #[test]
    fn the_untuned_walk_storage_is_the_first_the_precision_allows() {
        for p in [SpmvPrecision::F16, SpmvPrecision::Tf32, SpmvPrecision::F32] {
            assert_eq!(p.core_storages().first(), Some(&p.default_core_storage()));
        }
    }

    fn sample() -> Csr {
        let mut t = Vec::new();
        for r in 0..45u32 {
            for k in 0..(r % 7) {
                t.push((r, (r * 13 + k * 29) % 61, 1.0 - (r + k) as f32 / 40.0));
            }
        }
        for c in 0..400u32 {
            t.push((9, c % 61, (c % 5) as f32 - 2.0));
        }
        csr_from_triplets(45, 61, &t).unwrap()
    }

    #[test]
    fn cpu_path_matches_f64_at_every_precision() {
        let a = sample();
        let engine = Engine::cpu("test");
        for prec in [SpmvPrecision::F16, SpmvPrecision::Tf32, SpmvPrecision::F32] {
            for n in [1, 5, 8] {
                let opts = SpmvOptions {
                    precision: prec,
                    rhs: n,
                    chunk_tiles: 2,
                    tune: true,
                };
                let mut p = engine.prepare_spmv(&a, &opts).unwrap();
                let x: Vec<f32> = (0..61 * n).map(|i| (i % 11) as f32 / 5.0 - 1.0).collect();
                let mut y = vec![f32::NAN; 45 * n];
                p.spmv(2.0, &x, 0.0, &mut y).unwrap();
                let want = spmm_f64(&a, &x, n, n, false);
                let scale = spmm_f64(&a, &x, n, n, true);
                for i in 0..y.len() {
                    let bound = prec.bound() * 2.0 * scale[i];
                    assert!(
                        (y[i] as f64 - 2.0 * want[i]).abs() <= bound,
                        "{prec:?} n {n} y[{i}] = {} want {}",
                        y[i],
                        2.0 * want[i]
                    );
                }
                let expect_cpu = match prec {
                    SpmvPrecision::F32 => SpmvKernel::CpuCsr,
                    SpmvPrecision::F16 => SpmvKernel::CpuBitBsr {
                        storage: TileStorage::F16,
                    },
                    SpmvPrecision::Tf32 => SpmvKernel::CpuBitBsr {
                        storage: TileStorage::Tf32,
                    },
                };
                assert_eq!(p.kernel(), &expect_cpu);
            }
        }
    }

    /// One 8-row tile mixing magnitudes 1e12 apart: f16 would flush its small rows to zero, so
    /// an F16 preparation uses TF32 tiles (CPU reference of the layout) and meets the bound on
    /// every row.
    #[test]
    fn f16_falls_back_where_one_tile_scale_cannot_hold_the_range() {
        let mut t = Vec::new();
        for r in 0..16u32 {
            for k in 0..4u32 {
                let mag = if r == 0 { 1.0e6 } else { 1.0e-6 };
                t.push((r, (r * 5 + k * 3) % 16, mag * (1.0 + k as f32 / 4.0)));
            }
        }
        let a = csr_from_triplets(16, 16, &t).unwrap();
        let engine = Engine::cpu("test");
        for tune in [true, false] {
            let opts = SpmvOptions {
                precision: SpmvPrecision::F16,
                tune,
                ..SpmvOptions::default()
            };
            let mut p = engine.prepare_spmv(&a, &opts).unwrap();
            assert_eq!(
                p.kernel(),
                &SpmvKernel::CpuBitBsr {
                    storage: TileStorage::Tf32
                }
            );
            let x: Vec<f32> = (0..16).map(|i| 1.0 + (i % 3) as f32).collect();
            let mut y = vec![f32::NAN; 16];
            p.spmv(1.0, &x, 0.0, &mut y).unwrap();
            let want = spmm_f64(&a, &x, 1, 1, false);
            let scale = spmm_f64(&a, &x, 1, 1, true);
            for i in 0..16 {
                assert!(
                    (y[i] as f64 - want[i]).abs() <= SpmvPrecision::F16.bound() * scale[i],
                    "row {i}: {} want {}",
                    y[i],
                    want[i]
                );
                assert!(y[i] != 0.0, "row {i} flushed to zero");
            }
        }
    }

    #[test]
    fn bad_arguments_are_refused() {
        let a = sample();
        let engine = Engine::cpu("test");
        let opts = SpmvOptions {
            rhs: 9,
            ..SpmvOptions::default()
        };
        assert!(matches!(
            engine.prepare_spmv(&a, &opts),
            Err(Error::InvalidArgs(_))
        ));
        let mut p = engine.prepare_spmv(&a, &SpmvOptions::default()).unwrap();
        let mut y = vec![0f32; 45];
        assert!(p.spmv(1.0, &[0.0; 60], 0.0, &mut y).is_err());
        assert!(SpmvPrecision::parse("bf16").is_err());
        assert_eq!(SpmvPrecision::parse("F16").unwrap(), SpmvPrecision::F16);
    }
}
