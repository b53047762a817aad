//! SDDMM on the device (`kernels-ptx/sddmm.cu`): `out_p = α·⟨left_i, right_j⟩` for each stored
//! position `p = (i, j)` of a CSR pattern, in CSR order — the gradient of `Y = A·X` with respect to
//! A's values is the SDDMM of `dY` and `X`. The CPU reference is
//! [`tcsparse_formats::sddmm::sddmm`].

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut};
use tcsparse_formats::Csr;

use crate::launch::{Launch, Shape};
use crate::schedule::upload_nonempty;
use crate::spmm::{AccSpmmError, check_dense};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name.
pub const ENTRY: &str = "sddmm_f32";
/// Threads per block (8 warps, one stored position each at a time).
const THREADS: u32 = 256;
/// Most thread blocks of one launch (warps stride over further positions).
const MAX_BLOCKS: u32 = 1 << 16;

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[SIG];

const SIG: KernelSignature = KernelSignature {
    module: KernelModule::Sddmm,
    name: ENTRY,
    params: &[
        ParamKind::Ptr, // rows
        ParamKind::Ptr, // cols
        ParamKind::U32, // nnz
        ParamKind::Ptr, // left
        ParamKind::U32, // ldl
        ParamKind::Ptr, // right
        ParamKind::U32, // ldr
        ParamKind::U32, // k
        ParamKind::F32, // alpha
        ParamKind::Ptr, // out
    ],
};

/// The row and column of every stored position of `a`, in CSR order.
pub fn coordinates(a: &Csr) -> (Vec<u32>, Vec<u32>) {
    let mut rows = Vec::with_capacity(a.nnz());
    for (i, w) in a.row_offsets().windows(2).enumerate() {
        rows.extend(std::iter::repeat_n(i as u32, (w[1] - w[0]) as usize));
    }
    (rows, a.indices().to_vec())
}

/// A CSR pattern resident on the GPU for SDDMMs.
///
/// Invariant: `rows[p] < n_rows` and `cols[p] < n_cols` for every `p < nnz` (from the [`Csr`] it
/// was built from), never written after upload.
pub struct SddmmPattern {
    gpu: Gpu,
    n_rows: usize,
    n_cols: usize,
    nnz: usize,
    rows: CudaSlice<u32>,
    cols: CudaSlice<u32>,
    func: CudaFunction,
}

impl_debug!(SddmmPattern, |s| shape: (s.n_rows, s.n_cols), nnz: s.nnz);

impl SddmmPattern {
    /// Uploads `a`'s pattern (8 bytes a stored position; its values are not used).
    pub fn new(gpu: &Gpu, a: &Csr) -> Result<Self, GpuError> {
        if a.nnz() > u32::MAX as usize {
            return Err(GpuError::Invalid(format!(
                "{} stored positions exceed u32",
                a.nnz()
            )));
        }
        let (rows, cols) = coordinates(a);
        Ok(Self {
            gpu: gpu.clone(),
            n_rows: a.rows(),
            n_cols: a.cols(),
            nnz: a.nnz(),
            rows: upload_nonempty(gpu, &rows)?,
            cols: upload_nonempty(gpu, &cols)?,
            func: gpu.function(KernelModule::Sddmm, ENTRY)?,
        })
    }

    /// Stored positions.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Enqueues `out_p = α·⟨left_i, right_j⟩` on the GPU's stream: `left` is `rows × k` with
    /// leading dimension `ldl`, `right` is `cols × k` with `ldr`, `out` holds at least `nnz`
    /// values.
    #[allow(clippy::too_many_arguments)]
    pub fn launch<L: DevicePtr<f32>, R: DevicePtr<f32>, O: DevicePtrMut<f32>>(
        &self,
        alpha: f32,
        left: &L,
        ldl: usize,
        right: &R,
        ldr: usize,
        k: usize,
        out: &mut O,
    ) -> Result<(), GpuError> {
        let invalid = |e: AccSpmmError| GpuError::Invalid(e.to_string());
        check_dense("left", left.len(), self.n_rows, k, ldl).map_err(invalid)?;
        check_dense("right", right.len(), self.n_cols, k, ldr).map_err(invalid)?;
        if out.len() < self.nnz {
            return Err(GpuError::Invalid(format!(
                "out holds {} values, the pattern {} positions",
                out.len(),
                self.nnz
            )));
        }
        if self.nnz == 0 {
            return Ok(());
        }
        let fits = |x: usize| u32::try_from(x).ok();
        let (Some(nnz), Some(ldl), Some(ldr), Some(k32)) =
            (fits(self.nnz), fits(ldl), fits(ldr), fits(k))
        else {
            return Err(GpuError::Invalid(format!(
                "k = {k}, ldl = {ldl} or ldr = {ldr} exceeds u32"
            )));
        };
        let warps_per_block = (THREADS / 32) as usize;
        let blocks = self.nnz.div_ceil(warps_per_block).min(MAX_BLOCKS as usize) as u32;
        let shape = Shape {
            grid: (blocks, 1, 1),
            block: (THREADS, 1, 1),
            shared_bytes: 0,
        };
        let mut l = Launch::new(self.gpu.stream(), &self.func, &SIG);
        l.input(&self.rows)
            .input(&self.cols)
            .u32(nnz)
            .input(left)
            .u32(ldl)
            .input(right)
            .u32(ldr)
            .u32(k32)
            .f32(alpha)
            .output(out);
        // SAFETY: (1) the arguments fill `sddmm_f32(const u32*, const u32*, u32, const float*,
        // u32, const float*, u32, u32, float, float*)` (SIGNATURES, checked against the PTX by a
        // CPU test). (2) Only `out` is written, borrowed mutably (raw pointers through
        // device_ptr/device_ptr_mut, whose guards order the launch after earlier work on each
        // buffer). (3) In bounds: rows[p] < n_rows and cols[p] < n_cols (the struct's invariant),
        // check_dense proved (n_rows−1)·ldl + k ≤ len(left) and (n_cols−1)·ldr + k ≤ len(right),
        // out holds ≥ nnz values, and the kernel guards p < nnz and t < k.
        unsafe { l.launch(shape) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_follow_the_csr_order() {
        let a = tcsparse_formats::csr::csr_from_triplets(
            3,
            4,
            &[(2, 3, 1.0), (0, 1, 2.0), (0, 3, 3.0), (2, 0, 4.0)],
        )
        .unwrap();
        assert_eq!(coordinates(&a), (vec![0, 0, 2, 2], vec![1, 3, 0, 3]));
    }
}
