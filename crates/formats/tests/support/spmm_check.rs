//! The f64 reference check of a product C = α·A·B + β·C0 with padded leading dimensions, shared
//! by the SpMM tests of several crates (`#[path]`-included): element-wise against
//! `tcsparse_formats::reference::spmm_f64` with the TF32 bound, padding columns untouched.

#![allow(dead_code)] // not every test binary that includes this module uses every helper

use tcsparse_formats::Csr;
use tcsparse_formats::reference::spmm_f64;

/// The dense side of C = α·A·B + β·C0 of width `n`: B with rows `ldb` apart, C0 with rows `ldc`
/// apart.
#[derive(Clone, Copy)]
pub struct Dense<'a> {
    pub alpha: f32,
    pub b: &'a [f32],
    pub ldb: usize,
    pub beta: f32,
    pub c0: &'a [f32],
    pub ldc: usize,
    pub n: usize,
}

impl<'a> Dense<'a> {
    pub fn new(
        alpha: f32,
        b: &'a [f32],
        ldb: usize,
        beta: f32,
        c0: &'a [f32],
        ldc: usize,
        n: usize,
    ) -> Self {
        Self {
            alpha,
            b,
            ldb,
            beta,
            c0,
            ldc,
            n,
        }
    }
}

/// Calls `visit(r, f, g, want, scale)` with every element `g` of `got` (row `r`, feature `f`): the
/// f64 reference `want` = α·(A·B) + β·C0 (C0 not read when β = 0) and its `scale` =
/// |α|·|A|·|B| + |β|·|C0|, after asserting that the padding columns (f ≥ n) kept C0's bits.
pub fn visit_elements(
    what: &str,
    a: &Csr,
    d: Dense<'_>,
    got: &[f32],
    mut visit: impl FnMut(usize, usize, f32, f64, f64),
) {
    let Dense {
        alpha,
        b,
        ldb,
        beta,
        c0,
        ldc,
        n,
    } = d;
    let ab = spmm_f64(a, b, n, ldb, false);
    let abs = spmm_f64(a, b, n, ldb, true);
    for r in 0..a.rows() {
        for f in 0..ldc {
            let g = got[r * ldc + f];
            if f >= n {
                let same = g.to_bits() == c0[r * ldc + f].to_bits();
                assert!(same, "{what}: padding C[{r}][{f}] was written ({g})");
                continue;
            }
            let c_old = if beta == 0.0 {
                0.0
            } else {
                c0[r * ldc + f] as f64
            };
            let want = alpha as f64 * ab[r * n + f] + beta as f64 * c_old;
            let scale = (alpha as f64).abs() * abs[r * n + f] + (beta as f64).abs() * c_old.abs();
            visit(r, f, g, want, scale);
        }
    }
}

/// Checks `got = α·A·B + β·C0` against the f64 reference with the TF32 bound
/// |err| ≤ 2·2⁻¹⁰·(|α|·|A|·|B| + |β|·|C0|) element-wise, padding columns untouched. Panics with a
/// description of the first violation. Returns the largest scaled error.
#[allow(clippy::too_many_arguments)]
pub fn check_result(
    what: &str,
    a: &Csr,
    alpha: f32,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c0: &[f32],
    got: &[f32],
    ldc: usize,
    n: usize,
) -> f64 {
    let mut worst = 0f64;
    let d = Dense::new(alpha, b, ldb, beta, c0, ldc, n);
    visit_elements(what, a, d, got, |r, f, g: f32, want: f64, scale: f64| {
        let at = format_args!("{what}: C[{r}][{f}]");
        worst = worst.max(tf32_scaled_error(at, g, want, scale));
    });
    worst
}

/// The scaled error |g − want| / scale of one element `at` of a product (0 when exact), asserted
/// finite and within the TF32 bound 2·2⁻¹⁰.
pub fn tf32_scaled_error(at: std::fmt::Arguments<'_>, g: f32, want: f64, scale: f64) -> f64 {
    let bound = 2.0 * 2f64.powi(-10);
    assert!(g.is_finite(), "{at} = {g} (want {want})");
    let err = (g as f64 - want).abs();
    let scaled = if err == 0.0 {
        0.0
    } else {
        err / scale.max(f64::MIN_POSITIVE)
    };
    assert!(
        scaled <= bound,
        "{at} = {g}, want {want}, scaled error {scaled:.3e} > {bound:.3e}"
    );
    scaled
}
