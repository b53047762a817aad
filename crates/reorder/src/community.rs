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

use crate::graph::{Graph, PerThread};
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

/// Root of `x` without path compression (the forest is read-only while a batch decides).
fn root(parent: &[u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        x = parent[x as usize];
    }
    x
}

/// Vertices per batch of the aggregation: a fixed number, so the result does not depend on the
/// thread count. Smaller batches are closer to the one-at-a-time algorithm, larger ones synchronize
/// less often.
pub(crate) const BATCH: usize = 4096;

/// What one vertex of a batch decided: the community to join (or `NONE`) and its neighbour
/// communities with edge weights (handed to that community if it is still to be visited).
struct Decision {
    best: u32,
    /// Neighbour communities (roots at the start of the batch) in the order first met, with the
    /// number of edges to each.
    edges: Vec<(u32, u32)>,
    /// Length of the vertex's pending list when it was read.
    pending_read: usize,
}

#[derive(Default)]
struct Scratch {
    acc: Vec<u32>,
    touched: Vec<u32>,
}

impl Scratch {
    /// Adds each edge `(t, w)`'s weight to the current community of `t` (`u`'s own left out):
    /// weights in `acc`, the communities in first-met order in `touched`.
    fn gather(&mut self, parent: &[u32], u: u32, edges: impl Iterator<Item = (u32, u32)>) {
        if self.acc.len() < parent.len() {
            self.acc.resize(parent.len(), 0);
        }
        self.touched.clear();
        for (t, w) in edges {
            let r = root(parent, t);
            if r != u {
                if self.acc[r as usize] == 0 {
                    self.touched.push(r);
                }
                self.acc[r as usize] += w;
            }
        }
    }
}

/// Incremental aggregation of `g` (see the module docs), in batches: the vertices, in ascending
/// (degree, id) order, are cut into batches of [`BATCH`]; every vertex of a batch picks its best
/// neighbour community against the state at the start of the batch (in parallel, the expensive
/// part: a root lookup per edge), then the batch's merges are applied one by one in order. A
/// decision is redone at commit time (from its community list, see [`redecide`]) when an earlier
/// merge of the batch made it stale: `u` itself grew, its chosen community grew, or one of the
/// communities it saw merged away. Other communities that grew only lost gain, so the choice
/// stands. The result is therefore exactly that of the one-at-a-time algorithm, whatever the
/// thread count. Ties in ΔQ go to the neighbour community met first.
pub(crate) fn aggregate(g: &Graph) -> Dendrogram {
    let n = g.n();
    let m2 = g.adj.len() as f64; // 2m = sum of degrees
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let mut deg: Vec<u64> = (0..n).map(|v| g.degree(v) as u64).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.par_sort_unstable_by_key(|&v| (g.degree(v as usize), v));
    let mut pending: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    let mut processed = vec![false; n];
    let mut merges: Vec<(u32, u32)> = Vec::new();
    let scratch = PerThread::<Scratch>::new();
    let mut decisions: Vec<Decision> = Vec::new();
    let mut seq = Scratch::default();
    let mut grown = vec![0u32; n];
    let mut stamp = 1u32;
    for batch in order.chunks(BATCH) {
        {
            let (forest, pending) = (Forest::new(&parent, &deg, m2), &pending);
            batch
                .par_iter()
                .with_min_len(64)
                .map(|&u| scratch.with(|s| decide(g, u, forest, &pending[u as usize], s)))
                .collect_into_vec(&mut decisions);
        }
        for (&u, d) in batch.iter().zip(decisions.drain(..)) {
            let ui = u as usize;
            // A decision is stale when an earlier merge of this batch touched `u` or one of the
            // communities it saw (merged it away, grew its degree, handed it edges): decide again
            // against the current state, exactly as the one-at-a-time algorithm would.
            processed[ui] = true;
            let stale = grown[ui] == stamp
                || (d.best != NONE && grown[d.best as usize] == stamp)
                || d.edges.iter().any(|&(r, _)| parent[r as usize] != r);
            let d = if stale {
                redecide(d, u, Forest::new(&parent, &deg, m2), &pending[ui], &mut seq)
            } else {
                d
            };
            pending[ui] = Vec::new();
            if d.best == NONE {
                continue;
            }
            let b = d.best as usize;
            parent[ui] = d.best;
            deg[b] += deg[ui];
            merges.push((d.best, u));
            grown[b] = stamp;
            if !processed[b] {
                let list = &mut pending[b];
                let edges = d.edges.into_iter().filter(|&(t, _)| t != d.best);
                if list.is_empty() {
                    *list = edges.collect();
                } else {
                    list.extend(edges);
                }
            }
        }
        stamp += 1;
        // Path compression for the next batch's read-only lookups.
        for &u in batch {
            let r = root(&parent, u);
            parent[u as usize] = r;
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

/// The state a decision reads: the community forest (`parent`), every community's degree, and 2m
/// (the sum of degrees).
#[derive(Clone, Copy)]
struct Forest<'a> {
    parent: &'a [u32],
    deg: &'a [u64],
    m2: f64,
}

impl<'a> Forest<'a> {
    fn new(parent: &'a [u32], deg: &'a [u64], m2: f64) -> Self {
        Forest { parent, deg, m2 }
    }
}

/// One vertex's choice against the current forest (read-only): the neighbour community with the
/// largest positive ΔQ, and `u`'s edges to neighbour communities with their weights.
fn decide(g: &Graph, u: u32, f: Forest<'_>, pending: &[(u32, u32)], s: &mut Scratch) -> Decision {
    let ui = u as usize;
    if f.deg[ui] == 0 {
        return Decision {
            best: NONE,
            edges: Vec::new(),
            pending_read: pending.len(),
        };
    }
    let neighbours = g
        .neighbors(ui)
        .iter()
        .map(|&t| (t, 1))
        .chain(pending.iter().copied());
    s.gather(f.parent, u, neighbours);
    conclude(u, f, s, pending.len())
}

/// The best community among `s.touched` (weights in `s.acc`, which it clears).
fn conclude(u: u32, f: Forest<'_>, s: &mut Scratch, pending_read: usize) -> Decision {
    let (deg, m2) = (f.deg, f.m2);
    let du = deg[u as usize] as f64;
    let mut best = NONE;
    let mut best_gain = 0.0f64;
    for &r in &s.touched {
        let gain = s.acc[r as usize] as f64 / m2 - du * deg[r as usize] as f64 / (m2 * m2);
        if gain > best_gain {
            best_gain = gain;
            best = r;
        }
    }
    let edges = s.touched.iter().map(|&r| (r, s.acc[r as usize])).collect();
    for &r in &s.touched {
        s.acc[r as usize] = 0;
    }
    Decision {
        best,
        edges,
        pending_read,
    }
}

/// `decide` again for a stale decision, from its neighbour communities instead of the raw edges:
/// each batch-start community maps to its current root (merging the weights of communities that
/// merged), then the edges handed to `u` since it was read are added. Gives exactly what `decide`
/// would give now (same communities, weights and first-met order), in O(communities) steps.
fn redecide(
    d: Decision,
    u: u32,
    f: Forest<'_>,
    pending: &[(u32, u32)],
    s: &mut Scratch,
) -> Decision {
    if f.deg[u as usize] == 0 {
        return d;
    }
    let fresh = pending.get(d.pending_read..).unwrap_or(&[]);
    s.gather(f.parent, u, d.edges.iter().chain(fresh).copied());
    conclude(u, f, s, pending.len())
}
