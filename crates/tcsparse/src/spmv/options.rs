//! What the caller asks [`Engine::prepare_spmv`](crate::Engine::prepare_spmv)(crate::Engine::prepare_spmv) for.

use tcsparse_formats::bitbsr_device::TileStorage;
use tcsparse_gpu::spmv::DEFAULT_CHUNK_TILES;

use crate::Precision;

/// Tile storages our tensor-core kernels may use at `p`, cheapest first.
pub(super) fn storages(p: Precision) -> &'static [TileStorage] {
    match p {
        Precision::F16 => &[TileStorage::F16, TileStorage::Tf32],
        Precision::Tf32 => &[TileStorage::Tf32],
        _ => &[],
    }
}

/// Tile storages the CUDA-core walk (any n) may use at `p`: f32 tiles (as fast as TF32 ones on
/// CUDA cores, and exact) at every precision, f16 tiles when allowed (the first is the storage
/// of an untuned preparation).
pub(super) fn core_storages(p: Precision) -> &'static [TileStorage] {
    match p {
        Precision::F16 => &[TileStorage::F16, TileStorage::F32],
        _ => &[TileStorage::F32],
    }
}

/// Options of [`Engine::prepare_spmv`](crate::Engine::prepare_spmv): build them with [`SpmvOptions::builder`], as
/// [`PrepareOptions`](crate::PrepareOptions) for SpMM.
///
/// ```
/// use tcsparse::{Precision, SpmvOptions};
/// let opts = SpmvOptions::builder().n(4).precision(Precision::F32).build();
/// assert_eq!((opts.n, opts.precision), (4, Precision::F32));
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpmvOptions {
    /// Precision: [`Precision::Tf32`] (default), [`Precision::F16`] (f16 tiles allowed) or
    /// [`Precision::F32`]; 3×TF32 is refused.
    pub precision: Precision,
    /// Right-hand sides per call (columns of X and y), 1..=8 (default 1).
    pub n: usize,
    /// Tile budget per half when not tuning (default [`DEFAULT_CHUNK_TILES`]).
    pub chunk_tiles: u32,
    /// Time the candidates on the GPU and keep the fastest (default true); false keeps our kernel
    /// with the cheapest allowed storage (the CUDA-core walk: [`DEFAULT_CORE_LAYOUT`](tcsparse_gpu::spmv::DEFAULT_CORE_LAYOUT) for one
    /// right-hand side, [`MULTI_LAYOUT`](tcsparse_gpu::spmv::MULTI_LAYOUT) for more).
    pub tune: bool,
}

impl Default for SpmvOptions {
    fn default() -> Self {
        Self {
            precision: Precision::Tf32,
            n: 1,
            chunk_tiles: DEFAULT_CHUNK_TILES,
            tune: true,
        }
    }
}

impl SpmvOptions {
    /// A builder starting from [`SpmvOptions::default`].
    pub fn builder() -> SpmvOptionsBuilder {
        SpmvOptionsBuilder(Self::default())
    }
}

/// Builds [`SpmvOptions`] field by field ([`SpmvOptions::builder`]).
#[derive(Clone, Debug)]
pub struct SpmvOptionsBuilder(SpmvOptions);

impl SpmvOptionsBuilder {
    /// Sets [`SpmvOptions::precision`].
    pub fn precision(mut self, precision: Precision) -> Self {
        self.0.precision = precision;
        self
    }
    /// Sets [`SpmvOptions::n`].
    pub fn n(mut self, n: usize) -> Self {
        self.0.n = n;
        self
    }
    /// Sets [`SpmvOptions::chunk_tiles`].
    pub fn chunk_tiles(mut self, chunk_tiles: u32) -> Self {
        self.0.chunk_tiles = chunk_tiles;
        self
    }
    /// Sets [`SpmvOptions::tune`].
    pub fn tune(mut self, tune: bool) -> Self {
        self.0.tune = tune;
        self
    }
    /// The options.
    pub fn build(self) -> SpmvOptions {
        self.0
    }
}
