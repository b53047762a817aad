//! [`Engine::prepare_spmv`]: bitBSR built, the CPU path or, on a GPU, the untuned walk or the
//! tuned choice of `tune.rs`.

use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bitbsr_device::{DeviceBitBsr, TileStorage, f16_unfit_tile_row};
use tcsparse_gpu::spmv::{
    BitBsrSpmv, DEFAULT_CORE_LAYOUT, MAX_RHS, MULTI_LAYOUT, TC_LAYOUTS, tuned_walk_layouts,
};
use tcsparse_planner::work::spmv::spmv_work;

use super::options::{core_storages, storages};
use super::{CpuSpmv, Exec, PreparedSpmv, SpmvKernel, SpmvOptions, fmt_err};
use crate::{Engine, Error, Precision};

impl Engine {
    /// Prepares `a` for SpMV with `opts.n` right-hand sides (see the module docs).
    pub fn prepare_spmv(&self, a: &Csr, opts: &SpmvOptions) -> Result<PreparedSpmv, Error> {
        let n = opts.n;
        if !matches!(
            opts.precision,
            Precision::F16 | Precision::Tf32 | Precision::F32
        ) {
            return Err(Error::InvalidArgs(format!(
                "SpMV runs in F16, TF32 or F32, not {}",
                opts.precision
            )));
        }
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
        let storages = allowed(storages(opts.precision));
        let core_storages = allowed(core_storages(opts.precision));
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
        // Tuning: every candidate timed in CUDA graphs, fastest kept.
        let (exec, kernel, bytes, samples) = super::tune::tuned(
            gpu,
            a,
            &bsr,
            n,
            &storages,
            &core_storages,
            &core_layouts,
            tc_layouts,
            csr_bytes,
        )?;
        let mut p = base(kernel, exec, bytes);
        p.samples = samples;
        Ok(p)
    }
}
