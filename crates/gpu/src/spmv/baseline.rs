//! The cuSPARSE CSR baseline of SpMV that can be queued on any stream (for CUDA graphs): `cusparseSpMV`
//! for one right-hand side, `cusparseSpMM` (row-major X and y) for 2 to 8, each with any of its CSR
//! algorithms ([`CusparseSpmvAlg`]: the bench and the facade time them all and keep the fastest).

use std::ffi::c_void;

use cudarc::cusparse::sys as cs;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};

use super::graph::RawCall;
use crate::baselines::cusparse::{CusparseCsr, CusparseHandle, DnMat, DnVec, SpmmCall, ok};
use crate::{Gpu, GpuError};

const OP_N: cs::cusparseOperation_t = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;

/// The descriptor of X or y: a vector for one right-hand side (`cusparseSpMV`), a row-major
/// matrix for more (`cusparseSpMM`).
enum DnOperand {
    Vec(DnVec),
    Mat(DnMat),
}

impl DnOperand {
    /// # Safety
    /// `ptr` must hold `rows·n` f32 whenever the descriptor is used.
    unsafe fn new(rows: usize, n: usize, ptr: u64) -> Result<Self, GpuError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            Ok(if n == 1 {
                DnOperand::Vec(DnVec::new(rows, ptr)?)
            } else {
                DnOperand::Mat(DnMat::new(rows, n, ptr)?)
            })
        }
    }

    /// # Safety
    /// As for [`DnOperand::new`].
    unsafe fn set(&self, ptr: u64) -> Result<(), GpuError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            match self {
                DnOperand::Vec(d) => d.set(ptr),
                DnOperand::Mat(d) => d.set(ptr),
            }
        }
    }
}

/// The SpMM call of `alg` on `handle` over A's descriptor `a` and the dense matrices `x`, `y`.
fn spmm_call(
    handle: cs::cusparseHandle_t,
    a: cs::cusparseSpMatDescr_t,
    x: &DnMat,
    y: &DnMat,
    alg: CusparseSpmvAlg,
) -> SpmmCall {
    SpmmCall {
        handle,
        a,
        b: x.0,
        c: y.0,
        alg: alg.spmm(),
    }
}

/// The cuSPARSE algorithm of a [`CusparseSpmvGraphable`]: `cusparseSpMVAlg_t` for one right-hand
/// side, `cusparseSpMMAlg_t` for more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CusparseSpmvAlg {
    /// `CUSPARSE_SPMV_ALG_DEFAULT` / `CUSPARSE_SPMM_ALG_DEFAULT`.
    Default,
    /// `CUSPARSE_SPMV_CSR_ALG1` / `CUSPARSE_SPMM_CSR_ALG1` (SpMM: with `cusparseSpMM_preprocess`).
    CsrAlg1,
    /// `CUSPARSE_SPMV_CSR_ALG2` (deterministic, merge-based) / `CUSPARSE_SPMM_CSR_ALG2`
    /// (row-major X and y).
    CsrAlg2,
    /// `CUSPARSE_SPMM_CSR_ALG3` (with `cusparseSpMM_preprocess`); SpMM only.
    CsrAlg3,
}

impl CusparseSpmvAlg {
    /// The algorithms cuSPARSE offers for a CSR product with `n` right-hand sides, default first.
    pub fn candidates(n: usize) -> &'static [CusparseSpmvAlg] {
        use CusparseSpmvAlg::*;
        if n == 1 {
            &[Default, CsrAlg1, CsrAlg2]
        } else {
            &[Default, CsrAlg1, CsrAlg2, CsrAlg3]
        }
    }

    /// cuSPARSE's name of the algorithm for `n` right-hand sides, e.g. `SPMM_CSR_ALG2`.
    pub fn name(self, n: usize) -> &'static str {
        use CusparseSpmvAlg::*;
        match (n == 1, self) {
            (true, Default) => "SPMV_ALG_DEFAULT",
            (true, CsrAlg1) => "SPMV_CSR_ALG1",
            (true, CsrAlg2) => "SPMV_CSR_ALG2",
            (true, CsrAlg3) => "SPMM_CSR_ALG3 (no SpMV algorithm)",
            (false, Default) => "SPMM_ALG_DEFAULT",
            (false, CsrAlg1) => "SPMM_CSR_ALG1",
            (false, CsrAlg2) => "SPMM_CSR_ALG2",
            (false, CsrAlg3) => "SPMM_CSR_ALG3",
        }
    }

    fn spmv(self) -> Result<cs::cusparseSpMVAlg_t, GpuError> {
        use cs::cusparseSpMVAlg_t as A;
        match self {
            CusparseSpmvAlg::Default => Ok(A::CUSPARSE_SPMV_ALG_DEFAULT),
            CusparseSpmvAlg::CsrAlg1 => Ok(A::CUSPARSE_SPMV_CSR_ALG1),
            CusparseSpmvAlg::CsrAlg2 => Ok(A::CUSPARSE_SPMV_CSR_ALG2),
            CusparseSpmvAlg::CsrAlg3 => Err(GpuError::Invalid(
                "cusparseSpMV has no CSR_ALG3 (one right-hand side)".into(),
            )),
        }
    }

    fn spmm(self) -> cs::cusparseSpMMAlg_t {
        use cs::cusparseSpMMAlg_t as A;
        match self {
            CusparseSpmvAlg::Default => A::CUSPARSE_SPMM_ALG_DEFAULT,
            CusparseSpmvAlg::CsrAlg1 => A::CUSPARSE_SPMM_CSR_ALG1,
            CusparseSpmvAlg::CsrAlg2 => A::CUSPARSE_SPMM_CSR_ALG2,
            CusparseSpmvAlg::CsrAlg3 => A::CUSPARSE_SPMM_CSR_ALG3,
        }
    }

    /// Whether cuSPARSE documents a gain from `cusparseSpMM_preprocess` (SpMM ALG1 and ALG3).
    fn preprocessed(self) -> bool {
        matches!(self, CusparseSpmvAlg::CsrAlg1 | CusparseSpmvAlg::CsrAlg3)
    }
}

/// A prepared cuSPARSE CSR product `y = α·A·X + β·y` with `n` right-hand sides (X: `K × n`, y:
/// `M × n`, row-major), queueable on any stream of the context.
pub struct CusparseSpmvGraphable {
    x: DnOperand,
    y: DnOperand,
    spmat: SpMatDescr,
    handle: CusparseHandle,
    a: CusparseCsr,
    n: usize,
    alg: CusparseSpmvAlg,
    workspace: CudaSlice<u8>,
    gpu: Gpu,
}

// SAFETY: the descriptors are only used through &mut self / &self of the single owner; cuSPARSE
// handles may move between threads when calls do not overlap (as `CusparseHandle`).
unsafe impl Send for CusparseSpmvGraphable {}

/// An owned cuSPARSE CSR descriptor, destroyed when dropped: on every error path of
/// [`CusparseSpmvGraphable::with_alg`] as on the product's own drop. In the product it is declared
/// before the matrix whose buffers it points at, so it is dropped first.
struct SpMatDescr(cs::cusparseSpMatDescr_t);

impl Drop for SpMatDescr {
    fn drop(&mut self) {
        // SAFETY: a descriptor from `CusparseCsr::new_descriptor`, destroyed once, while the
        // matrix's buffers are alive (the caller's borrow in `with_alg`; in the product, the
        // matrix clone dropped after this field).
        let _ = unsafe { cs::cusparseDestroySpMat(self.0) };
    }
}

impl CusparseSpmvGraphable {
    /// Prepares the product for `n` (1..=8 is what the SpMV room uses; any n ≥ 1 works) with
    /// cuSPARSE's default algorithm.
    pub fn new(gpu: &Gpu, a: &CusparseCsr, n: usize) -> Result<Self, GpuError> {
        Self::with_alg(gpu, a, n, CusparseSpmvAlg::Default)
    }

    /// Prepares the product for `n` with algorithm `alg` (one of
    /// [`CusparseSpmvAlg::candidates`]`(n)`; an error for `CsrAlg3` at n = 1), running
    /// `cusparseSpMM_preprocess` where the algorithm gains from it.
    pub fn with_alg(
        gpu: &Gpu,
        a: &CusparseCsr,
        n: usize,
        alg: CusparseSpmvAlg,
    ) -> Result<Self, GpuError> {
        if n == 0 || n > i32::MAX as usize {
            return Err(GpuError::Invalid(format!("n = {n} must be ≥ 1")));
        }
        let handle = CusparseHandle::new(gpu)?;
        let s = gpu.stream();
        let spmat = SpMatDescr(a.new_descriptor()?);
        let tmp_x: CudaSlice<f32> = gpu.alloc_zeros((a.cols() * n).max(1))?;
        let mut tmp_y: CudaSlice<f32> = gpu.alloc_zeros((a.rows() * n).max(1))?;
        let (px, _gx) = tmp_x.device_ptr(s);
        let (py, _gy) = tmp_y.device_ptr_mut(s);
        // SAFETY: the temporaries hold cols·n and rows·n f32 while used here; every later use
        // re-points the descriptors (`enqueue`).
        let (x, y) = unsafe {
            (
                DnOperand::new(a.cols(), n, px)?,
                DnOperand::new(a.rows(), n, py)?,
            )
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let mut size = 0usize;
        // SAFETY: live handle and descriptors, host scalars, `size` valid for writes.
        unsafe {
            match (&x, &y) {
                (DnOperand::Vec(dx), DnOperand::Vec(dy)) => ok(
                    "cusparseSpMV_bufferSize",
                    cs::cusparseSpMV_bufferSize(
                        handle.raw(),
                        OP_N,
                        &alpha as *const f32 as *const c_void,
                        spmat.0,
                        dx.0,
                        &beta as *const f32 as *const c_void,
                        dy.0,
                        cs::cudaDataType::CUDA_R_32F,
                        alg.spmv()?,
                        &mut size,
                    ),
                )?,
                (DnOperand::Mat(dx), DnOperand::Mat(dy)) => {
                    size = spmm_call(handle.raw(), spmat.0, dx, dy, alg).buffer_size()?;
                }
                _ => return Err(GpuError::Invalid("mixed dense descriptors".into())),
            }
        }
        let workspace: CudaSlice<u8> = gpu.alloc_zeros(size.max(1))?;
        if let (DnOperand::Mat(dx), DnOperand::Mat(dy), true) = (&x, &y, alg.preprocessed()) {
            let (pw, _gw) = workspace.device_ptr(s);
            // SAFETY: live handle and descriptors pointing at the temporaries, host scalars, the
            // workspace sized by cuSPARSE for this matrix, n and algorithm; on the GPU's stream.
            unsafe {
                ok(
                    "cusparseSetStream",
                    cs::cusparseSetStream(handle.raw(), s.cu_stream() as cs::cudaStream_t),
                )?;
                spmm_call(handle.raw(), spmat.0, dx, dy, alg).preprocess(pw)?;
            }
        }
        gpu.synchronize()?;
        drop((_gx, _gy));
        Ok(Self {
            x,
            y,
            spmat,
            handle,
            a: a.clone(),
            n,
            alg,
            workspace,
            gpu: gpu.clone(),
        })
    }

    /// Right-hand sides.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The cuSPARSE algorithm this product runs.
    pub fn alg(&self) -> CusparseSpmvAlg {
        self.alg
    }
}

impl super::graph::GraphSpmv for CusparseSpmvGraphable {
    fn shape(&self) -> (usize, usize) {
        (self.a.rows(), self.a.cols())
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Its own width only ([`CusparseSpmvGraphable::n`]): a call at another is refused.
    fn max_width(&self) -> usize {
        self.n
    }

    /// Queues the product on `stream` with raw pointers.
    ///
    /// # Safety
    /// `x` must hold `cols·n` and `y` `rows·n` f32 of this context, alive and not written by others
    /// until the call completes; `stream` must be a live stream of this context ordered after
    /// [`CusparseSpmvGraphable::new`]; no concurrent call on this value.
    unsafe fn enqueue_raw(&self, call: RawCall) -> Result<(), GpuError> {
        let RawCall {
            stream,
            alpha,
            x,
            beta,
            y,
            n,
        } = call;
        if n != self.n {
            return Err(GpuError::Invalid(format!(
                "this cuSPARSE product was prepared for n = {}, not {n}",
                self.n
            )));
        }
        let (pw, _gw) = self.workspace.device_ptr(self.gpu.stream());
        // SAFETY: caller's contract for x, y and the stream; workspace sized by cuSPARSE for this
        // matrix and n; the handle's stream is set for this call (every call sets it).
        unsafe {
            ok(
                "cusparseSetStream",
                cs::cusparseSetStream(self.handle.raw(), stream as cs::cudaStream_t),
            )?;
            self.x.set(x)?;
            self.y.set(y)?;
            match (&self.x, &self.y) {
                (DnOperand::Vec(dx), DnOperand::Vec(dy)) => ok(
                    "cusparseSpMV",
                    cs::cusparseSpMV(
                        self.handle.raw(),
                        OP_N,
                        &alpha as *const f32 as *const c_void,
                        self.spmat.0,
                        dx.0,
                        &beta as *const f32 as *const c_void,
                        dy.0,
                        cs::cudaDataType::CUDA_R_32F,
                        self.alg.spmv()?,
                        pw as *mut c_void,
                    ),
                ),
                (DnOperand::Mat(dx), DnOperand::Mat(dy)) => {
                    spmm_call(self.handle.raw(), self.spmat.0, dx, dy, self.alg)
                        .run(alpha, beta, pw)
                }
                _ => Err(GpuError::Invalid("mixed dense descriptors".into())),
            }
        }
    }
}
