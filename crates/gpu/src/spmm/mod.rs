//! SpMM kernels, one room each: [`acc`] (Acc-SpMM on BitTCF, TF32 tensor cores), [`row_tile`]
//! (row-tile TCF, TF32 tensor cores), [`hrpb`] (cuTeSpMM on HRPB, TF32 tensor cores), [`csr`]
//! (CUDA cores, f32) and [`staged`] (window-staged CSR, CUDA cores, f32, B rows staged in shared
//! memory). The launch-shape and dense-operand helpers they share live here; work lists,
//! split rows and uploads in [`crate::schedule`]; the vendor baselines in [`crate::baselines`].

use cudarc::driver::LaunchConfig;
use thiserror::Error;

use crate::{GpuError, ParamKind};

pub mod acc;
pub mod csr;
mod half_split;
pub mod hrpb;
pub mod row_tile;
pub mod staged;

/// Most warps per thread block (the kernel's `__launch_bounds__`).
pub const MAX_WARPS: u32 = 8;

/// Errors of the Acc-SpMM launch path. Bad inputs are reported, never launched.
#[derive(Debug, Error)]
pub enum AccSpmmError {
    /// The BitTCF arrays break an invariant the kernel relies on.
    #[error("invalid BitTCF arrays: {0}")]
    InvalidFormat(String),
    /// The schedule does not cover the matrix as the kernel needs.
    #[error("invalid Acc-SpMM schedule: {0}")]
    InvalidSchedule(String),
    /// Dense operands or sizes do not match the prepared matrix.
    #[error("invalid SpMM arguments: {0}")]
    InvalidArgs(String),
    /// The GPU runtime failed (module load, allocation).
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0:?}")]
    Driver(cudarc::driver::DriverError),
}

impl From<AccSpmmError> for GpuError {
    /// A bad argument or layout as [`GpuError::Invalid`]; runtime failures as they are.
    fn from(e: AccSpmmError) -> Self {
        match e {
            AccSpmmError::Gpu(g) => g,
            AccSpmmError::Driver(d) => d.into(),
            AccSpmmError::InvalidArgs(s) => GpuError::Invalid(s),
            other => GpuError::Invalid(other.to_string()),
        }
    }
}

impl From<cudarc::driver::DriverError> for AccSpmmError {
    /// [`AccSpmmError::Driver`], or [`GpuError::DeviceLost`] for a status that leaves the
    /// context unusable.
    fn from(e: cudarc::driver::DriverError) -> Self {
        match GpuError::from(e) {
            GpuError::Driver(e) => Self::Driver(e),
            lost => Self::Gpu(lost),
        }
    }
}

/// Grid and block shape of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Warps per thread block (each owns 32 features).
    pub warps: u32,
    /// Features per thread block, `32 · warps`.
    pub features_per_tb: u32,
    /// Thread blocks along x (one per schedule entry).
    pub grid_x: u32,
    /// Feature tiles along y, `⌈N / features_per_tb⌉`.
    pub grid_y: u32,
}

impl LaunchShape {
    /// As a cudarc launch configuration with `shared_mem_bytes` of dynamic shared memory.
    pub fn config(&self, shared_mem_bytes: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.grid_x, self.grid_y, 1),
            block_dim: (32 * self.warps, 1, 1),
            shared_mem_bytes,
        }
    }
}

/// Launch shape for `n` features and `num_tbs` schedule entries: `⌈n/32⌉` warps are split into
/// `⌈warps/8⌉` feature tiles of equal width (so N = 384 runs 2 tiles of 6 warps, not 8 + 4).
/// `None` when there is nothing to launch (`n == 0` or no thread blocks).
pub fn launch_shape(n: usize, num_tbs: usize) -> Result<Option<LaunchShape>, AccSpmmError> {
    if n == 0 || num_tbs == 0 {
        return Ok(None);
    }
    if num_tbs > i32::MAX as usize || n > u32::MAX as usize / 2 {
        return Err(AccSpmmError::InvalidArgs(format!(
            "n = {n}, {num_tbs} thread blocks too large"
        )));
    }
    let total_warps = n.div_ceil(32);
    let tiles = total_warps.div_ceil(MAX_WARPS as usize);
    let warps = total_warps.div_ceil(tiles);
    if tiles > 65_535 {
        return Err(AccSpmmError::InvalidArgs(format!(
            "n = {n} needs {tiles} > 65535 feature tiles"
        )));
    }
    Ok(Some(LaunchShape {
        warps: warps as u32,
        features_per_tb: 32 * warps as u32,
        grid_x: num_tbs as u32,
        grid_y: tiles as u32,
    }))
}

/// Kernel flags: bit 0 = float4 loads of B and stores of C (needs `ldb` and `ldc` multiples of 4,
/// with 16-byte aligned buffers, which device allocations are).
pub fn launch_flags(ldb: usize, ldc: usize) -> u32 {
    u32::from(ldb.is_multiple_of(4) && ldc.is_multiple_of(4))
}

/// The parameters every schedule-driven tensor-core entry (Acc-SpMM, row-tile) ends with, after
/// its matrix arrays: the flat work list, the split-window flags, B and C with their leading
/// dimensions, M, N, α, β and the launch flags ([`launch_flags_at`]).
pub(crate) const SCHEDULED_TAIL: [ParamKind; 11] = [
    ParamKind::Ptr, // work (4 per thread block)
    ParamKind::Ptr, // window_split (1 byte per window)
    ParamKind::Ptr, // B
    ParamKind::U32, // ldb
    ParamKind::Ptr, // C
    ParamKind::U32, // ldc
    ParamKind::U32, // M
    ParamKind::U32, // N
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::U32, // flags
];

/// [`launch_flags`] for operands at device addresses `b_addr` and `c_addr`: the float4 path also
/// needs both 16-byte aligned (a view into a larger buffer may start anywhere).
pub fn launch_flags_at(ldb: usize, ldc: usize, b_addr: u64, c_addr: u64) -> u32 {
    launch_flags(ldb, ldc) & u32::from(b_addr.is_multiple_of(16) && c_addr.is_multiple_of(16))
}

/// Checks that a row-major operand of `rows × n` with leading dimension `ld` fits in `len` elements.
pub fn check_dense(
    what: &str,
    len: usize,
    rows: usize,
    n: usize,
    ld: usize,
) -> Result<(), AccSpmmError> {
    if ld < n {
        return Err(AccSpmmError::InvalidArgs(format!(
            "{what}: leading dimension {ld} < n = {n}"
        )));
    }
    if ld > u32::MAX as usize {
        return Err(AccSpmmError::InvalidArgs(format!(
            "{what}: leading dimension {ld} > u32::MAX"
        )));
    }
    let need = if rows == 0 || n == 0 {
        0
    } else {
        (rows - 1) * ld + n
    };
    if len < need {
        return Err(AccSpmmError::InvalidArgs(format!(
            "{what}: {len} elements, a {rows}×{n} matrix with leading dimension {ld} needs {need}"
        )));
    }
    Ok(())
}

/// Rounds an f32 to TF32 the way `cvt.rna.tf32.f32` does (nearest, ties away from zero; 10 explicit
/// mantissa bits). Non-finite values pass through.
pub fn to_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    f32::from_bits((x.to_bits().wrapping_add(0x1000)) & 0xFFFF_E000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_shape_tiles_features() {
        let s = |n| launch_shape(n, 10).unwrap().map(|s| (s.warps, s.grid_y));
        assert_eq!(s(0), None);
        assert_eq!(s(8), Some((1, 1)));
        assert_eq!(s(16), Some((1, 1)));
        assert_eq!(s(32), Some((1, 1)));
        assert_eq!(s(64), Some((2, 1)));
        assert_eq!(s(128), Some((4, 1)));
        assert_eq!(s(256), Some((8, 1)));
        assert_eq!(s(384), Some((6, 2)));
        assert_eq!(s(512), Some((8, 2)));
        assert_eq!(s(1024), Some((8, 4)));
        assert_eq!(s(1000), Some((8, 4)));
        assert_eq!(launch_shape(128, 0).unwrap(), None);
        for n in 1..3000 {
            let sh = launch_shape(n, 1).unwrap().unwrap();
            assert!(sh.warps >= 1 && sh.warps <= MAX_WARPS);
            let covered = (sh.grid_y * sh.features_per_tb) as usize;
            assert!(
                covered >= n && covered - n < sh.features_per_tb as usize,
                "n = {n}"
            );
        }
    }

    #[test]
    fn tf32_rounding_is_nearest_away() {
        assert_eq!(to_tf32(1.0), 1.0);
        let ulp = 2f32.powi(-10);
        assert_eq!(to_tf32(1.0 + ulp / 2.0), 1.0 + ulp); // tie → away from zero
        assert_eq!(to_tf32(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(to_tf32(1.0 + ulp / 4.0), 1.0);
        assert!(to_tf32(f32::NAN).is_nan());
    }

    #[test]
    fn dense_checks() {
        assert!(check_dense("B", 10, 2, 5, 5).is_ok());
        assert!(check_dense("B", 9, 2, 5, 5).is_err());
        assert!(check_dense("B", 100, 2, 5, 4).is_err());
        assert!(check_dense("B", 0, 0, 5, 5).is_ok());
    }
}
