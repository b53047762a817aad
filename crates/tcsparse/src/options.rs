//! What the caller asks [`Engine::prepare`](crate::Engine::prepare)(crate::Engine::prepare) for: [`PrepareOptions`] and
//! the choices inside it (reordering, load balance, kernel).

use tcsparse_gpu::spmm::row_tile::RowTileKernel;
use tcsparse_reorder::{Mode, Permutation};

/// Reordering step of [`PrepareOptions`].
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

/// Which kernel [`Engine::prepare`](crate::Engine::prepare) sets up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KernelRequest {
    /// The planner decides (Acc-SpMM where it is predicted faster, cuSPARSE otherwise).
    #[default]
    Auto,
    /// Acc-SpMM on BitTCF.
    AccSpmm,
    /// cuSPARSE SpMM on CSR.
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

/// Options of [`Engine::prepare`](crate::Engine::prepare).
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
    /// order; Acc-SpMM under the planner's and the other schedules, unless `balance` fixes one)
    /// with a random B of `n` columns and keep the fastest, instead of trusting the planner's
    /// model alone. Costs a few dozen launches at preparation.
    pub tune: bool,
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
        }
    }
}
