//! The sampled accuracy check of a SpAMM product on the device (`spamm_error_sums` in
//! `kernels-ptx/spamm.cu`): for sampled rows `i` of C, the reference `ref = A(i,:)·B` in f64 from
//! the f32 operands, and the sums Σ (c − ref)² and Σ ref² ([`ErrorSums`]).
//!
//! B is the f32 B already on the device; the sampled rows of A and C go up from the host in
//! launches of up to [`ERROR_ROWS`] rows (each launch reads B once), so the check adds
//! `ERROR_ROWS · (k + n)` floats to the device's memory. Every `ref` is accumulated in ascending k
//! from 0, zeros of A skipped, as the CPU's `tcsparse::spamm::measured_error`: an f32 product is
//! exact in f64, so each `ref` equals the CPU's bit for bit and only the order of the two final
//! sums differs (one pair per thread block, added on the host in block order: the same result on
//! every run).

use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use super::{nonempty, to_u32};
use crate::launch::{Launch, Shape};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Sampled rows per launch (8 warps of 8 rows in `spamm_error_sums`).
pub const ERROR_ROWS: usize = 64;
/// Columns of B per thread block.
const ERROR_COLS: usize = 128;
/// Threads per block (the kernel assumes it).
const ERROR_THREADS: u32 = 256;
/// Entry of the check.
const ERROR_ENTRY: &str = "spamm_error_sums";

/// The `.entry` signature of the check (in [`super::SIGNATURES`]).
pub(super) const ERROR_SIGNATURE: KernelSignature = KernelSignature {
    module: KernelModule::Spamm,
    name: ERROR_ENTRY,
    params: &[
        ParamKind::Ptr, // A rows (rows × k)
        ParamKind::Ptr, // B (k × n)
        ParamKind::Ptr, // C rows (rows × n)
        ParamKind::U32, // rows (≤ 64)
        ParamKind::U32, // n
        ParamKind::U32, // k
        ParamKind::Ptr, // out: two f64 per thread block
    ],
};

/// The two sums of a sampled accuracy check.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorSums {
    /// Σ (c − ref)².
    pub diff: f64,
    /// Σ ref².
    pub reference: f64,
}

impl ErrorSums {
    /// ‖C − C̃‖F/‖C‖F on the sampled rows: `sqrt(diff / reference)`, or `sqrt(diff)` where the
    /// reference is 0.
    pub fn relative(self) -> f64 {
        if self.reference == 0.0 {
            self.diff.sqrt()
        } else {
            (self.diff / self.reference).sqrt()
        }
    }
}

/// [`ErrorSums`] of the computed `c` (host, `m × n` row-major) on `rows` (each < m, repeats
/// allowed), the reference from host `a` (`m × k` row-major) and the device's `b` (f32, `k × n`
/// row-major), on `gpu` (the device that holds `b`). `shape` is (m, n, k). Buffers shorter than
/// their shape, a row ≥ m, or n, k beyond u32 are [`GpuError::Invalid`].
pub fn error_sums(
    gpu: &Gpu,
    a: &[f32],
    b: &CudaSlice<f32>,
    c: &[f32],
    shape: (usize, usize, usize),
    rows: &[usize],
) -> Result<ErrorSums, GpuError> {
    let (m, n, k) = shape;
    let (n32, k32) = (to_u32(n, "n")?, to_u32(k, "k")?);
    let need = |x: usize, y: usize, what: &str| {
        x.checked_mul(y)
            .ok_or_else(|| GpuError::Invalid(format!("{what} overflows")))
    };
    let (ma, mb, mc) = (need(m, k, "m·k")?, need(k, n, "k·n")?, need(m, n, "m·n")?);
    if a.len() < ma || b.len() < mb || c.len() < mc {
        return Err(GpuError::Invalid(format!(
            "error check of {m}×{k} · {k}×{n}: A, B, C need {ma}, {mb}, {mc} elements, got {}, {}, {}",
            a.len(),
            b.len(),
            c.len()
        )));
    }
    if let Some(&bad) = rows.iter().find(|&&i| i >= m) {
        return Err(GpuError::Invalid(format!(
            "error check row {bad} of a {m}-row C"
        )));
    }
    let mut sums = ErrorSums::default();
    if rows.is_empty() || n == 0 {
        return Ok(sums);
    }
    let blocks = n.div_ceil(ERROR_COLS);
    let grid = to_u32(blocks, "thread blocks")?;
    let f = gpu.function(KernelModule::Spamm, ERROR_ENTRY)?;
    // One host buffer per operand for every launch (its fresh pages fault in once, on every core).
    let most = rows.len().min(ERROR_ROWS);
    let (mut ha, mut hc) = (vec![0f32; most * k], vec![0f32; most * n]);
    for chunk in rows.chunks(ERROR_ROWS) {
        let (ha, hc) = (&mut ha[..chunk.len() * k], &mut hc[..chunk.len() * n]);
        gather_rows(a, k, chunk, ha);
        gather_rows(c, n, chunk, hc);
        let da = gpu.upload(nonempty(ha))?;
        let dc = gpu.upload(hc)?;
        let mut out = gpu.alloc_zeros::<f64>(2 * blocks)?;
        let r32 = chunk.len() as u32;
        let mut l = Launch::new(gpu.stream(), &f, &ERROR_SIGNATURE);
        l.input(&da)
            .input(b)
            .input(&dc)
            .u32(r32)
            .u32(n32)
            .u32(k32)
            .output(&mut out);
        // SAFETY: the arguments follow ERROR_SIGNATURE (checked against it at launch and against
        // the PTX by a CPU test). A's rows hold r32·k floats (or one where k = 0, then unread),
        // B ≥ k·n and C's rows r32·n (checked above); the kernel reads only rows < r32 ≤ 64, k
        // steps < k and columns < n, and writes two f64 per thread block into `out` (2·blocks).
        unsafe {
            l.launch(Shape {
                grid: (grid, 1, 1),
                block: (ERROR_THREADS, 1, 1),
                shared_bytes: 0,
            })
        }?;
        for pair in gpu.download(&out)?.chunks_exact(2) {
            sums.diff += pair[0];
            sums.reference += pair[1];
        }
    }
    Ok(sums)
}

/// Copies rows `rows` of the row-major `src` (rows of `width` values, each in range) into `dst`
/// (`rows.len() · width` values), one row per task on rayon's pool: page faults of a fresh `dst`
/// cost 10–15 ms for 16 MiB on one core of the H200 machine.
fn gather_rows(src: &[f32], width: usize, rows: &[usize], dst: &mut [f32]) {
    if width == 0 {
        return;
    }
    dst.par_chunks_mut(width)
        .zip(rows.par_iter())
        .for_each(|(d, &i)| d.copy_from_slice(&src[i * width..(i + 1) * width]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_error_of_a_zero_reference_is_the_difference_norm() {
        let s = |diff, reference| ErrorSums { diff, reference }.relative();
        assert_eq!(s(0.0, 0.0), 0.0);
        assert_eq!(s(4.0, 0.0), 2.0);
        assert_eq!(s(1.0, 4.0), 0.5);
        assert_eq!(s(0.0, 9.0), 0.0);
    }

    #[test]
    fn rows_are_gathered_in_sample_order_repeats_included() {
        let src: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let mut dst = vec![0f32; 12];
        gather_rows(&src, 3, &[3, 0, 3, 1], &mut dst);
        assert_eq!(dst, [9., 10., 11., 0., 1., 2., 9., 10., 11., 3., 4., 5.]);
        gather_rows(&src, 0, &[1, 2], &mut []);
    }
}
