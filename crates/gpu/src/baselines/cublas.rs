//! cuBLAS baselines: dense SGEMM (f32 CUDA cores) and TF32 tensor-core GEMM, with a row-major
//! convenience wrapper over cudarc's safe `CudaBlas` (column-major underneath).

use cudarc::cublas::sys as cb;
use cudarc::cublas::{Gemm, GemmConfig};
use cudarc::driver::CudaSlice;

use crate::{Gpu, GpuError};

/// Arithmetic of a GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmPrecision {
    /// f32 on CUDA cores (`CUBLAS_DEFAULT_MATH`, no tensor cores).
    F32,
    /// f32 in/out, TF32 tensor-core multiply, f32 accumulate (`CUBLAS_TF32_TENSOR_OP_MATH`).
    Tf32,
}

/// A cuBLAS handle on the [`Gpu`]'s stream.
pub struct Cublas {
    blas: super::BlasHandle,
    math: Option<GemmPrecision>,
}

impl Cublas {
    /// Creates a handle bound to [`Gpu::stream`].
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        Ok(Self {
            blas: super::BlasHandle::new(gpu)?,
            math: None,
        })
    }

    fn set_math(&mut self, p: GemmPrecision) -> Result<(), GpuError> {
        if self.math == Some(p) {
            return Ok(());
        }
        let mode = match p {
            GemmPrecision::F32 => cb::cublasMath_t::CUBLAS_DEFAULT_MATH,
            GemmPrecision::Tf32 => cb::cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
        };
        // SAFETY: the handle is live (owned by `self.blas`).
        unsafe { cb::cublasSetMathMode(*self.blas.handle(), mode) }.result()?;
        self.math = Some(p);
        Ok(())
    }

    /// Enqueues row-major `C = α·A·B + β·C` with A `m × k`, B `k × n`, C `m × n` (leading dimensions
    /// k, n, n). β = 0 never reads C.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_row_major(
        &mut self,
        precision: GemmPrecision,
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        beta: f32,
        c: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        let max = i32::MAX as usize;
        if m > max || n > max || k > max {
            return Err(GpuError::Invalid(format!("GEMM {m}×{n}×{k} exceeds i32")));
        }
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err(GpuError::Invalid(format!(
                "GEMM {m}×{n}×{k}: A, B, C need {}, {}, {} elements, got {}, {}, {}",
                m * k,
                k * n,
                m * n,
                a.len(),
                b.len(),
                c.len()
            )));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        self.set_math(precision)?;
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: swap the operands and m/n.
        let cfg = GemmConfig {
            transa: cb::cublasOperation_t::CUBLAS_OP_N,
            transb: cb::cublasOperation_t::CUBLAS_OP_N,
            m: n as i32,
            n: m as i32,
            k: k as i32,
            alpha,
            lda: n.max(1) as i32,
            ldb: k.max(1) as i32,
            beta,
            ldc: n.max(1) as i32,
        };
        // SAFETY: column-major Bᵀ is n×k with ld n (k·n elements ≤ b.len()), Aᵀ is k×m with ld k
        // (m·k ≤ a.len()), Cᵀ is n×m with ld n (m·n ≤ c.len()): all checked above; C is borrowed
        // mutably; the call is queued on the Gpu's stream.
        unsafe { self.blas.gemm(cfg, b, a, c) }?;
        Ok(())
    }
}
