//! cuSPARSE SpMM in a 16-bit type: A's values, B and C in f16 (`CUDA_R_16F`) or bf16
//! (`CUDA_R_16BF`), compute type `CUDA_R_32F` (cuSPARSE's mixed-precision SpMM), CSR with 32-bit
//! indices, row-major B and C: the same-precision baseline of the f16 / bf16 row-tile kernels.
//! A's values are rounded to the type on upload as `half` rounds, unscaled (as a cuSPARSE user
//! would give them; the row-tile kernels' f16 upload scales them by a power of two first); the
//! row offsets and column indices are the f32 matrix's ([`CusparseCsr`],
//! shared). An algorithm cuSPARSE refuses in these types fails in [`CusparseSpmmHalf::new`] with
//! its status, before any product.

use cudarc::cusparse::sys as cs;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use std::marker::PhantomData;

use super::{CusparseCsr, CusparseHandle, DenseSpmm, DnMat, SpmmAlg, check_width, create_csr};
use crate::schedule::upload_nonempty;
use crate::spmm::row_tile::{RowTileArith, RowTileHalf};
use crate::{Gpu, GpuError};

/// cuSPARSE's name of `H`.
fn cuda_type<H: RowTileHalf>() -> cs::cudaDataType {
    match H::ARITH {
        RowTileArith::Bf16 => cs::cudaDataType::CUDA_R_16BF,
        _ => cs::cudaDataType::CUDA_R_16F,
    }
}

/// A prepared cuSPARSE SpMM `C = α·A·B + β·C` with A, B and C in `H` (f32 compute) for one
/// matrix, one `n` and one algorithm: the descriptors, workspace and preprocessing are made once
/// in [`CusparseSpmmHalf::new`]; [`CusparseSpmmHalf::run`] points B's and C's descriptors at the
/// caller's buffers.
///
/// Invariant: `descr` points at `csr`'s row offsets and column indices and at `_values` (one `H`
/// per stored entry, at least one element), all held here and never written.
pub struct CusparseSpmmHalf<H: RowTileHalf> {
    // The sparse descriptor is destroyed in Drop, before the buffers it points at (fields).
    dense: DenseSpmm,
    descr: cs::cusparseSpMatDescr_t,
    csr: CusparseCsr,
    /// A's values in `H` (only the descriptor reads them).
    _values: CudaSlice<H>,
    _type: PhantomData<H>,
}

// SAFETY: the sparse descriptor is a host-side struct owned by this value and only used through
// it (the handle is Send, not Sync, and so is this type).
unsafe impl<H: RowTileHalf> Send for CusparseSpmmHalf<H> {}

impl<H: RowTileHalf> Drop for CusparseSpmmHalf<H> {
    fn drop(&mut self) {
        let _ = self.dense.handle.gpu.context().bind_to_thread();
        // SAFETY: created in `new`, destroyed once, before the buffers it points at (fields,
        // dropped after this body).
        let _ = unsafe { cs::cusparseDestroySpMat(self.descr) };
    }
}

impl<H: RowTileHalf> CusparseSpmmHalf<H> {
    /// Prepares the product of `csr` (its values `values`, f32 in CSR order, rounded to `H`
    /// here) with `n` dense columns under `alg`: descriptors, workspace and preprocessing (on
    /// temporary zero B and C).
    pub fn new(
        gpu: &Gpu,
        csr: &CusparseCsr,
        values: &[f32],
        n: usize,
        alg: SpmmAlg,
    ) -> Result<Self, GpuError> {
        check_width(n)?;
        if values.len() != csr.nnz() {
            return Err(GpuError::Invalid(format!(
                "{} values for a matrix with {} stored entries",
                values.len(),
                csr.nnz()
            )));
        }
        let (m, k) = (csr.rows(), csr.cols());
        let hv: Vec<H> = values.iter().map(|&v| H::from_f32(v)).collect();
        let values = upload_nonempty(gpu, &hv)?;
        let handle = CusparseHandle::new(gpu)?;
        let s = gpu.stream();
        let descr = {
            let (indptr, indices, _) = csr.buffers();
            let (p, _g1) = indptr.device_ptr(s);
            let (i, _g2) = indices.device_ptr(s);
            let (v, _g3) = values.device_ptr(s);
            // SAFETY: live device buffers of rows + 1, nnz and nnz (at least one) elements, the
            // values of type H, held by the returned value (csr, values) and never written; Drop
            // destroys the descriptor before they go.
            unsafe { create_csr((m, k, csr.nnz()), [p, i, v], cuda_type::<H>()) }?
        };
        let tmp_b: CudaSlice<H> = gpu.alloc_zeros((k * n).max(1))?;
        let mut tmp_c: CudaSlice<H> = gpu.alloc_zeros((m * n).max(1))?;
        let (pb, _gb) = tmp_b.device_ptr(s);
        let (pc, _gc) = tmp_c.device_ptr_mut(s);
        // SAFETY: tmp_b holds k·n and tmp_c m·n elements of H (at least 1), live until the
        // synchronize below; `run` re-points both descriptors before every later use.
        let made = unsafe {
            (
                DnMat::new_of(k, n, pb, cuda_type::<H>()),
                DnMat::new_of(m, n, pc, cuda_type::<H>()),
            )
        };
        let what = format_args!("{alg:?}, {:?}", H::ARITH);
        let dense = match made {
            // SAFETY: the dense descriptors point at tmp_b and tmp_c, live until `prepare`
            // has synchronized; `descr` is live.
            (Ok(b), Ok(c)) => unsafe {
                DenseSpmm::prepare(gpu, handle, descr, (b, c), n, alg, &what)
            },
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        drop((_gb, _gc));
        match dense {
            Ok(dense) => Ok(Self {
                dense,
                descr,
                csr: csr.clone(),
                _values: values,
                _type: PhantomData,
            }),
            Err(e) => {
                // SAFETY: created above, not yet owned by a value with a Drop.
                let _ = unsafe { cs::cusparseDestroySpMat(descr) };
                Err(e)
            }
        }
    }

    /// The algorithm.
    pub fn alg(&self) -> SpmmAlg {
        self.dense.alg
    }

    /// Rows and columns of A.
    pub fn shape(&self) -> (usize, usize) {
        (self.csr.rows(), self.csr.cols())
    }

    /// The GPU whose stream products are queued on.
    pub fn gpu(&self) -> &Gpu {
        self.csr.gpu()
    }

    /// Enqueues `C = α·A·B + β·C` (B: `cols × n`, C: `rows × n`, row-major, packed, in `H`;
    /// f32 compute). β = 0 never reads C.
    pub fn run<B: DevicePtr<H> + ?Sized, C: DevicePtrMut<H> + ?Sized>(
        &mut self,
        alpha: f32,
        b: &B,
        beta: f32,
        c: &mut C,
    ) -> Result<(), GpuError> {
        // SAFETY: `descr` lives as long as `self`, of `shape()`, with values in `H` like B's and
        // C's descriptors.
        unsafe { self.dense.run(self.descr, self.shape(), alpha, b, beta, c) }
    }
}
