//! [`Precision`]: the arithmetic a kernel may use, one choice for every operation.

/// Arithmetic a kernel may use: one choice for every operation ([`PrepareOptions::precision`](crate::PrepareOptions::precision)
/// for SpMM, [`SpmvOptions::precision`](crate::SpmvOptions::precision),
/// [`SpammOptions::precision`](crate::SpammOptions::precision)). Each operation takes the
/// precisions its kernels have and refuses the others at preparation
/// ([`Error::InvalidArgs`](crate::Error::InvalidArgs); SpMM:
/// [`Error::Unsupported`](crate::Error::Unsupported)):
///
/// | precision | SpMM | SpMV | SpAMM |
/// |---|---|---|---|
/// | `F16` | — (f16 operands: [`DType::F16`](crate::DType)) | f16 tiles allowed | f16 operands |
/// | `Tf32` (default of SpMM, SpMV) | yes | yes | yes |
/// | `Tf32x3` (default of SpAMM) | split TF32 (GPU: row-tile kernels; CPU path: exact f32) | — | split TF32 |
/// | `F32` | yes | yes | yes |
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// f16 inputs (11 significant bits, as TF32), f32 accumulation; scaled so nothing overflows
    /// (SpMV's tiles) or the operands as given (SpAMM). An explicit opt-in.
    F16,
    /// TF32 tensor-core inputs (10 explicit mantissa bits), f32 accumulation: each product term is
    /// off by at most about 2⁻¹⁰ of |a|·|b|, so an element of C by 2·2⁻¹⁰·(|A|·|B|) (relative
    /// error typically ~2e-4). The default of SpMM and SpMV: any kernel may run, tensor-core
    /// kernels included.
    #[default]
    Tf32,
    /// Split TF32 (a = a_hi + a_lo, three products): f32-level accuracy on tensor cores (SpAMM's
    /// default; SpMM's 3×TF32 row-tile kernels). An element of C is off by at most
    /// (2⁻²⁰ + γ_6k)·(|A|·|B|) ([`Precision::scaled_error_bound`]).
    Tf32x3,
    /// f32 rounding throughout (cuSPARSE's accuracy, relative error ~1e-7; an element of C is off
    /// by at most γ_k·(|A|·|B|), γ_k = k·2⁻²⁴/(1 − k·2⁻²⁴), k = nonzeros of its row): only the
    /// f32 kernels run (cuSPARSE, the CUDA-core kernels, the CPU path).
    F32,
}

impl Precision {
    /// Every precision.
    pub const ALL: [Precision; 4] = [Self::F16, Self::Tf32, Self::Tf32x3, Self::F32];

    /// Short name: `F16`, `TF32`, `3xTF32`, `F32`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F16 => "F16",
            Precision::Tf32 => "TF32",
            Precision::Tf32x3 => "3xTF32",
            Precision::F32 => "F32",
        }
    }

    /// Parses `f16`, `tf32`, `3xtf32` (or `tf32x3`), `f32`, case-insensitive.
    pub fn parse(s: &str) -> Result<Self, crate::Error> {
        match s.to_ascii_lowercase().as_str() {
            "f16" => Ok(Self::F16),
            "tf32" => Ok(Self::Tf32),
            "3xtf32" | "tf32x3" => Ok(Self::Tf32x3),
            "f32" => Ok(Self::F32),
            _ => Err(crate::Error::InvalidArgs(format!(
                "precision {s:?}: expected f16, tf32, 3xtf32 or f32"
            ))),
        }
    }

    /// SpMM's bound on `|C − C_exact| / (|A|·|B|)` per element, for rows of at most `k`
    /// nonzeros: 2·2⁻¹⁰ for 11-bit inputs (TF32, f16), γ_k for f32 rounding (F32), and
    /// 2⁻²⁰ + γ_6k for 3×TF32.
    ///
    /// 3×TF32: x = big + small + e with big = tf32(x), small = tf32(x − big), |e| ≤ 2⁻²²·|x|
    /// (each rounding to 11 significant bits is within 2⁻¹¹); a·b less the three products
    /// computed (big·big, big·small, small·big) is small·small + e_a·b + (big + small)·e_b, at
    /// most 3·2⁻²²·(1 + 2⁻¹⁰)·|a|·|b| < 2⁻²⁰·|a|·|b|. The products are exact in the MMA (11 by
    /// 11 bits) and each nonzero's three are summed in f32: 3k additions per element, counted
    /// twice (tensor-core accumulation may truncate instead of rounding to nearest), γ_6k.
    pub fn scaled_error_bound(self, k: usize) -> f64 {
        match self {
            Precision::Tf32 | Precision::F16 => 2.0 * 2f64.powi(-10),
            Precision::F32 => gamma(k),
            Precision::Tf32x3 => 2f64.powi(-20) + gamma(6 * k.max(1)),
        }
    }

    /// SpMV's element-wise error bound relative to |α|·|A|·|X| (+ |β|·|y|): 2⁻⁹ for 11-bit A and
    /// X (f16, TF32; f32 sums), 2⁻¹⁷ for f32 products and sums (cuSPARSE or the CUDA-core walk).
    pub fn spmv_bound(self) -> f64 {
        match self {
            Self::F16 | Self::Tf32 => 2f64.powi(-9),
            Self::F32 | Self::Tf32x3 => 2f64.powi(-17),
        }
    }

    /// The SpMM bound as a formula, for reports.
    pub fn bound_text(self) -> &'static str {
        match self {
            Precision::Tf32 | Precision::F16 => {
                "|C − C_exact| ≤ 2·2⁻¹⁰·(|A|·|B|) elementwise (TF32 inputs, f32 accumulation)"
            }
            Precision::F32 => {
                "|C − C_exact| ≤ γ_k·(|A|·|B|) elementwise, γ_k = k·2⁻²⁴/(1 − k·2⁻²⁴), k = nonzeros of the row (f32 rounding)"
            }
            Precision::Tf32x3 => {
                "|C − C_exact| ≤ (2⁻²⁰ + γ_6k)·(|A|·|B|) elementwise, γ_6k = 6k·2⁻²⁴/(1 − 6k·2⁻²⁴), k = nonzeros of the row (split TF32 inputs, f32 accumulation)"
            }
        }
    }
}

/// γ_k = k·2⁻²⁴ / (1 − k·2⁻²⁴) (k at least 1), ∞ where k·2⁻²⁴ ≥ 1: the bound of k f32 roundings.
pub(crate) fn gamma(k: usize) -> f64 {
    let ku = k.max(1) as f64 * 2f64.powi(-24);
    if ku >= 1.0 {
        f64::INFINITY
    } else {
        ku / (1.0 - ku)
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tcsparse_gpu::spmm::to_tf32;

    /// x as the 3×TF32 kernels split it (`split_tf32` in kernels-ptx/tc_common.cuh): big =
    /// tf32(x), small = tf32(x − big), x − big exact in f32.
    fn split(x: f32) -> (f64, f64) {
        let big = to_tf32(x);
        (big as f64, to_tf32(x - big) as f64)
    }

    proptest! {
        /// One product's error in 3×TF32 (the three products the kernels compute, exact in f64
        /// here as in the MMA) is within the derivation's 3·2⁻²²·(1 + 2⁻¹⁰)·|a|·|b| < 2⁻²⁰·|a|·|b|.
        #[test]
        fn split_products_are_within_the_derived_term(
            a in prop_oneof![-1.0e6f32..-1.0e-6, 1.0e-6f32..1.0e6],
            b in prop_oneof![-1.0e6f32..-1.0e-6, 1.0e-6f32..1.0e6],
        ) {
            let ((ab, as_), (bb, bs)) = (split(a), split(b));
            let got = as_ * bb + ab * bs + ab * bb;
            let exact = a as f64 * b as f64;
            let term = 3.0 * 2f64.powi(-22) * (1.0 + 2f64.powi(-10)) * exact.abs();
            prop_assert!((got - exact).abs() <= term, "{a} * {b}: {got} vs {exact}");
            prop_assert!(term < 2f64.powi(-20) * exact.abs());
        }
    }

    /// The 3×TF32 bound is the derivation's terms, above f32's and below TF32's; γ grows
    /// with k and is ∞ where k·2⁻²⁴ reaches 1.
    #[test]
    fn split_tf32_bound_lies_between_f32_and_tf32() {
        for k in [1usize, 8, 100, 10_000] {
            let x3 = Precision::Tf32x3.scaled_error_bound(k);
            assert_eq!(x3, 2f64.powi(-20) + gamma(6 * k));
            assert!(x3 > Precision::F32.scaled_error_bound(k));
            if k <= 1000 {
                assert!(x3 < Precision::Tf32.scaled_error_bound(k));
            }
            // The three dropped terms of one product, each within 2⁻²²·(1 + 2⁻¹⁰).
            assert!(3.0 * 2f64.powi(-22) * (1.0 + 2f64.powi(-10)) < 2f64.powi(-20));
        }
        assert!(gamma(8) < gamma(9));
        assert_eq!(gamma(0), gamma(1));
        assert_eq!(gamma(1 << 24), f64::INFINITY);
        assert!(Precision::Tf32x3.bound_text().contains("2⁻²⁰"));
    }
}
