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
        let ip = a.row_offsets();
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
        let ip = a.row_offsets();
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

/// Pattern of `Aᵀ` (column → rows, rows ascending).
pub(crate) fn transpose_pattern(a: &Csr) -> Pattern {
    let ip = a.row_offsets();
    let idx = a.indices();
    transpose_sources(a.cols(), a.rows(), |r| {
        &idx[ip[r] as usize..ip[r + 1] as usize]
    })
}

/// Pattern of `(P·A)ᵀ` for the row order `rows_in_order[new] = old`: column → new positions,
/// ascending.
pub(crate) fn transpose_pattern_relabelled(a: &Csr, rows_in_order: &[u32]) -> Pattern {
    let ip = a.row_offsets();
    let idx = a.indices();
    transpose_sources(a.cols(), rows_in_order.len(), |i| {
        let r = rows_in_order[i] as usize;
        &idx[ip[r] as usize..ip[r + 1] as usize]
    })
}

/// One chunk of sources: its (column, source) pairs grouped by column bucket, and the bucket
/// offsets into them.
type ChunkPairs = (Vec<(u32, u32)>, Vec<u32>);

/// Transpose of the pattern whose source `i` (`0..n_src`) has columns `row(i)` (each `< k`): for
/// every column, the sources holding it, ascending. Parallel two-level counting sort: sources are
/// cut into chunks that sort their entries by column bucket (`c >> shift`), then every bucket
/// gathers its entries from the chunks in order and counting-sorts them by column (stable, so the
/// sources stay ascending). The result is unique, so it does not depend on the thread count.
fn transpose_sources<'a, F>(k: usize, n_src: usize, row: F) -> Pattern
where
    F: Fn(usize) -> &'a [u32] + Sync,
{
    let bits = usize::BITS - k.leading_zeros();
    let shift = bits.saturating_sub(12);
    let nb = (k >> shift) + 1;
    let chunk = n_src.div_ceil(64).max(1024);
    // Per chunk: (column, source) pairs grouped by bucket, and the bucket sizes.
    let parts: Vec<ChunkPairs> = (0..n_src.div_ceil(chunk))
        .into_par_iter()
        .map(|ci| {
            let srcs = ci * chunk..((ci + 1) * chunk).min(n_src);
            let mut count = vec![0u32; nb + 1];
            for i in srcs.clone() {
                for &c in row(i) {
                    count[(c as usize >> shift) + 1] += 1;
                }
            }
            for b in 0..nb {
                count[b + 1] += count[b];
            }
            let mut pos = count.clone();
            let mut pairs = vec![(0u32, 0u32); count[nb] as usize];
            for i in srcs {
                for &c in row(i) {
                    let b = c as usize >> shift;
                    pairs[pos[b] as usize] = (c, i as u32);
                    pos[b] += 1;
                }
            }
            (pairs, count)
        })
        .collect();
    let mut bucket_start = vec![0usize; nb + 1];
    for b in 0..nb {
        bucket_start[b + 1] = bucket_start[b]
            + parts
                .iter()
                .map(|p| (p.1[b + 1] - p.1[b]) as usize)
                .sum::<usize>();
    }
    let nnz = bucket_start[nb];
    let mut idx = vec![0u32; nnz];
    let mut off = vec![0usize; k + 1];
    // Split `idx` and `off[1..]` into the buckets' disjoint ranges.
    let mut jobs: Vec<(usize, &mut [u32], &mut [usize])> = Vec::with_capacity(nb);
    {
        let (mut rest_i, mut rest_o) = (&mut idx[..], &mut off[1..]);
        for b in 0..nb {
            let (ci, ri) =
                std::mem::take(&mut rest_i).split_at_mut(bucket_start[b + 1] - bucket_start[b]);
            let width = ((b + 1) << shift).min(k).saturating_sub(b << shift);
            let (co, ro) = std::mem::take(&mut rest_o).split_at_mut(width);
            jobs.push((b, ci, co));
            (rest_i, rest_o) = (ri, ro);
        }
    }
    jobs.into_par_iter().for_each(|(b, out, offs)| {
        let c0 = (b << shift) as u32;
        // offs[j] = number of entries of columns c0..=c0+j (within this bucket) for now.
        for p in &parts {
            for &(c, _) in &p.0[p.1[b] as usize..p.1[b + 1] as usize] {
                offs[(c - c0) as usize] += 1;
            }
        }
        let mut start = 0usize;
        for o in offs.iter_mut() {
            let n = *o;
            *o = start;
            start += n;
        }
        for p in &parts {
            for &(c, i) in &p.0[p.1[b] as usize..p.1[b + 1] as usize] {
                let slot = &mut offs[(c - c0) as usize];
                out[*slot] = i;
                *slot += 1;
            }
        }
        // offs[j] is now the end of column c0 + j within the bucket; make it global.
        let base = bucket_start[b];
        for o in offs.iter_mut() {
            *o += base;
        }
    });
    Pattern { off, idx }
}

/// Per-thread scratch for rayon jobs (one slot per worker of the current pool). `f` must not run
/// rayon work itself: a worker waiting inside it could pick up a job that needs the same slot.
pub(crate) struct PerThread<T> {
    slots: Vec<std::sync::Mutex<T>>,
}

impl<T: Default> PerThread<T> {
    pub fn new() -> Self {
        Self {
            slots: (0..rayon::current_num_threads().max(1))
                .map(|_| std::sync::Mutex::new(T::default()))
                .collect(),
        }
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let i = rayon::current_thread_index().unwrap_or(0) % self.slots.len();
        let mut g = self.slots[i].lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }
}

/// Pattern of `A` itself.
pub(crate) fn pattern_of(a: &Csr) -> Pattern {
    Pattern {
        off: a.row_offsets().iter().map(|&x| x as usize).collect(),
        idx: a.indices().to_vec(),
    }
}
