//! Data-affinity reordering (Acc-SpMM, PPoPP'25, §3.2 Algorithm 1), designed from the paper.

use crate::community::aggregate;
use crate::graph::{Pattern, PerThread, pattern_of, transpose_pattern_relabelled};
use crate::{Mode, Permutation, Reorder, ReorderError, graph_for};
use rayon::prelude::*;
use tcsparse_formats::Csr;

/// Data-affinity reordering.
///
/// Step I (dendrogram): the modularity aggregation shared with [`crate::Rabbit`] (ascending degree,
/// merge into the neighbour community with the largest positive ΔQ) on `A + Aᵀ` (square) or on the
/// bipartite row/column graph (rectangular, row-only).
///
/// Step II (ordering): walk the rows in DFS order of the dendrogram; the first unvisited row `v` gets
/// the next index, then repeatedly the unvisited row `u` sharing the most columns of `A` with `v`
/// ("common neighbours") gets the next index and becomes `v`; ties go to the earlier row in DFS
/// order. When no candidate remains the walk resumes at the next unvisited row in DFS order.
///
/// The paper scans all unvisited leaves (O(n²)). Here the candidates are bounded: only rows of the
/// same top-level community as `v`, reached through at most `max_neighbors` columns of `v`, and at
/// most `max_scan` entries per column (each column's rows are kept sorted by DFS position with a
/// cursor that skips the visited prefix). A step costs at most `max_neighbors · max_scan` probes.
#[derive(Clone, Copy, Debug)]
pub struct Affinity {
    /// Columns of the current row examined per step.
    pub max_neighbors: usize,
    /// Entries examined per column per step (visited ones included).
    pub max_scan: usize,
}

impl Default for Affinity {
    fn default() -> Self {
        Self {
            max_neighbors: 32,
            max_scan: 32,
        }
    }
}

impl Reorder for Affinity {
    fn name(&self) -> &'static str {
        "affinity"
    }

    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError> {
        let g = graph_for(a, mode)?;
        let m = a.rows();
        let (order, comm_all) = aggregate(&g).dfs();
        drop(g);
        // Rows in DFS order (a row's position there is its rank) and the community of each rank.
        let rows_dfs: Vec<u32> = order.into_iter().filter(|&v| (v as usize) < m).collect();
        let comm: Vec<u32> = rows_dfs.par_iter().map(|&r| comm_all[r as usize]).collect(); // by rank
        drop(comm_all);
        // Row -> columns (A's pattern) and column -> row ranks, ascending.
        let rowp = pattern_of(a);
        let cols = transpose_pattern_relabelled(a, &rows_dfs);
        let (coff, clist) = (&cols.off, &cols.idx);

        // Communities own disjoint rank ranges and candidates never leave the community of `v`, so
        // the communities are walked independently, in parallel; the result is the same as walking
        // them one after the other, whatever the thread count.
        let mut out = vec![0u32; m];
        let mut visited = vec![false; m];
        let mut cnt = vec![0u32; m];
        let mut jobs: Vec<WalkJob<'_>> = Vec::new();
        {
            let (mut o, mut vis, mut cn) = (&mut out[..], &mut visited[..], &mut cnt[..]);
            let mut lo = 0usize;
            while lo < m {
                let c = comm[lo];
                let mut hi = lo + 1;
                while hi < m && comm[hi] == c {
                    hi += 1;
                }
                let (a1, b1) = std::mem::take(&mut o).split_at_mut(hi - lo);
                let (a2, b2) = std::mem::take(&mut vis).split_at_mut(hi - lo);
                let (a3, b3) = std::mem::take(&mut cn).split_at_mut(hi - lo);
                jobs.push((lo as u32, a1, a2, a3));
                (o, vis, cn) = (b1, b2, b3);
                lo = hi;
            }
        }
        // Largest communities first, so that a big one does not start last.
        jobs.sort_by_key(|j| std::cmp::Reverse(j.1.len()));
        let scratch = PerThread::<WalkScratch>::new();
        jobs.into_par_iter()
            .with_max_len(1)
            .for_each(|(lo, out, visited, cnt)| {
                scratch.with(|s| {
                    self.walk(
                        lo,
                        out,
                        visited,
                        cnt,
                        s,
                        &rows_dfs,
                        &rowp,
                        coff,
                        clist,
                        a.cols(),
                    )
                })
            });
        Permutation::new(out)
    }
}

/// One community's walk: its first rank and its slices of `out`, `visited` and `cnt`.
type WalkJob<'a> = (u32, &'a mut [u32], &'a mut [bool], &'a mut [u32]);

/// Per-thread state of the walk: a cursor per column (valid for the community whose tag it holds)
/// and the candidate list.
#[derive(Default)]
struct WalkScratch {
    tag: Vec<u32>,
    cursor: Vec<u32>,
    touched: Vec<u32>,
}

impl Affinity {
    /// Orders the rows of one top-level community, ranks `lo..lo + out.len()` (Step II above);
    /// `visited`, `cnt` and `out` are that rank range's slices.
    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        lo: u32,
        out: &mut [u32],
        visited: &mut [bool],
        cnt: &mut [u32],
        s: &mut WalkScratch,
        rows_dfs: &[u32],
        rowp: &Pattern,
        coff: &[usize],
        clist: &[u32],
        k: usize,
    ) {
        let len = out.len();
        let hi = lo + len as u32;
        let tag = lo + 1; // unique per community, never 0
        if s.tag.len() < k {
            s.tag.resize(k, 0);
            s.cursor.resize(k, 0);
        }
        let mut n_out = 0usize;
        let mut next = 0usize;
        while n_out < len {
            while visited[next] {
                next += 1;
            }
            let mut v = next;
            visited[next] = true;
            out[n_out] = rows_dfs[lo as usize + next];
            n_out += 1;
            loop {
                s.touched.clear();
                for &c in rowp
                    .row(rows_dfs[lo as usize + v] as usize)
                    .iter()
                    .take(self.max_neighbors)
                {
                    let c = c as usize;
                    let (st, e) = (coff[c], coff[c + 1]);
                    let mut p = if s.tag[c] == tag {
                        s.cursor[c] as usize
                    } else {
                        s.tag[c] = tag;
                        st + clist[st..e].partition_point(|&x| x < lo)
                    };
                    while p < e && clist[p] < hi && visited[(clist[p] - lo) as usize] {
                        p += 1;
                    }
                    s.cursor[c] = p as u32;
                    let mut scanned = 0;
                    while p < e && clist[p] < hi && scanned < self.max_scan {
                        let u = (clist[p] - lo) as usize;
                        if !visited[u] {
                            if cnt[u] == 0 {
                                s.touched.push(u as u32);
                            }
                            cnt[u] += 1;
                        }
                        scanned += 1;
                        p += 1;
                    }
                }
                let mut best = u32::MAX;
                let mut best_cnt = 0;
                for &u in &s.touched {
                    let cu = cnt[u as usize];
                    if cu > best_cnt || (cu == best_cnt && u < best) {
                        best_cnt = cu;
                        best = u;
                    }
                    cnt[u as usize] = 0;
                }
                if best == u32::MAX {
                    break;
                }
                visited[best as usize] = true;
                out[n_out] = rows_dfs[lo as usize + best as usize];
                n_out += 1;
                v = best as usize;
            }
        }
    }
}
