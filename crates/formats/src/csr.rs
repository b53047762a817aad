//! The CSR matrix type shared by every crate, and checked constructors for it.
//!
//! Invariants of a [`Csr`] produced by this crate: u32 row offsets and column indices, rows sorted by
//! column, no duplicate (row, column) entries, every column index `< cols`.

use thiserror::Error;

/// Compressed sparse row matrix with f32 values and u32 indices (sorted, duplicate-free rows).
pub type Csr = sprs::CsMatI<f32, u32>;

/// Errors building a [`Csr`].
#[derive(Debug, Error, PartialEq)]
pub enum CsrError {
    /// A triplet names a row or column outside the declared shape.
    #[error("entry ({row}, {col}) is outside a {rows}×{cols} matrix")]
    OutOfBounds {
        /// Zero-based row of the offending entry.
        row: u64,
        /// Zero-based column of the offending entry.
        col: u64,
        /// Declared row count.
        rows: usize,
        /// Declared column count.
        cols: usize,
    },
    /// The matrix has more nonzeros or a dimension larger than u32 indices can address.
    #[error("matrix too large for u32 indices: {what} = {value}")]
    TooLarge {
        /// Which quantity overflowed.
        what: &'static str,
        /// Its value.
        value: u64,
    },
}

/// Builds a CSR matrix from (row, col, value) triplets in any order, summing duplicates and sorting
/// every row by column. Zero-based indices. Explicit zeros (including sums that cancel) are kept, so
/// the sparsity pattern is exactly the set of distinct input positions.
pub fn csr_from_triplets(
    rows: usize,
    cols: usize,
    triplets: &[(u32, u32, f32)],
) -> Result<Csr, CsrError> {
    check_dims(rows, cols, triplets.len())?;
    let mut counts = vec![0u32; rows + 1];
    for &(r, c, _) in triplets {
        if r as usize >= rows || c as usize >= cols {
            return Err(CsrError::OutOfBounds {
                row: r.into(),
                col: c.into(),
                rows,
                cols,
            });
        }
        counts[r as usize + 1] += 1;
    }
    for i in 0..rows {
        counts[i + 1] += counts[i];
    }
    // Counting sort by row, then sort each row by column and merge duplicates.
    let mut next = counts.clone();
    let mut order = vec![(0u32, 0f32); triplets.len()];
    for &(r, c, v) in triplets {
        let slot = &mut next[r as usize];
        order[*slot as usize] = (c, v);
        *slot += 1;
    }
    let mut indptr = Vec::with_capacity(rows + 1);
    let mut indices = Vec::with_capacity(triplets.len());
    let mut data = Vec::with_capacity(triplets.len());
    indptr.push(0u32);
    for r in 0..rows {
        let row = &mut order[counts[r] as usize..counts[r + 1] as usize];
        row.sort_unstable_by_key(|&(c, _)| c);
        for &(c, v) in row.iter() {
            if indices.len() > *indptr.last().unwrap_or(&0) as usize && indices.last() == Some(&c) {
                *data.last_mut().expect("data parallels indices") += v;
            } else {
                indices.push(c);
                data.push(v);
            }
        }
        indptr.push(indices.len() as u32);
    }
    Ok(Csr::new((rows, cols), indptr, indices, data))
}

/// Builds a CSR matrix from raw arrays, checking every invariant of [`Csr`] (sprs checks offsets,
/// bounds and sortedness; duplicates are rejected by sprs as unsorted rows).
pub fn csr_from_parts(
    rows: usize,
    cols: usize,
    indptr: Vec<u32>,
    indices: Vec<u32>,
    data: Vec<f32>,
) -> Result<Csr, String> {
    check_dims(rows, cols, indices.len()).map_err(|e| e.to_string())?;
    Csr::try_new((rows, cols), indptr, indices, data).map_err(|(_, _, _, e)| e.to_string())
}

fn check_dims(rows: usize, cols: usize, nnz: usize) -> Result<(), CsrError> {
    for (what, value) in [("rows", rows), ("cols", cols), ("nnz", nnz)] {
        if value as u64 > u32::MAX as u64 {
            return Err(CsrError::TooLarge {
                what,
                value: value as u64,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triplets_are_sorted_and_duplicates_summed() {
        let m =
            csr_from_triplets(3, 4, &[(2, 3, 1.0), (0, 2, 2.0), (0, 1, 3.0), (0, 2, 4.0)]).unwrap();
        assert_eq!(m.indptr().raw_storage(), &[0, 2, 2, 3]);
        assert_eq!(m.indices(), &[1, 2, 3]);
        assert_eq!(m.data(), &[3.0, 6.0, 1.0]);
    }

    #[test]
    fn out_of_bounds_is_an_error() {
        let e = csr_from_triplets(2, 2, &[(0, 2, 1.0)]).unwrap_err();
        assert!(matches!(e, CsrError::OutOfBounds { row: 0, col: 2, .. }));
    }
}
