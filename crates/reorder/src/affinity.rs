//! Data-affinity reordering (Acc-SpMM, PPoPP'25, §3.2 Algorithm 1), designed from the paper.

use crate::community::aggregate;
use crate::graph::pattern_of;
use crate::{Mode, Permutation, Reorder, ReorderError, graph_for};
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
        // Rows in DFS order, their rank, community and the rank range of each community.
        let rows_dfs: Vec<u32> = order.into_iter().filter(|&v| (v as usize) < m).collect();
        let mut rank = vec![0u32; m];
        for (i, &r) in rows_dfs.iter().enumerate() {
            rank[r as usize] = i as u32;
        }
        let comm: Vec<u32> = rows_dfs.iter().map(|&r| comm_all[r as usize]).collect(); // by rank
        drop(comm_all);
        let ncomm = comm.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut comm_end = vec![0u32; ncomm];
        let mut comm_start = vec![u32::MAX; ncomm];
        for (i, &c) in comm.iter().enumerate() {
            comm_start[c as usize] = comm_start[c as usize].min(i as u32);
            comm_end[c as usize] = i as u32 + 1;
        }
        // Row -> columns (A's pattern) and column -> row ranks, ascending (built in rank order).
        let rowp = pattern_of(a);
        let k = a.cols();
        let mut coff = vec![0usize; k + 1];
        for &c in a.indices() {
            coff[c as usize + 1] += 1;
        }
        for i in 0..k {
            coff[i + 1] += coff[i];
        }
        let mut cursor = coff.clone();
        let mut clist = vec![0u32; a.nnz()];
        for (i, &r) in rows_dfs.iter().enumerate() {
            for &c in rowp.row(r as usize) {
                clist[cursor[c as usize]] = i as u32;
                cursor[c as usize] += 1;
            }
        }
        cursor.copy_from_slice(&coff);

        let mut visited = vec![false; m];
        let mut cnt = vec![0u32; m];
        let mut touched: Vec<u32> = Vec::new();
        let mut out: Vec<u32> = Vec::with_capacity(m);
        let mut next = 0usize;
        while out.len() < m {
            while visited[next] {
                next += 1;
            }
            let mut v = next as u32;
            visited[next] = true;
            out.push(rows_dfs[next]);
            loop {
                let c_id = comm[v as usize] as usize;
                let (lo, hi) = (comm_start[c_id], comm_end[c_id]);
                touched.clear();
                for &c in rowp
                    .row(rows_dfs[v as usize] as usize)
                    .iter()
                    .take(self.max_neighbors)
                {
                    let (s, e) = (coff[c as usize], coff[c as usize + 1]);
                    let list = &clist[s..e];
                    let mut p = cursor[c as usize];
                    if p == e || clist[p] < lo {
                        p = s + list.partition_point(|&x| x < lo);
                    }
                    while p < e && visited[clist[p] as usize] {
                        p += 1;
                    }
                    cursor[c as usize] = p;
                    let mut scanned = 0;
                    while p < e && clist[p] < hi && scanned < self.max_scan {
                        let u = clist[p];
                        if !visited[u as usize] {
                            if cnt[u as usize] == 0 {
                                touched.push(u);
                            }
                            cnt[u as usize] += 1;
                        }
                        scanned += 1;
                        p += 1;
                    }
                }
                let mut best = u32::MAX;
                let mut best_cnt = 0;
                for &u in &touched {
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
                out.push(rows_dfs[best as usize]);
                v = best;
            }
        }
        Permutation::new(out)
    }
}
