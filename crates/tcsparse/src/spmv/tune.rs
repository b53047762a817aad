//! The tuned SpMV preparation: the candidates (cuSPARSE at each of its algorithms, our CSR walks
//! for 2–8 right-hand sides, our bitBSR kernels at each storage, walk and tile budget), each timed
//! in full inside CUDA graphs by one [`GraphTimer`], the fastest kept by the crate's one
//! [`Fastest`].
//!
//! SpMM's probing harness (`spmm/tune.rs`: a few host-timed launches per candidate, only the
//! fastest probe of a family timed in full) is not used here: SpMV's calls are short enough that
//! only graphs of many calls time them (cuSPARSE's per-call floor would hide the kernels), and
//! every candidate is timed in full, so the choice does not depend on a probe.

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bitbsr_device::{DeviceBitBsr, TileStorage};
use tcsparse_gpu::baselines::cusparse::CusparseCsr;
use tcsparse_gpu::spmv::BitBsrSpmv;
use tcsparse_gpu::spmv::baseline::{CusparseSpmvAlg, CusparseSpmvGraphable};
use tcsparse_gpu::spmv::csr::{CSR_CHUNKS, CsrSpmv};
use tcsparse_gpu::spmv::graph::{GraphSpmv, time_spmv};
use tcsparse_gpu::{Gpu, GpuError};

use super::{Exec, SpmvKernel, SpmvSample, fmt_err};
use crate::Error;
use crate::tune::Fastest;

/// Tile budgets per half tried when tuning (and, for the layouts of
/// [`tcsparse_gpu::spmv::WAVE_FITTED_LAYOUTS`], the matrix's wave-fitted budget:
/// [`BitBsrSpmv::tuning_chunks`]).
pub const SPMV_TUNED_CHUNKS: [u32; 4] = [4, 8, 32, 128];

/// Calls per CUDA graph, and timed graphs per candidate (median kept).
const GRAPH_LAUNCHES: usize = 20;
const GRAPH_SAMPLES: usize = 5;

/// Times every candidate the same way: `y = A·X` on the tuning's X and y, `n` right-hand sides,
/// the median per call of [`GRAPH_SAMPLES`] graphs of [`GRAPH_LAUNCHES`] calls.
struct GraphTimer<'g> {
    gpu: &'g Gpu,
    x: CudaSlice<f32>,
    y: CudaSlice<f32>,
    n: usize,
}

impl GraphTimer<'_> {
    /// Median ms per call of `op`.
    fn ms(&mut self, op: &dyn GraphSpmv) -> Result<f64, GpuError> {
        let t = time_spmv(
            self.gpu,
            op,
            &self.x,
            &mut self.y,
            self.n,
            GRAPH_LAUNCHES,
            GRAPH_SAMPLES,
        )?;
        Ok(t.median_ms)
    }
}

/// Times every candidate of `a` (bitBSR `bsr`) at `n` right-hand sides and returns the fastest:
/// its execution, its name, the bytes one call moves at least, and every sample.
#[allow(clippy::too_many_arguments)]
pub(super) fn tuned(
    gpu: &Gpu,
    a: &Csr,
    bsr: &BitBsr,
    n: usize,
    storages: &[TileStorage],
    core_storages: &[TileStorage],
    core_layouts: &[&'static str],
    tc_layouts: &[&'static str],
    csr_bytes: usize,
) -> Result<(Exec, SpmvKernel, usize, Vec<SpmvSample>), Error> {
    let x: Vec<f32> = (0..a.cols() * n)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect();
    let mut timer = GraphTimer {
        gpu,
        x: gpu.upload(&x)?,
        y: gpu.alloc_zeros((a.rows() * n).max(1))?,
        n,
    };
    let mut samples = Vec::new();
    let ca = CusparseCsr::new(gpu, a)?;
    // cuSPARSE's algorithms, each timed; the default's failure is an error, another's skips it.
    let mut cusparse_best: Fastest<CusparseSpmvGraphable> = Fastest::new();
    for &alg in CusparseSpmvAlg::candidates(n) {
        let timed =
            CusparseSpmvGraphable::with_alg(gpu, &ca, n, alg).and_then(|c| Ok((timer.ms(&c)?, c)));
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
        cusparse_best.offer(ms, || c);
    }
    let (ms, c) = cusparse_best
        .into_inner()
        .ok_or_else(|| Error::Unavailable("no cuSPARSE algorithm could run".into()))?;
    let alg = c.alg();
    // The kept product: its execution, its name and the bytes one call moves at least.
    let mut best: Fastest<(Exec, SpmvKernel, usize)> = Fastest::new();
    best.offer(ms, || {
        (
            Exec::Cusparse(Box::new(c)),
            SpmvKernel::Cusparse { alg, n },
            csr_bytes,
        )
    });
    // Our CSR walks (n ≥ 2, f32 products: every precision), each at each budget.
    if n >= 2 {
        let mut k = CsrSpmv::new(gpu, a, ca.device(), CSR_CHUNKS[0])?;
        let (ms, walk, chunk) = k.tune(n, |k| {
            let ms = timer.ms(k)?;
            samples.push(SpmvSample {
                kernel: SpmvKernel::Csr {
                    chunk_nnz: k.chunk_nnz(),
                    walk: k.walk(),
                },
                ms,
            });
            Ok::<f64, Error>(ms)
        })?;
        let bytes = k.min_bytes(n);
        best.offer(ms, || {
            (
                Exec::Csr(Box::new(k)),
                SpmvKernel::Csr {
                    chunk_nnz: chunk,
                    walk,
                },
                bytes,
            )
        });
    }
    // Each storage once (uploaded once), with the MMA kernel and/or the CUDA-core walk.
    let mut all: Vec<TileStorage> = storages.to_vec();
    for &s in core_storages {
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
        let dev = DeviceBitBsr::encode(bsr, st).map_err(fmt_err)?;
        let mut k = BitBsrSpmv::with_chunk(gpu, &dev, SPMV_TUNED_CHUNKS[0])?;
        // The walks for n from their module before any graph is captured.
        k.load_walks(n)?;
        let mut kbest: Fastest<(u32, Option<&'static str>)> = Fastest::new();
        for core in modes {
            k.set_core_layout(core)?;
            for chunk in k.tuning_chunks(core, &SPMV_TUNED_CHUNKS)? {
                k.set_chunk(chunk)?;
                let ms = timer.ms(&k)?;
                samples.push(SpmvSample {
                    kernel: SpmvKernel::BitBsr {
                        storage: st,
                        chunk_tiles: chunk,
                        core,
                    },
                    ms,
                });
                kbest.offer(ms, || (chunk, core));
            }
        }
        if let Some((ms, (chunk, core))) = kbest.into_inner()
            && best.beats(ms)
        {
            k.set_chunk(chunk)?;
            k.set_core_layout(core)?;
            let bytes = k.min_bytes(n);
            best.offer(ms, || {
                (
                    Exec::Ours(Box::new(k)),
                    SpmvKernel::BitBsr {
                        storage: st,
                        chunk_tiles: chunk,
                        core,
                    },
                    bytes,
                )
            });
        }
    }
    drop(timer);
    let (_, (exec, kernel, bytes)) = best
        .into_inner()
        .ok_or_else(|| Error::Unavailable("no SpMV candidate could run".into()))?;
    Ok((exec, kernel, bytes, samples))
}
