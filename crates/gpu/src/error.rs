//! The GPU runtime's errors: [`GpuError`] keeps every driver and library status with a readable
//! `Display`, and [`GpuError::kind`] says what a caller can do about one. A driver status that
//! leaves the context unusable (a kernel fault, a lost device: [`driver_error_kind`] says
//! [`GpuErrorKind::DeviceLost`]) becomes [`GpuError::DeviceLost`] wherever it is converted.

use cudarc::driver::{DriverError, sys};

use crate::KernelModule;

/// Errors of the GPU runtime. Every driver/library status is kept, with a readable `Display`.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No usable GPU (the message says why: no driver, no device, init failure).
    #[error("no usable CUDA GPU: {0}")]
    Unavailable(String),
    /// A CUDA driver call failed; the context is still usable (a status that leaves it unusable
    /// converts to [`GpuError::DeviceLost`] instead).
    #[error("CUDA driver error: {0}")]
    Driver(DriverError),
    /// The device's CUDA context is unusable: a kernel faulted (a `trap`, an illegal address or
    /// instruction, …), the device reported an uncorrectable error, or it is gone. Such statuses
    /// are sticky: every later call on the context (products, uploads, new preparations) fails
    /// with one, and device memory allocated in it is lost. Only a new process can use the GPU
    /// again; dropping what was prepared on it is safe.
    #[error(
        "the GPU's CUDA context is unusable ({:?}): a kernel faulted or the device was lost, and every later call on this context fails; only a new process can use the GPU again",
        .status.0
    )]
    DeviceLost {
        /// The driver's status (e.g. `CUDA_ERROR_LAUNCH_FAILED` after a kernel's `trap`).
        status: DriverError,
    },
    /// A cuSPARSE call failed.
    #[error("cuSPARSE error in {call}: {status}")]
    Cusparse {
        /// Which cuSPARSE function.
        call: &'static str,
        /// Status name (e.g. `CUSPARSE_STATUS_INVALID_VALUE`).
        status: String,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS error: {0}")]
    Cublas(cudarc::cublas::result::CublasError),
    /// Loading a kernel module or function failed.
    #[error("loading {module:?}::{name}: {source}")]
    Load {
        /// Module.
        module: KernelModule,
        /// Kernel name (empty when the module itself failed to load).
        name: &'static str,
        /// Driver error.
        source: DriverError,
    },
    /// Arguments do not fit the operation (shapes, lengths, index ranges).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An allocation was refused by the handle's allocation budget ([`crate::Gpu::set_alloc_budget`],
    /// [`crate::budget::ALLOC_BUDGET_ENV`]) before the driver was asked.
    #[error(
        "device out of memory: {requested} bytes asked for with {drawn} of the allocation budget's {limit} bytes already drawn"
    )]
    OutOfMemory {
        /// Bytes of the refused allocation.
        requested: u64,
        /// Bytes drawn before it.
        drawn: u64,
        /// The budget.
        limit: u64,
    },
    /// A CUDA library (cuSPARSE, cuBLAS) is missing, or too old to have a function we call.
    #[error("{library}: {detail}")]
    Library {
        /// The library (`libcusparse`, `libcublas`).
        library: &'static str,
        /// What is missing.
        detail: String,
    },
}

/// What kind of failure a [`GpuError`] is ([`GpuError::kind`]): what a caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuErrorKind {
    /// No usable GPU (no driver, no device, initialisation failed).
    Unavailable,
    /// Device memory ran out (the driver's `CUDA_ERROR_OUT_OF_MEMORY` or the allocation budget):
    /// a smaller problem, or freeing other work, may succeed.
    OutOfMemory,
    /// A kernel could not be launched (too many resources, bad configuration, no kernel image
    /// for this device): the device itself is fine.
    LaunchFailed,
    /// The context is unusable: a kernel faulted (illegal address, trap, ECC error) or the device
    /// is gone. Every later call on the same context fails too (CUDA errors of this class are
    /// sticky); only a new process recovers.
    DeviceLost,
    /// A CUDA library is missing or too old.
    LibraryMissing,
    /// Loading one of our PTX modules failed (a driver older than the PTX ISA, a JIT error).
    ModuleLoad,
    /// Arguments that do not fit the operation.
    InvalidArgument,
    /// Anything else the driver or a library reported.
    Other,
}

/// The [`GpuErrorKind`] of a driver status. [`GpuErrorKind::DeviceLost`] are the statuses the
/// driver documents as leaving the context (or the device) unusable: every later call fails
/// ("sticky" errors). A kernel's `trap` is reported as `CUDA_ERROR_LAUNCH_FAILED`; an illegal
/// address, instruction or alignment, a device-side `assert`, a stack overflow, a kernel
/// killed by the watchdog, an uncorrectable ECC or NVLink error and a lost or detached device
/// have their own statuses, all in this class.
pub fn driver_error_kind(e: &DriverError) -> GpuErrorKind {
    use sys::CUresult::*;
    match e.0 {
        CUDA_ERROR_OUT_OF_MEMORY => GpuErrorKind::OutOfMemory,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        | CUDA_ERROR_INVALID_IMAGE
        | CUDA_ERROR_NO_BINARY_FOR_GPU
        | CUDA_ERROR_INVALID_PTX
        | CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | CUDA_ERROR_NOT_FOUND => GpuErrorKind::LaunchFailed,
        CUDA_ERROR_INVALID_VALUE => GpuErrorKind::InvalidArgument,
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_LAUNCH_TIMEOUT
        | CUDA_ERROR_ECC_UNCORRECTABLE
        | CUDA_ERROR_CONTEXT_IS_DESTROYED
        | CUDA_ERROR_DEINITIALIZED
        | CUDA_ERROR_DEVICE_UNAVAILABLE
        | CUDA_ERROR_DEVICE_NOT_LICENSED
        | CUDA_ERROR_SYSTEM_NOT_READY
        | CUDA_ERROR_NVLINK_UNCORRECTABLE
        | CUDA_ERROR_EXTERNAL_DEVICE => GpuErrorKind::DeviceLost,
        CUDA_ERROR_NO_DEVICE | CUDA_ERROR_NOT_INITIALIZED | CUDA_ERROR_SYSTEM_DRIVER_MISMATCH => {
            GpuErrorKind::Unavailable
        }
        _ => GpuErrorKind::Other,
    }
}

impl GpuError {
    /// What kind of failure this is (out of memory, a lost device, a missing library, …).
    pub fn kind(&self) -> GpuErrorKind {
        match self {
            GpuError::Unavailable(_) => GpuErrorKind::Unavailable,
            GpuError::Driver(e) => driver_error_kind(e),
            GpuError::DeviceLost { .. } => GpuErrorKind::DeviceLost,
            GpuError::Cusparse { status, .. } => match status.as_str() {
                "CUSPARSE_STATUS_ALLOC_FAILED" | "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES" => {
                    GpuErrorKind::OutOfMemory
                }
                "CUSPARSE_STATUS_EXECUTION_FAILED" => GpuErrorKind::LaunchFailed,
                "CUSPARSE_STATUS_INVALID_VALUE" | "CUSPARSE_STATUS_NOT_SUPPORTED" => {
                    GpuErrorKind::InvalidArgument
                }
                "CUSPARSE_STATUS_NOT_INITIALIZED" | "CUSPARSE_STATUS_ARCH_MISMATCH" => {
                    GpuErrorKind::Unavailable
                }
                _ => GpuErrorKind::Other,
            },
            GpuError::Cublas(e) => match e.0 {
                cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED => {
                    GpuErrorKind::OutOfMemory
                }
                cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED => {
                    GpuErrorKind::LaunchFailed
                }
                cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE => {
                    GpuErrorKind::InvalidArgument
                }
                _ => GpuErrorKind::Other,
            },
            GpuError::Load { source, .. } => match driver_error_kind(source) {
                GpuErrorKind::DeviceLost => GpuErrorKind::DeviceLost,
                GpuErrorKind::OutOfMemory => GpuErrorKind::OutOfMemory,
                _ => GpuErrorKind::ModuleLoad,
            },
            GpuError::Invalid(_) => GpuErrorKind::InvalidArgument,
            GpuError::OutOfMemory { .. } => GpuErrorKind::OutOfMemory,
            GpuError::Library { .. } => GpuErrorKind::LibraryMissing,
        }
    }

    /// Wraps a cuSPARSE status (cudarc's `CusparseError` has no `Display`). A failed execution or
    /// an internal error on a context that is no longer usable is [`GpuError::DeviceLost`]
    /// (`cuCtxSynchronize` on the calling thread's context says which).
    pub fn cusparse(call: &'static str, e: cudarc::cusparse::result::CusparseError) -> Self {
        use cudarc::cusparse::sys::cusparseStatus_t::*;
        if matches!(
            e.0,
            CUSPARSE_STATUS_EXECUTION_FAILED | CUSPARSE_STATUS_INTERNAL_ERROR
        ) && let Some(status) = crate::lost::sticky_error()
        {
            tracing::debug!("{call}: {:?} on a lost context ({status})", e.0);
            return GpuError::DeviceLost { status };
        }
        GpuError::Cusparse {
            call,
            status: format!("{:?}", e.0),
        }
    }

    /// Loading `module` (`name`: one of its kernels, empty for the module itself) failed with
    /// `source`: [`GpuError::Load`], or [`GpuError::DeviceLost`] for a status that leaves the
    /// context unusable.
    pub fn load(module: KernelModule, name: &'static str, source: DriverError) -> Self {
        match driver_error_kind(&source) {
            GpuErrorKind::DeviceLost => GpuError::DeviceLost { status: source },
            _ => GpuError::Load {
                module,
                name,
                source,
            },
        }
    }

    /// Whether this error left the context unusable ([`GpuErrorKind::DeviceLost`]).
    pub fn is_device_lost(&self) -> bool {
        self.kind() == GpuErrorKind::DeviceLost
    }
}

impl From<cudarc::cublas::result::CublasError> for GpuError {
    /// [`GpuError::Cublas`], or [`GpuError::DeviceLost`] for a failed execution or an internal
    /// error on a context that is no longer usable (as [`GpuError::cusparse`]).
    fn from(e: cudarc::cublas::result::CublasError) -> Self {
        use cudarc::cublas::sys::cublasStatus_t::*;
        if matches!(
            e.0,
            CUBLAS_STATUS_EXECUTION_FAILED | CUBLAS_STATUS_INTERNAL_ERROR
        ) && let Some(status) = crate::lost::sticky_error()
        {
            return GpuError::DeviceLost { status };
        }
        GpuError::Cublas(e)
    }
}

impl From<tcsparse_planner::PlanError> for GpuError {
    /// [`GpuError::Invalid`]: a planner refuses only its input.
    fn from(e: tcsparse_planner::PlanError) -> Self {
        GpuError::Invalid(format!("planning: {e}"))
    }
}

impl From<DriverError> for GpuError {
    /// [`GpuError::DeviceLost`] for a status that leaves the context unusable
    /// ([`driver_error_kind`]), [`GpuError::Driver`] for every other.
    fn from(e: DriverError) -> Self {
        match driver_error_kind(&e) {
            GpuErrorKind::DeviceLost => GpuError::DeviceLost { status: e },
            _ => GpuError::Driver(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_failures_are_classified() {
        use sys::CUresult::*;
        let kind = |r| GpuError::from(DriverError(r)).kind();
        assert_eq!(kind(CUDA_ERROR_OUT_OF_MEMORY), GpuErrorKind::OutOfMemory);
        assert_eq!(kind(CUDA_ERROR_ILLEGAL_ADDRESS), GpuErrorKind::DeviceLost);
        assert_eq!(kind(CUDA_ERROR_LAUNCH_FAILED), GpuErrorKind::DeviceLost);
        assert_eq!(kind(CUDA_ERROR_ECC_UNCORRECTABLE), GpuErrorKind::DeviceLost);
        assert_eq!(
            kind(CUDA_ERROR_DEVICE_UNAVAILABLE),
            GpuErrorKind::DeviceLost
        );
        assert_eq!(
            kind(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
            GpuErrorKind::LaunchFailed
        );
        assert_eq!(
            kind(CUDA_ERROR_NO_BINARY_FOR_GPU),
            GpuErrorKind::LaunchFailed
        );
        assert_eq!(
            kind(CUDA_ERROR_INVALID_VALUE),
            GpuErrorKind::InvalidArgument
        );
        assert_eq!(kind(CUDA_ERROR_NO_DEVICE), GpuErrorKind::Unavailable);
        assert_eq!(kind(CUDA_ERROR_UNKNOWN), GpuErrorKind::Other);
        let load = GpuError::Load {
            module: KernelModule::Spmv,
            name: "",
            source: DriverError(CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
        };
        assert_eq!(load.kind(), GpuErrorKind::ModuleLoad);
        let oom = GpuError::cusparse(
            "cusparseSpMM",
            cudarc::cusparse::result::CusparseError(
                cudarc::cusparse::sys::cusparseStatus_t::CUSPARSE_STATUS_ALLOC_FAILED,
            ),
        );
        assert_eq!(oom.kind(), GpuErrorKind::OutOfMemory);
        let refused = GpuError::OutOfMemory {
            requested: 64,
            drawn: 10,
            limit: 32,
        };
        assert_eq!(refused.kind(), GpuErrorKind::OutOfMemory);
        assert!(refused.to_string().contains("64 bytes"), "{refused}");
    }

    /// Every status that leaves the context unusable converts to `DeviceLost`, whose message
    /// says so; out of memory and the statuses of a usable context stay what they are.
    #[test]
    fn sticky_statuses_are_device_lost_and_others_stay() {
        use sys::CUresult::*;
        let lost = [
            CUDA_ERROR_LAUNCH_FAILED,
            CUDA_ERROR_ILLEGAL_ADDRESS,
            CUDA_ERROR_ILLEGAL_INSTRUCTION,
            CUDA_ERROR_MISALIGNED_ADDRESS,
            CUDA_ERROR_INVALID_ADDRESS_SPACE,
            CUDA_ERROR_INVALID_PC,
            CUDA_ERROR_HARDWARE_STACK_ERROR,
            CUDA_ERROR_ASSERT,
            CUDA_ERROR_ECC_UNCORRECTABLE,
            CUDA_ERROR_NVLINK_UNCORRECTABLE,
            CUDA_ERROR_LAUNCH_TIMEOUT,
            CUDA_ERROR_CONTEXT_IS_DESTROYED,
            CUDA_ERROR_DEVICE_UNAVAILABLE,
            CUDA_ERROR_EXTERNAL_DEVICE,
        ];
        for r in lost {
            let e = GpuError::from(DriverError(r));
            assert!(
                matches!(e, GpuError::DeviceLost { status } if status.0 == r),
                "{r:?}: {e:?}"
            );
            assert_eq!(e.kind(), GpuErrorKind::DeviceLost, "{r:?}");
            assert!(e.is_device_lost());
            let text = e.to_string();
            assert!(text.contains(&format!("{r:?}")), "{text}");
            assert!(text.contains("context is unusable"), "{text}");
            assert!(text.contains("new process"), "{text}");
            // Loading a module on a lost context is a lost device too, not a module problem.
            let load = GpuError::load(KernelModule::Spmv, "spmv_walk", DriverError(r));
            assert!(
                matches!(load, GpuError::DeviceLost { .. }),
                "{r:?}: {load:?}"
            );
        }
        for (r, kind) in [
            (CUDA_ERROR_OUT_OF_MEMORY, GpuErrorKind::OutOfMemory),
            (CUDA_ERROR_INVALID_VALUE, GpuErrorKind::InvalidArgument),
            (
                CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                GpuErrorKind::LaunchFailed,
            ),
            (CUDA_ERROR_NO_BINARY_FOR_GPU, GpuErrorKind::LaunchFailed),
            (CUDA_ERROR_NO_DEVICE, GpuErrorKind::Unavailable),
            (CUDA_ERROR_NOT_READY, GpuErrorKind::Other),
            (CUDA_ERROR_UNKNOWN, GpuErrorKind::Other),
        ] {
            let e = GpuError::from(DriverError(r));
            assert!(matches!(e, GpuError::Driver(d) if d.0 == r), "{r:?}: {e:?}");
            assert_eq!(e.kind(), kind, "{r:?}");
            assert!(!e.is_device_lost());
        }
        let load = GpuError::load(KernelModule::Spmv, "", DriverError(CUDA_ERROR_INVALID_PTX));
        assert!(matches!(load, GpuError::Load { .. }), "{load:?}");
        assert_eq!(load.kind(), GpuErrorKind::ModuleLoad);
    }

    /// A library's failed execution is a lost device only when the context says so: with no
    /// current context (a CPU test thread) it stays the library's error.
    #[test]
    fn a_library_failure_on_a_usable_context_stays_the_libraries() {
        let e = GpuError::cusparse(
            "cusparseSpMM",
            cudarc::cusparse::result::CusparseError(
                cudarc::cusparse::sys::cusparseStatus_t::CUSPARSE_STATUS_EXECUTION_FAILED,
            ),
        );
        assert!(matches!(e, GpuError::Cusparse { .. }), "{e:?}");
        assert_eq!(e.kind(), GpuErrorKind::LaunchFailed);
        let e = GpuError::from(cudarc::cublas::result::CublasError(
            cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED,
        ));
        assert!(matches!(e, GpuError::Cublas(_)), "{e:?}");
        assert_eq!(e.kind(), GpuErrorKind::LaunchFailed);
    }
}
