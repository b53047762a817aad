//! Row-length and shape statistics of a CSR matrix (what `tcsparse info` prints).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::csr::Csr;

/// Statistics of one matrix. Row lengths count stored entries (explicit zeros included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixStats {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// Average row length, nnz / rows (AvgL; 0 for a matrix without rows).
    pub avg_row_len: f64,
    /// Longest row.
    pub max_row_len: usize,
    /// Shortest row (0 for a matrix without rows).
    pub min_row_len: usize,
    /// Rows with no stored entry.
    pub empty_rows: usize,
    /// Largest |i − j| over stored entries (0 when there are none).
    pub bandwidth: usize,
    /// nnz / (rows · cols) (0 for an empty shape).
    pub density: f64,
    /// Row-length histogram: `histogram[0]` counts empty rows and `histogram[k]` (k ≥ 1) rows with
    /// length in `[2^(k−1), 2^k)`. Trailing empty buckets are trimmed.
    pub histogram: Vec<usize>,
}

impl MatrixStats {
    /// Computes the statistics in one pass over the row offsets and column indices.
    pub fn compute(csr: &Csr) -> Self {
        let (rows, cols, nnz) = (csr.rows(), csr.cols(), csr.nnz());
        let offsets = csr.row_offsets();
        let indices = csr.indices();
        let (mut max_row_len, mut min_row_len, mut empty_rows, mut bandwidth) =
            (0, usize::MAX, 0, 0);
        let mut histogram = vec![0usize; 34];
        for r in 0..rows {
            let (a, b) = (offsets[r] as usize, offsets[r + 1] as usize);
            let len = b - a;
            max_row_len = max_row_len.max(len);
            min_row_len = min_row_len.min(len);
            if len == 0 {
                empty_rows += 1;
                histogram[0] += 1;
                continue;
            }
            histogram[(usize::BITS - len.leading_zeros()) as usize] += 1;
            // Rows are sorted: the extreme columns are the first and the last.
            bandwidth = bandwidth
                .max(r.abs_diff(indices[a] as usize))
                .max(r.abs_diff(indices[b - 1] as usize));
        }
        while histogram.last() == Some(&0) {
            histogram.pop();
        }
        let cells = rows as f64 * cols as f64;
        Self {
            rows,
            cols,
            nnz,
            avg_row_len: if rows == 0 {
                0.0
            } else {
                nnz as f64 / rows as f64
            },
            max_row_len,
            min_row_len: if rows == 0 { 0 } else { min_row_len },
            empty_rows,
            bandwidth,
            density: if cells == 0.0 {
                0.0
            } else {
                nnz as f64 / cells
            },
            histogram,
        }
    }

    /// Label of histogram bucket `k`: `0`, `1`, `2-3`, `4-7`, ...
    pub fn bucket_label(k: usize) -> String {
        match k {
            0 => "0".into(),
            1 => "1".into(),
            _ => format!("{}-{}", 1u64 << (k - 1), (1u64 << k) - 1),
        }
    }
}

impl fmt::Display for MatrixStats {
    /// An aligned two-column table, then the row-length histogram with a bar per bucket.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = [
            ("rows", self.rows.to_string()),
            ("cols", self.cols.to_string()),
            ("nnz", self.nnz.to_string()),
            ("density", format!("{:.3e}", self.density)),
            ("avg row length (AvgL)", format!("{:.2}", self.avg_row_len)),
            ("min row length", self.min_row_len.to_string()),
            ("max row length", self.max_row_len.to_string()),
            ("empty rows", self.empty_rows.to_string()),
            ("bandwidth", self.bandwidth.to_string()),
        ];
        for (k, v) in rows {
            writeln!(f, "{k:<22} {v:>14}")?;
        }
        writeln!(f, "row-length histogram:")?;
        let labels: Vec<String> = (0..self.histogram.len()).map(Self::bucket_label).collect();
        let width = labels.iter().map(String::len).max().unwrap_or(1);
        let most = self.histogram.iter().copied().max().unwrap_or(0).max(1);
        for (label, &count) in labels.iter().zip(&self.histogram) {
            let bar = "#".repeat((count * 40).div_ceil(most));
            writeln!(f, "  {label:>width$} {count:>12}  {bar}")?;
        }
        Ok(())
    }
}
