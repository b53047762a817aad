//! What the caller asks [`Engine::prepare_spmm`](crate::Engine::prepare_spmm) for:
//! [`PrepareOptions`] and the choices inside it (reordering, load balance, kernel, row order).

use tcsparse_gpu::spmm::row_tile::RowTileKernel;
use tcsparse_reorder::{Mode, Permutation};

use super::family;
use crate::{DType, Precision};

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

/// Generates [`KernelRequest`] from the kernel-family registry (`spmm/family/`): the requests
/// written out below, then one variant per family (with its payload, if it has one).
macro_rules! kernel_request {
    ($( $(#[$doc:meta])* $req:ident $(($rty:ty))? => $kv:ident($kty:ident) in $module:ident; )*) => {
        /// Which kernel [`Engine::prepare_spmm`](crate::Engine::prepare_spmm) sets up: a kernel
        /// written out here, or a kernel family's.
        #[non_exhaustive]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        pub enum KernelRequest {
            /// The planner decides (Acc-SpMM where it is predicted faster, cuSPARSE otherwise).
            #[default]
            Auto,
            /// Acc-SpMM on BitTCF.
            AccSpmm,
            /// Acc-SpMM on BitTCF run by the paper's own pipeline (block metadata by `cp.async`
            /// into a shared-memory double buffer, B rows by `ld.global.ca`, C by `st.global.wt`)
            /// instead of ours (register metadata, read-only B loads): the ablation of
            /// docs/results. Schedules as [`KernelRequest::AccSpmm`] (`Balance::PackedCached` runs
            /// as `Balance::Packed`).
            AccSpmmPaper,
            /// cuSPARSE SpMM on CSR, at its default algorithm
            /// ([`SpmmAlg::Default`](crate::SpmmAlg); a tuned [`KernelRequest::Auto`] preparation
            /// times every CSR algorithm and keeps the fastest).
            Cusparse,
            /// A row-tile tensor-core kernel (TC16, TC16d, TC32, TC32d). `Balance::Packed(k)` runs
            /// it with k windows per thread block, `Balance::On` splits heavy windows at
            /// [`ROW_TILE_SPLIT_BLOCKS`](crate::ROW_TILE_SPLIT_BLOCKS) blocks per thread block,
            /// anything else packs 4 windows per thread block.
            RowTile(RowTileKernel),
            $( $(#[$doc])* $req $(($rty))?, )*
        }
    };
}
crate::spmm::family::with_families!(kernel_request);

/// The `--kernel` names of the requests written out in [`KernelRequest`], in the order the CLI
/// lists them (the kernel families' follow).
const NAMED: [(&str, KernelRequest); 9] = [
    ("auto", KernelRequest::Auto),
    ("acc", KernelRequest::AccSpmm),
    ("tc16", KernelRequest::RowTile(RowTileKernel::TC16)),
    ("tc32", KernelRequest::RowTile(RowTileKernel::TC32)),
    ("tc16d", KernelRequest::RowTile(RowTileKernel::TC16D)),
    ("tc32d", KernelRequest::RowTile(RowTileKernel::TC32D)),
    (
        "tc16d-tma",
        KernelRequest::RowTile(RowTileKernel::TC16D_TMA),
    ),
    (
        "tc32d-tma",
        KernelRequest::RowTile(RowTileKernel::TC32D_TMA),
    ),
    ("cusparse", KernelRequest::Cusparse),
];

impl KernelRequest {
    /// Every request's name (`tcsparse spmm --kernel NAME`), each once, in the order the CLI
    /// lists them: `auto` first, the requests written out in [`KernelRequest`], then each kernel
    /// family's.
    pub fn names() -> Vec<&'static str> {
        NAMED
            .iter()
            .map(|&(n, _)| n)
            .chain(
                family::FAMILIES
                    .iter()
                    .flat_map(|f| f.requests())
                    .map(|&(n, _)| n),
            )
            .collect()
    }

    /// The request named `name` ([`KernelRequest::names`]); `None` for a name that is none of
    /// them.
    pub fn from_name(name: &str) -> Option<KernelRequest> {
        NAMED
            .iter()
            .find(|&&(n, _)| n == name)
            .map(|&(_, r)| r)
            .or_else(|| family::request_named(name))
    }
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
    /// then an error). [`Precision::Tf32x3`] runs on the 3×TF32 row-tile kernels on a GPU
    /// (cuSPARSE in f32 where they do not take the matrix) and as exact f32 on the CPU path.
    pub precision: Precision,
    /// Element type of B and C in the products ([`Prepared::spmm_typed`](crate::Prepared::spmm_typed);
    /// default [`DType::F32`], what [`Prepared::spmm`](crate::Prepared::spmm) takes). Accumulation
    /// is f32 whatever the type, and A's values stay f32 ([`crate::element`]). On a GPU, f16 and
    /// bf16 (at [`Precision::Tf32`]) run on the row-tile kernels in that type, A's values rounded
    /// to it on upload; another precision is [`Error::Unsupported`](crate::Error::Unsupported)
    /// there. The CPU path takes every combination.
    pub dtype: DType,
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
            dtype: DType::F32,
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
    /// Sets [`PrepareOptions::dtype`].
    pub fn dtype(mut self, dtype: DType) -> Self {
        self.0.dtype = dtype;
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
