//! The skipped-product bound on the device (`spamm_skipped_squares` in `kernels-ptx/spamm.cu`):
//! [`DeviceBound::skipped_bound`] is `NormMaps::skipped_bound` of the norm maps a
//! [`SpammOperands`] holds, evaluated where they are, so that the τ search reads one f64 per
//! 32 × 32 block of C tiles instead of walking every product on the host.
//!
//! Both evaluations skip the same products (the f32 product of two norms below τ, one rule) and
//! add each skipped product exactly in f64 in ascending k per C tile; they differ only in the
//! order of the final sum of squares, so they agree to a relative 1e-12. The device's value is
//! the same on every run (the host adds the thread blocks' sums in order).

use cudarc::driver::{CudaFunction, CudaSlice};

use super::{SpammOperands, to_u32};
use crate::launch::{Launch, Shape};
use crate::{GpuError, KernelModule, KernelSignature, ParamKind};

/// C tiles per thread block edge (16 × 16 threads, 2 × 2 tiles each).
const BOUND_EDGE: usize = 32;
/// Entry of the bound.
const BOUND_ENTRY: &str = "spamm_skipped_squares";

/// The `.entry` signature of the bound (in [`super::SIGNATURES`]).
pub(super) const BOUND_SIGNATURE: KernelSignature = KernelSignature {
    module: KernelModule::Spamm,
    name: BOUND_ENTRY,
    params: &[
        ParamKind::Ptr, // A's norm map (tm × tk)
        ParamKind::Ptr, // B's norm map transposed (tn × tk)
        ParamKind::U32, // tm
        ParamKind::U32, // tk
        ParamKind::U32, // tn
        ParamKind::F32, // τ
        ParamKind::Ptr, // out: one f64 per thread block
    ],
};

/// The skipped-product bound of one [`SpammOperands`]' norm maps, on its device. Holds the
/// kernel and the per-block sums (one f64 per 32 × 32 C tiles, on the device and their host
/// copy) for every evaluation.
pub struct DeviceBound<'a> {
    ops: &'a SpammOperands,
    func: CudaFunction,
    grid: (u32, u32),
    sums: CudaSlice<f64>,
    host_sums: Vec<f64>,
}

impl std::fmt::Debug for DeviceBound<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBound")
            .field("tiles", &self.ops.tiles())
            .finish()
    }
}

impl<'a> DeviceBound<'a> {
    /// The bound of `ops`' maps (computed on its stream: queued after them). A product with
    /// no tile ([`SpammOperands::tiles`] has a 0) is [`GpuError::Invalid`].
    pub fn new(ops: &'a SpammOperands) -> Result<Self, GpuError> {
        let (tm, tk, tn) = ops.tiles();
        if tm == 0 || tk == 0 || tn == 0 {
            return Err(GpuError::Invalid(format!(
                "skipped-product bound of {tm}×{tk}×{tn} tiles: every count must be ≥ 1"
            )));
        }
        to_u32(tk, "k tiles")?;
        let gx = to_u32(tn.div_ceil(BOUND_EDGE), "thread blocks")?;
        let gy = to_u32(tm.div_ceil(BOUND_EDGE), "thread blocks")?;
        if gy > 65_535 {
            return Err(GpuError::Invalid(format!(
                "{tm} C tile rows need {gy} thread block rows, above 65535"
            )));
        }
        let blocks = gx as usize * gy as usize;
        Ok(Self {
            ops,
            func: ops.gpu().function(KernelModule::Spamm, BOUND_ENTRY)?,
            grid: (gx, gy),
            sums: ops.gpu().alloc_zeros::<f64>(blocks)?,
            host_sums: vec![0.0; blocks],
        })
    }

    /// `sqrt(Σ_ij (Σ_{k: a_ik·b_kj < τ} a_ik·b_kj)²)` over the operands' norm maps (τ = +∞:
    /// every product), as `NormMaps::skipped_bound`; waits for the device.
    pub fn skipped_bound(&mut self, tau: f32) -> Result<f64, GpuError> {
        let (tm, tk, tn) = self.ops.tiles();
        let gpu = self.ops.gpu();
        let mut l = Launch::new(gpu.stream(), &self.func, &BOUND_SIGNATURE);
        l.input(&self.ops.na)
            .input(&self.ops.nbt)
            .u32(tm as u32)
            .u32(tk as u32)
            .u32(tn as u32)
            .f32(tau)
            .output(&mut self.sums);
        // SAFETY: the arguments follow BOUND_SIGNATURE (checked at launch and against the PTX by
        // a CPU test). `na` holds tm·tk and `nbt` tn·tk floats (allocated so by SpammOperands for
        // these tiles, every count ≥ 1 and within u32: checked in `new`); the kernel reads rows
        // < tm (< tn) and k < tk only, and writes one f64 per thread block of the grid `sums`
        // was sized for.
        unsafe {
            l.launch(Shape {
                grid: (self.grid.0, self.grid.1, 1),
                block: (16, 16, 1),
                shared_bytes: 0,
            })
        }?;
        gpu.download_into(&self.sums, &mut self.host_sums)?;
        Ok(self.host_sums.iter().sum::<f64>().sqrt())
    }
}
