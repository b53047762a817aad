//! The facade's error type. Every operation of the facade (SpMM, SpMV, SpAMM) returns [`Error`],
//! and every error type of the workspace's libraries converts into it (`?` works on a reader's,
//! a generator's, the planner's or the GPU runtime's result inside a function returning
//! [`Error`]).

use tcsparse_formats::csr::CsrError;
use tcsparse_gpu::GpuError;
use tcsparse_gpu::distributed::DistributedError;
use tcsparse_gpu::spmm::AccSpmmError;
use tcsparse_reorder::ReorderError;
use thiserror::Error;

use crate::{DType, Precision};

/// Errors of the facade.
#[non_exhaustive]
#[derive(Debug, Error)]
pub enum Error {
    /// Building a CSR matrix failed.
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// Reordering failed (unknown method, non-square matrix in symmetric mode, …).
    #[error("reordering: {0}")]
    Reorder(#[from] ReorderError),
    /// Building a layout failed (the message names it).
    #[error("building BitTCF: {0}")]
    Format(String),
    /// A layout's arrays are inconsistent (building or validating a tensor-core format).
    #[error(transparent)]
    Layout(#[from] tcsparse_formats::tcf::FormatError),
    /// Reading a matrix file ([`crate::read`]; Matrix Market or `.npz`).
    #[error(transparent)]
    Read(#[from] tcsparse_formats::mtx::MtxError),
    /// Reading a scipy `.npz` file.
    #[error(transparent)]
    Npz(#[from] tcsparse_formats::npz::NpzError),
    /// Opening an input file.
    #[error(transparent)]
    File(#[from] tcsparse_formats::file::FileError),
    /// Reading or writing an on-disk layout cache file.
    #[error(transparent)]
    Cache(#[from] tcsparse_formats::cache::CacheError),
    /// Generating a matrix.
    #[error(transparent)]
    Generate(#[from] tcsparse_formats::generate::GenError),
    /// A pattern product (SDDMM, the SpMM gradient's transpose).
    #[error(transparent)]
    Sddmm(#[from] tcsparse_formats::sddmm::SddmmError),
    /// A memory budget refused a declared size.
    #[error(transparent)]
    Budget(#[from] tcsparse_formats::limits::BudgetError),
    /// Planning refused its inputs.
    #[error("planning: {0}")]
    Plan(#[from] tcsparse_planner::PlanError),
    /// The GPU runtime failed (a lost device is [`Error::DeviceLost`]).
    #[error(transparent)]
    Gpu(GpuError),
    /// The GPU's CUDA context is unusable ([`GpuError::DeviceLost`]): a kernel faulted or the
    /// device was lost. Every later product, upload and preparation on the device fails with
    /// this error, in every engine of the process; only a new process can use the GPU again.
    /// Dropping the prepared matrices and the engine is safe.
    #[error(transparent)]
    DeviceLost(GpuError),
    /// The Acc-SpMM launch path rejected its inputs or failed.
    #[error(transparent)]
    Acc(AccSpmmError),
    /// Arguments do not fit the prepared matrix.
    #[error("invalid argument: {0}")]
    InvalidArgs(String),
    /// New values for a prepared pattern ([`crate::Prepared::update_values`]) of the wrong length.
    #[error("{got} values given for a matrix with {expected} stored nonzeros")]
    ValueCount {
        /// Stored nonzeros of the prepared matrix.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// One rank per GPU: the launcher environment, the rendezvous, NCCL or a disagreement
    /// between ranks ([`crate::distributed`]).
    #[error(transparent)]
    Distributed(DistributedError),
    /// The rendezvous of one rank per GPU (launcher variables, the TCP store).
    #[error(transparent)]
    Rendezvous(#[from] tcsparse_gpu::distributed::rendezvous::RendezvousError),
    /// The operation needs something this engine does not have (e.g. a device call on the CPU path).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// No kernel of the family that would run has what was asked for: an element type or a
    /// precision it has no kernel for yet.
    #[error("unsupported: {requested} on {kernels}{hint}")]
    Unsupported {
        /// What was asked for.
        requested: Requested,
        /// The kernel family (or families) that would run, by name.
        kernels: String,
        /// What does take it (empty, or starting with `; `).
        hint: String,
    },
    /// B and C of another element type than the matrix was prepared for
    /// ([`PrepareOptions::dtype`](crate::PrepareOptions::dtype)).
    #[error(
        "B and C are {got}, but the matrix was prepared for {prepared} (PrepareOptions::dtype)"
    )]
    ElementType {
        /// The element type of the preparation.
        prepared: DType,
        /// The element type of the operands given.
        got: DType,
    },
}

/// What an [`Error::Unsupported`] request asked for.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requested {
    /// B and C of this element type.
    Element(DType),
    /// This arithmetic.
    Precision(Precision),
    /// B and C of this element type at this arithmetic.
    ElementAt(DType, Precision),
}

impl std::fmt::Display for Requested {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Requested::Element(d) => write!(f, "B and C in {d}"),
            Requested::Precision(p) => write!(f, "precision {p}"),
            Requested::ElementAt(d, p) => write!(f, "B and C in {d} at precision {p}"),
        }
    }
}

impl From<GpuError> for Error {
    /// [`Error::DeviceLost`] for an error that left the context unusable, [`Error::Gpu`]
    /// otherwise.
    fn from(e: GpuError) -> Self {
        if e.is_device_lost() {
            Error::DeviceLost(e)
        } else {
            Error::Gpu(e)
        }
    }
}

impl From<AccSpmmError> for Error {
    /// [`Error::DeviceLost`] for a runtime or driver error that left the context unusable,
    /// [`Error::Acc`] otherwise.
    fn from(e: AccSpmmError) -> Self {
        match e {
            AccSpmmError::Gpu(g) if g.is_device_lost() => Error::DeviceLost(g),
            AccSpmmError::Driver(d)
                if tcsparse_gpu::driver_error_kind(&d)
                    == tcsparse_gpu::GpuErrorKind::DeviceLost =>
            {
                Error::DeviceLost(d.into())
            }
            other => Error::Acc(other),
        }
    }
}

impl From<DistributedError> for Error {
    /// [`Error::DeviceLost`] for a GPU error that left the context unusable,
    /// [`Error::Distributed`] otherwise.
    fn from(e: DistributedError) -> Self {
        match e {
            DistributedError::Gpu(g) if g.is_device_lost() => Error::DeviceLost(g),
            other => Error::Distributed(other),
        }
    }
}

impl Error {
    /// For a GPU failure, what kind it is ([`tcsparse_gpu::GpuErrorKind`]: out of memory, a lost
    /// device, a failed launch, a missing library, …); `None` for every other error.
    pub fn gpu_kind(&self) -> Option<tcsparse_gpu::GpuErrorKind> {
        match self {
            Error::Gpu(e)
            | Error::DeviceLost(e)
            | Error::Acc(AccSpmmError::Gpu(e))
            | Error::Distributed(DistributedError::Gpu(e)) => Some(e.kind()),
            Error::Acc(AccSpmmError::Driver(e)) => Some(tcsparse_gpu::driver_error_kind(e)),
            _ => None,
        }
    }

    /// Whether the GPU's context is unusable ([`Error::DeviceLost`], or a GPU error of that
    /// kind wrapped another way): only a new process can use the GPU again.
    pub fn is_device_lost(&self) -> bool {
        self.gpu_kind() == Some(tcsparse_gpu::GpuErrorKind::DeviceLost)
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    /// `?` on every library's result inside a function returning the facade's error.
    #[test]
    fn every_library_error_converts() {
        fn read() -> Result<(), Error> {
            tcsparse_formats::mtx::read_matrix("/nonexistent/m.mtx")?;
            Ok(())
        }
        fn plan() -> Result<(), Error> {
            tcsparse_planner::split::split_rows(&[1], 0)?;
            Ok(())
        }
        fn generate() -> Result<(), Error> {
            let _: tcsparse_formats::generate::GeneratorSpec = "nonsense:x=1".parse()?;
            Ok(())
        }
        assert!(matches!(read(), Err(Error::Read(_))));
        assert!(matches!(plan(), Err(Error::Plan(_))));
        assert!(matches!(generate(), Err(Error::Generate(_))));
    }

    /// A GPU error that left the context unusable is `Error::DeviceLost`, however it arrives
    /// (the runtime's error, or the Acc-SpMM path's runtime or driver error); every other GPU
    /// error keeps its variant.
    #[test]
    fn a_lost_device_is_its_own_variant() {
        use cudarc::driver::{DriverError, sys::CUresult::*};
        use tcsparse_gpu::distributed::DistributedError;
        use tcsparse_gpu::spmm::AccSpmmError;
        use tcsparse_gpu::{GpuError, GpuErrorKind};
        for r in [
            CUDA_ERROR_LAUNCH_FAILED,
            CUDA_ERROR_ILLEGAL_INSTRUCTION,
            CUDA_ERROR_ILLEGAL_ADDRESS,
            CUDA_ERROR_ECC_UNCORRECTABLE,
            CUDA_ERROR_DEVICE_UNAVAILABLE,
        ] {
            let via: [Error; 5] = [
                GpuError::from(DriverError(r)).into(),
                DistributedError::Gpu(GpuError::from(DriverError(r))).into(),
                AccSpmmError::Gpu(GpuError::from(DriverError(r))).into(),
                AccSpmmError::Driver(DriverError(r)).into(),
                AccSpmmError::from(DriverError(r)).into(),
            ];
            for e in via {
                assert!(matches!(e, Error::DeviceLost(_)), "{r:?}: {e:?}");
                assert_eq!(e.gpu_kind(), Some(GpuErrorKind::DeviceLost));
                assert!(e.is_device_lost());
                let text = e.to_string();
                assert!(text.contains("context is unusable"), "{text}");
                assert!(text.contains("new process"), "{text}");
            }
        }
        let oom: Error = GpuError::from(DriverError(CUDA_ERROR_OUT_OF_MEMORY)).into();
        assert!(matches!(oom, Error::Gpu(GpuError::Driver(_))), "{oom:?}");
        assert_eq!(oom.gpu_kind(), Some(GpuErrorKind::OutOfMemory));
        assert!(!oom.is_device_lost());
        let budget: Error = GpuError::OutOfMemory {
            requested: 8,
            drawn: 0,
            limit: 4,
        }
        .into();
        assert!(matches!(budget, Error::Gpu(_)), "{budget:?}");
        let launch: Error =
            AccSpmmError::Driver(DriverError(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)).into();
        assert!(matches!(launch, Error::Acc(_)), "{launch:?}");
        assert_eq!(launch.gpu_kind(), Some(GpuErrorKind::LaunchFailed));
        let mismatch: Error = DistributedError::Mismatch("N".into()).into();
        assert!(matches!(mismatch, Error::Distributed(_)), "{mismatch:?}");
        let distributed_oom: Error =
            DistributedError::Gpu(GpuError::from(DriverError(CUDA_ERROR_OUT_OF_MEMORY))).into();
        assert_eq!(distributed_oom.gpu_kind(), Some(GpuErrorKind::OutOfMemory));
        let invalid: Error = AccSpmmError::InvalidArgs("n = 0".into()).into();
        assert!(matches!(invalid, Error::Acc(_)), "{invalid:?}");
        assert!(!invalid.is_device_lost());
    }
}
