//! What the caller asks [`Engine::prepare_spamm`](crate::Engine::prepare_spamm) for.

use tcsparse_gpu::multi::DeviceSet;
use tcsparse_gpu::spamm::{SpammBlock, SpammPrecision, TauTarget};

use crate::Precision;

/// Options of [`Engine::prepare_spamm`](crate::Engine::prepare_spamm): build them with
/// [`SpammOptions::builder`], as [`PrepareOptions`](crate::PrepareOptions) for SpMM.
///
/// ```
/// use tcsparse::spamm::{SpammOptions, TauTarget};
/// let opts = SpammOptions::builder().target(TauTarget::ValidRatio(0.2)).build();
/// assert_eq!(opts.precision, tcsparse::Precision::Tf32x3);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpammOptions {
    /// How τ is chosen (default: a relative error of at most 1e-5).
    pub target: TauTarget,
    /// Arithmetic of the tile products on the GPU: every [`Precision`] (default
    /// [`Precision::Tf32x3`]); the CPU path accumulates in f32 whatever is asked.
    pub precision: Precision,
    /// GPU C block (64 × 64 or 128 × 128 made of 32 × 32 norm tiles).
    pub block: SpammBlock,
    /// Strided balance parameter s (≥ 1).
    pub s: usize,
    /// GPUs to split C's rows over (default: the engine's GPU alone). Two or more: C's rows are
    /// split by valid tile products and computed on every device at once, B broadcast through
    /// NCCL ([`tcsparse_gpu::multi::DeviceGroup`]). Every listed device must be present; a
    /// list other than the default on an engine without a GPU is an error.
    pub devices: DeviceSet,
    /// Also compute the exact error ‖C − C̃‖F/‖C‖F against an f64 product (O(m·n·k) on the host:
    /// small sizes, or use `measure_rows` to sample).
    pub measure_error: bool,
    /// With `measure_error`: at most this many evenly spaced rows are checked (0 = all).
    pub measure_rows: usize,
}

impl Default for SpammOptions {
    fn default() -> Self {
        Self {
            target: TauTarget::RelError(1e-5),
            precision: Precision::Tf32x3,
            block: SpammBlock::B64,
            s: 1,
            devices: DeviceSet::default(),
            measure_error: false,
            measure_rows: 0,
        }
    }
}

impl SpammOptions {
    /// A builder starting from [`SpammOptions::default`].
    pub fn builder() -> SpammOptionsBuilder {
        SpammOptionsBuilder(Self::default())
    }
}

/// The GPU kernels' precision for `p` (every precision has one).
pub(crate) fn gpu_precision(p: Precision) -> SpammPrecision {
    match p {
        Precision::F16 => SpammPrecision::F16,
        Precision::Tf32 => SpammPrecision::Tf32,
        Precision::Tf32x3 => SpammPrecision::Tf32x3,
        Precision::F32 => SpammPrecision::F32,
    }
}

/// Builds [`SpammOptions`] field by field ([`SpammOptions::builder`]).
#[derive(Clone, Debug)]
pub struct SpammOptionsBuilder(SpammOptions);

impl SpammOptionsBuilder {
    /// Sets [`SpammOptions::target`].
    pub fn target(mut self, target: TauTarget) -> Self {
        self.0.target = target;
        self
    }
    /// Sets [`SpammOptions::precision`].
    pub fn precision(mut self, precision: Precision) -> Self {
        self.0.precision = precision;
        self
    }
    /// Sets [`SpammOptions::block`].
    pub fn block(mut self, block: SpammBlock) -> Self {
        self.0.block = block;
        self
    }
    /// Sets [`SpammOptions::s`].
    pub fn s(mut self, s: usize) -> Self {
        self.0.s = s;
        self
    }
    /// Sets [`SpammOptions::devices`].
    pub fn devices(mut self, devices: DeviceSet) -> Self {
        self.0.devices = devices;
        self
    }
    /// Sets [`SpammOptions::measure_error`] and [`SpammOptions::measure_rows`].
    pub fn measure_error(mut self, measure: bool, rows: usize) -> Self {
        self.0.measure_error = measure;
        self.0.measure_rows = rows;
        self
    }
    /// The options.
    pub fn build(self) -> SpammOptions {
        self.0
    }
}
