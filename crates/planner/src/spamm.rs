//! cuSpAMM (§3.4–3.5) planning on the tile norm maps of A and B ([`NormMaps`]): the τ search
//! for a requested valid ratio, τ for an error bound, the bound of what τ skips, and the valid
//! tile products per C tile row that the row split over GPUs
//! ([`crate::split::spamm_block_rows`]) balances; strided assignment of C tiles to thread blocks.
//!
//! Norm maps are plain row-major f32 slices of tile Frobenius norms: A's is tiles_m × tiles_k,
//! B's tiles_k × tiles_n. A product (i, k, j) is *valid* when the f32 product
//! `norm_a[i,k] * norm_b[k,j] >= τ` (one rule everywhere; the released code mixed ≥ and >).
//! valid ratio = valid products / (tiles_m · tiles_k · tiles_n).

use crate::PlanError;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// The τ search stops when |achieved − target| ≤ this (absolute, in ratio units: 0.001 = 0.1
/// percentage points).
pub const TAU_TOLERANCE: f64 = 0.001;
/// The most binary-search steps of the τ search (the bracket expansion is not counted).
pub const TAU_MAX_ITERATIONS: u32 = 64;

/// Result of the τ search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TauResult {
    /// The threshold: products ≥ τ are computed.
    pub tau: f32,
    /// Valid ratio achieved with `tau`.
    pub valid_ratio: f64,
    /// Binary-search steps taken.
    pub iterations: u32,
    /// Final expansion coefficient k (the search space was [0, k · ave]).
    pub k: u32,
}

/// The tile norm maps of A and B, checked: `a` is `tiles_m × tiles_k` and `b` is
/// `tiles_k × tiles_n` (row-major tile Frobenius norms), every tile count ≥ 1, every norm finite
/// and ≥ 0. What the τ choices and the valid counts read.
///
/// Made once per pair of maps: each row of B sorted ascending (with its columns), so that the
/// products of one A norm with a row of B that fall below τ are a prefix of the sorted row
/// (f32 multiplication by a ≥ 0 is monotone), found by binary search.
#[derive(Debug)]
pub struct NormMaps<'a> {
    a: &'a [f32],
    tiles_m: usize,
    tiles_k: usize,
    tiles_n: usize,
    /// Row k of B sorted ascending (`tiles_n` values per row).
    b_sorted: Vec<f32>,
    /// The column of each value of `b_sorted`.
    b_cols: Vec<u32>,
    /// Σ_k a_ik·b_kj in f64 per C tile (row-major `tiles_m × tiles_n`), made on first need.
    full: OnceLock<Vec<f64>>,
}

impl<'a> NormMaps<'a> {
    /// The maps `a` and `b` with `tiles = (tiles_m, tiles_k, tiles_n)`
    /// ([`PlanError::InvalidInput`] where they disagree or hold a negative or non-finite norm).
    pub fn new(
        a: &'a [f32],
        b: &'a [f32],
        tiles: (usize, usize, usize),
    ) -> Result<Self, PlanError> {
        let (tm, tk, tn) = tiles;
        if tm == 0 || tk == 0 || tn == 0 {
            return Err(PlanError::InvalidInput("tile counts must be ≥ 1".into()));
        }
        if a.len() != tm * tk || b.len() != tk * tn {
            return Err(PlanError::InvalidInput(format!(
                "norm maps have {} and {} entries, expected {tm}×{tk} and {tk}×{tn}",
                a.len(),
                b.len()
            )));
        }
        if a.iter().chain(b).any(|x| !x.is_finite() || *x < 0.0) {
            return Err(PlanError::InvalidInput(
                "norms must be finite and ≥ 0".into(),
            ));
        }
        if tn > u32::MAX as usize {
            return Err(PlanError::InvalidInput(format!(
                "{tn} C tile columns exceed u32"
            )));
        }
        let mut b_sorted = vec![0f32; tk * tn];
        let mut b_cols = vec![0u32; tk * tn];
        b_sorted
            .par_chunks_mut(tn)
            .zip(b_cols.par_chunks_mut(tn))
            .zip(b.par_chunks(tn))
            .for_each(|((vals, cols), row)| {
                let mut pairs: Vec<(f32, u32)> = row
                    .iter()
                    .enumerate()
                    .map(|(j, &v)| (v, j as u32))
                    .collect();
                pairs.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                for (slot, (v, j)) in vals.iter_mut().zip(cols.iter_mut()).zip(pairs) {
                    (*slot.0, *slot.1) = (v, j);
                }
            });
        Ok(Self {
            a,
            tiles_m: tm,
            tiles_k: tk,
            tiles_n: tn,
            b_sorted,
            b_cols,
            full: OnceLock::new(),
        })
    }

    /// `(tiles_m, tiles_k, tiles_n)`.
    pub fn tiles(&self) -> (usize, usize, usize) {
        (self.tiles_m, self.tiles_k, self.tiles_n)
    }

    /// Row k of B, sorted ascending.
    fn sorted_row(&self, k: usize) -> &[f32] {
        &self.b_sorted[k * self.tiles_n..(k + 1) * self.tiles_n]
    }

    /// How many products `x·b_kj` fall below τ (skipped): a prefix of the sorted row k.
    fn skipped_in_row(&self, x: f32, k: usize, tau: f32) -> usize {
        self.sorted_row(k).partition_point(|&b| x * b < tau)
    }

    /// Valid products of C tile row `i` at threshold τ.
    fn row_count(&self, i: usize, tau: f32) -> u64 {
        let (tk, tn) = (self.tiles_k, self.tiles_n);
        (0..tk)
            .map(|k| (tn - self.skipped_in_row(self.a[i * tk + k], k, tau)) as u64)
            .sum()
    }

    /// Valid products / all products at threshold τ.
    fn ratio(&self, tau: f32) -> f64 {
        let total = (self.tiles_m * self.tiles_k * self.tiles_n) as f64;
        let valid: u64 = (0..self.tiles_m)
            .into_par_iter()
            .map(|i| self.row_count(i, tau))
            .sum();
        valid as f64 / total
    }

    /// Σ_k a_ik·b_kj in f64 for every C tile (the norm-product bound of ‖C‖F's tiles before
    /// squaring), computed on first use, on every core. Never called from inside a parallel loop
    /// over these maps: the first call's own parallel loop may run another of that loop's
    /// iterations on the calling thread while it holds the cell, which would wait for itself.
    fn full_products(&self) -> &[f64] {
        self.full.get_or_init(|| {
            let (tk, tn) = (self.tiles_k, self.tiles_n);
            let mut full = vec![0f64; self.tiles_m * tn];
            full.par_chunks_mut(tn).enumerate().for_each(|(i, e)| {
                for k in 0..tk {
                    let x = self.a[i * tk + k];
                    if x == 0.0 {
                        continue;
                    }
                    let (vals, cols) = self.row_entries(k, 0..tn);
                    for (&y, &j) in vals.iter().zip(cols) {
                        e[j as usize] += x as f64 * y as f64;
                    }
                }
            });
            full
        })
    }

    /// The sorted values of row k of B in `range` and their columns.
    fn row_entries(&self, k: usize, range: std::ops::Range<usize>) -> (&[f32], &[u32]) {
        let base = k * self.tiles_n;
        let r = base + range.start..base + range.end;
        (&self.b_sorted[r.clone()], &self.b_cols[r])
    }

    /// Where each row of B is cut at τ for C tile row `i` (its skipped prefix), and whether
    /// summing the skipped products directly costs no more than the valid ones plus a copy of the
    /// row's full products.
    fn row_cuts(&self, i: usize, tau: f32) -> (Vec<usize>, bool) {
        let (tk, tn) = (self.tiles_k, self.tiles_n);
        let xs = &self.a[i * tk..(i + 1) * tk];
        let cuts: Vec<usize> = (0..tk)
            .map(|k| self.skipped_in_row(xs[k], k, tau))
            .collect();
        // (A zero norm's products are all zero: they cost nothing either way.)
        let skipped: usize = (0..tk).filter(|&k| xs[k] != 0.0).map(|k| cuts[k]).sum();
        let valid: usize = (0..tk)
            .filter(|&k| xs[k] != 0.0)
            .map(|k| tn - cuts[k])
            .sum();
        (cuts, skipped <= valid + tn)
    }

    /// Σ_j e_ij² for C tile row `i`, e_ij = Σ_{k skipped at τ} a_ik·b_kj, from the row's cuts:
    /// summed over the skipped products, or, given the row's full products, as those minus the
    /// valid ones.
    fn row_skipped_square(&self, i: usize, cuts: &[usize], full_row: Option<&[f64]>) -> f64 {
        let (tk, tn) = (self.tiles_k, self.tiles_n);
        let xs = &self.a[i * tk..(i + 1) * tk];
        let mut e = vec![0f64; tn];
        let Some(full_row) = full_row else {
            for k in (0..tk).filter(|&k| xs[k] != 0.0) {
                let (vals, cols) = self.row_entries(k, 0..cuts[k]);
                for (&y, &j) in vals.iter().zip(cols) {
                    e[j as usize] += xs[k] as f64 * y as f64;
                }
            }
            return e.iter().map(|v| v * v).sum();
        };
        e.copy_from_slice(full_row);
        for k in (0..tk).filter(|&k| xs[k] != 0.0) {
            let (vals, cols) = self.row_entries(k, cuts[k]..tn);
            for (&y, &j) in vals.iter().zip(cols) {
                e[j as usize] -= xs[k] as f64 * y as f64;
            }
        }
        e.iter().map(|v| v * v).sum()
    }

    /// τ for a requested valid ratio (cuSpAMM §3.5.2): `ave` = mean of all norm products; search space [0, k · ave] starting with k = 1 and
    /// growing k by one while the upper end still admits more than the target; then binary search.
    /// Returns the evaluated τ whose ratio is closest to the target (the ratio is a step function of τ,
    /// so an exact hit is not always possible), within [`TAU_TOLERANCE`] or after
    /// [`TAU_MAX_ITERATIONS`] binary-search steps.
    #[tracing::instrument(name = "tau_search", level = "info", skip_all)]
    pub fn tau_search(&self, target_valid_ratio: f64) -> Result<TauResult, PlanError> {
        let (norm_a, (tiles_m, tiles_k, tiles_n)) = (self.a, self.tiles());
        let target = target_valid_ratio;
        if !(target > 0.0 && target <= 1.0) {
            return Err(PlanError::InvalidInput(format!(
                "target valid ratio {target} not in (0, 1]"
            )));
        }
        // ave = Σ_k (Σ_i a[i,k]) (Σ_j b[k,j]) / (m k n).
        let mut sum = 0f64;
        for k in 0..tiles_k {
            let sa: f64 = (0..tiles_m).map(|i| norm_a[i * tiles_k + k] as f64).sum();
            let sb: f64 = self.sorted_row(k).iter().map(|&x| x as f64).sum();
            sum += sa * sb;
        }
        let ave = sum / (tiles_m * tiles_k * tiles_n) as f64;
        let tol = TAU_TOLERANCE;
        let mut best = TauResult {
            tau: 0.0,
            valid_ratio: 1.0,
            iterations: 0,
            k: 1,
        };
        if (1.0 - target).abs() <= tol || ave <= 0.0 {
            return Ok(best);
        }
        let mut k = 1u32;
        let (lo_start, hi) = loop {
            let hi = (k as f64 * ave) as f32;
            let r = self.ratio(hi);
            consider(&mut best, hi, r, target, k);
            if r <= target || k >= 1 << 20 {
                break (0f32, hi);
            }
            k += 1;
        };
        let (mut lo, mut hi) = (lo_start, hi);
        let mut iterations = 0;
        while iterations < TAU_MAX_ITERATIONS && (best.valid_ratio - target).abs() > tol {
            let mid = lo + (hi - lo) / 2.0;
            if mid <= lo || mid >= hi {
                break;
            }
            iterations += 1;
            let r = self.ratio(mid);
            consider(&mut best, mid, r, target, k);
            if r > target { lo = mid } else { hi = mid }
        }
        best.iterations = iterations;
        Ok(best)
    }

    /// Frobenius bound of what the skipped tile products can contribute at threshold τ:
    /// `sqrt(Σ_ij (Σ_{k: a_ik·b_kj < τ} a_ik·b_kj)²)` (triangle inequality per C tile, then the
    /// Frobenius sum over tiles), so ‖C − C̃‖F ≤ the bound for the SpAMM result C̃ (exact
    /// arithmetic). With τ = +∞ every product is skipped and the value bounds ‖C‖F itself.
    pub fn skipped_bound(&self, tau: f32) -> f64 {
        let tn = self.tiles_n;
        let rows: Vec<(Vec<usize>, bool)> = (0..self.tiles_m)
            .into_par_iter()
            .map(|i| self.row_cuts(i, tau))
            .collect();
        // The full products, where a row needs them, made here: outside the parallel sum.
        let full = rows
            .iter()
            .any(|(_, direct)| !direct)
            .then(|| self.full_products());
        let sq: f64 = rows
            .par_iter()
            .enumerate()
            .map(|(i, (cuts, direct))| {
                let full_row = match (direct, full) {
                    (false, Some(f)) => Some(&f[i * tn..(i + 1) * tn]),
                    _ => None,
                };
                self.row_skipped_square(i, cuts, full_row)
            })
            .sum();
        sq.sqrt()
    }

    /// Valid products per C tile row at threshold τ (the load each row brings to the product).
    pub fn valid_per_row(&self, tau: f32) -> Vec<u64> {
        (0..self.tiles_m)
            .into_par_iter()
            .map(|i| self.row_count(i, tau))
            .collect()
    }

    /// The smallest product `a_ik·b_kj` (in f32, as [`NormMaps::skipped_bound`] compares it) of a
    /// nonzero `a_ik` that is ≥ τ, if any: every τ' in [τ, that product] skips the same products.
    fn smallest_product_from(&self, tau: f32) -> Option<f32> {
        let tk = self.tiles_k;
        (0..self.tiles_m)
            .into_par_iter()
            .filter_map(|i| {
                let xs = &self.a[i * tk..(i + 1) * tk];
                (0..tk)
                    .filter(|&k| xs[k] != 0.0)
                    .filter_map(|k| {
                        let at = self.skipped_in_row(xs[k], k, tau);
                        self.sorted_row(k).get(at).map(|&b| xs[k] * b)
                    })
                    .min_by(f32::total_cmp)
            })
            .min_by(f32::total_cmp)
    }

    /// The largest τ whose [`NormMaps::skipped_bound`] is ≤ `max_bound` (absolute), to a relative
    /// width of 1e-4 below it (the bound is constant between products' values, so the largest is
    /// a product's value; τ stays below it, so that product is admitted with a margin). τ = 0
    /// (every product, bound 0) when even the smallest positive τ is too coarse; errors when
    /// `max_bound` is negative or not finite.
    ///
    /// The search keeps a bracket `lo < hi` (the bound at `lo` within `max_bound`, at `hi` not).
    /// Its steps on x = ln τ alternate the point where the straight line through (x, ln bound) at
    /// the bracket's ends meets ln `max_bound` (at least 1/16 of the bracket from either end) and
    /// the bracket's middle: the bound is nearly a power of τ over wide ranges, so the line lands
    /// close. The bound only changes at products' values, so where a step finds the bound of an
    /// end again (a plateau), the next step finds the smallest product v ≥ `lo` (every τ in
    /// [`lo`, v] has `lo`'s bound) and tests just above it: a bound beyond `max_bound` there makes
    /// v the end of the search (τ = max(`lo`, v / 1.0001)); otherwise `lo` moves past v.
    pub fn tau_for_error(&self, max_bound: f64) -> Result<TauForError, PlanError> {
        self.tau_for_error_by(max_bound, |t| Ok(self.skipped_bound(t)))
    }

    /// [`NormMaps::tau_for_error`] with [`NormMaps::skipped_bound`] evaluated by `bound` (for
    /// these maps, e.g. on the device that holds them: `tcsparse_gpu::spamm::DeviceBound`); its
    /// first error ends the search. Every other step (the plateaus' next product, the valid ratio)
    /// runs on these maps.
    pub fn tau_for_error_by<E: From<PlanError>>(
        &self,
        max_bound: f64,
        mut bound: impl FnMut(f32) -> Result<f64, E>,
    ) -> Result<TauForError, E> {
        if !(max_bound.is_finite() && max_bound >= 0.0) {
            return Err(PlanError::InvalidInput(format!(
                "error bound {max_bound} must be finite and ≥ 0"
            ))
            .into());
        }
        let ratio = |t: f32| self.ratio(t);
        let amax = self.a.iter().copied().fold(0f32, f32::max);
        let bmax = self.b_sorted.iter().copied().fold(0f32, f32::max);
        // Above the largest product everything is skipped: `top` skips what +∞ skips, so its
        // bound is the bound at +∞ (the norm-product bound of ‖C‖F a caller's estimate has just
        // evaluated: an evaluator that keeps its values, `tcsparse_gpu::spamm::SkippedBound`,
        // answers it without a second pass).
        let top = (amax * bmax * 1.0001).max(f32::MIN_POSITIVE);
        let top_bound = bound(f32::INFINITY)?;
        if top_bound <= max_bound {
            return Ok(TauForError {
                tau: top,
                bound: top_bound,
                valid_ratio: ratio(top),
            });
        }
        // A tiny τ (admitted or not) and `top` (not admitted).
        let mut lo = f32::MIN_POSITIVE;
        let mut lo_bound = bound(lo)?;
        if lo_bound > max_bound {
            return Ok(TauForError {
                tau: 0.0,
                bound: 0.0,
                valid_ratio: 1.0,
            });
        }
        let (mut hi, mut hi_bound) = (top, top_bound);
        let mut plateau = false;
        for step in 0..200 {
            if hi / lo <= 1.0001 {
                break;
            }
            if std::mem::take(&mut plateau) {
                // [lo, v] skips what lo skips (no product in between): every τ there has lo's
                // bound.
                let Some(v) = self.smallest_product_from(lo).filter(|&v| v < hi) else {
                    break;
                };
                let above = v.next_up();
                let b = if above < hi { bound(above)? } else { hi_bound };
                if b <= max_bound {
                    (lo, lo_bound) = (above, b);
                    continue;
                }
                // Skipping v's products breaks the bound: they are the smallest admitted. τ stays
                // up to 1e-4 below v where lo allows, so a product at v stays admitted where its
                // norms round differently (a product equal to τ is one rounding from skipped).
                let below = (v as f64 / 1.0001) as f32;
                let below = if below as f64 * 1.0001 < v as f64 {
                    below.next_up()
                } else {
                    below
                };
                lo = lo.max(below).min(v);
                break;
            }
            let (x_lo, x_hi) = ((lo as f64).ln(), (hi as f64).ln());
            let middle = 0.5 * (x_lo + x_hi);
            // The line through the ends in (ln τ, ln bound); the middle where a bound is 0.
            let x = if step % 2 == 0 && lo_bound > 0.0 && max_bound > 0.0 {
                let (y_lo, y_hi, y) = (lo_bound.ln(), hi_bound.ln(), max_bound.ln());
                let t = ((y - y_lo) / (y_hi - y_lo)).clamp(1.0 / 16.0, 15.0 / 16.0);
                if t.is_finite() {
                    x_lo + t * (x_hi - x_lo)
                } else {
                    middle
                }
            } else {
                middle
            };
            let mid = x.exp() as f32;
            if mid <= lo || mid >= hi {
                break;
            }
            let bm = bound(mid)?;
            plateau = bm == lo_bound || bm == hi_bound;
            if bm <= max_bound {
                (lo, lo_bound) = (mid, bm);
            } else {
                (hi, hi_bound) = (mid, bm);
            }
        }
        Ok(TauForError {
            tau: lo,
            bound: lo_bound,
            valid_ratio: ratio(lo),
        })
    }
}

fn consider(best: &mut TauResult, tau: f32, r: f64, target: f64, k: u32) {
    if (r - target).abs() < (best.valid_ratio - target).abs() {
        *best = TauResult {
            tau,
            valid_ratio: r,
            iterations: 0,
            k,
        };
    }
}

/// Result of [`NormMaps::tau_for_error`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TauForError {
    /// Products with f32 norm product ≥ τ are computed.
    pub tau: f32,
    /// [`NormMaps::skipped_bound`] at `tau` (absolute, Frobenius).
    pub bound: f64,
    /// Valid ratio at `tau`.
    pub valid_ratio: f64,
}

/// Products a SpAMM run with an error target may make: the first, and up to three retries.
pub const MAX_TAU_ATTEMPTS: u32 = 4;

/// The retry decision of a SpAMM product with an error target `target_rel` (a bound on
/// ‖E‖F/‖C‖F), the one both the facade and the one-rank-per-GPU product make: after product
/// number `attempts` (from 1) at `tau`, whose result has norm `result_norm` and bound `rel`, with
/// τ chosen for the estimate `c_norm` of ‖C‖F. `Some(next)`: choose τ again for the estimate
/// `next` — the result's norm (never above the previous estimate), halved from the second retry
/// on, since the same norm would choose the same τ. `None`: keep this product (the bound met,
/// [`MAX_TAU_ATTEMPTS`] products made, τ = 0 already, or a zero or NaN norm).
pub fn tau_retry_norm(
    target_rel: f64,
    rel: f64,
    attempts: u32,
    tau: f32,
    result_norm: f64,
    c_norm: f64,
) -> Option<f64> {
    let retry = rel > target_rel && attempts < MAX_TAU_ATTEMPTS && tau > 0.0 && result_norm > 0.0;
    let next = result_norm.min(c_norm);
    (retry && next > 0.0).then_some(if attempts > 1 { next * 0.5 } else { next })
}

/// Thread block → C tiles, flat (CSR-like): block `b` handles `tiles[offsets[b]..offsets[b+1]]`,
/// each a row-major C tile id `i · tiles_n + j`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StridedAssignment {
    /// Exclusive prefix of tiles per block (blocks + 1 entries).
    pub offsets: Vec<u32>,
    /// Tile ids, block by block.
    pub tiles: Vec<u32>,
}

impl StridedAssignment {
    /// Number of thread blocks.
    pub fn num_blocks(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Tiles of block `b` (empty when out of range).
    pub fn block(&self, b: usize) -> &[u32] {
        match (self.offsets.get(b), self.offsets.get(b + 1)) {
            (Some(&s), Some(&e)) => &self.tiles[s as usize..e as usize],
            _ => &[],
        }
    }
}

/// cuSpAMM §3.5.1: with stride parameter `s`, the tiles_m × tiles_n C tiles are handled by
/// ⌈tiles_m / s⌉ × ⌈tiles_n / s⌉ thread blocks; block (bi, bj) takes the s × s tiles
/// (bi + p · ⌈tiles_m / s⌉, bj + q · ⌈tiles_n / s⌉) for p, q < s that exist. Tiles near the diagonal
/// of a decay matrix (the heavy ones) are thereby spread over all blocks. s = 1 is one tile per block.
pub fn strided_assignment(
    tiles_m: usize,
    tiles_n: usize,
    s: usize,
) -> Result<StridedAssignment, PlanError> {
    if s == 0 {
        return Err(PlanError::InvalidInput(
            "stride parameter s must be ≥ 1".into(),
        ));
    }
    if (tiles_m as u64) * (tiles_n as u64) > u32::MAX as u64 {
        return Err(PlanError::InvalidInput("too many tiles for u32 ids".into()));
    }
    let (sm, sn) = (tiles_m.div_ceil(s), tiles_n.div_ceil(s));
    let mut offsets = Vec::with_capacity(sm * sn + 1);
    let mut tiles = Vec::with_capacity(tiles_m * tiles_n);
    offsets.push(0);
    for bi in 0..sm {
        for bj in 0..sn {
            for p in 0..s {
                let i = bi + p * sm;
                if i >= tiles_m {
                    break;
                }
                for q in 0..s {
                    let j = bj + q * sn;
                    if j >= tiles_n {
                        break;
                    }
                    tiles.push((i * tiles_n + j) as u32);
                }
            }
            offsets.push(tiles.len() as u32);
        }
    }
    Ok(StridedAssignment { offsets, tiles })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tau_retries_follow_the_results_norm_and_stop() {
        // Missed at the first product: retry with the result's norm, as it is.
        assert_eq!(tau_retry_norm(1e-3, 1e-2, 1, 0.5, 2.0, 10.0), Some(2.0));
        // From the second retry on the estimate is halved; it never grows past the last one.
        assert_eq!(tau_retry_norm(1e-3, 1e-2, 2, 0.5, 2.0, 10.0), Some(1.0));
        assert_eq!(tau_retry_norm(1e-3, 1e-2, 3, 0.5, 20.0, 4.0), Some(2.0));
        // Met, out of attempts, τ = 0, a zero or NaN result: keep the product.
        assert_eq!(tau_retry_norm(1e-2, 1e-3, 1, 0.5, 2.0, 10.0), None);
        assert_eq!(
            tau_retry_norm(1e-3, 1e-2, MAX_TAU_ATTEMPTS, 0.5, 2.0, 10.0),
            None
        );
        assert_eq!(tau_retry_norm(1e-3, 1e-2, 1, 0.0, 2.0, 10.0), None);
        assert_eq!(tau_retry_norm(1e-3, 1e-2, 1, 0.5, 0.0, 10.0), None);
        assert_eq!(tau_retry_norm(1e-3, 1e-2, 1, 0.5, f64::NAN, 10.0), None);
        assert_eq!(tau_retry_norm(1e-3, f64::INFINITY, 1, 0.5, 2.0, 0.0), None);
    }

    #[test]
    fn strided_example_of_the_paper() {
        // 32×32 tiles (1024² matrix, 32² tiles), s = 2: block 0 takes (0,0), (0,16), (16,0), (16,16).
        let s = strided_assignment(32, 32, 2).unwrap();
        assert_eq!(s.num_blocks(), 256);
        assert_eq!(s.block(0), &[0, 16, 16 * 32, 16 * 32 + 16]);
        let mut all = s.tiles.clone();
        all.sort_unstable();
        assert_eq!(all, (0..1024).collect::<Vec<u32>>());
        // Ragged: 5×3 tiles, s = 2 → 3×2 blocks, every tile once.
        let s = strided_assignment(5, 3, 2).unwrap();
        assert_eq!(s.num_blocks(), 6);
        let mut all = s.tiles.clone();
        all.sort_unstable();
        assert_eq!(all, (0..15).collect::<Vec<u32>>());
        assert!(strided_assignment(4, 4, 0).is_err());
    }

    fn lcg_maps(seed: u64, tm: usize, tk: usize, tn: usize) -> (Vec<f32>, Vec<f32>) {
        let mut x = seed;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32).powi(3)
        };
        let a = (0..tm * tk).map(|_| next()).collect();
        let b = (0..tk * tn).map(|_| next()).collect();
        (a, b)
    }

    /// The skipped bound and the valid counts by brute force over every product (the kernels'
    /// rule: valid iff the f32 product is ≥ τ).
    fn brute_force(
        a: &[f32],
        b: &[f32],
        (tm, tk, tn): (usize, usize, usize),
        tau: f32,
    ) -> (f64, Vec<u64>) {
        let mut sq = 0f64;
        let mut valid = vec![0u64; tm];
        for i in 0..tm {
            for j in 0..tn {
                let mut e = 0f64;
                for k in 0..tk {
                    let (x, y) = (a[i * tk + k], b[k * tn + j]);
                    if x * y < tau {
                        e += x as f64 * y as f64;
                    } else {
                        valid[i] += 1;
                    }
                }
                sq += e * e;
            }
        }
        (sq.sqrt(), valid)
    }

    #[test]
    fn skipped_bound_brute_force_and_monotone() {
        let (tm, tk, tn) = (5, 7, 4);
        let (a, b) = lcg_maps(7, tm, tk, tn);
        let maps = NormMaps::new(&a, &b, (tm, tk, tn)).unwrap();
        let mut prev = 0.0;
        for tau in [0.0f32, 1e-4, 1e-3, 1e-2, 0.1, 1.0, f32::INFINITY] {
            let got = maps.skipped_bound(tau);
            let (want, _) = brute_force(&a, &b, (tm, tk, tn), tau);
            assert!((got - want).abs() <= 1e-12 * want.max(1.0), "{tau}");
            assert!(got >= prev, "bound must grow with τ");
            prev = got;
        }
        assert_eq!(maps.skipped_bound(0.0), 0.0);
    }

    /// The full products are made outside the parallel sum: made lazily inside it, a worker
    /// holding the cell ran another row that waited for the same cell (a hang on 16 cores).
    #[test]
    fn the_bound_never_waits_for_itself_on_many_threads() {
        let t = 20;
        let m: Vec<f32> = (0..t * t)
            .map(|n| ((n * 7919) % 101) as f32 / 100.0)
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(16)
                .build()
                .expect("a thread pool");
            let bounds: Vec<f64> = pool.install(|| {
                (0..200)
                    .map(|_| {
                        let maps = NormMaps::new(&m, &m, (t, t, t)).expect("valid maps");
                        maps.skipped_bound(f32::INFINITY)
                    })
                    .collect()
            });
            let _ = tx.send(bounds);
        });
        let bounds = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("200 bounds on 16 threads within 60 s");
        assert!(bounds.iter().all(|&b| b == bounds[0] && b > 0.0));
    }

    proptest::proptest! {
        /// Both ways of summing the skipped products (directly, or the full product minus the
        /// valid ones, chosen per C tile row by which is fewer) and the valid counts agree with
        /// brute force, zero norms and repeated values included.
        #[test]
        fn skipped_bound_and_counts_match_brute_force(
            (tm, tk, tn) in (1usize..6, 1usize..7, 1usize..9),
            seed in 0u64..1000,
            zeros in 0u32..4,
            tau_pick in 0usize..12,
        ) {
            let (mut a, mut b) = lcg_maps(seed, tm, tk, tn);
            // Some exact zeros and repeats (ties in the sorted rows).
            for (n, v) in a.iter_mut().chain(b.iter_mut()).enumerate() {
                if (n as u32 + seed as u32) % 5 < zeros {
                    *v = if n % 2 == 0 { 0.0 } else { 0.25 };
                }
            }
            let maps = NormMaps::new(&a, &b, (tm, tk, tn)).unwrap();
            let mut products: Vec<f32> = (0..tm * tk * tn)
                .map(|n| a[(n / (tk * tn)) * tk + (n / tn) % tk] * b[((n / tn) % tk) * tn + n % tn])
                .collect();
            products.push(0.0);
            products.push(f32::INFINITY);
            products.sort_by(f32::total_cmp);
            let tau = products[tau_pick * (products.len() - 1) / 11];
            let (want, valid) = brute_force(&a, &b, (tm, tk, tn), tau);
            let got = maps.skipped_bound(tau);
            proptest::prop_assert!((got - want).abs() <= 1e-12 * want.max(1.0), "τ {}: {} vs {}", tau, got, want);
            proptest::prop_assert_eq!(maps.valid_per_row(tau), valid);
        }
    }

    #[test]
    fn tau_for_error_meets_the_bound_and_is_nearly_largest() {
        let (tm, tk, tn) = (6, 6, 6);
        let (a, b) = lcg_maps(3, tm, tk, tn);
        let maps = NormMaps::new(&a, &b, (tm, tk, tn)).unwrap();
        let total = maps.skipped_bound(f32::INFINITY);
        for frac in [1e-1, 1e-2, 1e-4] {
            let want = frac * total;
            let r = maps.tau_for_error(want).unwrap();
            assert!(r.bound <= want, "{frac}: {r:?}");
            assert_eq!(r.bound, maps.skipped_bound(r.tau));
            // A slightly larger τ would break the bound (unless τ already skips everything).
            if r.valid_ratio > 0.0 {
                let over = maps.skipped_bound(r.tau * 1.001);
                assert!(over > want, "{frac}: τ not maximal ({over} ≤ {want})");
            }
        }
        let r = maps.tau_for_error(0.0).unwrap();
        assert_eq!((r.bound, r.valid_ratio), (0.0, 1.0));
        // Against brute force: the bound is constant between products' values, so the largest
        // τ within a bound is a product's value; the search returns it or a τ at most 1e-4
        // below it, with the same bound. Coarse maps (values on a grid of 1/levels) and fine ones.
        for (seed, levels) in [(5u64, 3.0f32), (7, 1048576.0), (11, 6.0)] {
            let (a, b) = lcg_maps(seed, tm, tk, tn);
            let grid = |v: Vec<f32>| -> Vec<f32> {
                v.into_iter()
                    .map(|x| (x * levels).ceil() / levels)
                    .collect()
            };
            let (a, b) = (grid(a), grid(b));
            let maps = NormMaps::new(&a, &b, (tm, tk, tn)).unwrap();
            let mut products: Vec<f32> = (0..tm * tk)
                .filter(|&ik| a[ik] != 0.0)
                .flat_map(|ik| (0..tn).map(move |j| (ik, j)))
                .map(|(ik, j)| a[ik] * b[(ik % tk) * tn + j])
                .collect();
            products.sort_by(f32::total_cmp);
            products.dedup();
            let total = maps.skipped_bound(f32::INFINITY);
            for frac in [0.5, 1e-1, 1e-2, 1e-3] {
                let want = frac * total;
                let r = maps.tau_for_error(want).unwrap();
                let best = products
                    .iter()
                    .copied()
                    .rev()
                    .find(|&p| maps.skipped_bound(p) <= want)
                    .unwrap();
                assert!(r.bound <= want, "seed {seed}, {frac}: {r:?}");
                assert_eq!(r.bound, maps.skipped_bound(best), "seed {seed}, {frac}");
                assert!(
                    r.tau <= best && r.tau as f64 >= best as f64 / 1.0001,
                    "seed {seed}, {frac}: τ {} against the largest {best}",
                    r.tau
                );
            }
        }

        assert!(maps.tau_for_error(f64::NAN).is_err());
        assert!(maps.tau_for_error(-1.0).is_err());
    }

    /// `tau_for_error_by` with another evaluator of the same bound (here the host's, counted) is
    /// `tau_for_error`; the evaluator's first error ends the search with that error.
    #[test]
    fn tau_for_error_by_takes_the_bound_from_its_evaluator() {
        let (tm, tk, tn) = (5, 7, 4);
        let (a, b) = lcg_maps(13, tm, tk, tn);
        let maps = NormMaps::new(&a, &b, (tm, tk, tn)).unwrap();
        let want = 1e-2 * maps.skipped_bound(f32::INFINITY);
        let mut calls = 0;
        let by = maps
            .tau_for_error_by(want, |t| {
                calls += 1;
                Ok::<f64, PlanError>(maps.skipped_bound(t))
            })
            .unwrap();
        assert_eq!(by, maps.tau_for_error(want).unwrap());
        assert!(calls >= 2, "{calls} evaluations");
        let mut calls = 0;
        let err = maps
            .tau_for_error_by(want, |_| {
                calls += 1;
                Err(PlanError::InvalidInput("device gone".into()))
            })
            .unwrap_err();
        assert_eq!((err.to_string().contains("device gone"), calls), (true, 1));
        assert!(
            maps.tau_for_error_by(f64::NAN, |_| Ok::<f64, PlanError>(0.0))
                .is_err()
        );
    }

    #[test]
    fn bad_maps_and_targets_are_refused() {
        assert!(NormMaps::new(&[1.0], &[1.0, 2.0], (1, 1, 1)).is_err());
        assert!(NormMaps::new(&[f32::NAN], &[1.0], (1, 1, 1)).is_err());
        assert!(NormMaps::new(&[-1.0], &[1.0], (1, 1, 1)).is_err());
        assert!(NormMaps::new(&[], &[], (0, 1, 1)).is_err());
        let maps = NormMaps::new(&[1.0], &[1.0], (1, 1, 1)).unwrap();
        assert!(maps.tau_search(0.0).is_err());
        assert!(maps.tau_search(1.5).is_err());
        let r = maps.tau_search(1.0).unwrap();
        assert_eq!((r.tau, r.valid_ratio), (0.0, 1.0));
    }
}
