//! The facade's error type. Every operation of the facade (SpMM today; SpMV and SpAMM beside it)
//! returns [`Error`]; a new operation adds its variants here.

use tcsparse_formats::csr::CsrError;
use tcsparse_gpu::GpuError;
use tcsparse_gpu::spmm::AccSpmmError;
use tcsparse_reorder::ReorderError;
use thiserror::Error;

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
    /// Building the BitTCF format failed.
    #[error("building BitTCF: {0}")]
    Format(String),
    /// The GPU runtime failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The Acc-SpMM launch path rejected its inputs or failed.
    #[error(transparent)]
    Acc(#[from] AccSpmmError),
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
    Distributed(#[from] tcsparse_gpu::distributed::DistributedError),
    /// The operation needs something this engine does not have (e.g. a device call on the CPU path).
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl Error {
    /// For a GPU failure, what kind it is ([`tcsparse_gpu::GpuErrorKind`]: out of memory, a lost
    /// device, a failed launch, a missing library, …); `None` for every other error.
    pub fn gpu_kind(&self) -> Option<tcsparse_gpu::GpuErrorKind> {
        match self {
            Error::Gpu(e) | Error::Acc(AccSpmmError::Gpu(e)) => Some(e.kind()),
            Error::Acc(AccSpmmError::Driver(e)) => Some(tcsparse_gpu::driver_error_kind(e)),
            _ => None,
        }
    }
}
