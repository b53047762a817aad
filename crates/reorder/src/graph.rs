//! Undirected, unweighted graphs built from a sparse pattern (internal).
//!
//! * Square matrices: the symmetrized pattern `A + Aᵀ` without the diagonal (vertex = row = column).
//! * Row-only reordering of rectangular matrices: the bipartite graph `[[0, A], [Aᵀ, 0]]` with rows
//!   `0..m` and columns `m..m+k`; rows sharing columns are two hops apart.

use rayon::prelude::*;
use tcsparse_formats::Csr;

/// Adjacency in CSR form: sorted, duplicate-free neighbour lists, no self loops.
pub(crate) struct Graph {
    pub off: Vec<usize>,
    pub adj: Vec<u32>,
}

/// A pattern in CSR form (offsets, indices), e.g. a transpose.
pub(crate) struct Pattern {
    pub off: Vec<usize>,
    pub idx: Vec<u32>,
}

impl Pattern {
    pub fn row(&self, r: usize) -> &[u32] {
        &self.idx[self.off[r]..self.off[r + 1]]
    }
}

impl Graph {
    pub fn n(&self) -> usize {
        self.off.len() - 1
    }

    pub fn neighbors(&self, v: usize) -> &[u32] {
        &self.adj[self.off[v]..self.off[v + 1]]
    }

    pub fn degree(&self, v: usize) -> usize {
        self.off[v + 1] - self.off[v]
    }

    /// `A + Aᵀ` pattern without the diagonal; `a` must be square.
    pub fn symmetrized(a: &Csr) -> Graph {
        let n = a.rows();
        let t = transpose_pattern(a);
        let ip = a.indptr();
        let ip = ip.raw_storage();
        let idx = a.indices();
        let row = |r: usize| &idx[ip[r] as usize..ip[r + 1] as usize];
        build_chunked(n, |r, out| {
            let (x, y) = (row(r), t.row(r));
            let (mut i, mut j) = (0, 0);
            while i < x.len() || j < y.len() {
                let v = if j >= y.len() || (i < x.len() && x[i] < y[j]) {
                    i += 1;
                    x[i - 1]
                } else if i >= x.len() || y[j] < x[i] {
                    j += 1;
                    y[j - 1]
                } else {
                    i += 1;
                    j += 1;
                    x[i - 1]
                };
                if v as usize != r {
                    out.push(v);
                }
            }
        })
    }

    /// Bipartite graph of rows (`0..m`) and columns (`m..m+k`).
    pub fn bipartite(a: &Csr) -> Graph {
        let m = a.rows();
        let t = transpose_pattern(a);
        let ip = a.indptr();
        let ip = ip.raw_storage();
        let idx = a.indices();
        build_chunked(m + a.cols(), |v, out| {
            if v < m {
                out.extend(
                    idx[ip[v] as usize..ip[v + 1] as usize]
                        .iter()
                        .map(|&c| c + m as u32),
                );
            } else {
                out.extend_from_slice(t.row(v - m));
            }
        })
    }
}

/// Builds adjacency lists for `n` vertices in parallel chunks; `fill(v, out)` appends `v`'s list.
fn build_chunked<F>(n: usize, fill: F) -> Graph
where
    F: Fn(usize, &mut Vec<u32>) + Sync,
{
    const CHUNK: usize = 8192;
    let parts: Vec<(Vec<usize>, Vec<u32>)> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|ci| {
            let mut lens = Vec::with_capacity(CHUNK);
            let mut adj = Vec::new();
            for v in ci * CHUNK..((ci + 1) * CHUNK).min(n) {
                let before = adj.len();
                fill(v, &mut adj);
                lens.push(adj.len() - before);
            }
            (lens, adj)
        })
        .collect();
    let mut off = Vec::with_capacity(n + 1);
    off.push(0usize);
    let total: usize = parts.iter().map(|p| p.1.len()).sum();
    let mut adj = Vec::with_capacity(total);
    for (lens, a) in parts {
        for l in lens {
            off.push(off.last().copied().unwrap_or(0) + l);
        }
        adj.extend_from_slice(&a);
    }
    Graph { off, adj }
}

/// Pattern of `Aᵀ` (column → rows, rows ascending), by counting sort.
pub(crate) fn transpose_pattern(a: &Csr) -> Pattern {
    let k = a.cols();
    let mut off = vec![0usize; k + 1];
    for &c in a.indices() {
        off[c as usize + 1] += 1;
    }
    for i in 0..k {
        off[i + 1] += off[i];
    }
    let mut next = off.clone();
    let mut idx = vec![0u32; a.nnz()];
    let ip = a.indptr();
    let ip = ip.raw_storage();
    for r in 0..a.rows() {
        for &c in &a.indices()[ip[r] as usize..ip[r + 1] as usize] {
            idx[next[c as usize]] = r as u32;
            next[c as usize] += 1;
        }
    }
    Pattern { off, idx }
}

/// Pattern of `A` itself.
pub(crate) fn pattern_of(a: &Csr) -> Pattern {
    let ip = a.indptr();
    Pattern {
        off: ip.raw_storage().iter().map(|&x| x as usize).collect(),
        idx: a.indices().to_vec(),
    }
}
