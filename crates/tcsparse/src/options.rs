//! What the caller asks [`Engine::prepare_spmm`](crate::Engine::prepare_spmm)(crate::Engine::prepare_spmm) for: [`PrepareOptions`] and
//! the choices inside it (reordering, load balance, kernel).

use tcsparse_gpu::spmm::row_tile::RowTileKernel;
use tcsparse_reorder::{Mode, Permutation};

/// Arithmetic a kernel may use: one choice for every operation ([`PrepareOptions::precision`]
/// for SpMM, [`SpmvOptions::precision`](crate::SpmvOptions::precision),
/// [`SpammOptions::precision`](crate::SpammOptions::precision)). Each operation takes the
/// precisions its kernels have and refuses the others at preparation
/// ([`Error::InvalidArgs`](crate::Error::InvalidArgs)):
///
/// | precision | SpMM | SpMV | SpAMM |
/// |---|---|---|---|
/// | `F16` | — | f16 tiles allowed | f16 operands |
/// | `Tf32` (default of SpMM, SpMV) | yes | yes | yes |
/// | `Tf32x3` (default of SpAMM) | — | — | split TF32 |
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

    /// Checks an SpMV against its f64 reference with [`Precision::spmv_bound`] plus the
    /// underflow term for rows of at most `k` nonzeros.
    pub fn check_spmv(
        self,
        got: &[f32],
        want: &[f64],
        scale: &[f64],
        k: usize,
    ) -> crate::accuracy::AccuracyCheck {
        crate::accuracy::check_products(got, want, scale, self.spmv_bound(), k)
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

/// Row order of B and C in [`Prepared::spmm_device`](crate::Prepared::spmm_device), chosen in
/// [`PrepareOptions::device_order`]. The original order is the default, as for every host
/// product; the prepared order is asked for.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RowOrder {
    /// The original order, as for [`Prepared::spmm`](crate::Prepared::spmm) (the default): when
    /// the matrix was reordered, the call gathers B's and C's rows into prepared order on the
    /// device, multiplies and scatters C back (two or three extra row-permutation launches and
    /// scratch buffers of B's and C's size, kept between calls).
    #[default]
    Original,
    /// The prepared (reordered) order: no extra work; the caller permutes with
    /// [`Prepared::permutation`](crate::Prepared::permutation) where needed. The benchmarks' hot
    /// path.
    Prepared,
}

/// Reordering step of [`PrepareOptions`].
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ReorderChoice {
    /// Keep the input order.
    None,
    /// Data-affinity reordering, kept only when it raises MeanNNZTC.
    #[default]
    Auto,
    /// A named method of `tcsparse_reorder::by_name` (`affinity`, `rabbit`, `lsh`, `degree`, `rcm`,
    /// `none`), always applied.
    Method(String),
    /// This permutation (`perm[new] = old`, e.g. computed once by an earlier preparation and
    /// reused): applied like `Auto`'s choice, so CSR kernels still run on the original order.
    Given(Permutation),
}

/// Load balancing of the Acc-SpMM schedule.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Balance {
    /// The planner decides (IBD plus the hub check).
    #[default]
    Auto,
    /// Always the Eq. 4 packed schedule.
    On,
    /// Always one thread block per row window.
    Off,
    /// This many consecutive row windows per thread block, nothing split: neighbouring windows
    /// of banded or clustered matrices gather mostly the same B rows, which one thread block then
    /// finds in L1 instead of L2 (0 is treated as 1).
    Packed(u32),
    /// Experimental: [`Balance::Packed`] run by the kernel variant with a per-warp cache of
    /// `cache_rows` B rows in shared memory (a power of two from 8 to 1024), so the rows
    /// neighbouring windows share are read from shared memory. Measured slower than
    /// [`Balance::Packed`] on every matrix so far (docs/kernels/acc-spmm.md, v4). Larger caches
    /// need more shared memory per thread block: a combination the device cannot launch at the
    /// product's N is an error at `spmm` time (a tuned preparation keeps cuSPARSE instead).
    PackedCached {
        /// Consecutive row windows per thread block (0 is treated as 1).
        windows: u32,
        /// B rows cached per warp (power of two, 8..=1024).
        cache_rows: u32,
    },
    /// CUDA-core CSR kernel only ([`KernelRequest::Csr`]): warp items of at most this many
    /// nonzeros (longer rows are split across warps; 0 is treated as 1). A tuned preparation
    /// tries [`CSR_TUNED_CHUNKS`](crate::CSR_TUNED_CHUNKS); without this, a requested CSR kernel uses
    /// `tcsparse_gpu::csr_spmm::DEFAULT_CHUNK_NNZ`.
    NnzPerWarp(u32),
}

/// Which kernel [`Engine::prepare_spmm`](crate::Engine::prepare_spmm) sets up.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KernelRequest {
    /// The planner decides (Acc-SpMM where it is predicted faster, cuSPARSE otherwise).
    #[default]
    Auto,
    /// Acc-SpMM on BitTCF.
    AccSpmm,
    /// Acc-SpMM on BitTCF run by the paper's own pipeline (block metadata by `cp.async` into a
    /// shared-memory double buffer, B rows by `ld.global.ca`, C by `st.global.wt`) instead of ours
    /// (register metadata, read-only B loads): the ablation of docs/results. Schedules as
    /// [`KernelRequest::AccSpmm`] (`Balance::PackedCached` runs as `Balance::Packed`).
    AccSpmmPaper,
    /// cuSPARSE SpMM on CSR, at its default algorithm ([`SpmmAlg::Default`](crate::SpmmAlg); a
    /// tuned [`KernelRequest::Auto`] preparation times every CSR algorithm and keeps the fastest).
    Cusparse,
    /// The CUDA-core CSR kernel.
    Csr,
    /// A row-tile tensor-core kernel (TC16, TC16d, TC32, TC32d). `Balance::Packed(k)` runs it
    /// with k windows per thread block, `Balance::On` splits heavy windows at
    /// [`ROW_TILE_SPLIT_BLOCKS`](crate::ROW_TILE_SPLIT_BLOCKS) blocks per thread block, anything else packs 4 windows per
    /// thread block.
    RowTile(RowTileKernel),
    /// cuTeSpMM's HRPB kernel (m16n8k8 on brick pairs): `Balance::Off` keeps every row panel
    /// whole, anything else splits heavy panels wave-aware from the device.
    Hrpb,
}

/// Options of [`Engine::prepare_spmm`](crate::Engine::prepare_spmm). Build them with
/// [`PrepareOptions::builder`] or by changing the fields of [`PrepareOptions::default`].
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrepareOptions {
    /// Reordering step.
    pub reorder: ReorderChoice,
    /// Symmetric (`P·A·Pᵀ`, square only) or row-only (`P·A`); `None` picks symmetric for square
    /// matrices.
    pub mode: Option<Mode>,
    /// Load balancing of the Acc-SpMM schedule.
    pub balance: Balance,
    /// Kernel choice.
    pub kernel: KernelRequest,
    /// Seed of randomized reorderings.
    pub seed: u64,
    /// The N (columns of B) the plan (and tuning) is made for; products may use any N.
    pub n: usize,
    /// On the GPU with [`KernelRequest::Auto`]: time the candidates (cuSPARSE in the original
    /// order at each of its CSR algorithms, the fastest the bound the others must beat; Acc-SpMM under the planner's and the other schedules, unless `balance` fixes one)
    /// with a random B of `n` columns and keep the fastest, instead of trusting the planner's
    /// model alone. Costs a few dozen launches at preparation.
    pub tune: bool,
    /// Arithmetic the kernel may use: [`Precision::Tf32`] (default: tensor-core kernels allowed)
    /// or [`Precision::F32`] (only kernels with f32 rounding; a requested tensor-core kernel is
    /// then an error).
    pub precision: Precision,
    /// Row order of B and C in [`Prepared::spmm_device`](crate::Prepared::spmm_device).
    pub device_order: RowOrder,
    /// Prepared-plan cache: a directory where the permutation and the kernel decision of a
    /// preparation are stored, keyed by the matrix's sparsity pattern (its values may change:
    /// nothing stored depends on them), these options, N, the device and the library version; a
    /// later preparation with the same key loads them instead of reordering and tuning again. A corrupt or stale entry is rebuilt (with a warning), never
    /// trusted. `None`: no cache. The CLI sets it from `TCSPARSE_CACHE_DIR`.
    pub cache_dir: Option<std::path::PathBuf>,
}

impl Default for PrepareOptions {
    fn default() -> Self {
        Self {
            reorder: ReorderChoice::Auto,
            mode: None,
            balance: Balance::Auto,
            kernel: KernelRequest::Auto,
            seed: 0,
            n: 128,
            tune: true,
            precision: Precision::Tf32,
            device_order: RowOrder::Original,
            cache_dir: None,
        }
    }
}

impl PrepareOptions {
    /// A builder starting from [`PrepareOptions::default`].
    pub fn builder() -> PrepareOptionsBuilder {
        PrepareOptionsBuilder(Self::default())
    }
}

/// Builds [`PrepareOptions`] field by field (the struct is `#[non_exhaustive]`, so other crates
/// cannot write it as a literal):
///
/// ```
/// use tcsparse::{KernelRequest, PrepareOptions, Precision};
/// let opts = PrepareOptions::builder()
///     .kernel(KernelRequest::Auto)
///     .precision(Precision::F32)
///     .n(64)
///     .build();
/// assert_eq!(opts.n, 64);
/// assert_eq!(opts.precision, Precision::F32);
/// ```
#[derive(Clone, Debug)]
pub struct PrepareOptionsBuilder(PrepareOptions);

impl PrepareOptionsBuilder {
    /// Sets [`PrepareOptions::reorder`].
    pub fn reorder(mut self, reorder: ReorderChoice) -> Self {
        self.0.reorder = reorder;
        self
    }
    /// Sets [`PrepareOptions::mode`].
    pub fn mode(mut self, mode: Option<Mode>) -> Self {
        self.0.mode = mode;
        self
    }
    /// Sets [`PrepareOptions::balance`].
    pub fn balance(mut self, balance: Balance) -> Self {
        self.0.balance = balance;
        self
    }
    /// Sets [`PrepareOptions::kernel`].
    pub fn kernel(mut self, kernel: KernelRequest) -> Self {
        self.0.kernel = kernel;
        self
    }
    /// Sets [`PrepareOptions::seed`].
    pub fn seed(mut self, seed: u64) -> Self {
        self.0.seed = seed;
        self
    }
    /// Sets [`PrepareOptions::n`].
    pub fn n(mut self, n: usize) -> Self {
        self.0.n = n;
        self
    }
    /// Sets [`PrepareOptions::tune`].
    pub fn tune(mut self, tune: bool) -> Self {
        self.0.tune = tune;
        self
    }
    /// Sets [`PrepareOptions::precision`].
    pub fn precision(mut self, precision: Precision) -> Self {
        self.0.precision = precision;
        self
    }
    /// Sets [`PrepareOptions::device_order`].
    pub fn device_order(mut self, order: RowOrder) -> Self {
        self.0.device_order = order;
        self
    }
    /// Sets [`PrepareOptions::cache_dir`].
    pub fn cache_dir(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.0.cache_dir = dir;
        self
    }
    /// The options.
    pub fn build(self) -> PrepareOptions {
        self.0
    }
}
