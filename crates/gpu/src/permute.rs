//! Row permutation of dense row-major operands on the device (`kernels-ptx/permute_rows.cu`), in
//! f32 or a 16-bit type (f16, bf16: moved as their bits) ([`PermuteElement`]): a gather
//! `dst[i] = src[idx[i]]` or a scatter `dst[idx[i]] = src[i]` of whole rows, so a product on a
//! reordered matrix can take and give B and C in the caller's original row order.

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut};

use crate::launch::{Launch, Shape};
use crate::schedule::upload_nonempty;
use crate::spmm::{AccSpmmError, check_dense};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name (f32).
pub const ENTRY: &str = "permute_rows_f32";
/// Kernel entry name (16-bit types).
pub const ENTRY_U16: &str = "permute_rows_u16";
/// Threads per block.
const THREADS: u32 = 128;
/// Most thread blocks of one launch (the kernel strides over further rows).
const MAX_BLOCKS: u32 = 1 << 16;

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[SIG, SIG_U16];

const SIG: KernelSignature = KernelSignature {
    module: KernelModule::Permute,
    name: ENTRY,
    params: PARAMS,
};

const SIG_U16: KernelSignature = KernelSignature {
    module: KernelModule::Permute,
    name: ENTRY_U16,
    params: PARAMS,
};

/// Both entries' parameters (the element pointers' type aside).
const PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // idx
    ParamKind::U32, // rows
    ParamKind::Ptr, // src
    ParamKind::U32, // lds
    ParamKind::Ptr, // dst
    ParamKind::U32, // ldd
    ParamKind::U32, // n
    ParamKind::U32, // scatter
];

/// An element type [`RowPermutation`] moves: `f32`, or a 16-bit type ([`half::f16`],
/// [`half::bf16`]) moved as its bits (sealed).
pub trait PermuteElement: sealed::Sealed {
    /// Whether the 16-bit entry moves it (else the f32 one).
    const BITS16: bool;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

impl PermuteElement for f32 {
    const BITS16: bool = false;
}

impl PermuteElement for half::f16 {
    const BITS16: bool = true;
}

impl PermuteElement for half::bf16 {
    const BITS16: bool = true;
}

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
    func_u16: CudaFunction,
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
            func_u16: gpu.function(KernelModule::Permute, ENTRY_U16)?,
        })
    }

    /// Rows permuted.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Enqueues `dst[i] = src[idx[i]]` (first `n` columns of each of the `rows` rows).
    pub fn gather<T: PermuteElement, S: DevicePtr<T> + ?Sized, D: DevicePtrMut<T> + ?Sized>(
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
    pub fn scatter<T: PermuteElement, S: DevicePtr<T> + ?Sized, D: DevicePtrMut<T> + ?Sized>(
        &self,
        src: &S,
        lds: usize,
        dst: &mut D,
        ldd: usize,
        n: usize,
    ) -> Result<(), GpuError> {
        self.launch(src, lds, dst, ldd, n, true)
    }

    fn launch<T: PermuteElement, S: DevicePtr<T> + ?Sized, D: DevicePtrMut<T> + ?Sized>(
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
        let (func, sig) = if T::BITS16 {
            (&self.func_u16, &SIG_U16)
        } else {
            (&self.func, &SIG)
        };
        let mut l = Launch::new(self.gpu.stream(), func, sig);
        l.input(&self.idx)
            .u32(rows)
            .input(src)
            .u32(lds32)
            .output(dst)
            .u32(ldd32)
            .u32(n32)
            .u32(scatter);
        // SAFETY: (1) the arguments fill `permute_rows_f32(const u32*, u32, const float*, u32,
        // float*, u32, u32, u32)` or, for a 16-bit T (f16 / bf16, sealed: two bytes each),
        // `permute_rows_u16` with `unsigned short*` in place of `float*` (SIGNATURES, checked
        // against the PTX by a CPU test); lengths and leading dimensions count elements of T,
        // the entry's element size. (2) Only
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
    fn sixteen_bit_types_take_the_16_bit_entry() {
        // (The u16 entry moves two-byte elements: both types are.)
        assert_eq!(std::mem::size_of::<half::f16>(), 2);
        assert_eq!(std::mem::size_of::<half::bf16>(), 2);
        const { assert!(<half::f16 as PermuteElement>::BITS16) };
        const { assert!(<half::bf16 as PermuteElement>::BITS16) };
        const { assert!(!<f32 as PermuteElement>::BITS16) };
        assert_eq!(SIG_U16.params, SIG.params);
    }

    /// f16 and bf16 rows (NaN payloads and subnormals included) gathered and scattered bit for
    /// bit, from a view and at leading dimensions larger than n.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn sixteen_bit_rows_move_bit_for_bit() {
        let gpu = Gpu::require().expect("this test needs a CUDA GPU");
        let (rows, n, lds, ldd) = (29usize, 7usize, 9usize, 8usize);
        let idx: Vec<u32> = (0..rows as u32)
            .map(|i| (i * 11 + 3) % rows as u32)
            .collect();
        let p = RowPermutation::new(&gpu, &idx).unwrap();
        let bits: Vec<u16> = (0..(1 + rows * lds) as u32)
            .map(|i| (i.wrapping_mul(40503) ^ 0x7e01) as u16)
            .collect();
        let src: Vec<half::bf16> = bits.iter().map(|&b| half::bf16::from_bits(b)).collect();
        let sd = gpu.upload(&src).unwrap();
        let nan = half::bf16::from_bits(0x7fc1);
        let mut dd = gpu.upload(&vec![nan; rows * ldd]).unwrap();
        p.gather(&sd.slice(1..), lds, &mut dd, ldd, n).unwrap();
        let got = gpu.download(&dd).unwrap();
        for (i, &r) in idx.iter().enumerate() {
            let r = r as usize;
            for f in 0..ldd {
                let want = if f < n { src[1 + r * lds + f] } else { nan };
                assert_eq!(got[i * ldd + f].to_bits(), want.to_bits(), "row {i}, {f}");
            }
        }
        let mut back = gpu.alloc_zeros::<half::bf16>(rows * lds).unwrap();
        p.scatter(&dd, ldd, &mut back, lds, n).unwrap();
        let back = gpu.download(&back).unwrap();
        for r in 0..rows {
            for f in 0..n {
                assert_eq!(back[r * lds + f].to_bits(), src[1 + r * lds + f].to_bits());
            }
        }
        // f16 through the same entry.
        let h: Vec<half::f16> = bits[..rows * n]
            .iter()
            .map(|&b| half::f16::from_bits(b))
            .collect();
        let hd = gpu.upload(&h).unwrap();
        let mut hg = gpu.alloc_zeros::<half::f16>(rows * n).unwrap();
        p.gather(&hd, n, &mut hg, n, n).unwrap();
        let hg = gpu.download(&hg).unwrap();
        for (i, &r) in idx.iter().enumerate() {
            let r = r as usize;
            assert!(
                hg[i * n..i * n + n]
                    .iter()
                    .zip(&h[r * n..r * n + n])
                    .all(|(x, y)| x.to_bits() == y.to_bits())
            );
        }
    }

    #[test]
    fn permutations_are_checked() {
        assert!(check_permutation(&[]).is_ok());
        assert!(check_permutation(&[2, 0, 1]).is_ok());
        assert!(check_permutation(&[0, 0, 1]).is_err());
        assert!(check_permutation(&[0, 3, 1]).is_err());
    }
}
