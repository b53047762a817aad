//! `tcsparse-reorder`: permutations that pack nonzeros into dense tensor-core blocks.
//!
//! Tensor-core SpMM only beats CUDA-core SpMM when its 8×8 (BitTCF) or 16×8 (ME-TCF) blocks are dense;
//! the density is [`metrics::mean_nnz_tc`] and depends only on which rows share a row window. This
//! crate finds row orders that raise it:
//!
//! * [`Affinity`]: data-affinity reordering (Acc-SpMM §3.2, Algorithm 1), modularity dendrogram then a
//!   DFS that follows the unvisited row with the most common neighbours (bounded candidate set).
//! * [`Rabbit`]: Rabbit order (Arai et al., IPDPS'16), the same dendrogram numbered by plain DFS.
//! * [`Lsh`]: DTC-SpMM-style MinHash/LSH clustering into 16-row groups, then clusters of clusters.
//! * Baselines: [`Identity`], [`DegreeSort`], [`Rcm`] (reverse Cuthill–McKee).
//!
//! Every method implements [`Reorder`] and is deterministic for a given seed. [`by_name`] builds one
//! from its CLI name. A [`Permutation`] stores `perm[new] = old`; see [`perm`] for how `A`, `B` and
//! `C` are permuted in [`Mode::RowOnly`] (B untouched, C rows un-permuted on write) and
//! [`Mode::Symmetric`] (`P·A·Pᵀ`, B rows permuted too). Never touches CUDA.

mod affinity;
mod baselines;
mod community;
pub mod gate;
mod graph;
mod lsh;
pub mod metrics;
pub mod perm;
mod rabbit;

pub use affinity::Affinity;
pub use baselines::{DegreeSort, Identity, Rcm};
pub use gate::{Gate, GateReport};
pub use lsh::Lsh;
pub use perm::Permutation;
pub use rabbit::Rabbit;

use std::time::Instant;
use tcsparse_formats::Csr;
use thiserror::Error;

/// Errors of this crate.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ReorderError {
    /// The vector given to [`Permutation::new`] is not a bijection on `0..n`.
    #[error("not a permutation: {0}")]
    InvalidPermutation(String),
    /// A permutation and the object it is applied to disagree in size.
    #[error("size mismatch in {what}: expected {expected}, got {got}")]
    DimensionMismatch {
        /// What was being checked.
        what: &'static str,
        /// Size required by the permutation.
        expected: usize,
        /// Size found.
        got: usize,
    },
    /// Symmetric reordering needs a square matrix.
    #[error("symmetric reordering needs a square matrix, got {rows}×{cols}")]
    NotSquare {
        /// Rows of the matrix.
        rows: usize,
        /// Columns of the matrix.
        cols: usize,
    },
    /// More elements than u32 indices address.
    #[error("{0} elements do not fit u32 indices")]
    TooLarge(usize),
    /// [`by_name`] got a name it does not know.
    #[error("unknown reordering method {0:?} (known: affinity, rabbit, lsh, degree, rcm, none)")]
    UnknownMethod(String),
}

/// What gets permuted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Mode {
    /// `A' = P·A·Pᵀ` (square `A`, e.g. a graph): rows and columns together; `B` rows must be permuted
    /// with [`Permutation::apply_dense_rows`] and `C` rows restored with
    /// [`Permutation::unapply_dense_rows`].
    Symmetric,
    /// `A' = P·A` (any shape): rows only; `B` is used as is and `C` rows are restored with
    /// [`Permutation::unapply_dense_rows`] (or written straight to row `perm[i]`).
    RowOnly,
}

/// Block density before and after a reordering, and its cost.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReorderReport {
    /// Method name as accepted by [`by_name`].
    pub method: String,
    /// Wall time of computing the permutation (not of applying it or of the metrics), seconds.
    pub seconds: f64,
    /// MeanNNZTC (8×8 blocks) of the input.
    pub mean_nnz_tc_before: f64,
    /// MeanNNZTC (8×8 blocks) of the reordered matrix.
    pub mean_nnz_tc_after: f64,
    /// Non-empty 8×8 TC blocks of the input.
    pub blocks_before: u64,
    /// Non-empty 8×8 TC blocks of the reordered matrix.
    pub blocks_after: u64,
}

/// A permutation with its report.
#[derive(Clone, Debug, PartialEq)]
pub struct Reordering {
    /// The row (and, in symmetric mode, column) permutation, `perm[new] = old`.
    pub perm: Permutation,
    /// Density before/after and time.
    pub report: ReorderReport,
}

/// A reordering method.
pub trait Reorder {
    /// The name [`by_name`] knows it by.
    fn name(&self) -> &'static str;

    /// Computes the permutation only. For [`Mode::Symmetric`] `a` must be square and the permutation
    /// has `a.rows()` elements; for [`Mode::RowOnly`] it has `a.rows()` elements and any shape works.
    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError>;

    /// Computes the permutation, times it, and measures 8×8 MeanNNZTC and block counts before and
    /// after applying it.
    #[tracing::instrument(name = "reorder", level = "info", skip_all, fields(method = self.name(), ?mode))]
    fn reorder(&self, a: &Csr, mode: Mode) -> Result<Reordering, ReorderError> {
        check_mode(a, mode)?;
        let t = Instant::now();
        let perm = self.permutation(a, mode)?;
        let seconds = t.elapsed().as_secs_f64();
        if perm.len() != a.rows() {
            return Err(ReorderError::DimensionMismatch {
                what: "permutation length",
                expected: a.rows(),
                got: perm.len(),
            });
        }
        let before = metrics::window_stats(a, 8, 8);
        // Column order does not change the metric: permuting rows is enough to measure it.
        let after = metrics::window_stats(&perm.apply_rows(a)?, 8, 8);
        let report = ReorderReport {
            method: self.name().to_string(),
            seconds,
            mean_nnz_tc_before: before.mean_nnz_tc(),
            mean_nnz_tc_after: after.mean_nnz_tc(),
            blocks_before: before.blocks,
            blocks_after: after.blocks,
        };
        Ok(Reordering { perm, report })
    }
}

/// Applies a permutation found for `mode`: [`Permutation::apply_symmetric`] or
/// [`Permutation::apply_rows`].
pub fn apply(perm: &Permutation, a: &Csr, mode: Mode) -> Result<Csr, ReorderError> {
    match mode {
        Mode::Symmetric => perm.apply_symmetric(a),
        Mode::RowOnly => perm.apply_rows(a),
    }
}

/// A permutation and mode checked against the matrix they reorder (by [`CheckedReorder::new`],
/// with [`apply`]'s checks), so that [`CheckedReorder::apply`] cannot fail: for a reordered copy
/// made later, on first use.
#[derive(Clone, Debug)]
pub struct CheckedReorder {
    a: std::sync::Arc<Csr>,
    perm: Permutation,
    mode: Mode,
}

impl CheckedReorder {
    /// `perm` (`perm[new] = old`) as `mode` applies it to `a`: a symmetric mode needs a square
    /// `a`, and `perm` must have `a`'s row count.
    pub fn new(
        a: std::sync::Arc<Csr>,
        perm: Permutation,
        mode: Mode,
    ) -> Result<Self, ReorderError> {
        if mode == Mode::Symmetric && a.rows() != a.cols() {
            return Err(ReorderError::NotSquare {
                rows: a.rows(),
                cols: a.cols(),
            });
        }
        perm.check_len(a.rows(), "CheckedReorder (matrix rows)")?;
        Ok(Self { a, perm, mode })
    }

    /// The matrix it reorders.
    pub fn source(&self) -> &std::sync::Arc<Csr> {
        &self.a
    }

    /// The reordered matrix ([`apply`] of the checked triple).
    pub fn apply(&self) -> Csr {
        perm::permute_checked(&self.a, &self.perm, self.mode)
    }
}

/// Names accepted by [`by_name`], in the order tables list them.
pub const METHODS: [&str; 6] = ["none", "degree", "rcm", "lsh", "rabbit", "affinity"];

/// The method called `name` (`affinity`, `rabbit`, `lsh`, `degree`, `rcm`, `none`/`identity`) with
/// default parameters; `seed` drives the randomized ones (LSH).
pub fn by_name(name: &str, seed: u64) -> Result<Box<dyn Reorder + Send + Sync>, ReorderError> {
    Ok(match name {
        "none" | "identity" => Box::new(Identity),
        "degree" => Box::new(DegreeSort),
        "rcm" => Box::new(Rcm),
        "lsh" => Box::new(Lsh {
            seed,
            ..Lsh::default()
        }),
        "rabbit" => Box::new(Rabbit),
        "affinity" => Box::new(Affinity::default()),
        other => return Err(ReorderError::UnknownMethod(other.to_string())),
    })
}

pub(crate) fn check_mode(a: &Csr, mode: Mode) -> Result<(), ReorderError> {
    if mode == Mode::Symmetric && a.rows() != a.cols() {
        return Err(ReorderError::NotSquare {
            rows: a.rows(),
            cols: a.cols(),
        });
    }
    if a.rows().max(a.cols()) as u64 + a.rows().min(a.cols()) as u64 >= u32::MAX as u64 {
        return Err(ReorderError::TooLarge(a.rows() + a.cols()));
    }
    Ok(())
}

/// The graph a community method works on, and how many of its vertices are rows (`0..rows`).
/// Square: `A + Aᵀ` without the diagonal; rectangular (row-only): the bipartite row/column graph.
pub(crate) fn graph_for(a: &Csr, mode: Mode) -> Result<graph::Graph, ReorderError> {
    check_mode(a, mode)?;
    Ok(if a.rows() == a.cols() {
        graph::Graph::symmetrized(a)
    } else {
        graph::Graph::bipartite(a)
    })
}
