//! cuSPARSE's BSR SpMV (legacy `cusparseSbsrmv`), the baseline of block layouts: a CSR matrix
//! converted to row-major `block × block` blocks on the device.

use super::*;

/// A BSR matrix (row-major blocks of `block × block`, 32-bit indices) for `cusparseSbsrmv`.
///
/// Invariant: `row_ptr` has `mb+1` entries from 0 to `nnzb`, every block column `< nb`, and `values`
/// holds `nnzb·block²` f32 (checked in [`CusparseBsr::new`]).
pub struct CusparseBsr {
    descr: cs::cusparseMatDescr_t,
    handle: CusparseHandle,
    mb: usize,
    nb: usize,
    block: usize,
    nnzb: usize,
    row_ptr: CudaSlice<i32>,
    col_ind: CudaSlice<i32>,
    values: CudaSlice<f32>,
}

impl CusparseBsr {
    /// Builds BSR from CSR on the host (blocks stored row-major, zero-filled) and uploads it.
    pub fn from_csr(gpu: &Gpu, a: &Csr, block: usize) -> Result<Self, GpuError> {
        check_csr(a)?;
        if block == 0 {
            return Err(GpuError::Invalid("block size must be ≥ 1".into()));
        }
        let (m, k) = (a.rows(), a.cols());
        let (mb, nb) = (m.div_ceil(block), k.div_ceil(block));
        let mut row_ptr = vec![0i32; mb + 1];
        let mut col_ind = Vec::new();
        let mut values: Vec<f32> = Vec::new();
        let ip = a.indptr();
        let ip = ip.raw_storage();
        let mut slot: Vec<usize> = vec![usize::MAX; nb];
        for br in 0..mb {
            let start = col_ind.len();
            for r in br * block..((br + 1) * block).min(m) {
                for p in ip[r] as usize..ip[r + 1] as usize {
                    let c = a.indices()[p] as usize;
                    let bc = c / block;
                    if slot[bc] == usize::MAX {
                        slot[bc] = col_ind.len();
                        col_ind.push(bc as i32);
                        values.extend(std::iter::repeat_n(0.0, block * block));
                    }
                    values[slot[bc] * block * block + (r % block) * block + c % block] =
                        a.data()[p];
                }
            }
            // Sort this block row by column, keeping values with their blocks.
            let mut idx: Vec<usize> = (start..col_ind.len()).collect();
            idx.sort_by_key(|&i| col_ind[i]);
            let cols: Vec<i32> = idx.iter().map(|&i| col_ind[i]).collect();
            let vals: Vec<f32> = idx
                .iter()
                .flat_map(|&i| values[i * block * block..(i + 1) * block * block].to_vec())
                .collect();
            for &c in &cols {
                slot[c as usize] = usize::MAX;
            }
            col_ind[start..].copy_from_slice(&cols);
            values[start * block * block..].copy_from_slice(&vals);
            if col_ind.len() > i32::MAX as usize {
                return Err(GpuError::Invalid("too many BSR blocks for i32".into()));
            }
            row_ptr[br + 1] = col_ind.len() as i32;
        }
        Self::new(gpu, mb, nb, block, &row_ptr, &col_ind, &values)
    }

    /// Validates and uploads BSR arrays.
    pub fn new(
        gpu: &Gpu,
        mb: usize,
        nb: usize,
        block: usize,
        row_ptr: &[i32],
        col_ind: &[i32],
        values: &[f32],
    ) -> Result<Self, GpuError> {
        let nnzb = col_ind.len();
        let bad = |s: &str| Err(GpuError::Invalid(format!("BSR: {s}")));
        if block == 0
            || mb > i32::MAX as usize
            || nb > i32::MAX as usize
            || nnzb > i32::MAX as usize
        {
            return bad("sizes must be ≥ 1 block and fit i32");
        }
        if row_ptr.len() != mb + 1 || row_ptr[0] != 0 || row_ptr[mb] as usize != nnzb {
            return bad("row_ptr must have mb+1 entries from 0 to nnzb");
        }
        if row_ptr.windows(2).any(|w| w[1] < w[0])
            || col_ind.iter().any(|&c| c < 0 || c as usize >= nb)
        {
            return bad("row_ptr decreases or a block column is out of range");
        }
        if values.len() != nnzb * block * block {
            return bad("values must hold nnzb·block² entries");
        }
        let handle = CusparseHandle::new(gpu)?;
        let mut descr = std::ptr::null_mut();
        // SAFETY: `descr` is valid for writes; destroyed in Drop.
        ok("cusparseCreateMatDescr", unsafe {
            cs::cusparseCreateMatDescr(&mut descr)
        })?;
        let this = Self {
            descr,
            handle,
            mb,
            nb,
            block,
            nnzb,
            row_ptr: gpu.upload(row_ptr)?,
            col_ind: upload_nonempty(gpu, col_ind)?,
            values: upload_nonempty(gpu, values)?,
        };
        // SAFETY: live descriptor.
        unsafe {
            ok(
                "cusparseSetMatType",
                cs::cusparseSetMatType(
                    descr,
                    cs::cusparseMatrixType_t::CUSPARSE_MATRIX_TYPE_GENERAL,
                ),
            )?;
            ok(
                "cusparseSetMatIndexBase",
                cs::cusparseSetMatIndexBase(
                    descr,
                    cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                ),
            )?;
        }
        Ok(this)
    }

    /// Stored blocks.
    pub fn nnzb(&self) -> usize {
        self.nnzb
    }

    /// Enqueues `y = α·A·x + β·y` with `cusparseSbsrmv` (x: `nb·block`, y: `mb·block` elements).
    pub fn spmv(
        &self,
        alpha: f32,
        x: &CudaSlice<f32>,
        beta: f32,
        y: &mut CudaSlice<f32>,
    ) -> Result<(), GpuError> {
        if x.len() < self.nb * self.block || y.len() < self.mb * self.block {
            return Err(GpuError::Invalid(format!(
                "x needs {} and y {} elements",
                self.nb * self.block,
                self.mb * self.block
            )));
        }
        let s = self.handle.gpu.stream().clone();
        let (pr, _g1) = self.row_ptr.device_ptr(&s);
        let (pc, _g2) = self.col_ind.device_ptr(&s);
        let (pv, _g3) = self.values.device_ptr(&s);
        let (px, _g4) = x.device_ptr(&s);
        let (py, _g5) = y.device_ptr_mut(&s);
        // SAFETY: arrays validated in `new` (row_ptr mb+1, col_ind < nb, values nnzb·block²);
        // x/y lengths checked above; host scalars; queued on the Gpu's stream.
        ok("cusparseSbsrmv", unsafe {
            cs::cusparseSbsrmv(
                self.handle.handle,
                cs::cusparseDirection_t::CUSPARSE_DIRECTION_ROW,
                OP_N,
                self.mb as i32,
                self.nb as i32,
                self.nnzb as i32,
                &alpha,
                self.descr,
                pv as *const f32,
                pr as *const i32,
                pc as *const i32,
                self.block as i32,
                px as *const f32,
                &beta,
                py as *mut f32,
            )
        })
    }
}

// SAFETY: the matrix descriptor is set up once in `new` and only read afterwards; the handle is Send.
unsafe impl Send for CusparseBsr {}

impl Drop for CusparseBsr {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { cs::cusparseDestroyMatDescr(self.descr) };
    }
}
