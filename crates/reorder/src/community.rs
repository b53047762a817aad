//! Modularity-based incremental aggregation into a dendrogram, and its DFS numbering (internal).
//!
//! This is the shared first step of Rabbit order (Arai et al., IPDPS'16) and of the data-affinity
//! reordering (Acc-SpMM Algorithm 1, lines 1–8): vertices are visited once in ascending degree order;
//! each visited vertex `u` (a community by now, holding every vertex merged into it) is merged into the
//! neighbouring community `v` with the largest modularity gain
//! `ΔQ(u, v) = 2·(w_uv / 2m − d_u·d_v / (2m)²)` when that gain is positive, and otherwise becomes a
//! top-level community. Edges are aggregated lazily: a merged vertex hands its already compacted edge
//! list to its destination, which compacts it (targets mapped to their current community, internal
//! edges dropped, duplicates summed) when it is visited itself.

use crate::graph::Graph;
use rayon::prelude::*;

const NONE: u32 = u32::MAX;

/// The merge forest: children of every vertex in merge order, and the top-level vertices.
pub(crate) struct Dendrogram {
    child_off: Vec<usize>,
    children: Vec<u32>,
    /// Top-level vertices (never merged), ascending.
    pub roots: Vec<u32>,
}

impl Dendrogram {
    fn children(&self, v: usize) -> &[u32] {
        &self.children[self.child_off[v]..self.child_off[v + 1]]
    }

    /// Pre-order DFS numbering: each top-level community (roots ascending) is a contiguous range; a
    /// vertex comes before its children, children in merge order. Returns the order (`order[new] =
    /// vertex`) and the community index (position in `roots`) of every vertex.
    pub fn dfs(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.child_off.len() - 1;
        let mut order = Vec::with_capacity(n);
        let mut comm = vec![NONE; n];
        let mut stack = Vec::new();
        for (ci, &r) in self.roots.iter().enumerate() {
            stack.push(r);
            while let Some(v) = stack.pop() {
                order.push(v);
                comm[v as usize] = ci as u32;
                stack.extend(self.children(v as usize).iter().rev());
            }
        }
        (order, comm)
    }
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        let p = parent[x as usize];
        parent[x as usize] = parent[p as usize];
        x = p;
    }
    x
}

/// Incremental aggregation of `g` (see the module docs). Deterministic: visiting order is (degree,
/// id) and ties in ΔQ go to the neighbour community met first.
pub(crate) fn aggregate(g: &Graph) -> Dendrogram {
    let n = g.n();
    let m2 = g.adj.len() as f64; // 2m = sum of degrees
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let mut deg: Vec<u64> = (0..n).map(|v| g.degree(v) as u64).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.par_sort_unstable_by_key(|&v| (g.degree(v as usize), v));
    let mut pending: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    let mut processed = vec![false; n];
    let mut acc = vec![0u32; n];
    let mut touched: Vec<u32> = Vec::new();
    let mut merges: Vec<(u32, u32)> = Vec::new();
    for &u in &order {
        let ui = u as usize;
        processed[ui] = true;
        if deg[ui] == 0 {
            continue;
        }
        touched.clear();
        for &t in g.neighbors(ui) {
            let r = find(&mut parent, t);
            if r != u {
                if acc[r as usize] == 0 {
                    touched.push(r);
                }
                acc[r as usize] += 1;
            }
        }
        for (t, w) in std::mem::take(&mut pending[ui]) {
            let r = find(&mut parent, t);
            if r != u {
                if acc[r as usize] == 0 {
                    touched.push(r);
                }
                acc[r as usize] += w;
            }
        }
        let du = deg[ui] as f64;
        let mut best = NONE;
        let mut best_gain = 0.0f64;
        for &r in &touched {
            let gain = acc[r as usize] as f64 / m2 - du * deg[r as usize] as f64 / (m2 * m2);
            if gain > best_gain {
                best_gain = gain;
                best = r;
            }
        }
        if best != NONE {
            let b = best as usize;
            parent[ui] = best;
            deg[b] += deg[ui];
            merges.push((best, u));
            if !processed[b] {
                let list = &mut pending[b];
                list.extend(
                    touched
                        .iter()
                        .filter(|&&r| r != best)
                        .map(|&r| (r, acc[r as usize])),
                );
            }
        }
        for &r in &touched {
            acc[r as usize] = 0;
        }
    }
    // Children in merge order (counting sort by parent keeps the order stable).
    let mut child_off = vec![0usize; n + 1];
    for &(p, _) in &merges {
        child_off[p as usize + 1] += 1;
    }
    for i in 0..n {
        child_off[i + 1] += child_off[i];
    }
    let mut next = child_off.clone();
    let mut children = vec![0u32; merges.len()];
    for &(p, c) in &merges {
        children[next[p as usize]] = c;
        next[p as usize] += 1;
    }
    let roots = (0..n as u32).filter(|&v| parent[v as usize] == v).collect();
    Dendrogram {
        child_off,
        children,
        roots,
    }
}
