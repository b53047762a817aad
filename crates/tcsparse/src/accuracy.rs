//! One accuracy check for every product (SpMM and SpMV): a result element against its f64
//! reference, within a relative bound of the element's scale (|α|·|A|·|B| + |β|·|C₀|) plus an
//! underflow term.
//!
//! The relative bound alone cannot hold near f32's smallest numbers: a product or a sum that
//! lands among the subnormals is rounded to a multiple of 2⁻¹⁴⁹, an absolute error of up to 2⁻¹⁵⁰
//! whatever the relative bound says (a subnormal result that f32 arithmetic computes exactly as
//! IEEE rounds it would fail a bound of 2⁻⁹ of a scale of 1e-45). So each element may also be off
//! by `(terms + 1) · 2⁻¹⁴⁹`, `terms` being the products summed into it (each product and the final
//! scaling by α round once).
//!
//! A result stored in f16 or bf16 ([`check_stored`]) may also be off by the rounding of that type
//! below its normal range ([`DType::underflow_step`]), and a result whose reference, within the
//! bound, reaches the type's overflow threshold may be the ±∞ a cast gives it.
//!
//! Non-finite values, one policy for every operation: a product is computed on whatever the
//! inputs hold (NaN and ±∞ propagate as IEEE arithmetic makes them; nothing is refused); an
//! element whose f64 reference is not finite is not checked, only counted
//! ([`AccuracyCheck::non_finite_reference`]), and an element that is not finite where its
//! reference is finite fails the check.

use crate::element::DType;
use crate::precision::Precision;

// The checks of the element types and precisions live here, beside the check they call (this
// module reads the types; they do not read it).
impl DType {
    /// Checks a product stored in this type (`got`, widened to f32) against its f64 reference
    /// `want` with scales `scale` (|α|·|A|·|B| + |β|·|C₀|), for a kernel of `precision` and rows
    /// of at most `k` nonzeros: [`check_stored`] with [`DType::scaled_error_bound`] of the
    /// precision's bound.
    pub fn check_products(
        self,
        precision: Precision,
        got: &[f32],
        want: &[f64],
        scale: &[f64],
        k: usize,
    ) -> AccuracyCheck {
        let rel = self.scaled_error_bound(precision.scaled_error_bound(k));
        check_stored(got, want, scale, rel, k, self)
    }
}

impl Precision {
    /// Checks a product against its f64 reference with this precision's bound for rows of at
    /// most `k` nonzeros, plus the underflow term ([`check_products`]: the check SpMV uses too).
    pub fn check_products(
        self,
        got: &[f32],
        want: &[f64],
        scale: &[f64],
        k: usize,
    ) -> AccuracyCheck {
        check_products(got, want, scale, self.scaled_error_bound(k), k)
    }
}

/// The smallest positive f32 (a subnormal), 2⁻¹⁴⁹.
pub const F32_TINY: f64 = 1.401_298_464_324_817e-45;

/// Bound on |got − want| for an element of scale `scale` (|α|·|A|·|B| + |β|·|C₀|, the sum of the
/// magnitudes of what was added) with `terms` products summed: `rel · scale + (terms + 1) · 2⁻¹⁴⁹`.
pub fn element_bound(rel: f64, scale: f64, terms: usize) -> f64 {
    rel * scale + (terms as f64 + 1.0) * F32_TINY
}

/// What [`check_products`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyCheck {
    /// Largest |got − want| / bound over the checked elements (≤ 1: within the bound; ∞ for a
    /// non-finite result where the reference is finite).
    pub worst_ratio: f64,
    /// Largest |got − want| / scale (the relative error the reports print; 0 where equal).
    pub worst_scaled: f64,
    /// Elements over the bound.
    pub failures: usize,
    /// The first element over the bound.
    pub first_failure: Option<usize>,
    /// Elements whose f64 reference is not finite (not checked).
    pub non_finite_reference: usize,
}

impl AccuracyCheck {
    /// Every checked element within its bound.
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

/// Checks `got` against the f64 reference `want` with scales `scale` (same lengths; extra
/// elements of the longer slices are ignored): element `i` passes when
/// `|got[i] − want[i]| ≤ element_bound(rel, scale[i], terms)`; `terms` is the most products
/// summed into one element (the longest row's nonzeros).
pub fn check_products(
    got: &[f32],
    want: &[f64],
    scale: &[f64],
    rel: f64,
    terms: usize,
) -> AccuracyCheck {
    check_stored(got, want, scale, rel, terms, DType::F32)
}

/// [`check_products`] for a result stored in `stored` (`got` widened to f32): each bound gains
/// [`DType::underflow_step`], and an element that is ±∞ passes where its reference has the same
/// sign and, plus its bound, reaches [`DType::overflow_threshold`] (the cast's overflow).
pub fn check_stored(
    got: &[f32],
    want: &[f64],
    scale: &[f64],
    rel: f64,
    terms: usize,
    stored: DType,
) -> AccuracyCheck {
    let mut c = AccuracyCheck {
        worst_ratio: 0.0,
        worst_scaled: 0.0,
        failures: 0,
        first_failure: None,
        non_finite_reference: 0,
    };
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        if !w.is_finite() || !s.is_finite() {
            c.non_finite_reference += 1;
            continue;
        }
        let d = (g as f64 - w).abs();
        let bound = element_bound(rel, s, terms) + stored.underflow_step();
        let overflowed = g.is_infinite()
            && (g > 0.0) == (w > 0.0)
            && w.abs() + bound >= stored.overflow_threshold();
        let (ratio, scaled) = if overflowed {
            (0.0, 0.0)
        } else if !g.is_finite() {
            (f64::INFINITY, f64::INFINITY)
        } else if d == 0.0 {
            (0.0, 0.0)
        } else {
            let scaled = if s > 0.0 { d / s } else { f64::INFINITY };
            (d / bound, scaled)
        };
        c.worst_ratio = c.worst_ratio.max(ratio);
        c.worst_scaled = c.worst_scaled.max(scaled);
        if ratio > 1.0 {
            c.failures += 1;
            c.first_failure.get_or_insert(i);
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn subnormal_results_computed_exactly_pass() {
        // 3 · 2⁻¹⁴⁹ · 0.5: the exact product 1.5 · 2⁻¹⁴⁹ rounds (to even) to 2 · 2⁻¹⁴⁹ in f32.
        let a = 3.0 * F32_TINY as f32;
        let got = a * 0.5;
        let want = 3.0 * F32_TINY * 0.5;
        let scale = want.abs();
        assert!(got as f64 != want);
        // A relative bound alone fails it …
        assert!((got as f64 - want).abs() > 2f64.powi(-9) * scale);
        // … the underflow term passes it.
        let c = check_products(&[got], &[want], &[scale], 2f64.powi(-9), 1);
        assert!(c.passed(), "{c:?}");
        // A result off by more than the rounding of its terms still fails.
        let c = check_products(
            &[got + 4.0 * F32_TINY as f32],
            &[want],
            &[scale],
            2f64.powi(-9),
            1,
        );
        assert!(!c.passed());
        assert_eq!(c.first_failure, Some(0));
    }

    #[test]
    fn non_finite_references_are_counted_not_checked_and_non_finite_results_fail() {
        let c = check_products(
            &[f32::NAN, 1.0, f32::INFINITY, 2.0],
            &[f64::NAN, 1.0, 3.0, f64::INFINITY],
            &[1.0, 1.0, 3.0, f64::INFINITY],
            1e-3,
            4,
        );
        assert_eq!(c.non_finite_reference, 2);
        assert_eq!(c.failures, 1);
        assert_eq!(c.first_failure, Some(2));
        assert_eq!(c.worst_ratio, f64::INFINITY);
    }

    #[test]
    fn a_zero_scale_allows_only_the_underflow_term() {
        let c = check_products(&[0.0, 1e-30], &[0.0, 0.0], &[0.0, 0.0], 1e-3, 2);
        assert_eq!(c.failures, 1);
        assert_eq!(c.first_failure, Some(1));
    }

    #[test]
    fn stored_results_may_overflow_as_a_cast_and_round_below_the_normal_range() {
        let f16 = |v: f64| half::f16::from_f64(v).to_f32();
        let rel = DType::F16.scaled_error_bound(2f64.powi(-24));
        // 70000 (and 65520, the threshold) in f16 is +∞, as a cast gives it: passes.
        for w in [70000.0, 65520.0, -1e9] {
            let c = check_stored(&[f16(w)], &[w], &[w.abs()], rel, 1, DType::F16);
            assert!(c.passed(), "{w}: {c:?}");
        }
        // ∞ of the wrong sign, or where the reference is far below the threshold, fails.
        for (g, w) in [(f32::NEG_INFINITY, 70000.0), (f32::INFINITY, 60000.0)] {
            let c = check_stored(&[g], &[w], &[w], rel, 1, DType::F16);
            assert!(!c.passed(), "{g} for {w}: {c:?}");
        }
        // A result among f16's subnormals is a multiple of 2⁻²⁴: off by up to 2⁻²⁵ whatever
        // the relative bound says; the f32 check does not allow it, the f16 check does.
        let w = 1.4 * 2f64.powi(-24);
        assert_eq!(f16(w) as f64, 2f64.powi(-24));
        assert!(!check_products(&[f16(w)], &[w], &[w], rel, 1).passed());
        assert!(check_stored(&[f16(w)], &[w], &[w], rel, 1, DType::F16).passed());
        // … and no more than that.
        let c = check_stored(&[f16(3.0 * w)], &[w], &[w], rel, 1, DType::F16);
        assert!(!c.passed(), "{c:?}");
    }

    proptest! {
        /// Products of f32 values in f32 (one rounding) are within the bound at any magnitude,
        /// subnormal results included.
        #[test]
        fn one_rounded_product_is_within_the_bound(
            a in -1.0e-20f32..1.0e-20,
            b in -1.0e-20f32..1.0e-20,
        ) {
            let got = a * b;
            let want = a as f64 * b as f64;
            let c = check_products(&[got], &[want], &[want.abs()], 2f64.powi(-24), 1);
            prop_assert!(c.passed(), "{a} · {b}: {c:?}");
        }

        /// Sums of products (k terms, f32 accumulation) meet γ_k plus the underflow term.
        #[test]
        fn f32_dot_products_are_within_gamma_k(
            v in proptest::collection::vec((-1.0f32..1.0, -1.0f32..1.0, -60i32..60), 1..40),
        ) {
            let (mut acc, mut want, mut scale) = (0f32, 0f64, 0f64);
            for &(a, b, e) in &v {
                let a = a * 2f32.powi(e);
                let b = b * 2f32.powi(-e - 40);
                acc += a * b;
                want += a as f64 * b as f64;
                scale += (a as f64 * b as f64).abs();
            }
            let k = v.len() as f64 * 2f64.powi(-24);
            let c = check_products(&[acc], &[want], &[scale], k / (1.0 - k), v.len());
            prop_assert!(c.passed(), "{c:?}");
        }
    }
}
