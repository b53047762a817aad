//! The SpAMM room: `C ≈ A·B` for dense decay matrices (cuSpAMM), prepared like every operation
//! ([`Engine::prepare_spamm`](crate::Engine::prepare_spamm) → [`PreparedSpamm`], then [`PreparedSpamm::spamm`]) on the
//! engine's GPU — or the GPUs of [`SpammOptions::devices`], C's rows split over them — and on
//! the CPU reference path (`formats::normmap::spamm_cpu`, small sizes) on an engine without one.
//!
//! A tile product A(i,k)·B(k,j) of 32 × 32 tiles is computed iff ‖A(i,k)‖F·‖B(k,j)‖F ≥ τ. τ is
//! given, or chosen for a valid ratio, or for a bound on the relative error ‖E‖F/‖C‖F (from the
//! skipped norm products: ‖E‖F ≤ sqrt(Σ_ij (Σ_skipped ‖A_ik‖‖B_kj‖)²), divided by ‖C̃‖F − that).
//!
//! The room has the parts of every operation: [`options`](SpammOptions), `prepare` (the devices
//! opened once), `tune` (τ chosen, and chosen again for an error target the first product
//! misses: the one retry loop) and `run` (the CPU product, the product over a device group,
//! [`SpammSplit`], [`spamm_device`]). The measured error of a product (when asked) is checked
//! where the product ran: on the CPU by [`measured_error`], after a GPU product on its first
//! device (`measured_error_device`, the `spamm_error_sums` kernel).

mod options;
mod prepare;
mod run;
mod tune;

pub use options::{SpammOptions, SpammOptionsBuilder};
pub use prepare::PreparedSpamm;
pub use run::{SpammSplit, spamm_device, spamm_on_group};
pub use tcsparse_gpu::multi::DeviceSet;
pub use tcsparse_gpu::spamm::{SpammBlock, TauTarget};

use tcsparse_gpu::spamm::{ErrorSums, SpammOperands, error_sums};

use crate::Error;

/// A dense row-major host matrix.
#[derive(Clone, Copy, Debug)]
pub struct DenseRef<'a> {
    /// `rows · cols` values, row-major.
    pub data: &'a [f32],
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

impl<'a> DenseRef<'a> {
    /// `data` as a `rows × cols` row-major matrix (checked where it is used).
    pub const fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self { data, rows, cols }
    }
}

/// What a SpAMM product did ([`PreparedSpamm::spamm`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SpammReport {
    /// `gpu` or `cpu`.
    pub backend: &'static str,
    /// Precision name (`cpu-f32` on the CPU).
    pub precision: String,
    /// Threshold used.
    pub tau: f32,
    /// Computed tile products / all.
    pub valid_ratio: f64,
    /// Bound on ‖E‖F (absolute).
    pub abs_bound: f64,
    /// Bound on ‖E‖F/‖C‖F (skipped products only; the arithmetic's own rounding comes on top).
    pub rel_bound: f64,
    /// Measured ‖C − C̃‖F/‖C‖F (f64 reference) when asked.
    pub measured_error: Option<f64>,
    /// Products run to meet an error target.
    pub attempts: u32,
    /// C rows per GPU.
    pub row_ranges: Vec<(usize, usize)>,
    /// How B reached the devices: `single`, `nccl`, or `host-staged (why)`; `cpu` on the CPU.
    pub transport: String,
}

/// Shapes of `a · b`: `(m, n, k)`, checked against the data lengths.
pub(crate) fn check(a: &DenseRef<'_>, b: &DenseRef<'_>) -> Result<(usize, usize, usize), Error> {
    if a.cols != b.rows {
        return Err(Error::InvalidArgs(format!(
            "A is {}×{}, B is {}×{}: inner dimensions differ",
            a.rows, a.cols, b.rows, b.cols
        )));
    }
    let need = |x: &DenseRef<'_>| x.rows.checked_mul(x.cols);
    match (need(a), need(b)) {
        (Some(na), Some(nb)) if a.data.len() == na && b.data.len() == nb => {}
        _ => {
            return Err(Error::InvalidArgs(format!(
                "A needs {}×{} values (has {}), B {}×{} (has {})",
                a.rows,
                a.cols,
                a.data.len(),
                b.rows,
                b.cols,
                b.data.len()
            )));
        }
    }
    Ok((a.rows, b.cols, a.cols))
}

/// ‖C − C̃‖F/‖C‖F on `rows` (f64 reference). Blocks of up to 64 rows by 512 columns run on every
/// core, each streaming its columns of B once (B is read once per row block, not once per row: a
/// few checked rows of a 4 GiB B cost one pass over it).
pub fn measured_error(a: &[f32], b: &[f32], c: &[f32], n: usize, k: usize, rows: &[usize]) -> f64 {
    use rayon::prelude::*;
    let row_blocks = rows.chunks(ERROR_ROW_BLOCK);
    let tasks: Vec<(&[usize], usize)> = row_blocks
        .flat_map(|rb| (0..n).step_by(ERROR_COL_BLOCK).map(move |c0| (rb, c0)))
        .collect();
    let (e, r) = tasks
        .par_iter()
        .map(|&(rb, c0)| {
            let w = ERROR_COL_BLOCK.min(n - c0);
            let mut acc = vec![0f64; rb.len() * w];
            for t in 0..k {
                let b_row = &b[t * n + c0..t * n + c0 + w];
                for (slot, &i) in acc.chunks_exact_mut(w).zip(rb) {
                    let av = a[i * k + t] as f64;
                    if av != 0.0 {
                        for (x, &bv) in slot.iter_mut().zip(b_row) {
                            *x += av * bv as f64;
                        }
                    }
                }
            }
            acc.chunks_exact(w)
                .zip(rb)
                .flat_map(|(slot, &i)| slot.iter().zip(&c[i * n + c0..i * n + c0 + w]))
                .fold((0f64, 0f64), |(e, r), (&x, &y)| {
                    (e + (y as f64 - x).powi(2), r + x * x)
                })
        })
        .reduce(|| (0.0, 0.0), |p, q| (p.0 + q.0, p.1 + q.1));
    ErrorSums {
        diff: e,
        reference: r,
    }
    .relative()
}

/// [`measured_error`] on the device of `ops`, the operands a GPU product ran on (A `m × k` and
/// B `k × n` as the host's `a` and `b`): the f64 reference of each sampled row from B on that
/// device where it is f32 there ([`SpammOperands::b_f32`]); f16 operands are freed first and B
/// goes up again in f32. Only the sampled rows of A and C go up besides
/// ([`tcsparse_gpu::spamm::error_sums`]).
pub(crate) fn measured_error_device(
    ops: SpammOperands,
    a: &[f32],
    b: &[f32],
    c: &[f32],
    rows: &[usize],
) -> Result<f64, Error> {
    let shape = ops.shape();
    let gpu = ops.gpu().clone();
    let sums = match ops.b_f32() {
        Some(db) => error_sums(&gpu, a, db, c, shape, rows)?,
        None => {
            drop(ops);
            let db = gpu.upload(b)?;
            error_sums(&gpu, a, &db, c, shape, rows)?
        }
    };
    Ok(sums.relative())
}

/// Rows of one task of [`measured_error`].
const ERROR_ROW_BLOCK: usize = 64;
/// Columns of one task of [`measured_error`] (64 rows × 512 columns of f64: 256 KiB).
const ERROR_COL_BLOCK: usize = 512;

pub(crate) fn sample_rows(m: usize, max: usize) -> Vec<usize> {
    if max == 0 || max >= m {
        (0..m).collect()
    } else {
        (0..max).map(|i| i * m / max + (m / max) / 2).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;
    use tcsparse_formats::normmap::NormMap;
    use tcsparse_gpu::spamm::TILE;

    fn exp_decay(n: usize, rate: f64) -> Vec<f32> {
        tcsparse_formats::generate::exponential_decay_dense(n, rate)
    }

    fn cpu(target: TauTarget) -> SpammOptions {
        SpammOptions::builder()
            .target(target)
            .measure_error(true, 0)
            .build()
    }

    fn spamm(
        a: DenseRef<'_>,
        b: DenseRef<'_>,
        opts: &SpammOptions,
    ) -> Result<(Vec<f32>, SpammReport), Error> {
        Engine::cpu("test").prepare_spamm(a, opts)?.spamm(b)
    }

    #[test]
    fn measured_error_blocks_match_a_row_by_row_reference() {
        // More rows than one row block and more columns than one column block, ragged edges,
        // zeros in A (skipped) and a perturbed C.
        let (m, k, n) = (70, 30, 600);
        let val = |i: usize| ((i * 2654435761) % 1000) as f32 / 500.0 - 1.0;
        let a: Vec<f32> = (0..m * k)
            .map(|i| if i % 7 == 0 { 0.0 } else { val(i) })
            .collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i + 12345)).collect();
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let x: f64 = (0..k)
                    .map(|t| a[i * k + t] as f64 * b[t * n + j] as f64)
                    .sum();
                c[i * n + j] = x as f32 + 1e-3 * val(i * n + j + 7);
            }
        }
        for rows in [sample_rows(m, 0), sample_rows(m, 5)] {
            let (mut e, mut r) = (0f64, 0f64);
            for &i in &rows {
                for j in 0..n {
                    let x: f64 = (0..k)
                        .map(|t| a[i * k + t] as f64 * b[t * n + j] as f64)
                        .sum();
                    e += (c[i * n + j] as f64 - x).powi(2);
                    r += x * x;
                }
            }
            let want = (e / r).sqrt();
            let got = measured_error(&a, &b, &c, n, k, &rows);
            assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
        }
    }

    #[test]
    fn cpu_error_target_is_met_and_measured_error_within_bound() {
        let n = 200;
        let a = exp_decay(n, 0.08);
        let d = DenseRef::new(&a, n, n);
        for target in [1e-3, 1e-5] {
            let (_, r) = spamm(d, d, &cpu(TauTarget::RelError(target))).unwrap();
            assert!(r.rel_bound <= target, "{r:?}");
            let e = r.measured_error.unwrap();
            // Skipped products within the bound, plus f32 rounding.
            assert!(e <= r.rel_bound + 1e-6, "{e} > {r:?}");
            assert!(r.valid_ratio < 1.0, "{r:?}");
        }
    }

    #[test]
    fn cpu_valid_ratio_target() {
        let n = 256;
        let a = exp_decay(n, 0.05);
        let d = DenseRef::new(&a, n, n);
        let (_, r) = spamm(d, d, &cpu(TauTarget::ValidRatio(0.2))).unwrap();
        // The ratio is a step function of τ (a Toeplitz matrix has many equal tile products):
        // the search's closest step, and the product computes exactly that share.
        let na = NormMap::from_dense(&a, n, n, TILE).unwrap();
        let t = n / TILE;
        let maps = tcsparse_planner::spamm::NormMaps::new(na.norms(), na.norms(), (t, t, t));
        let want = maps.unwrap().tau_search(0.2).unwrap();
        assert_eq!(r.tau, want.tau);
        assert!(
            (r.valid_ratio - want.valid_ratio).abs() < 1e-12,
            "{r:?} vs {want:?}"
        );
        assert!((r.valid_ratio - 0.2).abs() < 0.05, "{r:?}");
        let e = r.measured_error.unwrap();
        assert!(e <= r.rel_bound + 1e-6, "{e} > {r:?}");
    }

    #[test]
    fn shape_errors() {
        let a = vec![0f32; 6];
        let x = DenseRef::new(&a, 2, 3);
        assert!(spamm(x, x, &cpu(TauTarget::Tau(0.0))).is_err());
        // An explicit device list on an engine without a GPU is refused.
        let two = SpammOptions::builder().devices(DeviceSet::first(2)).build();
        assert!(matches!(
            Engine::cpu("test").prepare_spamm(x, &two),
            Err(Error::Unavailable(_))
        ));
        let y = DenseRef::new(&a, 3, 3);
        assert!(spamm(x, y, &cpu(TauTarget::Tau(0.0))).is_err());
    }
}
