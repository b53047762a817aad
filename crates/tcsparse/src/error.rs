//! The facade's error type. Every operation of the facade (SpMM, SpMV, SpAMM) returns [`Error`],
//! and every error type of the workspace's libraries converts into it (`?` works on a reader's,
//! a generator's, the planner's or the GPU runtime's result inside a function returning
//! [`Error`]).

use tcsparse_formats::csr::CsrError;
use tcsparse_gpu::GpuError;
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
}
