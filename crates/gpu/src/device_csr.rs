//! A CSR matrix's arrays on the device, the one device CSR of this crate: uploaded once and handed
//! to whichever consumer needs them (our CSR SpMM kernel, our CSR SpMV walk, the row-tile build of
//! a plan-cache hit, and cuSPARSE's descriptor, [`crate::baselines::cusparse::CusparseCsr`], which
//! wraps one): a preparation can start the upload before it knows which consumer that will be.

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;

use crate::schedule::upload_nonempty;
use crate::{Gpu, GpuError};

/// Checks that `a` fits the kernels' u32 indices. Everything else the kernels' reads rely on
/// (row offsets rising from 0 to nnz, every column index < cols) is an invariant of [`Csr`],
/// checked by each of its constructors, so it is not scanned again here (that O(nnz) pass ran on
/// every CSR upload: ~2 ms for R-MAT scale 20 on 16 cores, on a plan-cache hit too).
pub fn check_csr(a: &Csr) -> Result<(), GpuError> {
    let (m, k) = (a.rows(), a.cols());
    if m >= u32::MAX as usize || k >= u32::MAX as usize || a.nnz() >= u32::MAX as usize {
        return Err(GpuError::Invalid(format!(
            "{m}×{k} with {} nnz does not fit u32 indices",
            a.nnz()
        )));
    }
    // (O(1) restatements of the type's invariants, for the SAFETY comments that cite them.)
    let ip = a.row_offsets();
    debug_assert!(ip.len() == m + 1 && ip[0] == 0 && ip[m] as usize == a.nnz());
    Ok(())
}

/// The arrays of one [`Csr`] on the device (row offsets, column indices, values; the two
/// nonzero arrays hold one element when the matrix has none).
///
/// Invariant: they are an upload of a [`Csr`] of `rows × cols` with `nnz` values (its invariants:
/// row offsets rising from 0 to nnz, every column < cols, all < u32::MAX) and are never written
/// in place (an owner may replace the values with a new upload of the same pattern). Consumers
/// take it together with that matrix and check that its shape matches.
pub struct DeviceCsr {
    rows: usize,
    cols: usize,
    nnz: usize,
    pub(crate) indptr: CudaSlice<u32>,
    pub(crate) indices: CudaSlice<u32>,
    pub(crate) values: CudaSlice<f32>,
}

impl_debug!(DeviceCsr, |s| rows: s.rows, cols: s.cols, nnz: s.nnz);

impl DeviceCsr {
    /// Uploads `a` (staged for large arrays, see [`Gpu::upload`]).
    #[tracing::instrument(name = "upload", level = "info", skip_all, fields(what = "csr", nnz = a.nnz()))]
    pub fn upload(gpu: &Gpu, a: &Csr) -> Result<Self, GpuError> {
        check_csr(a)?;
        Ok(Self {
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            indptr: gpu.upload(a.row_offsets())?,
            indices: upload_nonempty(gpu, a.indices())?,
            values: upload_nonempty(gpu, a.data())?,
        })
    }

    /// [`DeviceCsr::upload`] that applies `inspect` to every
    /// [`UPLOAD_PIECE_BYTES`](crate::UPLOAD_PIECE_BYTES) piece of the row offsets' bytes and then
    /// of the column indices' bytes as they go up ([`Gpu::upload_inspected`]: no second pass
    /// over memory), and hands both lists of results (in piece order; none for an empty array) to
    /// `pattern_read` before the values go up: a caller keyed by the pattern (the plan cache) has
    /// its key while the values are still on their way.
    pub fn upload_inspecting_pattern<R: Send>(
        gpu: &Gpu,
        a: &Csr,
        inspect: impl Fn(&[u8]) -> R + Sync,
        pattern_read: impl FnOnce(Vec<R>, Vec<R>),
    ) -> Result<Self, GpuError> {
        check_csr(a)?;
        let (indptr, indptr_pieces) = gpu.upload_inspected(a.row_offsets(), &inspect)?;
        let (indices, indices_pieces) = if a.indices().is_empty() {
            (upload_nonempty(gpu, a.indices())?, Vec::new())
        } else {
            gpu.upload_inspected(a.indices(), &inspect)?
        };
        pattern_read(indptr_pieces, indices_pieces);
        Ok(Self {
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            indptr,
            indices,
            values: upload_nonempty(gpu, a.data())?,
        })
    }

    /// `a`'s arrays copied, device to device on the GPU's stream, from buffers that already hold
    /// them (e.g. cuSPARSE's, [`crate::baselines::cusparse::CusparseCsr::buffers`]) instead of
    /// uploaded again from the host. The buffers' lengths are checked against `a`.
    pub fn copy_from_device(
        gpu: &Gpu,
        a: &Csr,
        (indptr, indices, values): (&CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<f32>),
    ) -> Result<Self, GpuError> {
        check_csr(a)?;
        let nnz = a.nnz().max(1);
        if indptr.len() != a.rows() + 1 || indices.len() != nnz || values.len() != nnz {
            return Err(GpuError::Invalid(format!(
                "device CSR arrays of {}/{}/{} entries for a {}×{} matrix with {} nonzeros",
                indptr.len(),
                indices.len(),
                values.len(),
                a.rows(),
                a.cols(),
                a.nnz()
            )));
        }
        let s = gpu.stream();
        Ok(Self {
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            indptr: s.clone_dtod(indptr)?,
            indices: s.clone_dtod(indices)?,
            values: s.clone_dtod(values)?,
        })
    }

    /// Rows of the uploaded matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of the uploaded matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stored values of the uploaded matrix.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// The arrays (row offsets, column indices, values).
    pub fn buffers(&self) -> (&CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<f32>) {
        (&self.indptr, &self.indices, &self.values)
    }

    /// Rows, columns and stored values of the uploaded matrix.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.rows, self.cols, self.nnz)
    }

    /// `Ok` when `a` has the uploaded matrix's shape and nonzero count (the caller vouches that
    /// it is the same matrix).
    pub(crate) fn check_matches(&self, a: &Csr) -> Result<(), GpuError> {
        if self.shape() == (a.rows(), a.cols(), a.nnz()) {
            Ok(())
        } else {
            Err(GpuError::Invalid(format!(
                "device CSR of {}×{} with {} values for a {}×{} matrix with {}",
                self.rows,
                self.cols,
                self.nnz,
                a.rows(),
                a.cols(),
                a.nnz()
            )))
        }
    }
}
