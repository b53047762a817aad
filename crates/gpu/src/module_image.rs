//! Which image of a kernel module the driver is given: the embedded sm_90 cubin on a GPU of compute
//! capability 9.0 (no JIT compilation: milliseconds instead of seconds per module on a cold driver
//! cache), the embedded PTX on every other GPU or when the cubin cannot be used.
//!
//! The cubins are `kernels-ptx/<stem>.sm_90.cubin.gz`, built with the PTX by `cargo xtask ptx` from
//! the same sources and compiler and checked fresh by `nvptx-builder`'s tests, and embedded through
//! `crates/gpu/kernels-ptx`, a link to the workspace's folder that `cargo package` follows (the
//! published crate holds the files themselves). The environment
//! variable [`KERNEL_IMAGE_ENV`] set to `ptx` makes every module load from PTX (for comparisons, or
//! a driver that refuses the cubins); `cubin` or unset chooses as above.

use std::io::Read;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule, DriverError};

use crate::KernelModule;

/// Environment variable choosing the module image: `ptx` forces PTX; `auto`, `cubin` or unset
/// load the cubin where the device matches.
pub const KERNEL_IMAGE_ENV: &str = "TCSPARSE_KERNEL_IMAGE";
/// The compute capability the embedded cubins are built for.
pub const CUBIN_COMPUTE_CAPABILITY: (u32, u32) = (9, 0);
/// Largest cubin inflated (the largest module's is under 1 MiB).
const MAX_CUBIN_BYTES: u64 = 64 << 20;

/// The image a module was loaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleImage {
    /// Machine code for sm_90, loaded as is.
    Cubin,
    /// PTX, compiled by the driver for the device (cached by the driver across processes).
    Ptx,
}

impl KernelModule {
    /// The embedded sm_90 cubin, gzip-compressed, its stamp in the gzip comment.
    pub fn cubin_gz(self) -> &'static [u8] {
        match self {
            KernelModule::CsrSpmm => include_bytes!("../kernels-ptx/csr_spmm.sm_90.cubin.gz"),
            KernelModule::AccSpmm => include_bytes!("../kernels-ptx/acc_spmm.sm_90.cubin.gz"),
            KernelModule::RowTileSpmm => {
                include_bytes!("../kernels-ptx/row_tile_spmm.sm_90.cubin.gz")
            }
            KernelModule::Permute => {
                include_bytes!("../kernels-ptx/permute_rows.sm_90.cubin.gz")
            }
            KernelModule::Spamm => include_bytes!("../kernels-ptx/spamm.sm_90.cubin.gz"),
            KernelModule::Spmv => include_bytes!("../kernels-ptx/spmv.sm_90.cubin.gz"),
            KernelModule::HrpbSpmm => {
                include_bytes!("../kernels-ptx/hrpb_spmm.sm_90.cubin.gz")
            }
            KernelModule::SpmvN2 => include_bytes!("../kernels-ptx/spmv_n2.sm_90.cubin.gz"),
            KernelModule::SpmvN3 => include_bytes!("../kernels-ptx/spmv_n3.sm_90.cubin.gz"),
            KernelModule::SpmvN4 => include_bytes!("../kernels-ptx/spmv_n4.sm_90.cubin.gz"),
            KernelModule::SpmvN5 => include_bytes!("../kernels-ptx/spmv_n5.sm_90.cubin.gz"),
            KernelModule::SpmvN6 => include_bytes!("../kernels-ptx/spmv_n6.sm_90.cubin.gz"),
            KernelModule::SpmvN7 => include_bytes!("../kernels-ptx/spmv_n7.sm_90.cubin.gz"),
            KernelModule::SpmvN8 => include_bytes!("../kernels-ptx/spmv_n8.sm_90.cubin.gz"),
            KernelModule::Sddmm => include_bytes!("../kernels-ptx/sddmm.sm_90.cubin.gz"),
            KernelModule::StagedSpmm => {
                include_bytes!("../kernels-ptx/staged_spmm.sm_90.cubin.gz")
            }
        }
    }

    /// The embedded cubin, inflated; `None` if it does not inflate within the size limit.
    pub fn cubin(self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(self.cubin_gz())
            .take(MAX_CUBIN_BYTES + 1)
            .read_to_end(&mut out)
            .ok()?;
        (!out.is_empty() && out.len() as u64 <= MAX_CUBIN_BYTES).then_some(out)
    }
}

/// Whether a device of `compute_capability` gets the cubin, given [`KERNEL_IMAGE_ENV`]'s value.
pub fn wants_cubin(compute_capability: (u32, u32), env: Option<&str>) -> bool {
    compute_capability == CUBIN_COMPUTE_CAPABILITY
        && !env.is_some_and(|v| v.eq_ignore_ascii_case("ptx"))
}

/// Loads module `m` into `ctx`: the cubin where [`wants_cubin`] says so (falling back to the PTX
/// if the driver refuses it), the PTX otherwise. Returns the module and the image it came from.
pub(crate) fn load(
    ctx: &Arc<CudaContext>,
    m: KernelModule,
    compute_capability: (u32, u32),
) -> Result<(Arc<CudaModule>, ModuleImage), DriverError> {
    let env = std::env::var(KERNEL_IMAGE_ENV).ok();
    if wants_cubin(compute_capability, env.as_deref()) {
        match m
            .cubin()
            .map(|c| ctx.load_module(cudarc::nvrtc::Ptx::from_binary(c)))
        {
            Some(Ok(module)) => return Ok((module, ModuleImage::Cubin)),
            Some(Err(e)) => {
                tracing::warn!("module {m:?}: the driver refused its cubin ({e}); loading its PTX")
            }
            None => {
                tracing::warn!("module {m:?}: its embedded cubin does not inflate; loading its PTX")
            }
        }
    }
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(m.ptx()))?;
    Ok((module, ModuleImage::Ptx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_embeds_a_cubin_that_inflates_to_an_elf() {
        for m in KernelModule::ALL {
            let c = m
                .cubin()
                .unwrap_or_else(|| panic!("{m:?}: cubin does not inflate"));
            assert_eq!(&c[..4], b"\x7fELF", "{m:?}: not an ELF image");
        }
    }

    #[test]
    fn the_cubin_is_chosen_only_for_its_device_unless_ptx_is_forced() {
        assert!(wants_cubin((9, 0), None));
        assert!(wants_cubin((9, 0), Some("cubin")));
        assert!(wants_cubin((9, 0), Some("auto")));
        assert!(!wants_cubin((9, 0), Some("PTX")));
        assert!(!wants_cubin((8, 0), None));
        assert!(!wants_cubin((9, 1), Some("cubin")));
        assert!(!wants_cubin((10, 0), None));
    }
}
