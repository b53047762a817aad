//! Tensor-core block density of a row order.
//!
//! A row window is `window_rows` consecutive rows; its distinct columns, sorted and compacted, are cut
//! into groups of `block_cols` ("TC blocks", as in BitTCF 8×8 and ME-TCF 16×8). The block count is
//! `Σ_windows ceil(distinct_cols(window) / block_cols)` and `MeanNNZTC = nnz / blocks`. Column order
//! does not matter for either: only which rows share a window does.

use rayon::prelude::*;
use tcsparse_formats::Csr;

/// Block statistics of one matrix for one window/block shape.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowStats {
    /// Number of row windows (`ceil(rows / window_rows)`).
    pub windows: u64,
    /// Windows with at least one nonzero.
    pub nonempty_windows: u64,
    /// Non-empty TC blocks.
    pub blocks: u64,
    /// `Σ_windows distinct_cols(window)`: rows of B read once per window.
    pub distinct_cols: u64,
    /// Stored entries.
    pub nnz: u64,
}

impl WindowStats {
    /// `nnz / blocks` (0 for an empty matrix).
    pub fn mean_nnz_tc(&self) -> f64 {
        if self.blocks == 0 {
            0.0
        } else {
            self.nnz as f64 / self.blocks as f64
        }
    }

    /// Mean distinct B rows touched per non-empty window (0 when none).
    pub fn mean_distinct_cols(&self) -> f64 {
        if self.nonempty_windows == 0 {
            0.0
        } else {
            self.distinct_cols as f64 / self.nonempty_windows as f64
        }
    }
}

/// Window/block statistics of `a` (parallel over groups of windows). `window_rows` and `block_cols`
/// of 0 are treated as 1.
pub fn window_stats(a: &Csr, window_rows: usize, block_cols: usize) -> WindowStats {
    let wr = window_rows.max(1);
    let bc = block_cols.max(1) as u64;
    let rows = a.rows();
    let windows = rows.div_ceil(wr);
    let ip = a.row_offsets();
    let idx = a.indices();
    let cols = a.cols();
    // Chunks of windows, each with its own stamp array (stamp = window index + 1).
    let chunk = 4096usize.max(windows / 64 + 1);
    let by_stamp = cols <= 4 * a.nnz() / windows.div_ceil(chunk).max(1) + 65_536;
    let parts: Vec<(u64, u64, u64)> = (0..windows.div_ceil(chunk))
        .into_par_iter()
        .map(|ci| {
            // A stamp per column when that is no more memory than the indices; else each window's
            // columns are sorted (memory proportional to the nonzeros, not to `cols`).
            let mut stamp = vec![0u32; if by_stamp { cols } else { 0 }];
            let mut buf: Vec<u32> = Vec::new();
            let (mut ne, mut blocks, mut distinct) = (0u64, 0u64, 0u64);
            for w in ci * chunk..((ci + 1) * chunk).min(windows) {
                let tag = (w % (u32::MAX as usize - 1)) as u32 + 1;
                let (r0, r1) = (w * wr, ((w + 1) * wr).min(rows));
                let mut d = 0u64;
                let wcols = &idx[ip[r0] as usize..ip[r1] as usize];
                if by_stamp {
                    for &c in wcols {
                        let s = &mut stamp[c as usize];
                        if *s != tag {
                            *s = tag;
                            d += 1;
                        }
                    }
                } else {
                    buf.clear();
                    buf.extend_from_slice(wcols);
                    buf.sort_unstable();
                    buf.dedup();
                    d = buf.len() as u64;
                }
                if d > 0 {
                    ne += 1;
                    blocks += d.div_ceil(bc);
                    distinct += d;
                }
            }
            (ne, blocks, distinct)
        })
        .collect();
    let mut s = WindowStats {
        windows: windows as u64,
        nnz: a.nnz() as u64,
        ..Default::default()
    };
    for (ne, b, d) in parts {
        s.nonempty_windows += ne;
        s.blocks += b;
        s.distinct_cols += d;
    }
    s
}

/// `MeanNNZTC`: nnz per non-empty (`window_rows` × `block_cols` compacted) TC block; 0 when `nnz = 0`.
pub fn mean_nnz_tc(a: &Csr, window_rows: usize, block_cols: usize) -> f64 {
    window_stats(a, window_rows, block_cols).mean_nnz_tc()
}

/// Number of non-empty TC blocks: `Σ_windows ceil(distinct_cols(window) / block_cols)`.
pub fn tc_blocks(a: &Csr, window_rows: usize, block_cols: usize) -> u64 {
    window_stats(a, window_rows, block_cols).blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_formats::csr::csr_from_triplets;

    /// Brute force: per window, a sorted set of columns.
    fn brute(a: &Csr, wr: usize, bc: usize) -> u64 {
        let mut blocks = 0;
        for w in 0..a.rows().div_ceil(wr) {
            let mut set = std::collections::BTreeSet::new();
            for r in w * wr..((w + 1) * wr).min(a.rows()) {
                set.extend(a.outer_view(r).unwrap().indices().iter().copied());
            }
            blocks += set.len().div_ceil(bc) as u64;
        }
        blocks
    }

    #[test]
    fn dense_block_and_diagonal() {
        let mut t = vec![];
        for r in 0..8 {
            for c in 0..8 {
                t.push((r, c, 1.0));
            }
        }
        let a = csr_from_triplets(8, 8, &t).unwrap();
        assert_eq!(tc_blocks(&a, 8, 8), 1);
        assert_eq!(mean_nnz_tc(&a, 8, 8), 64.0);
        let d =
            csr_from_triplets(20, 20, &(0..20).map(|i| (i, i, 1.0)).collect::<Vec<_>>()).unwrap();
        assert_eq!(tc_blocks(&d, 8, 8), 3);
        assert_eq!(window_stats(&d, 8, 8).distinct_cols, 20);
        assert_eq!(tc_blocks(&d, 16, 8), 3);
        let e = csr_from_triplets(5, 5, &[]).unwrap();
        assert_eq!(mean_nnz_tc(&e, 8, 8), 0.0);
    }

    #[test]
    fn matches_brute_force() {
        let mut t = vec![];
        let mut x = 12345u64;
        for _ in 0..3000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            t.push(((x >> 33) as u32 % 97, (x >> 13) as u32 % 301, 1.0));
        }
        let a = csr_from_triplets(97, 301, &t).unwrap();
        for (wr, bc) in [(8, 8), (16, 8), (3, 5)] {
            assert_eq!(tc_blocks(&a, wr, bc), brute(&a, wr, bc));
        }
    }
}
