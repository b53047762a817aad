//! Random SpMV operands and the f64 reference check of y = α·A·X + β·y₀ (`n` right-hand sides,
//! rows `n` apart), shared by the SpMV tests of several crates (`#[path]`-included).

use rand::Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::reference::spmm_f64;

/// X (`cols × n`) and y₀ (`rows × n`) in [-1, 1); y₀ all NaN when β = 0 (it must never be read).
pub fn operands(rng: &mut impl Rng, a: &Csr, n: usize, beta: f32) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..a.cols() * n)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let y0: Vec<f32> = (0..a.rows() * n)
        .map(|_| {
            if beta == 0.0 {
                f32::NAN
            } else {
                rng.random_range(-1.0..1.0)
            }
        })
        .collect();
    (x, y0)
}

/// Checks `y` (after y = α·A·X + β·y₀) against f64 element-wise:
/// |y − y64| ≤ tol · (|α|·|A|·|X| + |β|·|y₀|), every element finite.
#[allow(clippy::too_many_arguments)]
pub fn check(
    what: &str,
    a: &Csr,
    x: &[f32],
    n: usize,
    alpha: f32,
    beta: f32,
    y0: &[f32],
    y: &[f32],
    tol: f64,
) {
    let want = spmm_f64(a, x, n, n, false);
    let scale = spmm_f64(a, x, n, n, true);
    let mut worst = 0f64;
    for i in 0..a.rows() * n {
        let (w0, s0) = if beta == 0.0 {
            (0.0, 0.0)
        } else {
            (y0[i] as f64, y0[i].abs() as f64)
        };
        let want = alpha as f64 * want[i] + beta as f64 * w0;
        let bound = tol * (alpha.abs() as f64 * scale[i] + beta.abs() as f64 * s0);
        let err = (y[i] as f64 - want).abs();
        assert!(
            y[i].is_finite() && err <= bound,
            "{what}: y[{i}] (row {}, rhs {}) = {} want {want} (bound {bound:e})",
            i / n,
            i % n,
            y[i]
        );
        if bound > 0.0 {
            worst = worst.max(err / bound);
        }
    }
    println!("{what}: ok (worst error {worst:.3} of the bound)");
}
