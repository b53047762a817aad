//! Rabbit order (Arai et al., IPDPS'16).

use crate::community::aggregate;
use crate::{Mode, Permutation, Reorder, ReorderError, graph_for};
use tcsparse_formats::Csr;

/// Rabbit order: incremental aggregation in ascending degree order, each vertex merged into the
/// neighbour community with the largest positive modularity gain, then vertices numbered by a
/// pre-order DFS of the resulting dendrogram (top-level communities by ascending vertex id, children
/// in merge order). Graph construction and the aggregation's decisions are parallel (rayon, in
/// fixed batches re-checked in order, see `community::aggregate`), so the result is the
/// one-at-a-time algorithm's whatever the thread count (the paper's lock-free merging is not
/// deterministic and is not used).
#[derive(Clone, Copy, Debug, Default)]
pub struct Rabbit;

impl Reorder for Rabbit {
    fn name(&self) -> &'static str {
        "rabbit"
    }

    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError> {
        let g = graph_for(a, mode)?;
        let (order, _) = aggregate(&g).dfs();
        let rows = a.rows() as u32;
        Permutation::new(order.into_iter().filter(|&v| v < rows).collect())
    }
}
