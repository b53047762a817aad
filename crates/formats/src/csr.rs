//! The CSR matrix type shared by every crate, and checked constructors for it.
//!
//! Invariants of every [`Csr`] (checked by each constructor, so no code downstream re-checks
//! them): row-major (CSR) storage, u32 row offsets starting at 0, u32 column indices, rows sorted by
//! column, no duplicate (row, column) entries, every column index `< cols`, rows, cols and nnz at most
//! `u32::MAX`.
//!
//! A [`Csr`] reads like the sprs matrix it wraps (it derefs to `sprs::CsMatI<f32, u32>`, so
//! `rows()`, `indptr()`, `view()`, `outer_iterator()` … work unchanged) but can only be built
//! through a checked path: [`Csr::try_new`] from raw arrays, or `TryFrom` any sprs matrix — CSR or
//! CSC, f32 or f64 values, any index type, an indptr that does not start at 0 (what
//! `slice_outer(..).to_owned()` gives) — converting, normalising and narrowing with a typed
//! [`CsrError`] where a value or index does not fit.

use std::ops::Deref;

use sprs::errors::StructureError;
use sprs::{CsMatI, SpIndex};
use thiserror::Error;

use crate::limits::{BudgetError, Limits, bytes_of};

/// Compressed sparse row matrix with f32 values and u32 indices (sorted, duplicate-free rows, row
/// offsets from 0). Read it through `Deref` (the sprs API); build it with [`Csr::try_new`],
/// `TryFrom` or the constructors of this module.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr(CsMatI<f32, u32>);

impl Deref for Csr {
    type Target = CsMatI<f32, u32>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl AsRef<CsMatI<f32, u32>> for Csr {
    fn as_ref(&self) -> &CsMatI<f32, u32> {
        &self.0
    }
}

impl From<Csr> for CsMatI<f32, u32> {
    fn from(m: Csr) -> Self {
        m.0
    }
}

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
    /// An index or offset of the source matrix does not fit u32 (or is negative).
    #[error("{what}[{position}] = {value} does not fit a u32 index")]
    IndexOutOfRange {
        /// `indices` or `indptr`.
        what: &'static str,
        /// Position in that array.
        position: usize,
        /// The value, as text (it may be negative or wider than u64).
        value: String,
    },
    /// A finite value of the source matrix is too large for f32 (it would become infinite).
    #[error("data[{position}] = {value} does not fit f32 (|value| > {})", f32::MAX)]
    ValueOutOfRange {
        /// Position in `data`.
        position: usize,
        /// The value.
        value: f64,
    },
    /// The arrays do not form a valid CSR (lengths, offsets, unsorted or duplicate columns).
    #[error("invalid CSR structure: {0}")]
    Structure(#[source] StructureError),
    /// What the declared shape needs does not fit the memory budget.
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// A value type a [`Csr`] can be built from (narrowed to f32).
pub trait CsrValue: Copy + Default + Send + Sync + sealed::Sealed {
    /// The value as f32; `None` when a finite value would become infinite. NaN and ±inf pass
    /// through (scipy accepts them too); see [`Csr::non_finite`].
    fn to_f32(self) -> Option<f32>;
    /// The value widened, for error messages.
    fn to_f64(self) -> f64;
}

impl CsrValue for f32 {
    fn to_f32(self) -> Option<f32> {
        Some(self)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl CsrValue for f64 {
    fn to_f32(self) -> Option<f32> {
        let v = self as f32;
        (v.is_finite() || !self.is_finite()).then_some(v)
    }
    fn to_f64(self) -> f64 {
        self
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

fn narrow<I: SpIndex>(what: &'static str, position: usize, i: I) -> Result<u32, CsrError> {
    i.try_index()
        .and_then(|u| u32::try_from(u).ok())
        .ok_or_else(|| CsrError::IndexOutOfRange {
            what,
            position,
            value: format!("{i:?}"),
        })
}

impl<N: CsrValue, I: SpIndex, Iptr: SpIndex> TryFrom<CsMatI<N, I, Iptr>> for Csr {
    type Error = CsrError;

    /// Checks and converts any owned sprs matrix: CSC is transposed into CSR storage (the same
    /// matrix), an indptr that does not start at 0 is rebased, indices narrow to u32 and values to
    /// f32, each with a typed error where it does not fit.
    fn try_from(m: CsMatI<N, I, Iptr>) -> Result<Self, CsrError> {
        let (rows, cols) = m.shape();
        check_dims(rows, cols, m.nnz())?;
        let m = if m.is_csr() { m } else { m.to_other_storage() };
        let ptr = m.indptr();
        let proper = ptr.to_proper();
        let indptr = proper
            .iter()
            .enumerate()
            .map(|(k, &p)| narrow("indptr", k, p))
            .collect::<Result<Vec<u32>, _>>()?;
        let indices = m
            .indices()
            .iter()
            .enumerate()
            .map(|(k, &i)| narrow("indices", k, i))
            .collect::<Result<Vec<u32>, _>>()?;
        let data = m
            .data()
            .iter()
            .enumerate()
            .map(|(k, &v)| {
                v.to_f32().ok_or(CsrError::ValueOutOfRange {
                    position: k,
                    value: v.to_f64(),
                })
            })
            .collect::<Result<Vec<f32>, _>>()?;
        Csr::try_new((rows, cols), indptr, indices, data)
    }
}

impl Csr {
    /// Builds a CSR from raw arrays, checking every invariant (an indptr that does not start at 0
    /// is rebased, as sprs reads it: `indices` and `data` then hold only `indptr[last] − indptr[0]`
    /// entries).
    pub fn try_new(
        shape: (usize, usize),
        mut indptr: Vec<u32>,
        indices: Vec<u32>,
        data: Vec<f32>,
    ) -> Result<Self, CsrError> {
        check_dims(shape.0, shape.1, indices.len())?;
        if let Some(&first) = indptr.first()
            && first != 0
        {
            if indptr.iter().any(|&p| p < first) {
                return Err(CsrError::Structure(StructureError::Unsorted(
                    "indptr is not sorted",
                )));
            }
            for p in &mut indptr {
                *p -= first;
            }
        }
        CsMatI::try_new(shape, indptr, indices, data)
            .map(Csr)
            .map_err(|(_, _, _, e)| CsrError::Structure(e))
    }

    /// [`Csr::try_new`] for arrays a caller has built correctly (layout conversions back to CSR).
    ///
    /// # Panics
    /// If the arrays break an invariant of [`Csr`] (a bug in the caller, never input data).
    pub fn new(shape: (usize, usize), indptr: Vec<u32>, indices: Vec<u32>, data: Vec<f32>) -> Self {
        match Self::try_new(shape, indptr, indices, data) {
            Ok(m) => m,
            Err(e) => panic!("Csr::new: {e}"),
        }
    }

    /// The wrapped sprs matrix.
    pub fn into_inner(self) -> CsMatI<f32, u32> {
        self.0
    }

    /// The wrapped sprs matrix, borrowed.
    pub fn as_inner(&self) -> &CsMatI<f32, u32> {
        &self.0
    }

    /// The values, mutable (the pattern stays fixed, so every invariant holds).
    pub fn data_mut(&mut self) -> &mut [f32] {
        self.0.data_mut()
    }

    /// Row offsets (`rows + 1` entries, starting at 0).
    pub fn row_offsets(&self) -> &[u32] {
        self.0.indptr().into_raw_storage()
    }

    /// How many stored values are NaN or ±inf. Such values are accepted (scipy does too) but make
    /// every product's rows that touch them non-finite: tools should say so.
    pub fn non_finite(&self) -> usize {
        self.0.data().iter().filter(|v| !v.is_finite()).count()
    }
}

/// Builds a CSR matrix from (row, col, value) triplets in any order, summing duplicates and sorting
/// every row by column. Zero-based indices. Explicit zeros (including sums that cancel) are kept, so
/// the sparsity pattern is exactly the set of distinct input positions. Checks the row offsets
/// against [`Limits::global`] first.
pub fn csr_from_triplets(
    rows: usize,
    cols: usize,
    triplets: &[(u32, u32, f32)],
) -> Result<Csr, CsrError> {
    csr_from_triplets_with(rows, cols, triplets, &Limits::global())
}

/// [`csr_from_triplets`] under an explicit budget. Memory: the row offsets (4 bytes a row, checked
/// against `limits` before allocating) and 16 bytes per triplet.
pub fn csr_from_triplets_with(
    rows: usize,
    cols: usize,
    triplets: &[(u32, u32, f32)],
    limits: &Limits,
) -> Result<Csr, CsrError> {
    check_dims(rows, cols, triplets.len())?;
    check_csr_budget(rows, triplets.len() as u64, limits)?;
    // One array of rows + 1 counters serves as counts, then scatter cursors, then row offsets.
    let mut ptr = vec![0u32; rows + 1];
    for &(r, c, _) in triplets {
        if r as usize >= rows || c as usize >= cols {
            return Err(CsrError::OutOfBounds {
                row: r.into(),
                col: c.into(),
                rows,
                cols,
            });
        }
        ptr[r as usize + 1] += 1;
    }
    for i in 0..rows {
        ptr[i + 1] += ptr[i];
    }
    // Counting sort by row: afterwards ptr[r] is the end of row r (the start of row r + 1).
    let mut order = vec![(0u32, 0f32); triplets.len()];
    for &(r, c, v) in triplets {
        let slot = &mut ptr[r as usize];
        order[*slot as usize] = (c, v);
        *slot += 1;
    }
    // Sort each row by column and merge duplicates, compacting in place (the write cursor never
    // passes the read cursor); ptr[r] becomes the compacted end of row r.
    let mut w = 0usize;
    let mut start = 0usize;
    for slot in ptr[..rows].iter_mut() {
        let end = *slot as usize;
        order[start..end].sort_unstable_by_key(|&(c, _)| c);
        let row_start = w;
        for k in start..end {
            let (c, v) = order[k];
            if w > row_start && order[w - 1].0 == c {
                order[w - 1].1 += v;
            } else {
                order[w] = (c, v);
                w += 1;
            }
        }
        *slot = w as u32;
        start = end;
    }
    ptr.rotate_right(1);
    ptr[0] = 0;
    order.truncate(w);
    let (indices, data): (Vec<u32>, Vec<f32>) = order.into_iter().unzip();
    Csr::try_new((rows, cols), ptr, indices, data)
}

/// Checks what a `rows`-row CSR with `nnz` entries and its construction need against `limits`.
pub fn check_csr_budget(rows: usize, nnz: u64, limits: &Limits) -> Result<(), BudgetError> {
    let need = bytes_of(rows as u64 + 1, 4).saturating_add(bytes_of(nnz, 16));
    limits.check(
        || format!("a CSR of {rows} rows and {nnz} nonzeros (row offsets and entries)"),
        need,
    )
}

/// Builds a CSR matrix from raw arrays, checking every invariant of [`Csr`] (see
/// [`Csr::try_new`]).
pub fn csr_from_parts(
    rows: usize,
    cols: usize,
    indptr: Vec<u32>,
    indices: Vec<u32>,
    data: Vec<f32>,
) -> Result<Csr, CsrError> {
    Csr::try_new((rows, cols), indptr, indices, data)
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
