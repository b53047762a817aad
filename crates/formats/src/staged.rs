//! Window-staged CSR: the layout of the staged SpMM kernel (`kernels-ptx/staged_spmm.cu`), which
//! copies the B rows a window of consecutive rows reads into shared memory once and multiplies
//! every row of the window from there, instead of gathering one B row per nonzero through L2.
//!
//! Rows are cut greedily into *windows*: a window grows while it has fewer than
//! [`StagedSpec::max_window_rows`] rows and the union of its rows' columns stays within
//! [`StagedSpec::slot_cap`]. Per window the layout keeps its first row and its sorted unique
//! columns (`unique_cols`, from `unique_offsets`); per nonzero, in CSR order, the column's *slot*
//! in its window's unique list (u16) and the value. The CSR row offsets are kept, so a row's
//! nonzeros are `indptr[r] .. indptr[r+1]` as in CSR and B row `unique_cols[unique_offsets[w] +
//! slot]` is staged at slot `slot` of window `w`.
//!
//! A row whose own distinct columns exceed the cap cannot be staged: the build returns
//! [`FormatError::RowOverCap`] (the kernel is then not a candidate for this matrix).
//!
//! The build is O(nnz) plus the sort of each window's unique list (at most `slot_cap` columns):
//! one sequential pass cuts the windows with a stamp per column, then the windows sort their
//! lists and find their nonzeros' slots in parallel. Every allocation is proportional to the
//! nonzeros and rows (the stamps to the columns that occur, when columns far outnumber
//! nonzeros).

use rayon::prelude::*;

use crate::Csr;
use crate::layout::{
    FormatError, Layout, check_prefix, check_u32, invalid, layout_from_inherent, shape_accessors,
};

const NAME: &str = "window-staged CSR";

/// Largest slot cap: slots are u16.
pub const MAX_SLOT_CAP: u32 = 1 << 16;

/// How rows are cut into windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StagedSpec {
    /// Most rows in one window (≥ 1).
    pub max_window_rows: u32,
    /// Most distinct columns (staged B rows) in one window (1 ..= [`MAX_SLOT_CAP`]).
    pub slot_cap: u32,
}

impl StagedSpec {
    /// `Ok` when both bounds are in range.
    pub fn check(&self) -> Result<(), FormatError> {
        if self.max_window_rows == 0 {
            return Err(FormatError::BadArgument(
                "max_window_rows must be at least 1".into(),
            ));
        }
        if self.slot_cap == 0 || self.slot_cap > MAX_SLOT_CAP {
            return Err(FormatError::BadArgument(format!(
                "slot_cap {} outside 1 ..= {MAX_SLOT_CAP}",
                self.slot_cap
            )));
        }
        Ok(())
    }
}

/// A CSR matrix cut into windows of rows with their staged columns (module docs).
///
/// Invariants (checked by [`StagedCsr::validate`]): `indptr` is a CSR row-offset array of
/// `rows + 1` entries ending at nnz; `window_rows` rises strictly from 0 to `rows` (one entry when
/// there are no rows), each window at most `max_window_rows` rows; `unique_offsets` has one entry
/// per window plus one, from 0 to `unique_cols.len()`, each window at most `slot_cap` columns;
/// each window's list is strictly increasing and `< cols`; `slots` and `values` have nnz entries,
/// each slot below its window's unique count.
#[derive(Clone, Debug, PartialEq)]
pub struct StagedCsr {
    rows: usize,
    cols: usize,
    spec: StagedSpec,
    indptr: Vec<u32>,
    window_rows: Vec<u32>,
    unique_offsets: Vec<u32>,
    unique_cols: Vec<u32>,
    slots: Vec<u16>,
    values: Vec<f32>,
}

/// Splits `a` into consecutive mutable pieces at the non-decreasing `offsets` (from 0 to
/// `a.len()`).
fn split_at_offsets<'a, T>(mut a: &'a mut [T], offsets: &[u32]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (head, tail) = a.split_at_mut((w[1] - w[0]) as usize);
        out.push(head);
        a = tail;
    }
    out
}

/// Dense ids of the columns that occur in `indices`: the identity when the columns are few
/// against the nonzeros, else the rank of each column among the sorted distinct ones (so the
/// stamp array never grows with an empty column range).
fn column_ids(cols: usize, indices: &[u32]) -> (usize, Option<Vec<u32>>) {
    if cols <= 4 * indices.len() + 4096 {
        return (cols, None);
    }
    let mut distinct = indices.to_vec();
    distinct.par_sort_unstable();
    distinct.dedup();
    let ids = indices
        .par_iter()
        .map(|c| distinct.partition_point(|&d| d < *c) as u32)
        .collect();
    (distinct.len(), Some(ids))
}

impl StagedCsr {
    /// Cuts `csr` into windows by `spec` (module docs).
    ///
    /// # Errors
    /// [`FormatError::BadArgument`] for a spec out of range, [`FormatError::TooLarge`] when the
    /// matrix does not fit u32 indices, [`FormatError::RowOverCap`] when one row alone has more
    /// distinct columns than `spec.slot_cap`.
    pub fn build(csr: &Csr, spec: &StagedSpec) -> Result<Self, FormatError> {
        spec.check()?;
        check_u32(csr)?;
        let (rows, cols) = csr.shape();
        let indptr = csr.row_offsets();
        let indices = csr.indices();
        let cap = spec.slot_cap as usize;
        let max_rows = spec.max_window_rows as usize;
        if let Some(r) = (0..rows).find(|&r| (indptr[r + 1] - indptr[r]) as usize > cap) {
            return Err(FormatError::RowOverCap {
                row: r,
                columns: (indptr[r + 1] - indptr[r]) as usize,
                cap,
            });
        }
        // One pass: stamp[c] = 1 + the window that last listed column c (rows are duplicate-free,
        // so a row's columns not stamped for the current window are its new ones).
        let (ids_len, ids) = column_ids(cols, indices);
        let id = |p: usize| ids.as_ref().map_or(indices[p], |v| v[p]) as usize;
        let mut stamp = vec![0u32; ids_len];
        let mut window_rows = vec![0u32];
        let mut unique_offsets = vec![0u32];
        let mut unique_cols: Vec<u32> = Vec::new();
        let mut window = 1u32; // stamp of the open window
        let mut open_rows = 0usize;
        for r in 0..rows {
            let (s, e) = (indptr[r] as usize, indptr[r + 1] as usize);
            let new = (s..e).filter(|&p| stamp[id(p)] != window).count();
            let union = unique_cols.len() - *unique_offsets.last().unwrap_or(&0) as usize;
            if open_rows > 0 && (open_rows == max_rows || union + new > cap) {
                window_rows.push(r as u32);
                unique_offsets.push(unique_cols.len() as u32);
                window += 1;
                open_rows = 0;
            }
            for (p, &col) in indices.iter().enumerate().take(e).skip(s) {
                let c = id(p);
                if stamp[c] != window {
                    stamp[c] = window;
                    unique_cols.push(col);
                }
            }
            open_rows += 1;
        }
        if rows > 0 {
            window_rows.push(rows as u32);
            unique_offsets.push(unique_cols.len() as u32);
        }
        drop(stamp);
        split_at_offsets(&mut unique_cols, &unique_offsets)
            .into_par_iter()
            .for_each(|u| u.sort_unstable());
        let mut slots = vec![0u16; csr.nnz()];
        let nnz_offsets: Vec<u32> = window_rows.iter().map(|&r| indptr[r as usize]).collect();
        split_at_offsets(&mut slots, &nnz_offsets)
            .into_par_iter()
            .enumerate()
            .for_each(|(w, out)| {
                let u = &unique_cols[unique_offsets[w] as usize..unique_offsets[w + 1] as usize];
                let base = nnz_offsets[w] as usize;
                for (k, slot) in out.iter_mut().enumerate() {
                    // Present: the column was listed for this window.
                    *slot = u.partition_point(|&c| c < indices[base + k]) as u16;
                }
            });
        Ok(Self {
            rows,
            cols,
            spec: *spec,
            indptr: indptr.to_vec(),
            window_rows,
            unique_offsets,
            unique_cols,
            slots,
            values: csr.data().to_vec(),
        })
    }

    /// [`StagedCsr::build`] for the [`Layout`] contract.
    pub fn from_csr(csr: &Csr, spec: StagedSpec) -> Result<Self, FormatError> {
        Self::build(csr, &spec)
    }

    shape_accessors!();

    /// Stored entries (explicit zeros included).
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// The spec the windows were cut by.
    pub fn spec(&self) -> StagedSpec {
        self.spec
    }

    /// Number of windows.
    pub fn windows(&self) -> usize {
        self.window_rows.len() - 1
    }

    /// CSR row offsets (`rows + 1`).
    pub fn indptr(&self) -> &[u32] {
        &self.indptr
    }

    /// First row of each window, then `rows` (`windows + 1` entries).
    pub fn window_rows(&self) -> &[u32] {
        &self.window_rows
    }

    /// Offsets of each window's list in [`StagedCsr::unique_cols`] (`windows + 1` entries).
    pub fn unique_offsets(&self) -> &[u32] {
        &self.unique_offsets
    }

    /// Every window's sorted unique columns, window after window.
    pub fn unique_cols(&self) -> &[u32] {
        &self.unique_cols
    }

    /// Per nonzero (CSR order), its column's slot in its window's list.
    pub fn slots(&self) -> &[u16] {
        &self.slots
    }

    /// Per nonzero (CSR order), its value.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Most unique columns of any window (the shared-memory rows a kernel block needs).
    pub fn max_window_unique(&self) -> usize {
        self.unique_offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Staged B rows over all windows (Σ|U_w|): a kernel reads this many B rows instead of one
    /// per nonzero; `nnz / staged_rows` is the gather reduction.
    pub fn staged_rows(&self) -> usize {
        self.unique_cols.len()
    }

    /// Column of the nonzero at CSR position `p` in window `w`.
    fn column(&self, w: usize, p: usize) -> u32 {
        self.unique_cols[self.unique_offsets[w] as usize + self.slots[p] as usize]
    }

    /// Decodes back to the CSR it was built from, bit for bit.
    pub fn to_csr(&self) -> Csr {
        let mut indices = vec![0u32; self.nnz()];
        for w in 0..self.windows() {
            let (rb, re) = (self.window_rows[w], self.window_rows[w + 1]);
            let (s, e) = (
                self.indptr[rb as usize] as usize,
                self.indptr[re as usize] as usize,
            );
            for (p, out) in indices[s..e].iter_mut().enumerate() {
                *out = self.column(w, s + p);
            }
        }
        Csr::new(
            (self.rows, self.cols),
            self.indptr.clone(),
            indices,
            self.values.clone(),
        )
    }

    /// Re-checks every invariant (struct docs).
    pub fn validate(&self) -> Result<(), FormatError> {
        self.spec.check()?;
        let nnz = self.values.len();
        if self.slots.len() != nnz {
            return Err(invalid(NAME, "slots and values differ in length"));
        }
        check_prefix(NAME, "indptr", &self.indptr, self.rows + 1, nnz)?;
        let windows = self.window_rows.len().saturating_sub(1);
        check_prefix(
            NAME,
            "window_rows",
            &self.window_rows,
            windows + 1,
            self.rows,
        )?;
        check_prefix(
            NAME,
            "unique_offsets",
            &self.unique_offsets,
            windows + 1,
            self.unique_cols.len(),
        )?;
        for w in 0..windows {
            let (rb, re) = (
                self.window_rows[w] as usize,
                self.window_rows[w + 1] as usize,
            );
            if re == rb || re - rb > self.spec.max_window_rows as usize {
                return Err(invalid(NAME, format!("window {w} has {} rows", re - rb)));
            }
            let u = &self.unique_cols
                [self.unique_offsets[w] as usize..self.unique_offsets[w + 1] as usize];
            if u.len() > self.spec.slot_cap as usize {
                return Err(invalid(NAME, format!("window {w} has {} columns", u.len())));
            }
            if u.windows(2).any(|p| p[0] >= p[1])
                || u.last().is_some_and(|&c| c as usize >= self.cols)
            {
                return Err(invalid(
                    NAME,
                    format!("window {w}: columns not increasing or out of range"),
                ));
            }
            let (s, e) = (self.indptr[rb] as usize, self.indptr[re] as usize);
            if self.slots[s..e].iter().any(|&k| k as usize >= u.len()) {
                return Err(invalid(
                    NAME,
                    format!("window {w}: a slot beyond its columns"),
                ));
            }
        }
        Ok(())
    }

    /// Calls `f(row, col, value)` for every entry, row by row in CSR order (the order the kernel
    /// accumulates a row).
    pub fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, mut f: F) {
        for w in 0..self.windows() {
            for r in self.window_rows[w] as usize..self.window_rows[w + 1] as usize {
                for p in self.indptr[r] as usize..self.indptr[r + 1] as usize {
                    f(r, self.column(w, p) as usize, self.values[p]);
                }
            }
        }
    }
}

impl Layout for StagedCsr {
    layout_from_inherent!(NAME, StagedSpec);

    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, f: F) {
        Self::for_each_entry(self, f)
    }
}
