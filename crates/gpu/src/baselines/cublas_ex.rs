//! cuBLAS `GemmEx` baselines for SpAMM: dense f16 GEMM with f32 accumulation (cuSpAMM's FP16
//! comparison) and f32 GEMM with `CUBLAS_COMPUTE_32F_FAST_TF32` (TF32 tensor cores), row-major.
//! (Kept apart from `cublas.rs`, which the facade re-layout moves.)

use cudarc::cublas::sys as cb;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use crate::{Gpu, GpuError};

/// Input type and compute mode of a [`CublasEx::gemm_row_major`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmExKind {
    /// f16 A and B (raw bits), f32 C, `CUBLAS_COMPUTE_32F`.
    F16,
    /// f32 A, B, C, `CUBLAS_COMPUTE_32F_FAST_TF32`.
    FastTf32,
    /// f32 A, B, C, `CUBLAS_COMPUTE_32F` (SGEMM).
    F32,
}

/// Operands of a `GemmEx`.
pub enum GemmExInput<'a> {
    /// f32 operands.
    F32(&'a CudaSlice<f32>, &'a CudaSlice<f32>),
    /// f16 operands (IEEE bits).
    F16(&'a CudaSlice<u16>, &'a CudaSlice<u16>),
}

/// A cuBLAS handle on the [`Gpu`]'s stream for `cublasGemmEx`.
pub struct CublasEx {
    gpu: Gpu,
    blas: super::BlasHandle,
}

impl CublasEx {
    /// Creates a handle bound to [`Gpu::stream`].
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        Ok(Self {
            gpu: gpu.clone(),
            blas: super::BlasHandle::new(gpu)?,
        })
    }

    /// Enqueues row-major `C = A·B` (A `m × k`, B `k × n`, C `m × n`; β = 0, C not read).
    /// The kind must match the input type (f16 inputs with [`GemmExKind::F16`] only).
    pub fn gemm_row_major(
        &mut self,
        kind: GemmExKind,
        m: usize,
        n: usize,
        k: usize,
        input: GemmExInput<'_>,
        c: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        let max = i32::MAX as usize;
        if m > max || n > max || k > max {
            return Err(GpuError::Invalid(format!("GEMM {m}×{n}×{k} exceeds i32")));
        }
        let (alen, blen) = match &input {
            GemmExInput::F32(a, b) => (a.len(), b.len()),
            GemmExInput::F16(a, b) => (a.len(), b.len()),
        };
        if alen < m * k || blen < k * n || c.len() < m * n {
            return Err(GpuError::Invalid(format!(
                "GEMM {m}×{n}×{k}: operands too short"
            )));
        }
        let f16_in = matches!(input, GemmExInput::F16(..));
        if f16_in != (kind == GemmExKind::F16) {
            return Err(GpuError::Invalid(format!(
                "GemmEx kind {kind:?} does not match the input type"
            )));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (dt_in, compute) = match kind {
            GemmExKind::F16 => (
                cb::cudaDataType::CUDA_R_16F,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
            GemmExKind::FastTf32 => (
                cb::cudaDataType::CUDA_R_32F,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            ),
            GemmExKind::F32 => (
                cb::cudaDataType::CUDA_R_32F,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            ),
        };
        let (alpha, beta) = (1f32, 0f32);
        let s = self.gpu.stream().clone();
        let (pa, pb, _ga, _gb) = match &input {
            GemmExInput::F32(a, b) => {
                let (pa, ga) = a.device_ptr(&s);
                let (pb, gb) = b.device_ptr(&s);
                (pa, pb, ga, gb)
            }
            GemmExInput::F16(a, b) => {
                let (pa, ga) = a.device_ptr(&s);
                let (pb, gb) = b.device_ptr(&s);
                (pa, pb, ga, gb)
            }
        };
        let (pc, _gc) = c.device_ptr_mut(&s);
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, m and n swapped.
        // SAFETY: the handle is live; Bᵀ (n × k, ld n), Aᵀ (k × m, ld k) and Cᵀ (n × m, ld n) lie
        // within the buffers (lengths checked above); alpha/beta are host f32 (default pointer
        // mode), matching CUBLAS_COMPUTE_32F*; the call is queued on the Gpu's stream.
        unsafe {
            cb::cublasGemmEx(
                *self.blas.handle(),
                cb::cublasOperation_t::CUBLAS_OP_N,
                cb::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                (&alpha as *const f32).cast(),
                pb as *const std::ffi::c_void,
                dt_in,
                n.max(1) as i32,
                pa as *const std::ffi::c_void,
                dt_in,
                k.max(1) as i32,
                (&beta as *const f32).cast(),
                pc as *mut std::ffi::c_void,
                cb::cudaDataType::CUDA_R_32F,
                n.max(1) as i32,
                compute,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .result()?;
        Ok(())
    }
}
