//! Rabbit order (Arai et al., IPDPS'16).

use crate::community::aggregate;
use crate::{Mode, Permutation, Reorder, ReorderError, graph_for};
use tcsparse_formats::Csr;

/// Rabbit order: incremental aggregation in ascending degree order, each vertex merged into the
/// neighbour community with the largest positive modularity gain, then vertices numbered by a
/// pre-order DFS of the resulting dendrogram (top-level communities by ascending vertex id, children
/// in merge order). Graph construction is parallel (rayon); the aggregation itself is sequential
/// (the paper's lock-free parallel merging is not implemented), which keeps it deterministic.
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
