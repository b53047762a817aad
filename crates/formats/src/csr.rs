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

use rayon::prelude::*;

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

/// Every entry of `a` (the array `what`) as u32, or the first that does not fit.
fn narrow_all<I: SpIndex>(what: &'static str, a: &[I]) -> Result<Vec<u32>, CsrError> {
    a.iter()
        .enumerate()
        .map(|(position, &i)| {
            i.try_index()
                .and_then(|u| u32::try_from(u).ok())
                .ok_or_else(|| CsrError::IndexOutOfRange {
                    what,
                    position,
                    value: format!("{i:?}"),
                })
        })
        .collect()
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
        let indptr = narrow_all("indptr", &proper)?;
        let indices = narrow_all("indices", m.indices())?;
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

    /// Stored values of the longest row (0 for a matrix without rows).
    pub fn longest_row(&self) -> usize {
        self.row_offsets()
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// How many stored values are NaN or ±inf. Such values are accepted (scipy does too) but make
    /// every product's rows that touch them non-finite: tools should say so.
    pub fn non_finite(&self) -> usize {
        self.0.data().iter().filter(|v| !v.is_finite()).count()
    }
}

/// Builds a CSR matrix from (row, col, value) triplets in any order, summing duplicates (in input
/// order: `((a + b) + c)`) and sorting every row by column. Zero-based indices. Explicit zeros
/// (including sums that cancel) are kept, so the sparsity pattern is exactly the set of distinct
/// input positions. Checks the row offsets against [`Limits::global`] first.
pub fn csr_from_triplets(
    rows: usize,
    cols: usize,
    triplets: &[(u32, u32, f32)],
) -> Result<Csr, CsrError> {
    csr_from_triplets_with(rows, cols, triplets, &Limits::global())
}

/// [`csr_from_triplets`] under an explicit budget, built in parallel ([`RowBuckets`]): the same
/// matrix, bit for bit, on any thread count. Memory: the row offsets (4 bytes a row, checked
/// against `limits` before allocating) and [`BYTES_PER_ENTRY`] per triplet.
pub fn csr_from_triplets_with(
    rows: usize,
    cols: usize,
    triplets: &[(u32, u32, f32)],
    limits: &Limits,
) -> Result<Csr, CsrError> {
    check_dims(rows, cols, triplets.len())?;
    check_csr_budget(rows, triplets.len() as u64, limits)?;
    if let Some(k) = triplets
        .par_iter()
        .position_first(|&(r, c, _)| r as usize >= rows || c as usize >= cols)
    {
        let (r, c, _) = triplets[k];
        return Err(CsrError::OutOfBounds {
            row: r.into(),
            col: c.into(),
            rows,
            cols,
        });
    }
    let buckets = RowBuckets::new(rows);
    let runs: Vec<BucketedRun> = triplets
        .par_chunks(1 << 16)
        .map(|t| BucketedRun::new(t, &buckets))
        .collect();
    csr_from_runs(rows, cols, runs, &buckets)
}

/// Bytes per entry that building a CSR from triplets holds at its peak: the triplets (12) and the
/// output's column index and value (8).
pub const BYTES_PER_ENTRY: u64 = 20;

/// Largest number of row buckets of the parallel CSR build.
const MAX_BUCKETS: usize = 1024;

/// Rows cut into at most 1024 buckets of a power-of-two number of consecutive rows: the unit of
/// work of the parallel CSR build. Each bucket gathers its triplets from every run in input order
/// (so the result never depends on the thread count), sorts them by row (counting sort) and each
/// row by column (stable), and sums duplicates, into its own part of the output.
#[derive(Clone, Copy, Debug)]
pub struct RowBuckets {
    rows: usize,
    shift: u32,
    count: usize,
}

impl RowBuckets {
    /// The buckets of a matrix of `rows` rows.
    pub fn new(rows: usize) -> Self {
        let per = rows.div_ceil(MAX_BUCKETS).max(1).next_power_of_two();
        Self {
            rows,
            shift: per.trailing_zeros(),
            count: rows.div_ceil(per),
        }
    }

    /// The bucket of row `r` (`r < rows`).
    #[inline]
    fn of(&self, r: u32) -> usize {
        (r as usize) >> self.shift
    }

    /// The rows of bucket `b`.
    fn rows_of(&self, b: usize) -> std::ops::Range<usize> {
        (b << self.shift)..((b + 1) << self.shift).min(self.rows)
    }
}

/// A run of triplets (all inside the matrix) in input order, grouped by [`RowBuckets`] bucket and
/// in input order within each bucket.
#[derive(Debug, Default)]
pub struct BucketedRun {
    triplets: Vec<(u32, u32, f32)>,
    /// `starts[b]..starts[b + 1]`: bucket `b`'s triplets (empty when there is one bucket).
    starts: Vec<u32>,
}

impl BucketedRun {
    /// Groups `t` by bucket (a stable counting sort). Every row must be inside the matrix.
    pub fn new(t: &[(u32, u32, f32)], buckets: &RowBuckets) -> Self {
        if buckets.count <= 1 {
            return Self {
                triplets: t.to_vec(),
                starts: Vec::new(),
            };
        }
        let mut starts = vec![0u32; buckets.count + 1];
        for &(r, _, _) in t {
            starts[buckets.of(r) + 1] += 1;
        }
        for b in 0..buckets.count {
            starts[b + 1] += starts[b];
        }
        let mut cursor = starts.clone();
        let mut triplets = vec![(0u32, 0u32, 0f32); t.len()];
        for &e in t {
            let k = &mut cursor[buckets.of(e.0)];
            triplets[*k as usize] = e;
            *k += 1;
        }
        Self { triplets, starts }
    }

    /// [`BucketedRun::new`] taking the triplets by value (kept as they are with one bucket).
    pub fn from_vec(t: Vec<(u32, u32, f32)>, buckets: &RowBuckets) -> Self {
        if buckets.count <= 1 {
            Self {
                triplets: t,
                starts: Vec::new(),
            }
        } else {
            Self::new(&t, buckets)
        }
    }

    /// Triplets in the run.
    pub fn len(&self) -> usize {
        self.triplets.len()
    }

    /// True when the run holds no triplet.
    pub fn is_empty(&self) -> bool {
        self.triplets.is_empty()
    }

    fn bucket(&self, b: usize) -> &[(u32, u32, f32)] {
        if self.starts.is_empty() {
            &self.triplets
        } else {
            &self.triplets[self.starts[b] as usize..self.starts[b + 1] as usize]
        }
    }
}

/// Builds the CSR of the triplets of `runs` (in order; rows and columns already checked against
/// the shape) in parallel, one task per [`RowBuckets`] bucket. Duplicates are summed in input
/// order; the result is the same on any thread count.
pub fn csr_from_runs(
    rows: usize,
    cols: usize,
    runs: Vec<BucketedRun>,
    buckets: &RowBuckets,
) -> Result<Csr, CsrError> {
    let nnz: usize = runs.iter().map(BucketedRun::len).sum();
    check_dims(rows, cols, nnz)?;
    let nb = buckets.count;
    let mut sizes = vec![0usize; nb];
    for run in &runs {
        for (b, size) in sizes.iter_mut().enumerate() {
            *size += run.bucket(b).len();
        }
    }
    let mut indices = vec![0u32; nnz];
    let mut data = vec![0f32; nnz];
    let mut ptr = vec![0u32; rows + 1];
    // Every bucket's own part of the output (its entries and its rows' lengths in ptr[1..]).
    let mut tasks = Vec::with_capacity(nb);
    {
        let (mut idx, mut dat, mut lens) = (&mut indices[..], &mut data[..], &mut ptr[1..]);
        for (b, &n) in sizes.iter().enumerate() {
            let (i, rest) = std::mem::take(&mut idx).split_at_mut(n);
            idx = rest;
            let (d, rest) = std::mem::take(&mut dat).split_at_mut(n);
            dat = rest;
            let (l, rest) = std::mem::take(&mut lens).split_at_mut(buckets.rows_of(b).len());
            lens = rest;
            tasks.push((b, i, d, l));
        }
    }
    let kept: Vec<usize> = tasks
        .into_par_iter()
        .map(|(b, idx, dat, lens)| build_bucket(&runs, b, buckets.rows_of(b).start, idx, dat, lens))
        .collect();
    drop(runs);
    for i in 0..rows {
        ptr[i + 1] += ptr[i];
    }
    let total: usize = kept.iter().sum();
    if total < nnz {
        // Duplicates were merged: close the gaps at the end of each bucket's part.
        let (mut from, mut to) = (0usize, 0usize);
        for (&n, &k) in sizes.iter().zip(&kept) {
            indices.copy_within(from..from + k, to);
            data.copy_within(from..from + k, to);
            from += n;
            to += k;
        }
        indices.truncate(total);
        data.truncate(total);
    }
    Csr::try_new((rows, cols), ptr, indices, data)
}

/// One bucket of [`csr_from_runs`]: counting sort of its entries by row into `idx`/`dat` (input
/// order kept within a row), each row sorted by column (stable) with duplicates summed and
/// compacted to the front; `lens` ends as the rows' lengths. Returns the entries kept.
fn build_bucket(
    runs: &[BucketedRun],
    b: usize,
    r0: usize,
    idx: &mut [u32],
    dat: &mut [f32],
    lens: &mut [u32],
) -> usize {
    for run in runs {
        for &(r, _, _) in run.bucket(b) {
            lens[r as usize - r0] += 1;
        }
    }
    // Exclusive prefix: lens[r] becomes row r's start, then (after the scatter) its end.
    let mut acc = 0u32;
    for l in lens.iter_mut() {
        let n = *l;
        *l = acc;
        acc += n;
    }
    for run in runs {
        for &(r, c, v) in run.bucket(b) {
            let k = &mut lens[r as usize - r0];
            idx[*k as usize] = c;
            dat[*k as usize] = v;
            *k += 1;
        }
    }
    let mut pairs: Vec<(u32, f32)> = Vec::new();
    let (mut w, mut start) = (0usize, 0usize);
    for l in lens.iter_mut() {
        let end = *l as usize;
        let row_start = w;
        if idx[start..end].windows(2).all(|p| p[0] < p[1]) {
            // Sorted without duplicates (the usual case): at most a move to close a gap.
            if w != start {
                idx.copy_within(start..end, w);
                dat.copy_within(start..end, w);
            }
            w += end - start;
        } else {
            pairs.clear();
            pairs.extend(
                idx[start..end]
                    .iter()
                    .copied()
                    .zip(dat[start..end].iter().copied()),
            );
            pairs.sort_by_key(|p| p.0);
            for &(c, v) in &pairs {
                if w > row_start && idx[w - 1] == c {
                    dat[w - 1] += v;
                } else {
                    idx[w] = c;
                    dat[w] = v;
                    w += 1;
                }
            }
        }
        *l = (w - row_start) as u32;
        start = end;
    }
    w
}

/// Checks what a `rows`-row CSR with `nnz` entries and its construction need against `limits`:
/// 4 bytes a row and [`BYTES_PER_ENTRY`] an entry.
pub fn check_csr_budget(rows: usize, nnz: u64, limits: &Limits) -> Result<(), BudgetError> {
    let need = bytes_of(rows as u64 + 1, 4).saturating_add(bytes_of(nnz, BYTES_PER_ENTRY));
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
    fn longest_row_counts_stored_values() {
        let m =
            csr_from_triplets(3, 4, &[(2, 3, 1.0), (0, 2, 2.0), (0, 1, 3.0), (0, 2, 4.0)]).unwrap();
        // Row 0 holds two values (the duplicate summed), row 1 none, row 2 one.
        assert_eq!(m.longest_row(), 2);
        assert_eq!(csr_from_triplets(0, 5, &[]).unwrap().longest_row(), 0);
        assert_eq!(csr_from_triplets(4, 0, &[]).unwrap().longest_row(), 0);
    }

    #[test]
    fn out_of_bounds_is_an_error() {
        let e = csr_from_triplets(2, 2, &[(0, 2, 1.0)]).unwrap_err();
        assert!(matches!(e, CsrError::OutOfBounds { row: 0, col: 2, .. }));
    }
}
