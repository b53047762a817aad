//! The choice of τ for a SpAMM product and what a run reports: the target ([`TauTarget`]), the
//! configuration ([`SpammConfig`]), [`choose_tau`] over host norm maps (its bounds on the host or
//! the device: [`SkippedBound`]), the run's record
//! ([`SpammRun`], [`rel_bound`]) and C's row split over devices at τ ([`spamm_block_rows`]).

use tcsparse_planner::spamm::NormMaps;

use super::{DeviceBound, SpammBlock, SpammPrecision, TILE};
use crate::GpuError;

/// How τ is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TauTarget {
    /// This τ.
    Tau(f32),
    /// The τ whose valid ratio is closest to this (cuSpAMM §3.5.2).
    ValidRatio(f64),
    /// The largest τ whose bound on ‖E‖F/‖C‖F is ≤ this (see [`SpammRun::rel_bound`]).
    RelError(f64),
}

impl TauTarget {
    /// This τ: finite and ≥ 0 (τ = 0 computes every tile product), else
    /// [`GpuError::Invalid`].
    pub fn tau(tau: f32) -> Result<Self, GpuError> {
        Self::Tau(tau).checked()
    }

    /// The τ whose valid ratio is closest to `ratio`, in [0, 1], else [`GpuError::Invalid`].
    pub fn valid_ratio(ratio: f64) -> Result<Self, GpuError> {
        Self::ValidRatio(ratio).checked()
    }

    /// The largest τ whose error bound is ≤ `rel`: finite and ≥ 0, else [`GpuError::Invalid`].
    pub fn rel_error(rel: f64) -> Result<Self, GpuError> {
        Self::RelError(rel).checked()
    }

    /// `self` if its number is in range (NaN, ±∞ and negative values never are; a valid ratio
    /// is at most 1). Every τ selection ([`choose_tau`]) checks its target this way, so a target
    /// built from the variants directly is refused just the same.
    pub fn checked(self) -> Result<Self, GpuError> {
        let ok = match self {
            TauTarget::Tau(t) => t.is_finite() && t >= 0.0,
            TauTarget::ValidRatio(r) => r.is_finite() && (0.0..=1.0).contains(&r),
            TauTarget::RelError(r) => r.is_finite() && r >= 0.0,
        };
        if ok {
            Ok(self)
        } else {
            Err(GpuError::Invalid(format!(
                "SpAMM target {self:?}: τ and the target error must be finite and ≥ 0, the valid ratio in [0, 1]"
            )))
        }
    }
}

/// Configuration of a SpAMM product: arithmetic, C block, balance and τ target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpammConfig {
    /// Arithmetic.
    pub precision: SpammPrecision,
    /// C block edge.
    pub block: SpammBlock,
    /// Balance parameter s of the strided assignment (1: one C block per thread block).
    pub s: usize,
    /// How τ is chosen.
    pub target: TauTarget,
}

impl Default for SpammConfig {
    fn default() -> Self {
        Self {
            precision: SpammPrecision::Tf32x3,
            block: SpammBlock::B64,
            s: 1,
            target: TauTarget::RelError(1e-5),
        }
    }
}

/// What one SpAMM run did.
#[derive(Debug, Clone, PartialEq)]
pub struct SpammRun {
    /// Threshold used.
    pub tau: f32,
    /// Computed tile products / all (from the host count over the norm maps).
    pub valid_ratio: f64,
    /// Computed tile products counted by the kernels (equals the host count).
    pub valid_products: u64,
    /// `NormMaps::skipped_bound` at τ (absolute Frobenius bound of the skipped products).
    pub abs_bound: f64,
    /// ‖Ã·B‖F of the result (host, f64).
    pub result_norm: f64,
    /// abs_bound / (result_norm − abs_bound): bound on ‖E‖F/‖C‖F (∞ when the bound is not
    /// smaller than the result's norm).
    pub rel_bound: f64,
    /// C row ranges per device.
    pub row_ranges: Vec<(usize, usize)>,
    /// Products run (more than 1 when a relative-error target needed a smaller τ).
    pub attempts: u32,
}

impl SpammRun {
    /// The run of an empty product (a dimension of 0 tiles) over `m` rows of C on one device:
    /// C of zeros, nothing computed.
    pub fn empty(m: usize) -> Self {
        Self {
            tau: 0.0,
            valid_ratio: 0.0,
            valid_products: 0,
            abs_bound: 0.0,
            result_norm: 0.0,
            rel_bound: 0.0,
            row_ranges: vec![(0, m)],
            attempts: 0,
        }
    }
}

/// Relative bound from the absolute bound and the result's norm: ‖C‖ ≥ ‖C̃‖ − ‖E‖.
pub fn rel_bound(abs_bound: f64, result_norm: f64) -> f64 {
    if abs_bound == 0.0 {
        0.0
    } else if result_norm > abs_bound {
        abs_bound / (result_norm - abs_bound)
    } else {
        f64::INFINITY
    }
}

/// Where a τ choice evaluates `NormMaps::skipped_bound` of one pair of maps: on the host's maps
/// ([`SkippedBound::host`]) or on the device that holds them ([`SkippedBound::device`], the same
/// maps: a relative 1e-12 apart). Every value evaluated is kept, so the caller's estimate at +∞,
/// the search's evaluations (its check above every product is the one at +∞) and the bound
/// reported at the chosen τ, also across retries, cost one evaluation per distinct τ.
#[derive(Debug)]
pub struct SkippedBound<'a> {
    device: Option<DeviceBound<'a>>,
    /// (τ's bits, bound) of every evaluation so far.
    known: Vec<(u32, f64)>,
}

impl<'a> SkippedBound<'a> {
    /// `NormMaps::skipped_bound` on the host's maps.
    pub fn host() -> Self {
        Self {
            device: None,
            known: Vec::new(),
        }
    }

    /// [`DeviceBound::skipped_bound`] of the operands the maps were downloaded from.
    pub fn device(bound: DeviceBound<'a>) -> Self {
        Self {
            device: Some(bound),
            known: Vec::new(),
        }
    }

    /// The bound at τ of `maps` (always the same maps: the host's copy of those a
    /// [`SkippedBound::device`] reads), evaluated once per τ.
    pub fn at(&mut self, maps: &NormMaps<'_>, tau: f32) -> Result<f64, GpuError> {
        if let Some(&(_, v)) = self.known.iter().find(|(t, _)| *t == tau.to_bits()) {
            return Ok(v);
        }
        let v = match &mut self.device {
            None => maps.skipped_bound(tau),
            Some(d) => d.skipped_bound(tau)?,
        };
        self.known.push((tau.to_bits(), v));
        Ok(v)
    }
}

/// Chooses τ from host norm maps. For [`TauTarget::RelError`] the reference norm `c_norm` is
/// used (‖C‖F, or an estimate of it).
pub fn choose_tau(maps: &NormMaps<'_>, target: TauTarget, c_norm: f64) -> Result<f32, GpuError> {
    choose_tau_with(maps, &mut SkippedBound::host(), target, c_norm)
}

/// [`choose_tau`] with the bounds of an error target evaluated by `bound` (the other targets
/// read only the host maps); `bound` then also knows the bound at the τ chosen.
pub fn choose_tau_with(
    maps: &NormMaps<'_>,
    bound: &mut SkippedBound<'_>,
    target: TauTarget,
    c_norm: f64,
) -> Result<f32, GpuError> {
    Ok(match target.checked()? {
        TauTarget::Tau(t) => t,
        TauTarget::ValidRatio(r) => maps.tau_search(r)?.tau,
        TauTarget::RelError(r) => {
            // bound ≤ r·(‖C̃‖ − bound)  ⇐  bound ≤ r/(1+r)·‖C̃‖.
            let max_bound = r / (1.0 + r) * c_norm;
            let chosen = maps.tau_for_error_by(max_bound, |t| bound.at(maps, t))?;
            // The search's τ may sit just below the last τ it evaluated, on the same plateau.
            bound.known.push((chosen.tau.to_bits(), chosen.bound));
            chosen.tau
        }
    })
}

/// C's rows over `parts` devices in whole C blocks, balancing valid products at τ
/// ([`tcsparse_planner::split::spamm_block_rows`]).
pub fn spamm_block_rows(
    maps: &NormMaps<'_>,
    tau: f32,
    m: usize,
    block: SpammBlock,
    parts: usize,
) -> Result<Vec<(usize, usize)>, GpuError> {
    tcsparse_planner::split::spamm_block_rows(maps, tau, m, block.tiles(), TILE, parts)
        .map_err(|e| GpuError::Invalid(format!("row split: {e}")))
}

/// The norm maps `na` and `nb` of `tiles` (as [`NormMaps::new`]; a disagreement is
/// [`GpuError::Invalid`]).
pub fn norm_maps<'a>(
    na: &'a [f32],
    nb: &'a [f32],
    tiles: (usize, usize, usize),
) -> Result<NormMaps<'a>, GpuError> {
    NormMaps::new(na, nb, tiles).map_err(|e| GpuError::Invalid(format!("norm maps: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error target's choice evaluates each τ once, its check above every product is the
    /// estimate's +∞, and the evaluator knows the bound at the τ chosen (the host's value there).
    #[test]
    fn the_bounds_of_a_choice_are_evaluated_once_each() {
        let (t, n) = (6usize, 36usize);
        let na: Vec<f32> = (0..n)
            .map(|x| (-(0.7 * (x / t).abs_diff(x % t) as f32)).exp() + 1e-3 * x as f32)
            .collect();
        let maps = norm_maps(&na, &na, (t, t, t)).unwrap();
        let mut bound = SkippedBound::host();
        let c_norm = bound.at(&maps, f32::INFINITY).unwrap();
        assert_eq!(c_norm, maps.skipped_bound(f32::INFINITY));
        let tau = choose_tau_with(&maps, &mut bound, TauTarget::RelError(1e-2), c_norm).unwrap();
        assert!(tau > 0.0 && tau.is_finite(), "{tau}");
        let mut taus: Vec<u32> = bound.known.iter().map(|&(t, _)| t).collect();
        taus.sort_unstable();
        let evaluated = taus.len();
        taus.dedup();
        assert_eq!(
            taus.len(),
            evaluated,
            "a τ evaluated twice: {:?}",
            bound.known
        );
        let before = bound.known.len();
        assert_eq!(bound.at(&maps, tau).unwrap(), maps.skipped_bound(tau));
        assert_eq!(bound.known.len(), before, "the chosen τ's bound was known");
        // A retry (another target on the same maps) re-evaluates neither +∞ nor the tiny τ.
        let again = choose_tau_with(&maps, &mut bound, TauTarget::RelError(1e-3), c_norm).unwrap();
        assert!(again <= tau);
        assert!(
            bound
                .known
                .iter()
                .filter(|&&(t, _)| t == f32::INFINITY.to_bits())
                .count()
                == 1
                && bound
                    .known
                    .iter()
                    .filter(|&&(t, _)| t == f32::MIN_POSITIVE.to_bits())
                    .count()
                    <= 1
        );
    }
}
