//! f64 reference products on CSR, the ground truth every kernel and every format-walking CPU product
//! is compared with. Dense operands are row-major with an explicit leading dimension (in elements).

use crate::Csr;
use rayon::prelude::*;

/// C = A·B in f64, with B row-major `a.cols() × n` (leading dimension `ldb ≥ n`), returned row-major
/// `a.rows() × n` (leading dimension `n`). When `abs` is true computes |A|·|B| instead, the scale used
/// by element-wise error bounds.
///
/// # Panics
/// If `b` is shorter than `(a.cols() - 1)·ldb + n` or `ldb < n` (caller bug, not input data).
pub fn spmm_f64(a: &Csr, b: &[f32], n: usize, ldb: usize, abs: bool) -> Vec<f64> {
    assert!(ldb >= n, "ldb {ldb} < n {n}");
    assert!(
        a.cols() == 0 || dense_len(a.cols(), n, ldb).is_some_and(|need| b.len() >= need),
        "B too short"
    );
    let mut c = vec![0f64; a.rows().checked_mul(n).expect("rows·n overflows usize")];
    if n == 0 {
        return c;
    }
    let indptr = a.row_offsets();
    c.par_chunks_mut(n).enumerate().for_each(|(r, c_row)| {
        for k in indptr[r] as usize..indptr[r + 1] as usize {
            let col = a.indices()[k] as usize;
            let v = a.data()[k] as f64;
            let b_row = &b[col * ldb..col * ldb + n];
            for (acc, &bv) in c_row.iter_mut().zip(b_row) {
                if abs {
                    *acc += v.abs() * (bv as f64).abs();
                } else {
                    *acc += v * bv as f64;
                }
            }
        }
    });
    c
}

/// Elements a `rows × n` row-major matrix with leading dimension `ld` spans, `(rows − 1)·ld + n`
/// (0 when empty); `None` when that overflows `usize`.
pub fn dense_len(rows: usize, n: usize, ld: usize) -> Option<usize> {
    if rows == 0 || n == 0 {
        return Some(0);
    }
    (rows - 1).checked_mul(ld)?.checked_add(n)
}

/// y = A·x in f64 (or |A|·|x| when `abs`).
///
/// # Panics
/// If `x.len() < a.cols()`.
pub fn spmv_f64(a: &Csr, x: &[f32], abs: bool) -> Vec<f64> {
    spmm_f64(a, x, 1, 1, abs)
}

/// Largest element-wise error of `got` against `want`, relative to the bound scale `scale`
/// (typically |A|·|B|): max over i of |got_i − want_i| / scale_i, with 0/0 counted as 0.
/// A value ≤ c·2⁻¹⁰ means a TF32 product is within c TF32 ulps of the reference.
/// Non-finite values in `got` give infinity.
pub fn max_scaled_error(got: &[f32], want: &[f64], scale: &[f64]) -> f64 {
    max_scaled_excess(got, want, scale, 0.0)
}

/// [`max_scaled_error`] of the part of each difference beyond `slack` (0 where the difference is
/// within it).
fn max_scaled_excess(got: &[f32], want: &[f64], scale: &[f64], slack: f64) -> f64 {
    got.iter()
        .zip(want)
        .zip(scale)
        .map(|((&g, &w), &s)| {
            if !g.is_finite() {
                return f64::INFINITY;
            }
            let d = (g as f64 - w).abs() - slack;
            if d <= 0.0 {
                0.0
            } else if s == 0.0 {
                f64::INFINITY
            } else {
                d / s
            }
        })
        .fold(0.0, f64::max)
}

/// Relative Frobenius error ‖got − want‖ / ‖want‖ (0 when both are zero).
pub fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    let (num, den) = squared_sums(got, want);
    relative_from_sums(num, den)
}

/// (‖got − want‖², ‖want‖²).
fn squared_sums(got: &[f32], want: &[f64]) -> (f64, f64) {
    got.iter()
        .zip(want)
        .fold((0f64, 0f64), |(num, den), (&g, &w)| {
            (num + (g as f64 - w).powi(2), den + w * w)
        })
}

/// √(num / den), or √num where den is 0.
fn relative_from_sums(num: f64, den: f64) -> f64 {
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// Error of a product against the f64 reference, as [`spmm_error`] measures it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProductError {
    /// [`max_scaled_error`] of the product against A·B with the scale |A|·|B|.
    pub max_scaled: f64,
    /// [`relative_error`] of the product against A·B.
    pub relative: f64,
}

/// The rows of a product a check visits: every `stride`-th row from row 0, and `extra` (the
/// longest row of a sampled check) where it is not among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedRows {
    /// Rows of the product.
    pub rows: usize,
    /// Distance between visited rows (1: every row).
    pub stride: usize,
    /// One more row visited.
    pub extra: Option<usize>,
}

impl CheckedRows {
    /// Every row of a `rows`-row product.
    pub fn all(rows: usize) -> Self {
        CheckedRows {
            rows,
            stride: 1,
            extra: None,
        }
    }

    /// Every row of `a` where its nonzeros times `n` are at most `max_madds` (the check's
    /// multiply-adds), else evenly spaced rows that stay about within it and the longest row.
    pub fn within(a: &Csr, n: usize, max_madds: usize) -> Self {
        let rows = a.rows();
        let stride = a
            .nnz()
            .saturating_mul(n)
            .div_ceil(max_madds.max(1))
            .clamp(1, rows.max(1));
        if stride == 1 {
            return Self::all(rows);
        }
        let indptr = a.indptr();
        let ip = indptr.raw_storage();
        let longest = (0..rows).max_by_key(|&r| ip[r + 1] - ip[r]);
        CheckedRows {
            rows,
            stride,
            extra: longest.filter(|r| r % stride != 0),
        }
    }

    /// How many rows are visited.
    pub fn count(&self) -> usize {
        self.rows.div_ceil(self.stride.max(1)) + usize::from(self.extra.is_some())
    }

    /// Whether every row is visited.
    pub fn is_all(&self) -> bool {
        self.count() == self.rows
    }
}

/// Compares `got` (row-major `a.rows() × n`, leading dimension `n`) with the f64 reference of A·B
/// (B as in [`spmm_f64`]) on the rows `checked` names ([`CheckedRows::all`]: every row), row by
/// row on every core, without materialising the reference: over every row the same numbers as
/// [`max_scaled_error`] and [`relative_error`] over [`spmm_f64`]'s two products (the relative error
/// up to the order of its f64 sums), in memory ∝ `n` per thread instead of two `rows × n` f64
/// matrices; over a sample, those of the visited rows' elements.
///
/// `slack` is an absolute difference forgiven per element before scaling (a stored type's
/// underflow step: a result below its normal range is rounded absolutely, not relatively); 0
/// gives exactly [`max_scaled_error`]'s numbers.
///
/// # Panics
/// As [`spmm_f64`], if `got` is shorter than `a.rows() · n`, and if `checked` is not of `a`'s
/// rows.
pub fn spmm_error(
    a: &Csr,
    b: &[f32],
    n: usize,
    ldb: usize,
    got: &[f32],
    slack: f64,
    checked: &CheckedRows,
) -> ProductError {
    assert!(ldb >= n, "ldb {ldb} < n {n}");
    assert!(
        a.cols() == 0 || dense_len(a.cols(), n, ldb).is_some_and(|need| b.len() >= need),
        "B too short"
    );
    let rows = a.rows();
    assert!(
        rows.checked_mul(n).is_some_and(|need| got.len() >= need),
        "C too short"
    );
    assert!(
        checked.rows == rows && checked.extra.is_none_or(|r| r < rows),
        "checked rows {checked:?} of a {rows}-row product"
    );
    if n == 0 || rows == 0 {
        return ProductError {
            max_scaled: 0.0,
            relative: 0.0,
        };
    }
    let indptr = a.indptr();
    let indptr = indptr.raw_storage();
    let stride = checked.stride.max(1);
    let visited = (0..rows.div_ceil(stride))
        .into_par_iter()
        .map(|i| i * stride)
        .chain(checked.extra.into_par_iter());
    let (max_scaled, num, den) = visited
        .map_init(
            || (vec![0f64; n], vec![0f64; n]),
            |(want, scale), r| {
                want.fill(0.0);
                scale.fill(0.0);
                for k in indptr[r] as usize..indptr[r + 1] as usize {
                    let v = a.data()[k] as f64;
                    let col = a.indices()[k] as usize;
                    let b_row = &b[col * ldb..col * ldb + n];
                    for ((w, s), &bv) in want.iter_mut().zip(scale.iter_mut()).zip(b_row) {
                        *w += v * bv as f64;
                        *s += v.abs() * (bv as f64).abs();
                    }
                }
                let got_row = &got[r * n..r * n + n];
                let (num, den) = squared_sums(got_row, want);
                let worst = max_scaled_excess(got_row, want, scale, slack);
                (worst, num, den)
            },
        )
        .reduce(
            || (0.0, 0.0, 0.0),
            |x, y| (f64::max(x.0, y.0), x.1 + y.1, x.2 + y.2),
        );
    ProductError {
        max_scaled,
        relative: relative_from_sums(num, den),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;

    #[test]
    fn spmm_matches_hand_product() {
        // [[1, 2], [0, 3]] · [[1, 1], [2, -1]] = [[5, -1], [6, -3]]
        let a = csr_from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 2.0), (1, 1, 3.0)]).unwrap();
        let c = spmm_f64(&a, &[1.0, 1.0, 2.0, -1.0], 2, 2, false);
        assert_eq!(c, vec![5.0, -1.0, 6.0, -3.0]);
        let s = spmm_f64(&a, &[1.0, 1.0, 2.0, -1.0], 2, 2, true);
        assert_eq!(s, vec![5.0, 3.0, 6.0, 3.0]);
    }

    #[test]
    fn scaled_error_flags_nan() {
        assert_eq!(max_scaled_error(&[f32::NAN], &[1.0], &[1.0]), f64::INFINITY);
        assert_eq!(max_scaled_error(&[1.5], &[1.0], &[2.0]), 0.25);
    }

    /// A random `rows × cols` matrix (density about 0.2), a B with leading dimension `ldb` and a
    /// product perturbed by up to `noise`: the fused error must equal the materialised one (the
    /// relative error up to the order of its f64 sums).
    fn check_fused_error(rows: usize, cols: usize, n: usize, ldb: usize, seed: u64, noise: f32) {
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let mut t = Vec::new();
        for r in 0..rows as u32 {
            for c in 0..cols as u32 {
                if next() > 0.6 {
                    t.push((r, c, next()));
                }
            }
        }
        let a = csr_from_triplets(rows, cols, &t).unwrap();
        let b: Vec<f32> = (0..cols * ldb).map(|_| next()).collect();
        let want = spmm_f64(&a, &b, n, ldb, false);
        let scale = spmm_f64(&a, &b, n, ldb, true);
        let got: Vec<f32> = want.iter().map(|&w| w as f32 + noise * next()).collect();
        let fused = spmm_error(&a, &b, n, ldb, &got, 0.0, &CheckedRows::all(rows));
        assert_eq!(fused.max_scaled, max_scaled_error(&got, &want, &scale));
        let rel = relative_error(&got, &want);
        assert!(
            (fused.relative - rel).abs() <= 1e-12 * rel,
            "{} vs {rel}",
            fused.relative
        );
    }

    proptest::proptest! {
        #[test]
        fn fused_error_matches_materialised_reference(
            rows in 1usize..40, cols in 1usize..40, n in 1usize..9, extra in 0usize..3,
            seed in 0u64..1000, noise in 0.0f32..1e-3,
        ) {
            check_fused_error(rows, cols, n, n + extra, seed, noise);
        }
    }

    #[test]
    fn fused_error_flags_nan_and_empty_rows() {
        let a = csr_from_triplets(3, 2, &[(0, 0, 2.0), (2, 1, -1.0)]).unwrap();
        let b = [1.0, 3.0];
        let all3 = CheckedRows::all(3);
        let e = spmm_error(&a, &b, 1, 1, &[2.0, 0.0, -3.0], 0.0, &all3);
        assert_eq!((e.max_scaled, e.relative), (0.0, 0.0));
        let e = spmm_error(&a, &b, 1, 1, &[f32::NAN, 0.0, -3.0], 0.0, &all3);
        assert_eq!(e.max_scaled, f64::INFINITY);
        // A difference within the slack is forgiven; beyond it, only the excess counts.
        let e = spmm_error(&a, &b, 1, 1, &[2.0 + 1e-3, 0.0, -3.0], 1e-3, &all3);
        assert_eq!(e.max_scaled, 0.0);
        let e = spmm_error(&a, &b, 1, 1, &[2.5, 0.0, -3.0], 0.25, &all3);
        assert_eq!(e.max_scaled, 0.125);
    }

    /// A check within a budget visits every row of a small product, and of a large one every
    /// stride-th row plus the longest: an error on a visited row counts, one elsewhere is not
    /// seen, and over every row the sampled numbers are the full check's.
    #[test]
    fn sampled_checks_visit_every_stride_th_row_and_the_longest() {
        // 10 rows of one nonzero, but `long` holds three: 12 nonzeros.
        let matrix = |long: u32| {
            let t: Vec<(u32, u32, f32)> = (0..10u32)
                .flat_map(|r| {
                    let cols = if r == long { 0..3 } else { r % 3..r % 3 + 1 };
                    cols.map(move |c| (r, c, 1.0 + r as f32 + 0.5 * c as f32))
                })
                .collect();
            csr_from_triplets(10, 3, &t).unwrap()
        };
        let a = matrix(7);
        let (n, b) = (2, [1.0f32, -2.0, 0.5, 4.0, -1.5, 3.0]);
        let exact: Vec<f32> = spmm_f64(&a, &b, n, n, false)
            .iter()
            .map(|&v| v as f32)
            .collect();
        assert!(CheckedRows::within(&a, n, 24).is_all());
        assert_eq!(CheckedRows::within(&a, n, 24), CheckedRows::all(10));
        // 12 nonzeros × 2 columns = 24 multiply-adds; a budget of 9 takes every third row.
        let sampled = CheckedRows::within(&a, n, 9);
        assert_eq!(
            sampled,
            CheckedRows {
                rows: 10,
                stride: 3,
                extra: Some(7),
            }
        );
        assert_eq!(sampled.count(), 5);
        assert!(!sampled.is_all());
        let on = |c: &[f32], rows: &CheckedRows| spmm_error(&a, &b, n, n, c, 0.0, rows);
        assert_eq!(on(&exact, &sampled).max_scaled, 0.0);
        for (row, seen) in [(3, true), (7, true), (4, false)] {
            let mut c = exact.clone();
            c[row * n] += 1.0;
            assert_eq!(on(&c, &sampled).max_scaled > 0.0, seen, "row {row}");
            // Over every row: what the materialised reference gives.
            let want = spmm_f64(&a, &b, n, n, false);
            let scale = spmm_f64(&a, &b, n, n, true);
            assert_eq!(
                on(&c, &CheckedRows::all(10)).max_scaled,
                max_scaled_error(&c, &want, &scale),
                "row {row}"
            );
        }
        // The longest row on the stride is not visited twice.
        assert_eq!(CheckedRows::within(&matrix(6), n, 9).extra, None);
    }
}
