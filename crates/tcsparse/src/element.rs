//! Element types of the dense operands: [`Element`] (sealed; `f32`, [`half::f16`],
//! [`half::bf16`]) and its run-time name [`DType`].
//!
//! Every product accumulates in f32 whatever the element type: B (and C where β ≠ 0) are widened
//! to f32 (exact: every f16 and bf16 value is an f32 value), the f32 product runs, and C is
//! rounded back to the element type by [`half`]'s conversion (round to nearest, ties to even; a
//! value beyond the type's range becomes ±∞ exactly as a cast would, NaN stays NaN). A matrix's
//! values are kept in f32 in every prepared layout: f16 or bf16 values are widened by
//! [`widen`] (exact) before the matrix is built.
//!
//! Accuracy: an element of C is off by at most the f32 product's bound plus the rounding of the
//! element type ([`DType::scaled_error_bound`]; 2⁻¹¹ relative for f16, 2⁻⁸ for bf16), and below
//! the type's normal range by half its smallest subnormal ([`DType::underflow_step`]);
//! [`DType::check_products`] checks a product against its f64 reference with that bound.

use std::fmt;
use std::str::FromStr;

pub use half::{bf16, f16};

use crate::Error;

mod sealed {
    /// Only this crate implements [`super::Element`].
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// An element type of B and C: `f32`, [`f16`](struct@f16) or [`bf16`] (sealed: no other type
/// implements it). Conversions are [`half`]'s.
pub trait Element:
    sealed::Sealed + Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// This type's name at run time.
    const DTYPE: DType;

    /// The value in f32 (exact for every element type).
    fn to_f32(self) -> f32;

    /// `v` rounded to this type: to nearest, ties to even; beyond the type's range ±∞ (as a
    /// cast); NaN stays NaN.
    fn from_f32(v: f32) -> Self;

    /// `values` as f32 where this type is f32 (no copy), else `None`.
    fn f32_slice(values: &[Self]) -> Option<&[f32]> {
        let _ = values;
        None
    }

    /// [`Element::f32_slice`] for a mutable slice.
    fn f32_slice_mut(values: &mut [Self]) -> Option<&mut [f32]> {
        let _ = values;
        None
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
    fn f32_slice(values: &[Self]) -> Option<&[f32]> {
        Some(values)
    }
    fn f32_slice_mut(values: &mut [Self]) -> Option<&mut [f32]> {
        Some(values)
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

/// `values` in f32 (exact): f16 or bf16 matrix values for
/// [`csr_from_parts`](crate::formats::csr::csr_from_parts) or
/// [`Prepared::update_values`](crate::Prepared::update_values).
///
/// ```
/// use tcsparse::element::{f16, widen};
/// let v = [f16::from_f32(0.1), f16::from_f32(-2.5)];
/// let a = tcsparse::formats::csr::csr_from_parts(2, 2, vec![0, 1, 2], vec![1, 0], widen(&v))?;
/// assert_eq!(a.data(), [f16::from_f32(0.1).to_f32(), -2.5]);
/// # Ok::<(), tcsparse::Error>(())
/// ```
pub fn widen<T: Element>(values: &[T]) -> Vec<f32> {
    values.iter().map(|&v| v.to_f32()).collect()
}

/// The element type of B and C, at run time: [`PrepareOptions::dtype`](crate::PrepareOptions::dtype),
/// the CLI's `--dtype`. Displayed and parsed as `f32`, `f16`, `bf16`.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DType {
    /// IEEE binary32 (the default).
    #[default]
    F32,
    /// IEEE binary16 ([`f16`](struct@f16)): 11 significant bits, largest finite 65504.
    F16,
    /// bfloat16 ([`bf16`]): 8 significant bits, f32's exponent range.
    BF16,
}

impl DType {
    /// Every element type.
    pub const ALL: [DType; 3] = [Self::F32, Self::F16, Self::BF16];

    /// The name: `f32`, `f16`, `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
        }
    }

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// Relative error of rounding an f32 result to this type (its unit roundoff): 2⁻¹¹ (f16),
    /// 2⁻⁸ (bf16), 0 for f32 (the product's own bound covers its rounding).
    pub fn storage_rounding(self) -> f64 {
        match self {
            DType::F32 => 0.0,
            DType::F16 => 2f64.powi(-11),
            DType::BF16 => 2f64.powi(-8),
        }
    }

    /// Absolute error of rounding a result below this type's normal range: half its smallest
    /// subnormal, 2⁻²⁵ (f16), 2⁻¹³⁴ (bf16); 0 for f32 (the check's own underflow term,
    /// [`crate::accuracy`], covers it).
    pub fn underflow_step(self) -> f64 {
        match self {
            DType::F32 => 0.0,
            DType::F16 => 2f64.powi(-25),
            DType::BF16 => 2f64.powi(-134),
        }
    }

    /// The smallest magnitude that rounds to ±∞ in this type: 65520 (f16), (2 − 2⁻⁸)·2¹²⁷
    /// (bf16), (2 − 2⁻²⁴)·2¹²⁷ (f32).
    pub fn overflow_threshold(self) -> f64 {
        match self {
            DType::F32 => (2.0 - 2f64.powi(-24)) * 2f64.powi(127),
            DType::F16 => 65520.0,
            DType::BF16 => (2.0 - 2f64.powi(-8)) * 2f64.powi(127),
        }
    }

    /// SpMM's bound on `|C − C_exact| / (|α|·|A|·|B| + |β|·|C₀|)` per element with B and C of
    /// this type, when the f32 product's bound is `product` ([`Precision::scaled_error_bound`](crate::Precision::scaled_error_bound)):
    /// `product + u·(1 + product)`, `u` = [`DType::storage_rounding`] (the f32 result is within
    /// `(1 + product)` of the scale, and rounding it to this type adds `u` of it).
    pub fn scaled_error_bound(self, product: f64) -> f64 {
        product + self.storage_rounding() * (1.0 + product)
    }

    /// The product's bound (before C is rounded to the type) of the GPU's f16 / bf16 row-tile
    /// kernels, for rows of at most `k` nonzeros, relative to |A|·|B|: A's values are rounded to this type
    /// when the matrix is uploaded (`u` = [`DType::storage_rounding`]; in f16 after a division by
    /// the power of two that puts the largest just below 2¹⁵, so values down to 2⁻²⁹ of the
    /// largest round relatively), B is in it already, the
    /// products are exact in f32 (11 by 11 or 8 by 8 significant bits) and summed in f32 with
    /// γ_2k (k additions per element, counted twice: tensor-core accumulation may truncate):
    /// `u + γ_2k·(1 + u)`. For f32 (no rounding of A) it is γ_2k.
    pub fn rounded_a_bound(self, k: usize) -> f64 {
        let u = self.storage_rounding();
        u + crate::precision::gamma(2 * k.max(1)) * (1.0 + u)
    }

    /// The bound of the GPU's f16 / bf16 row-tile kernels as a formula, for reports: their
    /// product's bound ([`DType::rounded_a_bound`]) in place of the precision's in
    /// [`DType::bound_text`] (the CSR kernel in f16 / bf16 keeps A in f32: `bound_text`).
    pub fn gpu_bound_text(self) -> &'static str {
        match self {
            DType::F32 => "B and C in f32: the precision's bound",
            DType::F16 => {
                "A, B and C in f16 (A rounded on upload), f32 accumulation, C rounded to f16 \
                 (beyond ±65504: ±∞): p + 2⁻¹¹·(1 + p)·(|A|·|B|) elementwise, p = 2⁻¹¹ + \
                 γ_2k·(1 + 2⁻¹¹), k = nonzeros of the row"
            }
            DType::BF16 => {
                "A, B and C in bf16 (A rounded on upload), f32 accumulation, C rounded to bf16: \
                 p + 2⁻⁸·(1 + p)·(|A|·|B|) elementwise, p = 2⁻⁸ + γ_2k·(1 + 2⁻⁸), k = nonzeros \
                 of the row"
            }
        }
    }

    /// What the type does to a product, with its bound as a formula, for reports: what rounding
    /// C to this type adds to the kernel's bound ([`Precision::bound_text`](crate::Precision::bound_text)).
    pub fn bound_text(self) -> &'static str {
        match self {
            DType::F32 => "B and C in f32, f32 accumulation: the precision's bound",
            DType::F16 => {
                "B and C in f16, f32 accumulation, C rounded to f16 (beyond ±65504: ±∞): the \
                 precision's bound + 2⁻¹¹·(1 + bound)·(|A|·|B|) elementwise"
            }
            DType::BF16 => {
                "B and C in bf16, f32 accumulation, C rounded to bf16: the precision's bound + \
                 2⁻⁸·(1 + bound)·(|A|·|B|) elementwise"
            }
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Parses `f32`, `f16`, `bf16` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(Self::F32),
            "f16" => Ok(Self::F16),
            "bf16" => Ok(Self::BF16),
            _ => Err(Error::InvalidArgs(format!(
                "element type {s:?}: expected f32, f16 or bf16"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Precision;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for d in DType::ALL {
            assert_eq!(d.to_string().parse::<DType>().unwrap(), d);
            assert_eq!(d.name().to_uppercase().parse::<DType>().unwrap(), d);
        }
        assert_eq!(
            DType::ALL.map(DType::name),
            ["f32", "f16", "bf16"],
            "the CLI's and the JSON's names"
        );
        let e = "f64".parse::<DType>().unwrap_err();
        assert!(matches!(e, Error::InvalidArgs(_)), "{e}");
        assert!(e.to_string().contains("f32, f16 or bf16"), "{e}");
    }

    /// The GPU's f16 / bf16 product bound: the type's rounding of A plus f32 accumulation
    /// counted twice; f16's stays below TF32's bound for rows up to thousands of nonzeros, bf16's
    /// is above it (8 significant bits).
    #[test]
    fn rounded_a_bound_adds_the_types_rounding_to_f32_accumulation() {
        for k in [1usize, 16, 1000] {
            let g = crate::precision::gamma(2 * k);
            assert_eq!(DType::F32.rounded_a_bound(k), g);
            assert_eq!(
                DType::F16.rounded_a_bound(k),
                2f64.powi(-11) + g * (1.0 + 2f64.powi(-11))
            );
            assert_eq!(
                DType::BF16.rounded_a_bound(k),
                2f64.powi(-8) + g * (1.0 + 2f64.powi(-8))
            );
            assert!(DType::F16.rounded_a_bound(k) < Precision::Tf32.scaled_error_bound(k));
            assert!(DType::BF16.rounded_a_bound(k) > Precision::Tf32.scaled_error_bound(k));
        }
        assert!(DType::F16.gpu_bound_text().contains("p = 2⁻¹¹ + γ_2k"));
        assert!(DType::BF16.gpu_bound_text().contains("p = 2⁻⁸ + γ_2k"));
    }

    #[test]
    fn each_type_names_itself() {
        assert_eq!(<f32 as Element>::DTYPE, DType::F32);
        assert_eq!(<f16 as Element>::DTYPE, DType::F16);
        assert_eq!(<bf16 as Element>::DTYPE, DType::BF16);
        assert_eq!(
            DType::ALL.map(DType::size_bytes),
            [size_of::<f32>(), size_of::<f16>(), size_of::<bf16>()]
        );
    }

    /// Overflow is ±∞ as a cast; NaN stays NaN; the thresholds are where the cast starts giving ∞.
    #[test]
    fn rounding_overflows_to_infinity_at_the_threshold_and_keeps_nan() {
        assert_eq!(<f16 as Element>::from_f32(65504.0).to_f32(), 65504.0);
        assert_eq!(<f16 as Element>::from_f32(65519.996), f16::MAX);
        assert_eq!(<f16 as Element>::from_f32(65520.0), f16::INFINITY);
        assert_eq!(<f16 as Element>::from_f32(-1e6), f16::NEG_INFINITY);
        assert_eq!(<bf16 as Element>::from_f32(f32::MAX), bf16::INFINITY);
        assert_eq!(<bf16 as Element>::from_f32(-f32::MAX), bf16::NEG_INFINITY);
        assert!(<f16 as Element>::from_f32(f32::NAN).is_nan());
        assert!(<bf16 as Element>::from_f32(f32::NAN).is_nan());
        assert!(<f32 as Element>::from_f32(f32::NAN).is_nan());
        for d in [DType::F16, DType::BF16] {
            let t = d.overflow_threshold() as f32;
            let (below, at) = (f32::from_bits(t.to_bits() - 1), t);
            let round = |v: f32| match d {
                DType::F16 => <f16 as Element>::from_f32(v).to_f32(),
                _ => <bf16 as Element>::from_f32(v).to_f32(),
            };
            assert!(round(below).is_finite(), "{d}: {below}");
            assert_eq!(round(at), f32::INFINITY, "{d}: {at}");
        }
    }

    proptest! {
        /// Widening is exact and rounding back gives the same value; rounding an f32 is within
        /// the type's unit roundoff (normal range) or half its smallest subnormal.
        #[test]
        fn widening_is_exact_and_rounding_within_the_unit_roundoff(bits in any::<u16>(), v in -6.0e4f32..6.0e4) {
            let h = f16::from_bits(bits);
            let b = bf16::from_bits(bits);
            if !h.is_nan() {
                prop_assert_eq!(<f16 as Element>::from_f32(Element::to_f32(h)), h);
            }
            if !b.is_nan() {
                prop_assert_eq!(<bf16 as Element>::from_f32(Element::to_f32(b)), b);
            }
            for d in [DType::F16, DType::BF16] {
                let r = match d {
                    DType::F16 => <f16 as Element>::from_f32(v).to_f32(),
                    _ => <bf16 as Element>::from_f32(v).to_f32(),
                } as f64;
                let err = (r - v as f64).abs();
                prop_assert!(
                    err <= d.storage_rounding() * (v as f64).abs() + d.underflow_step(),
                    "{} {} → {}", d, v, r
                );
            }
        }
    }
}
