//! The SpMV room: `y = α·A·X + β·y` with 1 to 8 right-hand sides (X: `cols × n`, y: `rows × n`,
//! row-major f32) on Spaden's bitBSR and tensor cores, our CSR walk (2 to 8 right-hand sides) or
//! cuSPARSE, whichever is faster.
//!
//! [`Engine::prepare_spmv`](crate::Engine::prepare_spmv) builds bitBSR once and, on a GPU, *tunes*: it times cuSPARSE CSR SpMV
//! (SpMM for n > 1) at each of its CSR algorithms ([`CusparseSpmvAlg::candidates`]), for n > 1 our
//! CSR walks ([`CsrSpmv`]: f32 products on the same CSR arrays, each [`CsrWalk`] at each budget of [`CSR_CHUNKS`](tcsparse_gpu::spmv::csr::CSR_CHUNKS))
//! and our bitBSR kernels (each allowed tile storage × tensor-core MMA or the CUDA-core
//! walk — every layout for one right-hand side, the set-bit walks [`MULTI_LAYOUTS`](tcsparse_gpu::spmv::MULTI_LAYOUTS) for 2 to 8; the
//! tensor-core walk [`TC_LAYOUTS`](tcsparse_gpu::spmv::TC_LAYOUTS) only on the MMA kernels' storages; never [`UNTUNED_LAYOUTS`](tcsparse_gpu::spmv::UNTUNED_LAYOUTS) — ×
//! tile budgets per half) inside CUDA graphs and keeps the
//! fastest, so the prepared product is never slower than cuSPARSE (up to timing noise). Precision
//! ([`Precision`](crate::Precision); 3×TF32 is refused):
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
//!
//! The room has the parts of every operation: `options` ([`SpmvOptions`]), `prepare`
//! ([`Engine::prepare_spmv`](crate::Engine::prepare_spmv): the CPU path and the untuned walk), `tune` (the tuned candidates,
//! each timed inside CUDA graphs, the fastest kept) and `run` (the products).

mod options;
mod prepare;
mod run;
mod tune;

pub use options::{SpmvOptions, SpmvOptionsBuilder};
pub use tune::SPMV_TUNED_CHUNKS;

use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr_device::{DeviceBitBsr, TileStorage};
use tcsparse_gpu::Gpu;
use tcsparse_gpu::spmv::BitBsrSpmv;
use tcsparse_gpu::spmv::baseline::{CusparseSpmvAlg, CusparseSpmvGraphable};
use tcsparse_gpu::spmv::csr::{CsrSpmv, CsrWalk};
use tcsparse_planner::work::spmv::SpmvWork;

use crate::Error;

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

pub(super) enum Exec {
    Ours(Box<BitBsrSpmv>),
    Csr(Box<CsrSpmv>),
    Cusparse(Box<CusparseSpmvGraphable>),
    Cpu(Box<CpuSpmv>),
}

/// The CPU path: the kernel's bitBSR walk, or f32 CSR at precision F32.
pub(super) struct CpuSpmv {
    dev: Option<DeviceBitBsr>,
    work: Option<SpmvWork>,
    csr: Csr,
}

/// A matrix prepared for SpMV ([`Engine::prepare_spmv`](crate::Engine::prepare_spmv)).
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

/// A layout's error as the facade's.
pub(super) fn fmt_err(e: impl std::fmt::Display) -> Error {
    Error::Format(e.to_string())
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
    /// Right-hand sides per call (columns of X and y).
    pub fn n(&self) -> usize {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Precision};
    use tcsparse_formats::csr::csr_from_triplets;
    use tcsparse_formats::reference::spmm_f64;

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
        for prec in [Precision::F16, Precision::Tf32, Precision::F32] {
            for n in [1, 5, 8] {
                let opts = SpmvOptions::builder()
                    .precision(prec)
                    .n(n)
                    .chunk_tiles(2)
                    .build();
                let mut p = engine.prepare_spmv(&a, &opts).unwrap();
                let x: Vec<f32> = (0..61 * n).map(|i| (i % 11) as f32 / 5.0 - 1.0).collect();
                let mut y = vec![f32::NAN; 45 * n];
                p.spmv(2.0, &x, 0.0, &mut y).unwrap();
                let want = spmm_f64(&a, &x, n, n, false);
                let scale = spmm_f64(&a, &x, n, n, true);
                for i in 0..y.len() {
                    let bound = prec.spmv_bound() * 2.0 * scale[i];
                    assert!(
                        (y[i] as f64 - 2.0 * want[i]).abs() <= bound,
                        "{prec:?} n {n} y[{i}] = {} want {}",
                        y[i],
                        2.0 * want[i]
                    );
                }
                let expect_cpu = match prec {
                    Precision::F32 => SpmvKernel::CpuCsr,
                    Precision::F16 => SpmvKernel::CpuBitBsr {
                        storage: TileStorage::F16,
                    },
                    _ => SpmvKernel::CpuBitBsr {
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
            let opts = SpmvOptions::builder()
                .precision(Precision::F16)
                .tune(tune)
                .build();
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
                    (y[i] as f64 - want[i]).abs() <= Precision::F16.spmv_bound() * scale[i],
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
        for opts in [
            SpmvOptions::builder().n(9).build(),
            SpmvOptions::builder().precision(Precision::Tf32x3).build(),
        ] {
            assert!(matches!(
                engine.prepare_spmv(&a, &opts),
                Err(Error::InvalidArgs(_))
            ));
        }
        let mut p = engine.prepare_spmv(&a, &SpmvOptions::default()).unwrap();
        let mut y = vec![0f32; 45];
        assert!(p.spmv(1.0, &[0.0; 60], 0.0, &mut y).is_err());
        assert!(Precision::parse("bf16").is_err());
        assert_eq!(Precision::parse("F16").unwrap(), Precision::F16);
    }
}
