//! Our CUDA-core CSR kernel (f32; `tcsparse_gpu::spmm::csr`): warp items balanced by nonzeros,
//! long rows split across warps with atomics. Requested as `csr` (at the budget of
//! `Balance::NnzPerWarp`, else the kernel's default); tuned at each of [`CSR_TUNED_CHUNKS`]. The
//! planner's model picks it for CUDA-core plans (`choose.rs`).

use std::time::Instant;

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_gpu::spmm::csr::{CsrSpmm, CsrWorkPlan};
use tcsparse_gpu::{DeviceProduct, Gpu};

use super::{
    Build, Choice, EarlyWork, FamilyDevice, FamilyFacts, FamilyKernel, HalfOperands, HalfProduct,
    SpmmFamily,
};
use crate::spmm::codec::{Reader, StaleOrCorrupt, put_u32};
use crate::spmm::tune::Tuning;
use crate::{Balance, Error, ExecKernel, KernelRequest, Precision};

/// Nonzero budgets per warp item a tuned preparation times for the CSR kernel.
pub const CSR_TUNED_CHUNKS: [u32; 3] = [64, 256, 1024];

/// Nonzero budgets per warp item an f16 / bf16 preparation times for the CSR kernel: finer than
/// [`CSR_TUNED_CHUNKS`], as the 16-bit gathers move half the bytes per warp (on the H200's shared
/// datasets, timed at [64, 256, 1024], the f16 / bf16 tuning kept the CSR kernel in 27 / 28 of 45
/// cases, at 64 in 25 of them each and never at 1024; 2026-11-29, bundle of d358f99).
pub const CSR_HALF_TUNED_CHUNKS: [u32; 3] = [16, 64, 256];

/// The CUDA-core CSR kernel (f32) as [`ExecKernel::CsrCuda`] runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsrKernel {
    /// Most nonzeros one warp item holds (longer rows are split across warps).
    pub chunk_nnz: u32,
}

impl std::fmt::Display for CsrKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CSR (CUDA cores, ≤ {} nonzeros per warp)",
            self.chunk_nnz
        )
    }
}

/// The family ([`KernelRequest::Csr`]: warp items of `Balance::NnzPerWarp`'s budget, else
/// `tcsparse_gpu::csr_spmm::DEFAULT_CHUNK_NNZ`).
pub(crate) struct Family;

impl SpmmFamily for Family {
    fn facts(&self) -> &'static FamilyFacts {
        &FamilyFacts {
            tag: 2,
            requests: &[("csr", KernelRequest::Csr)],
            precision: Precision::F32,
            original_order: true,
        }
    }

    fn choose(&self, request: KernelRequest, c: &Choice<'_>) -> Option<(ExecKernel, String)> {
        if request != KernelRequest::Csr {
            return None;
        }
        let chunk_nnz = match c.opts.balance {
            Balance::NnzPerWarp(k) => k.max(1),
            _ => tcsparse_gpu::csr_spmm::DEFAULT_CHUNK_NNZ,
        };
        Some((
            ExecKernel::CsrCuda(CsrKernel { chunk_nnz }),
            format!("CSR kernel requested (planner: {})", c.reason),
        ))
    }

    /// The budget, u32 (at least 1).
    fn decode(&self, r: &mut Reader<'_>) -> Result<ExecKernel, StaleOrCorrupt> {
        let chunk_nnz = r.u32()?;
        if chunk_nnz == 0 {
            return Err("corrupt: CSR chunk of 0 nonzeros".into());
        }
        Ok(ExecKernel::CsrCuda(CsrKernel { chunk_nnz }))
    }

    #[cfg(test)]
    fn examples(&self) -> Vec<ExecKernel> {
        [1, 64, 256, 1024, u32::MAX]
            .map(|chunk_nnz| ExecKernel::CsrCuda(CsrKernel { chunk_nnz }))
            .to_vec()
    }
}

impl FamilyKernel for CsrKernel {
    fn family(&self) -> &'static dyn SpmmFamily {
        &Family
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_u32(out, self.chunk_nnz);
    }

    /// The work list, packed and uploaded (and the modules loaded) while the matrix's values go
    /// up (R-MAT scale 20: 2.3 ms off a plan-cache hit's critical path).
    fn early(&self, gpu: &Gpu, a: &Csr) -> Option<EarlyWork> {
        CsrWorkPlan::new(gpu, a, self.chunk_nnz)
            .ok()
            .map(|w| Box::new(w) as EarlyWork)
    }

    fn build(&self, b: &mut Build<'_>) -> Result<Box<dyn FamilyDevice>, Error> {
        let work = b
            .early
            .take()
            .and_then(|w| w.downcast::<CsrWorkPlan>().ok());
        let k = match (b.device.take(), work) {
            (Some(d), Some(w)) if w.chunk_nnz() == self.chunk_nnz.max(1) => {
                CsrSpmm::with_work_on(b.gpu, b.a, *w, d)?
            }
            (Some(d), _) => CsrSpmm::with_chunk_on(b.gpu, b.a, self.chunk_nnz, d)?,
            (None, _) => CsrSpmm::with_chunk(b.gpu, b.a, self.chunk_nnz)?,
        };
        Ok(Box::new(k))
    }
}

impl FamilyDevice for CsrSpmm {
    fn kernel(&self) -> ExecKernel {
        ExecKernel::CsrCuda(CsrKernel {
            chunk_nnz: self.chunk_nnz(),
        })
    }

    fn set_values(&mut self, _gpu: &Gpu, a: &Csr) -> Result<(), Error> {
        Ok(CsrSpmm::set_values(self, a.data())?)
    }

    fn half(&mut self) -> Option<&mut dyn HalfProduct> {
        Some(self)
    }
}

/// `csr_spmm_f16` / `_bf16`: A's f32 values, f32 accumulation ([`CsrSpmm::enqueue_half`]).
impl HalfProduct for CsrSpmm {
    fn enqueue_typed(
        &mut self,
        alpha: f32,
        beta: f32,
        operands: HalfOperands<'_, '_>,
    ) -> Result<(), Error> {
        Ok(match operands {
            HalfOperands::F16(b, c) => self.enqueue_half(alpha, b, beta, c),
            HalfOperands::Bf16(b, c) => self.enqueue_half(alpha, b, beta, c),
        }?)
    }
}

/// A CSR matrix's arrays on the device (indptr, indices, values).
pub(in crate::spmm) type DeviceArrays<'a> =
    (&'a CudaSlice<u32>, &'a CudaSlice<u32>, &'a CudaSlice<f32>);

/// The tuning candidates: the kernel on `a` (its arrays copied on the device from `on_device`
/// when given, else uploaded) at each of [`CSR_TUNED_CHUNKS`]; returns the kernel set to the
/// finalist and its full time (`None` when `a` has no rows or no budget came close to cuSPARSE).
pub(in crate::spmm) fn tune(
    t: &mut Tuning,
    a: &Csr,
    on_device: Option<DeviceArrays>,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
) -> Result<Option<(f64, CsrSpmm)>, Error> {
    if a.rows() == 0 {
        return Ok(None);
    }
    let t0 = Instant::now();
    let mut dev = match on_device {
        Some(arrays) => CsrSpmm::with_chunk_from_device(t.gpu, a, CSR_TUNED_CHUNKS[0], arrays)?,
        None => CsrSpmm::with_chunk(t.gpu, a, CSR_TUNED_CHUNKS[0])?,
    };
    tracing::debug!(
        "tuning: CSR kernel set up in {:.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let names: Vec<String> = CSR_TUNED_CHUNKS
        .iter()
        .map(|&chunk_nnz| ExecKernel::CsrCuda(CsrKernel { chunk_nnz }).to_string())
        .collect();
    let found = t.family(
        &names,
        |_, _| true,
        |i| {
            dev.set_chunk(CSR_TUNED_CHUNKS[i])?;
            Ok(dev.run(1.0, b, 0.0, c, n)?)
        },
    )?;
    let Some((i, ms)) = found else {
        return Ok(None);
    };
    dev.set_chunk(CSR_TUNED_CHUNKS[i])?;
    Ok(Some((ms, dev)))
}
