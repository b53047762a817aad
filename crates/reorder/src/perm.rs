//! [`Permutation`]: a validated bijection on `0..n`, and how it is applied to matrices and dense rows.
//!
//! Convention, used everywhere in tcsparse: `perm[new] = old`. Position `new` of the reordered object
//! holds item `old` of the original. [`Permutation::inverse`] gives `inv[old] = new`.
//!
//! * Row-only reordering computes `A' = P·A` ([`Permutation::apply_rows`]); `B` is used untouched and
//!   `C = Pᵀ·C'` is recovered with [`Permutation::unapply_dense_rows`] (row `new` of `C'` is row
//!   `perm[new]` of `C`).
//! * Symmetric reordering computes `A' = P·A·Pᵀ` ([`Permutation::apply_symmetric`]); then `B' = P·B`
//!   ([`Permutation::apply_dense_rows`]) and `C = Pᵀ·(A'·B')`, again with `unapply_dense_rows`.

use crate::ReorderError;
use rayon::prelude::*;
use tcsparse_formats::Csr;

/// A bijection on `0..n` stored as `perm[new] = old`. Invariant: every value in `0..n` occurs once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    perm: Vec<u32>,
}

impl Permutation {
    /// Validates `perm` (`perm[new] = old`) as a bijection on `0..perm.len()`.
    pub fn new(perm: Vec<u32>) -> Result<Self, ReorderError> {
        let n = perm.len();
        if n > u32::MAX as usize {
            return Err(ReorderError::TooLarge(n));
        }
        let mut seen = vec![false; n];
        for (pos, &v) in perm.iter().enumerate() {
            let vi = v as usize;
            if vi >= n {
                return Err(ReorderError::InvalidPermutation(format!(
                    "value {v} at position {pos} is not below n = {n}"
                )));
            }
            if seen[vi] {
                return Err(ReorderError::InvalidPermutation(format!(
                    "value {v} occurs twice (second time at position {pos})"
                )));
            }
            seen[vi] = true;
        }
        Ok(Self { perm })
    }

    /// The identity on `0..n`.
    pub fn identity(n: usize) -> Self {
        Self {
            perm: (0..n as u32).collect(),
        }
    }

    /// Number of elements `n`.
    pub fn len(&self) -> usize {
        self.perm.len()
    }

    /// Whether `n == 0`.
    pub fn is_empty(&self) -> bool {
        self.perm.is_empty()
    }

    /// The stored map, `perm[new] = old`.
    pub fn as_slice(&self) -> &[u32] {
        &self.perm
    }

    /// Consumes the permutation, returning `perm[new] = old`.
    pub fn into_vec(self) -> Vec<u32> {
        self.perm
    }

    /// Whether this is the identity.
    pub fn is_identity(&self) -> bool {
        self.perm.iter().enumerate().all(|(i, &v)| i as u32 == v)
    }

    /// The inverse map: `inv[old] = new`.
    pub fn inverse(&self) -> Self {
        let mut inv = vec![0u32; self.perm.len()];
        for (new, &old) in self.perm.iter().enumerate() {
            inv[old as usize] = new as u32;
        }
        Self { perm: inv }
    }

    /// Composition "first `self`, then `then`": reordering by `self` and then reordering the result by
    /// `then` equals reordering once by `self.compose(then)`, i.e. `out[i] = self[then[i]]`.
    pub fn compose(&self, then: &Permutation) -> Result<Self, ReorderError> {
        self.check_len(then.len(), "compose")?;
        Ok(Self {
            perm: then.perm.iter().map(|&i| self.perm[i as usize]).collect(),
        })
    }

    pub(crate) fn check_len(&self, got: usize, what: &'static str) -> Result<(), ReorderError> {
        if got != self.perm.len() {
            return Err(ReorderError::DimensionMismatch {
                what,
                expected: self.perm.len(),
                got,
            });
        }
        Ok(())
    }

    /// `P·A`: row `new` of the result is row `perm[new]` of `a`. Needs `a.rows() == n`.
    /// Parallel over chunks of rows.
    pub fn apply_rows(&self, a: &Csr) -> Result<Csr, ReorderError> {
        self.check_len(a.rows(), "apply_rows (matrix rows)")?;
        Ok(permute(a, Some(&self.perm), None))
    }

    /// `A·Pᵀ`: column `new` of the result is column `perm[new]` of `a`. Needs `a.cols() == n`.
    pub fn apply_cols(&self, a: &Csr) -> Result<Csr, ReorderError> {
        self.check_len(a.cols(), "apply_cols (matrix columns)")?;
        Ok(permute(a, None, Some(&self.inverse().perm)))
    }

    /// `P·A·Pᵀ`: entry `(i, j)` of the result is entry `(perm[i], perm[j])` of `a`. Needs a square
    /// `a` with `n` rows.
    pub fn apply_symmetric(&self, a: &Csr) -> Result<Csr, ReorderError> {
        if a.rows() != a.cols() {
            return Err(ReorderError::NotSquare {
                rows: a.rows(),
                cols: a.cols(),
            });
        }
        self.check_len(a.rows(), "apply_symmetric (matrix rows)")?;
        Ok(permute(a, Some(&self.perm), Some(&self.inverse().perm)))
    }

    /// `P·X` for a row-major dense `X` with `n` rows of `ld ≥ width` elements: row `new` of the result
    /// is row `perm[new]` of `x`. `x.len()` must be `n·ld`.
    pub fn apply_dense_rows(
        &self,
        x: &[f32],
        n: usize,
        ld: usize,
    ) -> Result<Vec<f32>, ReorderError> {
        self.move_dense_rows(x, n, ld, |new, old| (new, old))
    }

    /// `Pᵀ·X`, the inverse of [`Permutation::apply_dense_rows`]: row `perm[new]` of the result is row
    /// `new` of `x`. Use it to bring `C'` computed in the reordered space back to the original rows.
    pub fn unapply_dense_rows(
        &self,
        x: &[f32],
        n: usize,
        ld: usize,
    ) -> Result<Vec<f32>, ReorderError> {
        self.move_dense_rows(x, n, ld, |new, old| (old, new))
    }

    /// Rows of `x` (checked as in [`Permutation::apply_dense_rows`]) moved to a new buffer:
    /// `to_from(new, perm[new])` gives the destination row and the source row of each.
    fn move_dense_rows(
        &self,
        x: &[f32],
        n: usize,
        ld: usize,
        to_from: impl Fn(usize, usize) -> (usize, usize),
    ) -> Result<Vec<f32>, ReorderError> {
        self.check_dense(x, n, ld)?;
        let mut out = vec![0f32; x.len()];
        for (new, &old) in self.perm.iter().enumerate() {
            let (to, from) = to_from(new, old as usize);
            out[to * ld..(to + 1) * ld].copy_from_slice(&x[from * ld..(from + 1) * ld]);
        }
        Ok(out)
    }

    fn check_dense(&self, x: &[f32], n: usize, ld: usize) -> Result<(), ReorderError> {
        self.check_len(n, "dense rows")?;
        let want = n
            .checked_mul(ld)
            .ok_or(ReorderError::TooLarge(usize::MAX))?;
        if x.len() != want {
            return Err(ReorderError::DimensionMismatch {
                what: "dense length n·ld",
                expected: want,
                got: x.len(),
            });
        }
        Ok(())
    }
}

/// Rows taken in order `row_order` (identity when `None`), columns relabelled
/// `c -> new_of_col[c]` (kept when `None`) and each relabelled row re-sorted. Parallel over chunks
/// of rows, each writing its own slice of the output (the result does not depend on the thread
/// count).
/// [`crate::apply`] of `perm` to `a` in `mode`, for a triple whose lengths and shape
/// [`crate::CheckedReorder::new`] checked.
pub(crate) fn permute_checked(a: &Csr, perm: &Permutation, mode: crate::Mode) -> Csr {
    match mode {
        crate::Mode::Symmetric => permute(a, Some(&perm.perm), Some(&perm.inverse().perm)),
        crate::Mode::RowOnly => permute(a, Some(&perm.perm), None),
    }
}

fn permute(a: &Csr, row_order: Option<&[u32]>, new_of_col: Option<&[u32]>) -> Csr {
    let ip = a.row_offsets();
    let rows = a.rows();
    let old = |r: usize| row_order.map_or(r, |o| o[r] as usize);
    let mut indptr = Vec::with_capacity(rows + 1);
    indptr.push(0u32);
    let mut end = 0u32;
    for r in 0..rows {
        let o = old(r);
        end += ip[o + 1] - ip[o];
        indptr.push(end);
    }
    let nnz = a.nnz();
    let mut indices = vec![0u32; nnz];
    let mut data = vec![0f32; nnz];
    const CHUNK: usize = 4096;
    let mut jobs: Vec<(usize, &mut [u32], &mut [f32])> = Vec::with_capacity(rows.div_ceil(CHUNK));
    {
        let (mut ri, mut rd) = (&mut indices[..], &mut data[..]);
        for r0 in (0..rows).step_by(CHUNK) {
            let len = (indptr[(r0 + CHUNK).min(rows)] - indptr[r0]) as usize;
            let (ci, ni) = std::mem::take(&mut ri).split_at_mut(len);
            let (cd, nd) = std::mem::take(&mut rd).split_at_mut(len);
            jobs.push((r0, ci, cd));
            (ri, rd) = (ni, nd);
        }
    }
    let (src_i, src_d) = (a.indices(), a.data());
    jobs.into_par_iter()
        .for_each_init(Vec::new, |buf: &mut Vec<(u32, f32)>, (r0, oi, od)| {
            let mut k = 0usize;
            for r in r0..(r0 + CHUNK).min(rows) {
                let o = old(r);
                let (s, e) = (ip[o] as usize, ip[o + 1] as usize);
                let n = e - s;
                match new_of_col {
                    None => {
                        oi[k..k + n].copy_from_slice(&src_i[s..e]);
                        od[k..k + n].copy_from_slice(&src_d[s..e]);
                    }
                    Some(map) => {
                        buf.clear();
                        buf.extend(
                            src_i[s..e]
                                .iter()
                                .zip(&src_d[s..e])
                                .map(|(&c, &v)| (map[c as usize], v)),
                        );
                        buf.sort_unstable_by_key(|&(c, _)| c);
                        for (j, &(c, v)) in buf.iter().enumerate() {
                            oi[k + j] = c;
                            od[k + j] = v;
                        }
                    }
                }
                k += n;
            }
        });
    Csr::new((a.rows(), a.cols()), indptr, indices, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_formats::csr::csr_from_triplets;

    #[test]
    fn rejects_non_bijections() {
        assert!(Permutation::new(vec![0, 2]).is_err());
        assert!(Permutation::new(vec![1, 1]).is_err());
        assert!(Permutation::new(vec![]).is_ok());
        assert!(Permutation::new(vec![2, 0, 1]).is_ok());
    }

    #[test]
    fn a_checked_reorder_applies_as_apply_and_refuses_what_apply_refuses() {
        use crate::{CheckedReorder, Mode, apply};
        use std::sync::Arc;
        let p = Permutation::new(vec![2, 0, 3, 1]).unwrap();
        let t = [
            (0, 1, 1.0),
            (2, 0, 2.0),
            (2, 3, 3.0),
            (3, 3, 4.0),
            (1, 2, 5.0),
        ];
        let a = Arc::new(csr_from_triplets(4, 4, &t).unwrap());
        for mode in [Mode::Symmetric, Mode::RowOnly] {
            let r = CheckedReorder::new(Arc::clone(&a), p.clone(), mode).unwrap();
            assert_eq!(r.apply(), apply(&p, &a, mode).unwrap());
            assert!(Arc::ptr_eq(r.source(), &a));
        }
        let wide = Arc::new(csr_from_triplets(4, 6, &[(0, 5, 1.0)]).unwrap());
        assert!(CheckedReorder::new(Arc::clone(&wide), p.clone(), Mode::Symmetric).is_err());
        let r = CheckedReorder::new(Arc::clone(&wide), p.clone(), Mode::RowOnly).unwrap();
        assert_eq!(r.apply(), p.apply_rows(&wide).unwrap());
        let short = Permutation::new(vec![1, 0]).unwrap();
        assert!(CheckedReorder::new(a, short, Mode::RowOnly).is_err());
    }

    #[test]
    fn conventions() {
        let p = Permutation::new(vec![2, 0, 1]).unwrap();
        assert_eq!(p.inverse().as_slice(), &[1, 2, 0]);
        assert!(p.compose(&p.inverse()).unwrap().is_identity());
        let a = csr_from_triplets(3, 3, &[(0, 1, 1.0), (2, 0, 2.0), (2, 2, 3.0)]).unwrap();
        let r = p.apply_rows(&a).unwrap();
        // new row 0 = old row 2
        assert_eq!(r.outer_view(0).unwrap().indices(), &[0, 2]);
        let s = p.apply_symmetric(&a).unwrap();
        // (i,j) = a(perm[i], perm[j]); a(2,2)=3 lands at (0,0); a(2,0)=2 at (0,1); a(0,1)=1 at (1,2)
        assert_eq!(s.get(0, 0), Some(&3.0));
        assert_eq!(s.get(0, 1), Some(&2.0));
        assert_eq!(s.get(1, 2), Some(&1.0));
        let x = vec![0., 0., 1., 1., 2., 2.];
        let px = p.apply_dense_rows(&x, 3, 2).unwrap();
        assert_eq!(px, vec![2., 2., 0., 0., 1., 1.]);
        assert_eq!(p.unapply_dense_rows(&px, 3, 2).unwrap(), x);
    }
}
