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
    got.iter()
        .zip(want)
        .zip(scale)
        .map(|((&g, &w), &s)| {
            if !g.is_finite() {
                return f64::INFINITY;
            }
            let d = (g as f64 - w).abs();
            if d == 0.0 {
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
    let (mut num, mut den) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        num += (g as f64 - w).powi(2);
        den += w * w;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
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
}
