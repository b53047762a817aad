//! Choosing τ: the one retry loop every SpAMM product of the facade runs (CPU, one GPU, C's rows
//! over several GPUs). "Candidates in, timed choice out" does not fit SpAMM's tuning, which is a
//! search for the largest τ meeting a target: a product is run at a τ, and for an error target
//! the result's own norm replaces the estimate of ‖C‖F and τ is chosen again (at most 4 products).

use tcsparse_gpu::spamm::{SkippedBound, SpammRun, TauTarget, choose_tau_with, rel_bound};
use tcsparse_planner::spamm::{NormMaps, tau_retry_norm};

use crate::Error;

/// What a product at one τ gives back: C (`m × n`) and the valid tile products it computed.
pub(crate) struct Product {
    /// C, row-major.
    pub c: Vec<f32>,
    /// Computed tile products.
    pub valid: u64,
}

/// The product kept by [`choose_and_run`] and how it was found.
pub(crate) struct Chosen {
    /// C, row-major.
    pub c: Vec<f32>,
    /// Threshold used.
    pub tau: f32,
    /// Computed tile products.
    pub valid: u64,
    /// Computed tile products / all.
    pub valid_ratio: f64,
    /// [`NormMaps::skipped_bound`] at τ.
    pub abs_bound: f64,
    /// ‖C̃‖F (f64).
    pub result_norm: f64,
    /// Bound on ‖E‖F/‖C‖F.
    pub rel_bound: f64,
    /// Products run.
    pub attempts: u32,
}

impl Chosen {
    /// C and the run's report, with C's rows per device.
    pub(crate) fn into_run(self, row_ranges: Vec<(usize, usize)>) -> (Vec<f32>, SpammRun) {
        let run = SpammRun {
            tau: self.tau,
            valid_ratio: self.valid_ratio,
            valid_products: self.valid,
            abs_bound: self.abs_bound,
            result_norm: self.result_norm,
            rel_bound: self.rel_bound,
            row_ranges,
            attempts: self.attempts,
        };
        (self.c, run)
    }
}

pub(crate) fn plan_error(e: tcsparse_planner::PlanError) -> Error {
    Error::InvalidArgs(format!("τ selection: {e}"))
}

/// ‖c‖F in f64 on every core: sums of fixed chunks added in order, so the value does not
/// depend on the number of threads.
pub(crate) fn frobenius(c: &[f32]) -> f64 {
    use rayon::prelude::*;
    let chunks: Vec<f64> = c
        .par_chunks(1 << 16)
        .map(|ch| ch.iter().map(|&x| x as f64 * x as f64).sum::<f64>())
        .collect();
    chunks.iter().sum::<f64>().sqrt()
}

/// Chooses τ from the norm maps for `target`, runs
/// `product` at it and, for an error target the result misses, again with the result's norm
/// in place of the norm-product estimate of ‖C‖F, as [`tau_retry_norm`] decides (halved from
/// the second retry on; at most 4 products, stopping at τ = 0 or a zero result). Every
/// skipped-product bound (the estimate, the search's, the reported one) is evaluated by `bound`.
pub(crate) fn choose_and_run(
    maps: &NormMaps<'_>,
    bound: &mut SkippedBound<'_>,
    target: TauTarget,
    mut product: impl FnMut(f32) -> Result<Product, Error>,
) -> Result<Chosen, Error> {
    let (tm, tk, tn) = maps.tiles();
    // First estimate of ‖C‖F for an error target: the norm-product bound (≥ ‖C‖F).
    let mut c_norm = match target {
        TauTarget::RelError(_) => bound.at(maps, f32::INFINITY)?,
        _ => 0.0,
    };
    let total = (tm * tk * tn) as f64;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let tau = choose_tau_with(maps, bound, target, c_norm)?;
        let Product { c, valid } = product(tau)?;
        let abs_bound = bound.at(maps, tau)?;
        let result_norm = frobenius(&c);
        let rel = rel_bound(abs_bound, result_norm);
        let retry = match target {
            TauTarget::RelError(r) => tau_retry_norm(r, rel, attempts, tau, result_norm, c_norm),
            _ => None,
        };
        match retry {
            Some(next) => c_norm = next,
            None => {
                return Ok(Chosen {
                    c,
                    tau,
                    valid,
                    valid_ratio: if total > 0.0 {
                        valid as f64 / total
                    } else {
                        0.0
                    },
                    abs_bound,
                    result_norm,
                    rel_bound: rel,
                    attempts,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake product whose norm is a tenth of the estimate: the loop retries with the
    /// result's norm, then halves it, and stops after 4 products at most.
    #[test]
    fn an_error_target_missed_is_retried_with_the_results_norm() {
        let norms = [1.0f32, 1e-3, 1e-3, 1e-6];
        let mut taus = Vec::new();
        let maps = NormMaps::new(&norms, &norms, (2, 2, 2)).unwrap();
        let chosen = choose_and_run(
            &maps,
            &mut SkippedBound::host(),
            TauTarget::RelError(1e-2),
            |tau| {
                taus.push(tau);
                Ok(Product {
                    c: vec![1e-3; 4],
                    valid: 1,
                })
            },
        )
        .unwrap();
        assert!(
            chosen.attempts >= 2 && chosen.attempts <= 4,
            "{}",
            chosen.attempts
        );
        assert_eq!(taus.len() as u32, chosen.attempts);
        assert!(taus.windows(2).all(|w| w[1] <= w[0]), "{taus:?}");
        assert!(taus[0] > 0.0, "the estimate skips the small products first");
        assert_eq!(chosen.valid_ratio, 1.0 / 8.0);
    }

    #[test]
    fn a_given_tau_runs_once() {
        let norms = [1.0f32; 4];
        let maps = NormMaps::new(&norms, &norms, (2, 2, 2)).unwrap();
        let chosen = choose_and_run(
            &maps,
            &mut SkippedBound::host(),
            TauTarget::Tau(0.5),
            |_| {
                Ok(Product {
                    c: vec![0.0; 4],
                    valid: 8,
                })
            },
        )
        .unwrap();
        assert_eq!(
            (chosen.tau, chosen.attempts, chosen.valid_ratio),
            (0.5, 1, 1.0)
        );
    }
}
