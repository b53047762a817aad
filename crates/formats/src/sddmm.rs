//! Products over a CSR *pattern* with values supplied apart from it: the sampled dense-dense
//! product (SDDMM) `out_k = ⟨A_i, B_j⟩` for each stored position `k = (i, j)`, and the SpMM
//! `C = A·B` with f64 values in the pattern's CSR order. Together they are the two halves of an
//! SpMM's gradient: for `Y = A·X`, `dX = Aᵀ·dY` and `dA_ij = ⟨dY_i, X_j⟩` on A's pattern (an SDDMM
//! of dY and X).
//!
//! Dense operands are row-major and compact (leading dimension = their column count); sums are in
//! f64 whatever the operand type. These are the CPU reference the GPU SDDMM kernel is checked
//! against, and the arithmetic of the Python package's float64 path.

use crate::Csr;
use rayon::prelude::*;
use thiserror::Error;

/// Errors of the pattern products: operands whose lengths do not fit the pattern.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SddmmError {
    /// A dense operand has the wrong number of elements.
    #[error("{what} has {got} elements, expected {rows}×{k} = {expected}")]
    Shape {
        /// Which operand.
        what: &'static str,
        /// Its element count.
        got: usize,
        /// Rows it must have.
        rows: usize,
        /// Columns it must have.
        k: usize,
        /// `rows · k` (saturated).
        expected: usize,
    },
    /// The value array does not hold one value per stored position.
    #[error("{got} values given for a pattern with {nnz} stored positions")]
    Values {
        /// Stored positions of the pattern.
        nnz: usize,
        /// Values given.
        got: usize,
    },
}

fn check(what: &'static str, got: usize, rows: usize, k: usize) -> Result<(), SddmmError> {
    match rows.checked_mul(k) {
        Some(expected) if expected == got => Ok(()),
        expected => Err(SddmmError::Shape {
            what,
            got,
            rows,
            k,
            expected: expected.unwrap_or(usize::MAX),
        }),
    }
}

/// `out_k = ⟨a_i, b_j⟩` (sum in f64) for each stored position `k = (i, j)` of `pattern`, in its
/// CSR order; `a` is `rows × k`, `b` is `cols × k`, both row-major (the pattern's values are not
/// read). With `a = dY` and `b = X` this is the gradient of `Y = A·X` with respect to A's values.
pub fn sddmm<T>(pattern: &Csr, a: &[T], b: &[T], k: usize) -> Result<Vec<f64>, SddmmError>
where
    T: Copy + Into<f64> + Sync,
{
    check("the left operand", a.len(), pattern.rows(), k)?;
    check("the right operand", b.len(), pattern.cols(), k)?;
    let offsets = pattern.row_offsets();
    let indices = pattern.indices();
    let mut out = vec![0f64; pattern.nnz()];
    // Each row's outputs are one contiguous run of `out`: split it by rows for rayon.
    let mut runs: Vec<(usize, &mut [f64])> = Vec::with_capacity(pattern.rows());
    let mut rest = out.as_mut_slice();
    for (i, w) in offsets.windows(2).enumerate() {
        let (run, tail) = rest.split_at_mut((w[1] - w[0]) as usize);
        runs.push((i, run));
        rest = tail;
    }
    runs.into_par_iter().for_each(|(i, run)| {
        let ai = &a[i * k..(i + 1) * k];
        let start = offsets[i] as usize;
        for (slot, &j) in run.iter_mut().zip(&indices[start..]) {
            let bj = &b[j as usize * k..(j as usize + 1) * k];
            *slot = ai.iter().zip(bj).map(|(&x, &y)| x.into() * y.into()).sum();
        }
    });
    Ok(out)
}

/// `C = A·B` in f64 where A has `pattern`'s positions and `values` (one per stored position, in
/// CSR order; the pattern's own values are not read); B is `cols × n`, C is returned `rows × n`,
/// both row-major.
pub fn pattern_spmm_f64(
    pattern: &Csr,
    values: &[f64],
    b: &[f64],
    n: usize,
) -> Result<Vec<f64>, SddmmError> {
    if values.len() != pattern.nnz() {
        return Err(SddmmError::Values {
            nnz: pattern.nnz(),
            got: values.len(),
        });
    }
    check("B", b.len(), pattern.cols(), n)?;
    let offsets = pattern.row_offsets();
    let indices = pattern.indices();
    let mut c = vec![0f64; pattern.rows() * n];
    if n == 0 {
        return Ok(c);
    }
    c.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
        for p in offsets[i] as usize..offsets[i + 1] as usize {
            let j = indices[p] as usize;
            let v = values[p];
            for (acc, &x) in row.iter_mut().zip(&b[j * n..(j + 1) * n]) {
                *acc += v * x;
            }
        }
    });
    Ok(c)
}

/// The transpose of `a` and, for each stored position of the transpose (CSR order), the position
/// of the same entry in `a`: `t.data()[q] == a.data()[map[q]]`. A value update of `a` carries over
/// to the transpose as `v_t[q] = v[map[q]]`.
pub fn transpose_with_map(a: &Csr) -> (Csr, Vec<u32>) {
    let (rows, cols, nnz) = (a.rows(), a.cols(), a.nnz());
    let mut counts = vec![0u32; cols + 1];
    for &j in a.indices() {
        counts[j as usize + 1] += 1;
    }
    for j in 0..cols {
        counts[j + 1] += counts[j];
    }
    let indptr = counts.clone();
    let mut next = counts;
    let mut indices = vec![0u32; nnz];
    let mut data = vec![0f32; nnz];
    let mut map = vec![0u32; nnz];
    let offsets = a.row_offsets();
    for i in 0..rows {
        for p in offsets[i] as usize..offsets[i + 1] as usize {
            let j = a.indices()[p] as usize;
            let q = next[j] as usize;
            next[j] += 1;
            indices[q] = i as u32;
            data[q] = a.data()[p];
            map[q] = p as u32;
        }
    }
    // Rows of `a` are visited in order, so each row of the transpose is sorted and duplicate-free.
    (Csr::new((cols, rows), indptr, indices, data), map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;
    use proptest::prelude::*;

    fn matrix(rows: usize, cols: usize, entries: &[(u32, u32)]) -> Csr {
        let t: Vec<_> = entries
            .iter()
            .map(|&(i, j)| {
                (
                    i % rows as u32,
                    j % cols as u32,
                    (i * 7 + j) as f32 * 0.25 - 3.0,
                )
            })
            .collect();
        csr_from_triplets(rows, cols, &t).unwrap()
    }

    /// Matrices of 1 to `max_dim` − 1 rows and columns holding up to `max_entries` − 1 entries.
    fn matrices(max_dim: usize, max_entries: usize) -> impl Strategy<Value = Csr> {
        let entries = proptest::collection::vec((0u32..64, 0u32..64), 0..max_entries);
        (1..max_dim, 1..max_dim, entries)
            .prop_map(|(rows, cols, entries)| matrix(rows, cols, &entries))
    }

    fn dense(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 250.0 - 2.0)
            .collect()
    }

    proptest! {
        #[test]
        fn sddmm_equals_the_dense_product_on_the_pattern(
            a in matrices(20, 80), k in 0usize..9, seed in any::<u32>(),
        ) {
            let (rows, cols) = a.shape();
            let (l, r) = (dense(rows * k, seed), dense(cols * k, seed.rotate_left(7)));
            let got = sddmm(&a, &l, &r, k).unwrap();
            // Reference: the whole dense product L·Rᵀ in f64, read at the stored positions.
            let mut full = vec![0f64; rows * cols];
            for i in 0..rows {
                for j in 0..cols {
                    full[i * cols + j] = (0..k).map(|t| l[i * k + t] as f64 * r[j * k + t] as f64).sum();
                }
            }
            let mut p = 0;
            for i in 0..rows {
                for &j in &a.indices()[a.row_offsets()[i] as usize..a.row_offsets()[i + 1] as usize] {
                    let want = full[i * cols + j as usize];
                    prop_assert!((got[p] - want).abs() <= 1e-12 * (1.0 + want.abs()), "{} vs {}", got[p], want);
                    p += 1;
                }
            }
            prop_assert_eq!(p, got.len());
        }

        #[test]
        fn pattern_spmm_matches_the_f64_reference_and_sddmm_is_its_adjoint(
            a in matrices(16, 60), n in 1usize..6, seed in any::<u32>(),
        ) {
            let (rows, cols) = a.shape();
            let b32 = dense(cols * n, seed);
            let b: Vec<f64> = b32.iter().map(|&x| x as f64).collect();
            let values: Vec<f64> = a.data().iter().map(|&v| v as f64).collect();
            let c = pattern_spmm_f64(&a, &values, &b, n).unwrap();
            let want = crate::reference::spmm_f64(&a, &b32, n, n, false);
            for (x, y) in c.iter().zip(&want) {
                prop_assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()));
            }
            // ⟨dY, A·B⟩ = ⟨SDDMM(dY, B), values⟩: the gradient identity the autograd relies on.
            let dy: Vec<f64> = dense(rows * n, seed ^ 0x55).iter().map(|&x| x as f64).collect();
            let lhs: f64 = dy.iter().zip(&c).map(|(x, y)| x * y).sum();
            let g = sddmm(&a, &dy, &b, n).unwrap();
            let rhs: f64 = g.iter().zip(&values).map(|(x, y)| x * y).sum();
            prop_assert!((lhs - rhs).abs() <= 1e-9 * (1.0 + lhs.abs()));
        }

        #[test]
        fn transpose_map_points_at_the_same_entries(a in matrices(20, 80)) {
            let (t, map) = transpose_with_map(&a);
            prop_assert_eq!(t.shape(), (a.cols(), a.rows()));
            let back = t.transpose_view().to_csr();
            prop_assert_eq!(back.indptr().into_raw_storage(), a.row_offsets());
            prop_assert_eq!(back.indices(), a.indices());
            prop_assert_eq!(back.data(), a.data());
            for (q, &p) in map.iter().enumerate() {
                prop_assert_eq!(t.data()[q].to_bits(), a.data()[p as usize].to_bits());
            }
        }
    }

    #[test]
    fn wrong_shapes_are_errors() {
        let a = csr_from_triplets(2, 3, &[(0, 1, 1.0), (1, 2, 2.0)]).unwrap();
        assert!(matches!(
            sddmm(&a, &[0f32; 5], &[0f32; 6], 2),
            Err(SddmmError::Shape {
                rows: 2,
                k: 2,
                expected: 4,
                ..
            })
        ));
        assert!(matches!(
            sddmm(&a, &[0f32; 4], &[0f32; 5], 2),
            Err(SddmmError::Shape { rows: 3, .. })
        ));
        assert_eq!(
            pattern_spmm_f64(&a, &[1.0], &[0.0; 3], 1),
            Err(SddmmError::Values { nnz: 2, got: 1 })
        );
        assert!(sddmm(&a, &[0f32; 0], &[0f32; 0], usize::MAX).is_err());
    }
}
