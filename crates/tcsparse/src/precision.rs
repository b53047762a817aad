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
/// | `Tf32x3` (default of SpAMM) | CPU path (exact f32); GPU — | — | split TF32 |
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
    /// default).
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
    /// nonzeros: 2·2⁻¹⁰ for 11-bit inputs (TF32, f16), γ_k for f32-level rounding (F32, 3×TF32).
    pub fn scaled_error_bound(self, k: usize) -> f64 {
        match self {
            Precision::Tf32 | Precision::F16 => 2.0 * 2f64.powi(-10),
            Precision::F32 | Precision::Tf32x3 => {
                let ku = k.max(1) as f64 * 2f64.powi(-24);
                if ku >= 1.0 {
                    f64::INFINITY
                } else {
                    ku / (1.0 - ku)
                }
            }
        }
    }

    /// Checks a product against its f64 reference with this precision's bound for rows of at
    /// most `k` nonzeros, plus the underflow term ([`crate::accuracy`]: the check SpMV uses too).
    pub fn check_products(
        self,
        got: &[f32],
        want: &[f64],
        scale: &[f64],
        k: usize,
    ) -> crate::accuracy::AccuracyCheck {
        crate::accuracy::check_products(got, want, scale, self.scaled_error_bound(k), k)
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
            Precision::F32 | Precision::Tf32x3 => {
                "|C − C_exact| ≤ γ_k·(|A|·|B|) elementwise, γ_k = k·2⁻²⁴/(1 − k·2⁻²⁴), k = nonzeros of the row (f32 rounding)"
            }
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
