//! Vendor baselines the bench and the facade compare against: [`cusparse`] (SpMM, SpMV, BSR SpMV)
//! and [`cublas`] (dense GEMM), [`cublas_ex`] (GemmEx: f16 and FAST_TF32, for SpAMM).

pub mod cublas;
pub mod cublas_ex;
pub mod cusparse;

use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use cudarc::cublas::CudaBlas;

use crate::{Gpu, GpuError};

/// A cuBLAS handle on a [`Gpu`]'s stream that is not destroyed on a lost context: cudarc's
/// `CudaBlas` unwraps `cublasDestroy`'s status when dropped, and that call synchronizes the
/// device, which fails once the context is unusable ([`Gpu::lost_status`]); the handle is then
/// left to the process, which cannot use the GPU any more anyway.
pub(crate) struct BlasHandle {
    blas: ManuallyDrop<CudaBlas>,
    gpu: Gpu,
}

impl BlasHandle {
    /// A handle bound to [`Gpu::stream`] (cuBLAS checked first: cudarc panics on a missing
    /// library or function).
    pub(crate) fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        require_cublas()?;
        Ok(Self {
            blas: ManuallyDrop::new(CudaBlas::new(gpu.stream().clone())?),
            gpu: gpu.clone(),
        })
    }
}

impl std::ops::Deref for BlasHandle {
    type Target = CudaBlas;
    fn deref(&self) -> &CudaBlas {
        &self.blas
    }
}

impl std::ops::DerefMut for BlasHandle {
    fn deref_mut(&mut self) -> &mut CudaBlas {
        &mut self.blas
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        if let Some(status) = self.gpu.lost_status() {
            tracing::debug!("cuBLAS handle left undestroyed on a lost context ({status:?})");
            return;
        }
        // SAFETY: dropped exactly once, here; `self.blas` is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.blas) }
    }
}

/// The cuSPARSE functions this crate calls (through cudarc's `sys` layer or its `result::create`).
/// cudarc resolves each on first call and panics when the library lacks it, so
/// [`require_cusparse`] looks every one up first.
pub const CUSPARSE_SYMBOLS: &[&str] = &[
    "cusparseCreate",
    "cusparseDestroy",
    "cusparseSetStream",
    "cusparseCreateCsr",
    "cusparseDestroySpMat",
    "cusparseCreateDnMat",
    "cusparseDestroyDnMat",
    "cusparseDnMatSetValues",
    "cusparseCreateDnVec",
    "cusparseDestroyDnVec",
    "cusparseDnVecSetValues",
    "cusparseCreateMatDescr",
    "cusparseDestroyMatDescr",
    "cusparseSetMatIndexBase",
    "cusparseSetMatType",
    "cusparseSpMM",
    "cusparseSpMM_bufferSize",
    "cusparseSpMM_preprocess",
    "cusparseSpMV",
    "cusparseSpMV_bufferSize",
    "cusparseSbsrmv",
];

/// The cuBLAS functions this crate calls (directly or through cudarc's `CudaBlas`).
pub const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetMathMode",
    "cublasSgemm_v2",
    "cublasGemmEx",
];

/// Checks that a library loads (`present`) and has every one of `symbols` (`has`), naming the
/// first missing ones in a [`GpuError::Library`].
pub fn check_library(
    library: &'static str,
    present: bool,
    has: impl Fn(&str) -> bool,
    symbols: &[&str],
) -> Result<(), GpuError> {
    if !present {
        return Err(GpuError::Library {
            library,
            detail: "could not be loaded (not on the library path)".into(),
        });
    }
    let missing: Vec<&str> = symbols.iter().copied().filter(|s| !has(s)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(GpuError::Library {
        library,
        detail: format!(
            "too old: lacks {} of the functions tcsparse calls ({})",
            missing.len(),
            missing.join(", ")
        ),
    })
}

/// [`check_library`] on a library cudarc opens at run time: `present` (its `is_culib_present`)
/// tries to open it by its usual names, `lib` (its `culib`) is the library once it opens.
pub(crate) fn check_loaded(
    library: &'static str,
    present: unsafe fn() -> bool,
    lib: unsafe fn() -> &'static libloading::Library,
    symbols: &[&str],
) -> Result<(), GpuError> {
    // SAFETY: only tries to open the library by its usual names.
    let present = unsafe { present() };
    check_library(
        library,
        present,
        // SAFETY: reached only when the library opens (so `lib` does not panic); looking a
        // symbol up calls nothing.
        |name| unsafe { lib().get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_ok(),
        symbols,
    )
}

/// Result of a library check, cached for the process (the error's detail).
fn cached(
    cell: &'static OnceLock<Result<(), String>>,
    library: &'static str,
    check: impl FnOnce() -> Result<(), GpuError>,
) -> Result<(), GpuError> {
    let r = cell.get_or_init(|| {
        check().map_err(|e| match e {
            GpuError::Library { detail, .. } => detail,
            other => other.to_string(),
        })
    });
    r.clone()
        .map_err(|detail| GpuError::Library { library, detail })
}

/// libcusparse loads and has every function of [`CUSPARSE_SYMBOLS`]: checked once per process,
/// before any cuSPARSE call (cudarc would panic on a missing library or function).
pub fn require_cusparse() -> Result<(), GpuError> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    use cudarc::cusparse::sys as cs;
    cached(&CHECK, "libcusparse", || {
        check_loaded(
            "libcusparse",
            cs::is_culib_present,
            cs::culib,
            CUSPARSE_SYMBOLS,
        )
    })
}

/// libcublas loads and has every function of [`CUBLAS_SYMBOLS`] (as [`require_cusparse`]).
pub fn require_cublas() -> Result<(), GpuError> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    use cudarc::cublas::sys as cb;
    cached(&CHECK, "libcublas", || {
        check_loaded("libcublas", cb::is_culib_present, cb::culib, CUBLAS_SYMBOLS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GpuErrorKind;

    #[test]
    fn a_missing_library_is_a_typed_error() {
        let e = check_library("libx", false, |_| true, &["a"]).unwrap_err();
        assert_eq!(e.kind(), GpuErrorKind::LibraryMissing);
        assert!(e.to_string().contains("libx: could not be loaded"), "{e}");
    }

    #[test]
    fn a_library_without_a_function_we_call_is_too_old() {
        let has = |s: &str| s != "cusparseSpMV" && s != "cusparseSbsrmv";
        let e = check_library("libcusparse", true, has, CUSPARSE_SYMBOLS).unwrap_err();
        assert_eq!(e.kind(), GpuErrorKind::LibraryMissing);
        let m = e.to_string();
        assert!(
            m.contains("too old") && m.contains("cusparseSpMV, cusparseSbsrmv"),
            "{m}"
        );
        assert!(check_library("libcusparse", true, |_| true, CUSPARSE_SYMBOLS).is_ok());
    }

    #[test]
    fn every_cusparse_function_called_is_checked() {
        // Each `cs::cusparseX(` call in this crate's sources must be listed.
        let sources = [
            include_str!("cusparse/mod.rs"),
            include_str!("cusparse/bsr.rs"),
            include_str!("../spmv/baseline.rs"),
        ];
        for src in sources {
            for (i, _) in src.match_indices("cs::cusparse") {
                let name: String = src[i + 4..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let is_call = src[i + 4 + name.len()..].starts_with('(');
                if is_call {
                    assert!(
                        CUSPARSE_SYMBOLS.contains(&name.as_str()),
                        "{name} unchecked"
                    );
                }
            }
        }
    }

    #[test]
    fn the_checks_never_panic_and_match_the_loader() {
        // SAFETY: only dlopen attempts.
        let present = unsafe {
            [
                cudarc::cusparse::sys::is_culib_present(),
                cudarc::cublas::sys::is_culib_present(),
            ]
        };
        for (r, present) in [require_cusparse(), require_cublas()]
            .into_iter()
            .zip(present)
        {
            match r {
                Ok(()) => assert!(present),
                Err(e) => {
                    assert_eq!(e.kind(), GpuErrorKind::LibraryMissing);
                    // Absent: "could not be loaded"; present: only a too-old one fails.
                    assert_eq!(e.to_string().contains("too old"), present, "{e}");
                }
            }
        }
    }
}
