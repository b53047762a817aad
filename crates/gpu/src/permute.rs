//! Row permutation of dense row-major f32 operands on the device (`kernels-ptx/permute_rows.cu`):
//! a gather `dst[i] = src[idx[i]]` or a scatter `dst[idx[i]] = src[i]` of whole rows, so a product
//! on a reordered matrix can take and give B and C in the caller's original row order.

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut};

use crate::launch::{Launch, Shape};
use crate::schedule::upload_nonempty;
use crate::spmm::{AccSpmmError, check_dense};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name.
pub const ENTRY: &str = "permute_rows_f32";
/// Threads per block.
const THREADS: u32 = 128;
/// Most thread blocks of one launch (the kernel strides over further rows).
const MAX_BLOCKS: u32 = 1 << 16;

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[SIG];

const SIG: KernelSignature = KernelSignature {
    module: KernelModule::Permute,
    name: ENTRY,
    params: &[
        ParamKind::Ptr, // idx
        ParamKind::U32, // rows
        ParamKind::Ptr, // src
        ParamKind::U32, // lds
        ParamKind::Ptr, // dst
        ParamKind::U32, // ldd
        ParamKind::U32, // n
        ParamKind::U32, // scatter
    ],
};

/// Checks that `idx` is a permutation of `0..idx.len()` fitting the kernel's u32 indices.
pub fn check_permutation(idx: &[u32]) -> Result<(), GpuError> {
    if idx.len() >= u32::MAX as usize {
        return Err(GpuError::Invalid(format!(
            "{} rows exceed u32 indices",
            idx.len()
        )));
    }
    let mut seen = vec![false; idx.len()];
    for (i, &r) in idx.iter().enumerate() {
        match seen.get_mut(r as usize) {
            Some(s) if !*s => *s = true,
            _ => {
                return Err(GpuError::Invalid(format!(
                    "entry {i} ({r}) repeats or is ≥ {}: not a permutation",
                    idx.len()
                )));
            }
        }
    }
    Ok(())
}

/// A row permutation resident on the GPU.
///
/// Invariant: `idx` holds a permutation of `0..rows` ([`check_permutation`]), never written after
/// upload.
pub struct RowPermutation {
    gpu: Gpu,
    rows: usize,
    idx: CudaSlice<u32>,
    func: CudaFunction,
}

impl_debug!(RowPermutation, |s| rows: s.rows);

impl RowPermutation {
    /// Validates and uploads `idx` (a permutation of `0..idx.len()`).
    pub fn new(gpu: &Gpu, idx: &[u32]) -> Result<Self, GpuError> {
        check_permutation(idx)?;
        Ok(Self {
            gpu: gpu.clone(),
            rows: idx.len(),
            idx: upload_nonempty(gpu, idx)?,
            func: gpu.function(KernelModule::Permute, ENTRY)?,
        })
    }

    /// Rows permuted.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Enqueues `dst[i] = src[idx[i]]` (first `n` columns of each of the `rows` rows).
    pub fn gather<S: DevicePtr<f32>, D: DevicePtrMut<f32>>(
        &self,
        src: &S,
        lds: usize,
        dst: &mut D,
        ldd: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        self.launch(src, lds, dst, ldd, n, false)
    }

    /// Enqueues `dst[idx[i]] = src[i]` (first `n` columns of each of the `rows` rows).
    pub fn scatter<S: DevicePtr<f32>, D: DevicePtrMut<f32>>(
        &self,
        src: &S,
        lds: usize,
        dst: &mut D,
        ldd: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        self.launch(src, lds, dst, ldd, n, true)
    }

    fn launch<S: DevicePtr<f32>, D: DevicePtrMut<f32>>(
        &self,
        src: &S,
        lds: usize,
        dst: &mut D,
        ldd: usize,
        n: usize,
        scatter: bool,
    ) -> Result<(), GpuError> {
        let invalid = |e: AccSpmmError| GpuError::Invalid(e.to_string());
        check_dense("source", src.len(), self.rows, n, lds).map_err(invalid)?;
        check_dense("destination", dst.len(), self.rows, n, ldd).map_err(invalid)?;
        if self.rows == 0 || n == 0 {
            return Ok(());
        }
        if n > u32::MAX as usize {
            return Err(GpuError::Invalid(format!("n = {n} exceeds u32")));
        }
        let (rows, lds32, ldd32, n32) = (self.rows as u32, lds as u32, ldd as u32, n as u32);
        let scatter = u32::from(scatter);
        let shape = Shape {
            grid: (rows.min(MAX_BLOCKS), 1, 1),
            block: (THREADS, 1, 1),
            shared_bytes: 0,
        };
        let mut l = Launch::new(self.gpu.stream(), &self.func, &SIG);
        l.input(&self.idx)
            .u32(rows)
            .input(src)
            .u32(lds32)
            .output(dst)
            .u32(ldd32)
            .u32(n32)
            .u32(scatter);
        // SAFETY: (1) the arguments fill `permute_rows_f32(const u32*, u32, const float*, u32,
        // float*, u32, u32, u32)` (SIGNATURES, checked against the PTX by a CPU test). (2) Only
        // dst is written, borrowed mutably (raw pointers through device_ptr/device_ptr_mut, whose
        // guards order the launch after earlier work on both buffers); src and dst are distinct
        // buffers (one is borrowed shared, the other mutably). (3) In bounds: idx holds a
        // permutation of 0..rows (check_permutation), so every source and destination row is
        // < rows, and check_dense proved (rows−1)·ld + n ≤ len for both; the kernel guards
        // i < rows and f < n.
        unsafe { l.launch(shape) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_checked() {
        assert!(check_permutation(&[]).is_ok());
        assert!(check_permutation(&[2, 0, 1]).is_ok());
        assert!(check_permutation(&[0, 0, 1]).is_err());
        assert!(check_permutation(&[0, 3, 1]).is_err());
    }
}
