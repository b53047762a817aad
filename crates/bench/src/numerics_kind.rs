//! [`Numerics`]: the element type or precision of an SpMM run besides the default (f32 operands,
//! TF32 tensor cores), as a case and a result file record it (crate::numerics renders its
//! summary lines).

use serde::{Deserialize, Serialize};

/// The element type or precision of a run other than f32/TF32.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Numerics {
    /// A, B and C in IEEE binary16, f32 accumulation (`--dtype f16`).
    #[serde(rename = "f16")]
    F16,
    /// A, B and C in bfloat16, f32 accumulation (`--dtype bf16`).
    #[serde(rename = "bf16")]
    Bf16,
    /// f32 operands, 3×TF32 split products on tensor cores (`--precision 3xtf32`).
    #[serde(rename = "3xtf32")]
    Tf32x3,
}

impl Numerics {
    /// The name in file names, backend names and summary lines: `f16`, `bf16`, `3xtf32`.
    pub fn name(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Tf32x3 => "3xtf32",
        }
    }

    /// Our tuned engine's backend name in this run: `tcsparse-f16`, `tcsparse-bf16`,
    /// `tcsparse-3xtf32`.
    pub fn headline(self) -> &'static str {
        match self {
            Self::F16 => "tcsparse-f16",
            Self::Bf16 => "tcsparse-bf16",
            Self::Tf32x3 => "tcsparse-3xtf32",
        }
    }

    /// cuSPARSE in the same element type (`cusparse-f16`, `cusparse-bf16`), when it differs from
    /// the f32 baseline (`None` for 3×TF32, whose operands are f32).
    pub fn same_type_baseline(self) -> Option<&'static str> {
        match self {
            Self::F16 => Some("cusparse-f16"),
            Self::Bf16 => Some("cusparse-bf16"),
            Self::Tf32x3 => None,
        }
    }

    /// The element type of B and C (and of A's values on the device).
    pub fn dtype(self) -> tcsparse::DType {
        match self {
            Self::F16 => tcsparse::DType::F16,
            Self::Bf16 => tcsparse::DType::BF16,
            Self::Tf32x3 => tcsparse::DType::F32,
        }
    }

    /// The precision the engine is prepared with.
    pub fn precision(self) -> tcsparse::Precision {
        match self {
            Self::F16 | Self::Bf16 => tcsparse::Precision::Tf32,
            Self::Tf32x3 => tcsparse::Precision::Tf32x3,
        }
    }

    /// The bound a product of this run must meet, as a formula (the report's header): in f16 /
    /// bf16 that of the kernel the case kept (`Prepared::bound_text`), the row-tile kernels' or
    /// the CSR kernel's.
    pub fn bound_text(self) -> String {
        match self {
            Self::F16 | Self::Bf16 => {
                let d = self.dtype();
                format!(
                    "row-tile kernels: {}; CSR kernel: A in f32, {}, the precision's bound \
                     f32's (γ_k, k = nonzeros of the row)",
                    d.gpu_bound_text(),
                    d.bound_text()
                )
            }
            Self::Tf32x3 => tcsparse::Precision::Tf32x3.bound_text().to_string(),
        }
    }

    /// The bound on |C − C_ref| / (|A|·|B|) per element for rows of at most `k` nonzeros:
    /// [`tcsparse::DType::rounded_a_bound`] plus the rounding of C to the type
    /// ([`tcsparse::DType::scaled_error_bound`]) for f16 / bf16, the 3×TF32 bound
    /// ([`tcsparse::Precision::scaled_error_bound`]) for 3×TF32.
    pub fn scaled_bound(self, k: usize) -> f64 {
        match self {
            Self::F16 | Self::Bf16 => {
                let d = self.dtype();
                d.scaled_error_bound(d.rounded_a_bound(k))
            }
            Self::Tf32x3 => tcsparse::Precision::Tf32x3.scaled_error_bound(k),
        }
    }

    /// The variant of `--dtype` and `--precision` (as the CLI `tcsparse spmm` spells them):
    /// `None` for the default f32/TF32 run; an error naming both flags for a combination the
    /// bench does not measure.
    pub fn from_flags(dtype: &str, precision: &str) -> Result<Option<Self>, String> {
        let d: tcsparse::DType = dtype.parse().map_err(|e| format!("--dtype: {e}"))?;
        let p = tcsparse::Precision::parse(precision).map_err(|e| format!("--precision: {e}"))?;
        use tcsparse::{DType, Precision};
        match (d, p) {
            (DType::F32, Precision::Tf32) => Ok(None),
            (DType::F32, Precision::Tf32x3) => Ok(Some(Self::Tf32x3)),
            (DType::F16, Precision::Tf32) => Ok(Some(Self::F16)),
            (DType::BF16, Precision::Tf32) => Ok(Some(Self::Bf16)),
            (DType::F16 | DType::BF16, _) => Err(format!(
                "--dtype {d} with --precision {precision}: the {d} bench runs the {d} kernels \
                 (f32 accumulation, the default --precision tf32); --precision 3xtf32 splits f32 \
                 operands (--dtype f32): choose one"
            )),
            (DType::F32, Precision::F32) => Err(
                "--precision f32: the bench measures tf32 (the f32 results, spmm-<device>) and \
                 3xtf32 (f32-grade accuracy on tensor cores, against cuSPARSE f32); f32 rounding \
                 throughout is what the cuSPARSE row of either already measures"
                    .to_string(),
            ),
            (_, p) => Err(format!(
                "--dtype {d} --precision {}: not a combination the bench measures (tf32, 3xtf32 \
                 with f32; f16, bf16 with tf32)",
                p.name()
            )),
        }
    }
}

impl std::fmt::Display for Numerics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
