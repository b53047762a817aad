//! The GPU runtime's errors: [`GpuError`] keeps every driver and library status with a readable
//! `Display`, and [`GpuError::kind`] says what a caller can do about one.

use cudarc::driver::{DriverError, sys};

use crate::KernelModule;

/// Errors of the GPU runtime. Every driver/library status is kept, with a readable `Display`.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No usable GPU (the message says why: no driver, no device, init failure).
    #[error("no usable CUDA GPU: {0}")]
    Unavailable(String),
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0}")]
    Driver(#[from] DriverError),
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
    Cublas(#[from] cudarc::cublas::result::CublasError),
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

/// The [`GpuErrorKind`] of a driver status.
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
        | CUDA_ERROR_NVLINK_UNCORRECTABLE => GpuErrorKind::DeviceLost,
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

    /// Wraps a cuSPARSE status (cudarc's `CusparseError` has no `Display`).
    pub fn cusparse(call: &'static str, e: cudarc::cusparse::result::CusparseError) -> Self {
        GpuError::Cusparse {
            call,
            status: format!("{:?}", e.0),
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
}
