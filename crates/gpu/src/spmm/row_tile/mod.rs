//! Row-tile tensor-core SpMM (`tc16_spmm_tf32`, `tc32_spmm_tf32`, `tc16d_spmm_tf32`,
//! `tc32d_spmm_tf32` in `kernels-ptx/row_tile_spmm.cu`, and `tc16d_tma_spmm_tf32`,
//! `tc32d_tma_spmm_tf32` in `kernels-ptx/row_tile_tma.cuh`, see [`KERNELS`]): `C = α·A·B + β·C` with A in
//! row-tile TCF (16- or 32-row windows, 8-column blocks over compacted columns, one `u64` tile mask
//! per 8 rows), B and C dense row-major f32 on the device.
//!
//! Each 16×8 row tile of a block is an MMA A-operand and the block's 8 gathered B rows its
//! B-operand, so one gather of 8 B rows serves every row of a window (16 or 32; Acc-SpMM's BitTCF
//! kernel: 8). The masked kernels decode the tile from the masks by popcount, like BitTCF's; the
//! dense-tile kernels read it from a copy stored dense in MMA fragment order ([`fragment_tiles`]),
//! which costs 4 B per tile slot instead of per nonzero but saves most of the kernel's load
//! instructions. The TMA kernels run the dense tiles with a producer warp that bulk-copies each
//! block's B rows and tile into a ring of shared-memory stages (sm_90; [`RowTileKernel::tma`]).
//!
//! Windows map to thread blocks by a [`RowTileSchedule`], run through the same work list as
//! Acc-SpMM's BitTCF kernel (planner `AccSchedule`): `Packed(k)` gives thread block x the
//! windows `[x·k, (x+1)·k)` and nothing is split; `Split { max_blocks }` fills thread blocks with
//! at most `max_blocks` consecutive blocks, so a heavy window is spread over several thread blocks
//! whose partial sums are added with atomics after a β pre-scale of its rows. Splitting is what
//! small matrices (too few windows to fill the GPU) and hub rows (one window with most of the
//! blocks) need. The dense tiles (host and device builds) are in `dense.rs`.
//!
//! The masked kernels also run in other arithmetic ([`RowTileArith`]): 3×TF32 (f32 operands,
//! f32-grade products) through [`DeviceProduct`] like TF32, and f16 / bf16 (A's values converted
//! to the type on upload, B and C in the type, f32 accumulation) through
//! [`RowTileDevice::enqueue_half`] (split windows add into f32 scratch rows that a finish kernel
//! rounds into C).

use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, ValidAsZeroBits};
use rayon::prelude::*;
use tcsparse_formats::Csr;
use tcsparse_formats::rowtile::{RowTileStructure, RowTileTcf, SENTINEL};
use tcsparse_planner::{AccSchedule, Eq4Model};

use super::half_split::{HalfSplit, finish_signature};
use super::{AccSpmmError, SCHEDULED_TAIL, launch_flags_at, launch_shape, to_tf32};
use crate::device_csr::DeviceCsr;
use crate::launch::{Arg, Launch, Shape};
use crate::permute::check_permutation;
use crate::product::{Checked, Dense, DenseMut, DeviceProduct, checked_width};
use crate::schedule::{DeviceSchedule, flatten_acc_schedule, upload_nonempty};
use crate::signature::concat;
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

mod dense;

pub use dense::{
    MAX_DENSE_SLOTS_PER_NNZ, MAX_DENSE_TILE_BYTES, dense_slots_per_nnz, dense_tiles_worth_trying,
    fragment_tiles,
};
use dense::{SIG_BUILD, SIG_SKELETON};

/// The arithmetic of a row-tile kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RowTileArith {
    /// f32 A, B and C; TF32 MMA inputs, f32 accumulation (every kernel of [`KERNELS`]).
    #[default]
    Tf32,
    /// f32 A, B and C; each input split into two TF32 values (big + small), three MMAs per step
    /// (a_small·b_big + a_big·b_small + a_big·b_big), f32 accumulation: f32-grade products.
    /// Masked tiles only.
    Tf32x3,
    /// A's values (divided by [`half_scale`]'s power of two and converted on upload, to nearest;
    /// α multiplied by it at launch), B and C in f16; f16 MMAs with f32 accumulation; C rounded
    /// to f16 (to nearest, beyond ±65504 ±∞). Masked tiles; split windows sum in f32 scratch
    /// rows, rounded once.
    F16,
    /// As [`RowTileArith::F16`] in bf16.
    Bf16,
}

impl RowTileArith {
    /// Short name: `TF32`, `3xTF32`, `f16`, `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            RowTileArith::Tf32 => "TF32",
            RowTileArith::Tf32x3 => "3xTF32",
            RowTileArith::F16 => "f16",
            RowTileArith::Bf16 => "bf16",
        }
    }

    /// Whether A, B and C are in a 16-bit type ([`RowTileDevice::enqueue_half`]).
    pub fn is_half(self) -> bool {
        matches!(self, RowTileArith::F16 | RowTileArith::Bf16)
    }
}

/// A 16-bit element type the f16 / bf16 kernels take ([`half::f16`], [`half::bf16`]; sealed): the
/// row-tile kernels' and [`crate::spmm::csr::CsrSpmm::enqueue_half`]'s.
pub trait RowTileHalf:
    DeviceRepr + ValidAsZeroBits + Copy + Default + Send + Sync + sealed::Sealed + 'static
{
    /// The kernels' arithmetic in this type.
    const ARITH: RowTileArith;
    /// `v` rounded to this type (to nearest, ties to even; beyond the range ±∞; NaN stays NaN).
    fn from_f32(v: f32) -> Self;
    /// The value in f32 (exact).
    fn to_f32(self) -> f32;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

impl RowTileHalf for half::f16 {
    const ARITH: RowTileArith = RowTileArith::F16;
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
}

impl RowTileHalf for half::bf16 {
    const ARITH: RowTileArith = RowTileArith::Bf16;
    fn from_f32(v: f32) -> Self {
        half::bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        half::bf16::to_f32(self)
    }
}

/// One row-tile kernel: the window height it runs on, how it stores the tiles and its
/// arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowTileKernel {
    /// Rows per window (16 or 32).
    pub window_rows: u32,
    /// Tiles stored dense in MMA fragment order (else: masks and nonzero values).
    pub dense_tiles: bool,
    /// B rows and tiles reach shared memory by TMA bulk copies that a producer warp issues into
    /// a ring of stages (dense tiles, TF32; sm_90), instead of through each warp's registers.
    /// Where the copies' alignment does not hold (n or ldb not a multiple of 4) the producer
    /// warp copies those B rows through its registers, inside the same kernel.
    pub tma: bool,
    /// Arithmetic (TF32 for every kernel of [`KERNELS`]; the others: [`TYPED_KERNELS`]).
    pub arith: RowTileArith,
}

impl RowTileKernel {
    /// TC16: 16-row windows, masked tiles.
    pub const TC16: Self = Self::new(16, false);
    /// TC32: 32-row windows, masked tiles.
    pub const TC32: Self = Self::new(32, false);
    /// TC16d: 16-row windows, dense tiles.
    pub const TC16D: Self = Self::new(16, true);
    /// TC32d: 32-row windows, dense tiles.
    pub const TC32D: Self = Self::new(32, true);
    /// TC16d-tma: TC16d's layout on the TMA pipeline.
    pub const TC16D_TMA: Self = Self::TC16D.on_tma();
    /// TC32d-tma: TC32d's layout on the TMA pipeline.
    pub const TC32D_TMA: Self = Self::TC32D.on_tma();

    const fn new(window_rows: u32, dense_tiles: bool) -> Self {
        Self {
            window_rows,
            dense_tiles,
            tma: false,
            arith: RowTileArith::Tf32,
        }
    }

    const fn on_tma(self) -> Self {
        Self { tma: true, ..self }
    }

    /// The kernel of the same layout on the register pipeline (itself when it is one).
    pub const fn on_registers(self) -> Self {
        Self { tma: false, ..self }
    }

    /// This kernel in arithmetic `arith` (a kernel only where [`RowTileKernel::entry`] has one).
    pub const fn with_arith(self, arith: RowTileArith) -> Self {
        Self { arith, ..self }
    }

    /// The PTX entry, `None` for a window height, storage or arithmetic without a kernel.
    pub fn entry(self) -> Option<&'static str> {
        KERNELS
            .iter()
            .zip(ENTRIES)
            .chain(TYPED_KERNELS.iter().zip(TYPED_ENTRIES))
            .find_map(|(&k, e)| (k == self).then_some(e))
    }

    /// The PTX entry's signature, `None` for a kernel without an entry.
    pub fn signature(self) -> Option<&'static KernelSignature> {
        let name = self.entry()?;
        SIGNATURES.iter().find(|s| s.name == name)
    }

    /// Short name: `TC16`, `TC32`, `TC16d`, `TC32d`, `TC16d-tma`, `TC32d-tma`; another
    /// arithmetic than TF32 after a space (`TC16 f16`, `TC32 3xTF32`).
    pub fn name(self) -> String {
        let dense = if self.dense_tiles { "d" } else { "" };
        let tma = if self.tma { "-tma" } else { "" };
        match self.arith {
            RowTileArith::Tf32 => format!("TC{}{dense}{tma}", self.window_rows),
            a => format!("TC{}{dense}{tma} {}", self.window_rows, a.name()),
        }
    }
}

/// How a row-tile kernel's windows map to thread blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowTileSchedule {
    /// This many consecutive windows per thread block (0 is treated as 1); nothing is split, every
    /// row is written with plain stores.
    Packed(u32),
    /// Consecutive blocks fill thread blocks of at most `max_blocks` blocks (0 is treated as 1;
    /// light windows share a thread block, see the planner's `Eq4Model::block_cap`); a window
    /// spread over several thread blocks is pre-scaled by β and accumulated with atomics.
    Split {
        /// Most blocks per thread block.
        max_blocks: u32,
    },
}

impl RowTileSchedule {
    /// The thread-block schedule over windows with block prefix `row_window_offset`.
    pub fn build(self, row_window_offset: &[u32]) -> AccSchedule {
        match self {
            RowTileSchedule::Packed(k) => AccSchedule::packed(row_window_offset, k),
            RowTileSchedule::Split { max_blocks } => {
                // The model counts blocks only, so the width does not change the schedule.
                AccSchedule::balanced(row_window_offset, &Eq4Model::block_cap(max_blocks), 1)
            }
        }
    }
}

impl std::fmt::Display for RowTileSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            RowTileSchedule::Packed(k) if k <= 1 => write!(f, "1 window per TB"),
            RowTileSchedule::Packed(k) => write!(f, "{k} windows per TB"),
            RowTileSchedule::Split { max_blocks } => {
                write!(f, "split, ≤ {} blocks per TB", max_blocks.max(1))
            }
        }
    }
}

/// Warps a row-tile thread block keeps resident per SM, as the tuner assumes (64 registers per
/// thread: TC16, TC16d; the 32-row kernels keep 24).
const RESIDENT_WARPS_PER_SM: usize = 32;

/// The `max_blocks` a tuned preparation tries for [`RowTileSchedule::Split`] on a matrix of
/// `blocks` blocks at width `n` on `sms` SMs: the cap that makes about two waves of resident
/// thread blocks (cuTeSpMM's wave-aware splitting: enough thread blocks to fill the GPU, no more
/// atomics than that needs), at least 4, and four times it (fewer atomics, less parallelism).
pub fn split_caps(blocks: usize, n: usize, sms: u32) -> [u32; 2] {
    let Ok(Some(shape)) = launch_shape(n.max(1), 1) else {
        return [4, 16];
    };
    let per_sm = (RESIDENT_WARPS_PER_SM / shape.warps as usize).max(1);
    // Thread blocks along x that fit in one wave (the feature tiles share the wave).
    let wave = (sms as usize * per_sm / shape.grid_y as usize).max(1);
    let cap = blocks.div_ceil(2 * wave).clamp(4, 1 << 16) as u32;
    [cap, 4 * cap]
}

/// Every row-tile kernel, in the order a tuned preparation times them.
/// (The kernels of one window height are adjacent, so a tuner builds each layout once.)
pub const KERNELS: [RowTileKernel; 6] = [
    RowTileKernel::TC16,
    RowTileKernel::TC16D,
    RowTileKernel::TC16D_TMA,
    RowTileKernel::TC32,
    RowTileKernel::TC32D,
    RowTileKernel::TC32D_TMA,
];

/// PTX entries of [`KERNELS`], same order.
const ENTRIES: [&str; 6] = [
    "tc16_spmm_tf32",
    "tc16d_spmm_tf32",
    "tc16d_tma_spmm_tf32",
    "tc32_spmm_tf32",
    "tc32d_spmm_tf32",
    "tc32d_tma_spmm_tf32",
];

/// The row-tile kernels in arithmetic other than TF32 (masked tiles only).
pub const TYPED_KERNELS: [RowTileKernel; 6] = [
    RowTileKernel::TC16.with_arith(RowTileArith::Tf32x3),
    RowTileKernel::TC32.with_arith(RowTileArith::Tf32x3),
    RowTileKernel::TC16.with_arith(RowTileArith::F16),
    RowTileKernel::TC32.with_arith(RowTileArith::F16),
    RowTileKernel::TC16.with_arith(RowTileArith::Bf16),
    RowTileKernel::TC32.with_arith(RowTileArith::Bf16),
];

/// PTX entries of [`TYPED_KERNELS`], same order.
const TYPED_ENTRIES: [&str; 6] = [
    "tc16_spmm_3xtf32",
    "tc32_spmm_3xtf32",
    "tc16_spmm_f16",
    "tc32_spmm_f16",
    "tc16_spmm_bf16",
    "tc32_spmm_bf16",
];

const MASKED_PARAMS: [ParamKind; 16] = concat(
    &[
        ParamKind::Ptr, // rwo (windows + 1)
        ParamKind::Ptr, // bvo (blocks + 1)
        ParamKind::Ptr, // a2x (8 per block)
        ParamKind::Ptr, // masks (window_rows / 8 per block)
        ParamKind::Ptr, // values
    ],
    &SCHEDULED_TAIL,
);

const DENSE_PARAMS: [ParamKind; 14] = concat(
    &[
        ParamKind::Ptr, // rwo (windows + 1)
        ParamKind::Ptr, // a2x (8 per block)
        ParamKind::Ptr, // frag (window_rows · 8 per block, fragment order)
    ],
    &SCHEDULED_TAIL,
);

/// The f16 / bf16 masked entries: the masked parameters, then the split windows' f32 scratch.
const HALF_PARAMS: [ParamKind; 19] = concat(
    &MASKED_PARAMS,
    &[
        ParamKind::Ptr, // split_ids (the split windows, ascending)
        ParamKind::U32, // split_count
        ParamKind::Ptr, // scratch (split_count · window_rows · n f32, zeroed)
    ],
);

/// The split-window finish of the f16 / bf16 kernels, `[f16, bf16]`.
const FINISH_ENTRIES: [&str; 2] = ["row_tile_split_finish_f16", "row_tile_split_finish_bf16"];

const fn signature(name: &'static str, params: &'static [ParamKind]) -> KernelSignature {
    KernelSignature {
        module: KernelModule::RowTileSpmm,
        name,
        params,
    }
}

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test): the
/// kernels of [`KERNELS`] in its order, the device builds, then the kernels of
/// [`TYPED_KERNELS`] in its order (masked parameters, the pointers to the element type; f16 and
/// bf16 then the split windows' scratch), then the split finish of f16 and bf16.
pub const SIGNATURES: &[KernelSignature] = &[
    signature(ENTRIES[0], &MASKED_PARAMS),
    signature(ENTRIES[1], &DENSE_PARAMS),
    signature(ENTRIES[2], &DENSE_PARAMS),
    signature(ENTRIES[3], &MASKED_PARAMS),
    signature(ENTRIES[4], &DENSE_PARAMS),
    signature(ENTRIES[5], &DENSE_PARAMS),
    SIG_BUILD,
    SIG_SKELETON,
    signature(TYPED_ENTRIES[0], &MASKED_PARAMS),
    signature(TYPED_ENTRIES[1], &MASKED_PARAMS),
    signature(TYPED_ENTRIES[2], &HALF_PARAMS),
    signature(TYPED_ENTRIES[3], &HALF_PARAMS),
    signature(TYPED_ENTRIES[4], &HALF_PARAMS),
    signature(TYPED_ENTRIES[5], &HALF_PARAMS),
    FINISH_SIGNATURES[0],
    FINISH_SIGNATURES[1],
];

/// The signatures of [`FINISH_ENTRIES`], same order.
const FINISH_SIGNATURES: [KernelSignature; 2] = [
    finish_signature(KernelModule::RowTileSpmm, FINISH_ENTRIES[0]),
    finish_signature(KernelModule::RowTileSpmm, FINISH_ENTRIES[1]),
];

/// How the device copy stores the tiles.
enum Tiles {
    /// Masks and nonzero values (TC16, TC32).
    Masked {
        bvo: CudaSlice<u32>,
        masks: CudaSlice<u64>,
        values: CudaSlice<f32>,
    },
    /// Dense tiles in fragment order (TC16d, TC32d).
    Dense { frag: CudaSlice<f32> },
    /// Masks and nonzero values as f16 or bf16 bits (the f16 / bf16 kernels).
    MaskedHalf {
        bvo: CudaSlice<u32>,
        masks: CudaSlice<u64>,
        values: CudaSlice<u16>,
    },
}

/// The power of two `s` A's values are divided by before they are rounded to the 16-bit type of
/// `arith` (and α multiplied by at launch, so the product is unchanged): for f16, the one that
/// puts the largest finite |value| in [2¹⁴, 2¹⁵), so no value overflows f16's range (±65504)
/// and values down to 2⁻²⁹ of the largest stay in its normal range (relative rounding 2⁻¹¹);
/// 1 for bf16 (f32's range), for the f32 kernels and for a matrix without a finite nonzero.
pub fn half_scale(values: &[f32], arith: RowTileArith) -> f32 {
    if arith != RowTileArith::F16 {
        return 1.0;
    }
    let max = values
        .iter()
        .filter(|v| v.is_finite())
        .fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 {
        return 1.0;
    }
    let k = (max.log2().floor() as i32 - 14).clamp(-126, 127);
    2f32.powi(k)
}

/// `values` / `scale` rounded to the 16-bit type of `arith` (to nearest, as `half` does), as
/// bits (`scale` a power of two: the division is exact).
fn half_bits(values: &[f32], arith: RowTileArith, scale: f32) -> Vec<u16> {
    match arith {
        RowTileArith::Bf16 => values
            .iter()
            .map(|&v| half::bf16::from_f32(v / scale).to_bits())
            .collect(),
        _ => values
            .iter()
            .map(|&v| half::f16::from_f32(v / scale).to_bits())
            .collect(),
    }
}

/// The masked tiles of `m` for a kernel of arithmetic `arith`, uploaded, and the scale of its
/// 16-bit values ([`half_scale`]; 1 for f32 values).
fn upload_masked(gpu: &Gpu, m: &RowTileTcf, arith: RowTileArith) -> Result<(Tiles, f32), GpuError> {
    let bvo = upload_nonempty(gpu, m.block_value_offset())?;
    let masks = upload_nonempty(gpu, m.masks())?;
    Ok(if arith.is_half() {
        let scale = half_scale(m.values(), arith);
        let tiles = Tiles::MaskedHalf {
            bvo,
            masks,
            values: upload_nonempty(gpu, &half_bits(m.values(), arith, scale))?,
        };
        (tiles, scale)
    } else {
        let tiles = Tiles::Masked {
            bvo,
            masks,
            values: upload_nonempty(gpu, m.values())?,
        };
        (tiles, 1.0)
    })
}

/// A row-tile TCF matrix resident on the GPU, ready for repeated products.
///
/// Invariant: the arrays come from a [`RowTileTcf`] whose window height is the kernel's, whose constructor
/// establishes its invariants — window and block prefixes run from 0 to the block and nonzero
/// counts, column ids are `< K` or [`SENTINEL`], every block's mask bits count its values — and
/// are never written after upload.
pub struct RowTileDevice {
    /// The GPU it was uploaded to ([`DeviceProduct`] calls queue on its stream).
    gpu: Gpu,
    rows: usize,
    /// Stored values of the uploaded matrix.
    nnz: usize,
    /// Blocks of the uploaded matrix.
    blocks: usize,
    kernel: RowTileKernel,
    cols: usize,
    /// Host copy of the window block prefix (schedules are built from it).
    row_window_offset: Vec<u32>,
    rwo: CudaSlice<u32>,
    a2x: CudaSlice<u32>,
    tiles: Tiles,
    /// The power of two A's 16-bit values were divided by ([`half_scale`]; 1 for f32 values):
    /// launches multiply α by it.
    a_scale: f32,
    schedule: RowTileSchedule,
    /// `schedule` built over `row_window_offset` and uploaded.
    sched: DeviceSchedule,
    main: CudaFunction,
    /// f16 / bf16 kernels: `row_tile_split_finish_*` and the f32 rows their split windows add
    /// into (`split windows · window_rows · n` floats, grown to the widest n run so far).
    half_split: Option<HalfSplit>,
}

/// `kind` built over the windows `rwo`, validated and uploaded.
fn upload_schedule(
    gpu: &Gpu,
    rwo: &[u32],
    kind: RowTileSchedule,
) -> Result<DeviceSchedule, AccSpmmError> {
    DeviceSchedule::upload(gpu, &flatten_acc_schedule(rwo, &kind.build(rwo))?)
}

impl_debug!(RowTileDevice, |s|
    rows: s.rows, kernel: s.kernel, cols: s.cols,
    windows: s.row_window_offset.len().saturating_sub(1), schedule: s.schedule,
    thread_blocks: s.sched.num_tbs, split_windows: s.sched.split.count());

impl RowTileDevice {
    /// Uploads `m` (once; launch many times) for the masked or, with `dense_tiles`, the
    /// dense-tile kernel of its window height, run under `schedule`. Window heights without a
    /// kernel (not in [`KERNELS`]) and sizes beyond the kernel's u32 indices are refused.
    pub fn upload(
        gpu: &Gpu,
        m: &RowTileTcf,
        dense_tiles: bool,
        schedule: RowTileSchedule,
    ) -> Result<Self, AccSpmmError> {
        Self::upload_as(gpu, m, dense_tiles, RowTileArith::Tf32, schedule)
    }

    /// [`RowTileDevice::upload`] for the kernel of arithmetic `arith` ([`TYPED_KERNELS`]: masked
    /// tiles; f16 and bf16 convert A's values to their type here, to nearest). A combination
    /// without a kernel is refused.
    pub fn upload_as(
        gpu: &Gpu,
        m: &RowTileTcf,
        dense_tiles: bool,
        arith: RowTileArith,
        schedule: RowTileSchedule,
    ) -> Result<Self, AccSpmmError> {
        let kernel = RowTileKernel::new(m.window_rows() as u32, dense_tiles).with_arith(arith);
        Self::upload_for(gpu, m, kernel, schedule)
    }

    /// Uploads `m` for `kernel` (any of [`KERNELS`] and [`TYPED_KERNELS`]), run under
    /// `schedule`. A kernel whose window height is not `m`'s, or without an entry, is refused.
    pub fn upload_for(
        gpu: &Gpu,
        m: &RowTileTcf,
        kernel: RowTileKernel,
        schedule: RowTileSchedule,
    ) -> Result<Self, AccSpmmError> {
        let bad = |s: String| Err(AccSpmmError::InvalidFormat(s));
        let (dense_tiles, arith) = (kernel.dense_tiles, kernel.arith);
        let entry = match kernel.entry() {
            Some(e) if kernel.window_rows as usize == m.window_rows() => e,
            _ => {
                return bad(format!(
                    "no row-tile kernel {} for {}-row windows (16 or 32) with {} tiles in {}",
                    kernel.name(),
                    m.window_rows(),
                    if dense_tiles { "dense" } else { "masked" },
                    arith.name()
                ));
            }
        };
        let tile_slots = m.num_blocks() as u64 * m.window_rows() as u64 * 8;
        if dense_tiles && tile_slots >= u64::from(u32::MAX) {
            return bad(format!("{tile_slots} dense tile slots exceed u32 indices"));
        }
        if m.rows() > u32::MAX as usize - 32 || m.cols() >= u32::MAX as usize {
            return bad(format!(
                "{}×{} is too large for u32 indices",
                m.rows(),
                m.cols()
            ));
        }
        if m.num_blocks() >= (u32::MAX / 8) as usize || m.nnz() >= u32::MAX as usize {
            return bad(format!(
                "{} blocks / {} values exceed u32 indices",
                m.num_blocks(),
                m.nnz()
            ));
        }
        // The kernel relies on these RowTileTcf invariants (restated next to the launch, debug
        // builds).
        debug_assert_eq!(
            m.row_window_offset().len(),
            m.rows().div_ceil(m.window_rows()) + 1
        );
        debug_assert!(
            m.block_cols()
                .iter()
                .all(|&c| c == SENTINEL || (c as usize) < m.cols())
        );
        let (tiles, a_scale) = if dense_tiles {
            let frag = upload_nonempty(gpu, &fragment_tiles(m))?;
            (Tiles::Dense { frag }, 1.0)
        } else {
            upload_masked(gpu, m, arith)?
        };
        Ok(Self {
            gpu: gpu.clone(),
            rows: m.rows(),
            nnz: m.nnz(),
            blocks: m.num_blocks(),
            kernel,
            cols: m.cols(),
            row_window_offset: m.row_window_offset().to_vec(),
            schedule,
            sched: upload_schedule(gpu, m.row_window_offset(), schedule)?,
            rwo: upload_nonempty(gpu, m.row_window_offset())?,
            a2x: upload_nonempty(gpu, m.block_cols())?,
            tiles,
            a_scale,
            main: gpu.function(KernelModule::RowTileSpmm, entry)?,
            half_split: match arith {
                RowTileArith::F16 | RowTileArith::Bf16 => Some(HalfSplit::new(
                    gpu,
                    &FINISH_SIGNATURES[usize::from(arith == RowTileArith::Bf16)],
                )?),
                _ => None,
            },
        })
    }

    /// Replaces the values with those of `m`, which must have the uploaded matrix's pattern
    /// (checked: shape, windows, blocks and nonzero count), with one upload (the values, or the
    /// dense tiles rebuilt from them); schedule and kernel stay.
    pub fn set_values(&mut self, gpu: &Gpu, m: &RowTileTcf) -> Result<(), AccSpmmError> {
        if m.rows() != self.rows
            || m.cols() != self.cols
            || m.window_rows() != self.kernel.window_rows as usize
            || m.row_window_offset() != self.row_window_offset.as_slice()
            || m.num_blocks() != self.blocks
            || m.nnz() != self.nnz
        {
            return Err(AccSpmmError::InvalidArgs(
                "new values: the row-tile matrix's pattern differs from the uploaded one".into(),
            ));
        }
        match &mut self.tiles {
            Tiles::Dense { frag } => *frag = upload_nonempty(gpu, &fragment_tiles(m))?,
            Tiles::Masked { values, .. } => *values = upload_nonempty(gpu, m.values())?,
            Tiles::MaskedHalf { values, .. } => {
                let scale = half_scale(m.values(), self.kernel.arith);
                *values = upload_nonempty(gpu, &half_bits(m.values(), self.kernel.arith, scale))?;
                self.a_scale = scale;
            }
        }
        Ok(())
    }

    /// The kernel it launches.
    pub fn kernel(&self) -> RowTileKernel {
        self.kernel
    }

    /// How windows map to thread blocks.
    pub fn schedule(&self) -> RowTileSchedule {
        self.schedule
    }

    /// Runs under `schedule` from now on; the matrix stays uploaded.
    pub fn set_schedule(
        &mut self,
        gpu: &Gpu,
        schedule: RowTileSchedule,
    ) -> Result<(), AccSpmmError> {
        self.sched = upload_schedule(gpu, &self.row_window_offset, schedule)?;
        self.schedule = schedule;
        Ok(())
    }

    /// Windows spread over several thread blocks (written with atomics after a β pre-scale).
    pub fn num_split_windows(&self) -> usize {
        self.sched.split.count()
    }

    /// Thread blocks per feature tile.
    pub fn num_tbs(&self) -> usize {
        self.sched.num_tbs
    }
}

/// `C = α·A·B + β·C` on the GPU's stream (asynchronous): B is `K × n` row-major, C is
/// `M × n`, at any leading dimensions ≥ n (any device buffer or view); with β = 0, C is
/// never read.
impl DeviceProduct for RowTileDevice {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError> {
        if self.kernel.arith.is_half() {
            return Err(GpuError::Invalid(format!(
                "the {} kernel takes {} operands (RowTileDevice::enqueue_half), not f32",
                self.kernel.name(),
                self.kernel.arith.name()
            )));
        }
        let (alpha, beta) = (call.alpha, call.beta);
        let (b, mut c) = call.views();
        let (n, ldc) = (c.n(), c.ld());
        let Some(shape) = launch_shape(n, self.num_tbs())? else {
            return Ok(());
        };
        self.sched.split.prescale(
            &self.gpu,
            c.buf(),
            ldc,
            self.rows,
            n,
            beta,
            self.kernel.window_rows,
        )?;
        self.launch_main(shape, alpha, &b, beta, &mut c, None)
    }
}

impl RowTileDevice {
    /// `C = α·A·B + β·C` with B (`K × n`, leading dimension `ldb`) and C (`M × n`, `ldc`) views in
    /// the 16-bit type `T` of an f16 / bf16 kernel ([`RowTileArith::F16`], [`RowTileArith::Bf16`]),
    /// queued on the GPU's stream: f32 accumulation, β·C read in `T` (not at all when β = 0), C
    /// rounded to `T` to nearest (beyond its range ±∞, as a cast). Another type than the kernel's,
    /// or operands too short for their shapes, are refused before anything is queued.
    pub fn enqueue_half<T: RowTileHalf>(
        &mut self,
        alpha: f32,
        b: &Dense<'_, T>,
        beta: f32,
        c: &mut DenseMut<'_, T>,
    ) -> Result<(), GpuError> {
        if self.kernel.arith != T::ARITH {
            return Err(GpuError::Invalid(format!(
                "the {} kernel takes {} operands, got {}",
                self.kernel.name(),
                self.kernel.arith.name(),
                T::ARITH.name()
            )));
        }
        let n = checked_width((self.rows, self.cols), usize::MAX, false, b, c)?;
        let Some(shape) = launch_shape(n, self.num_tbs())? else {
            return Ok(());
        };
        // A's values went up divided by a_scale (a power of two): α·a_scale restores them.
        let alpha = alpha * self.a_scale;
        let mut hs = self.half_split.take().ok_or_else(|| {
            GpuError::Invalid(format!("no split finish for {}", self.kernel.name()))
        })?;
        // Split windows: the main kernel adds into the zeroed scratch, the finish rounds it into
        // C (ids: the split windows, ascending, < ⌈M / window_rows⌉ by flatten_schedule).
        let split = &self.sched.split;
        let groups = (split.ids(), split.count(), self.kernel.window_rows);
        let run = hs.run(&self.gpu, groups, self.rows, beta, c, |c, scratch| {
            self.launch_main(shape, alpha, b, beta, c, scratch)
        });
        self.half_split = Some(hs);
        run
    }

    /// Launches the main kernel on B and C of its element type (f32, or the bits of f16 / bf16),
    /// checked by the caller (shapes, and for split windows the β pre-scale queued before).
    fn launch_main<T>(
        &self,
        shape: super::LaunchShape,
        alpha: f32,
        b: &Dense<'_, T>,
        beta: f32,
        c: &mut DenseMut<'_, T>,
        scratch: Option<&mut CudaSlice<f32>>,
    ) -> Result<(), GpuError> {
        let gpu = &self.gpu;
        let sched = &self.sched;
        let (n, ldb, ldc) = (c.n(), b.ld(), c.ld());
        let (m, n32, ldb32, ldc32) = (self.rows as u32, n as u32, ldb as u32, ldc as u32);
        let sig = self.kernel.signature().ok_or_else(|| {
            AccSpmmError::InvalidArgs(format!("no {} kernel", self.kernel.name()))
        })?;
        let mut l = Launch::new(gpu.stream(), &self.main, sig);
        let b_ptr = l.borrow(b.buf());
        let c_ptr = l.borrow_mut(c.buf());
        let flags = launch_flags_at(ldb, ldc, b_ptr, c_ptr);
        match &self.tiles {
            Tiles::Masked { bvo, masks, values } => l
                .input(&self.rwo)
                .input(bvo)
                .input(&self.a2x)
                .input(masks)
                .input(values),
            Tiles::MaskedHalf { bvo, masks, values } => l
                .input(&self.rwo)
                .input(bvo)
                .input(&self.a2x)
                .input(masks)
                .input(values),
            Tiles::Dense { frag } => l.input(&self.rwo).input(&self.a2x).input(frag),
        };
        l.input(&sched.work)
            .input(&sched.window_split)
            .arg(Arg::Ptr(b_ptr))
            .u32(ldb32)
            .arg(Arg::Ptr(c_ptr))
            .u32(ldc32)
            .u32(m)
            .u32(n32)
            .f32(alpha)
            .f32(beta)
            .u32(flags);
        if self.kernel.arith.is_half() {
            // The split windows' scratch (none: count 0, never dereferenced).
            let ptr = scratch.map_or(0, |s| l.borrow_mut(s));
            l.input(sched.split.ids())
                .u32(sched.split.count() as u32)
                .arg(Arg::Ptr(ptr));
        }
        let launch_shape = if self.kernel.tma {
            Shape {
                grid: (shape.grid_x, shape.grid_y, 1),
                block: (32 * (shape.warps + 1), 1, 1),
                shared_bytes: tma_shared_bytes(shape.warps, self.kernel.window_rows),
            }
        } else {
            shape.config(0).into()
        };
        // SAFETY: (1) the arguments fill the row-tile entry chosen on upload
        // (`RowTileKernel::entry`, masked or dense parameter list matching `tiles`) in
        // kernels-ptx/row_tile_spmm.cu (SIGNATURES, checked against the PTX by a CPU test); the
        // element type of values, B and C is the entry's (f32 for TF32 and 3xTF32, enforced by
        // DeviceProduct's f32 operands; 16-bit for f16 / bf16: Tiles::MaskedHalf holds u16 bits,
        // and enqueue_half checked T::ARITH against the kernel's); flag bit 0 (float4 access, or
        // 8-byte access of four 16-bit values) is set only when ldb and ldc are multiples of 4 and
        // B and C start 16-byte aligned (launch_flags_at).
        // (2) Only C is written, borrowed mutably for this call (raw pointers through
        // device_ptr/device_ptr_mut, whose guards order the launch after earlier work on B and C); the matrix buffers are private and
        // never written after upload. (3) Every index is in bounds: the RowTileTcf invariants (held
        // by every RowTileTcf, see the struct docs) bound the window and block prefixes by the
        // array lengths, each block's value reads stay below block_value_offset[j + 1] (rank among
        // the block's mask bits, which count its values; the 16-bit value array has one entry per
        // f32 value), the kernel reads window_rows / 8 masks
        // per block (the entry matches the window height) or, dense, window_rows · 8 fragment
        // values per block (fragment_tiles wrote exactly blocks · window_rows · 8), and column ids
        // are < K or the sentinel (never dereferenced); flatten_schedule proved every work entry
        // lies inside the window and block counts of this matrix's row_window_offset (the one
        // uploaded) and window_split has one flag per window; the grid has one thread block per
        // work entry; checked_width (check_dense) proved (K−1)·ldb + n ≤ B.len() and (M−1)·ldc + n ≤ C.len()
        // in elements of B's and C's type, and the kernel guards features ≥ n and rows ≥ M.
        // (4) Split windows were pre-scaled on the same stream just before (f32 kernels); the
        // f16 / bf16 kernels add theirs into `scratch` (HALF_PARAMS' tail: the schedule's
        // ascending split window ids, their count, and scratch rows for split · window_rows · n
        // floats, zeroed on this stream by launch_half; with no split window the count is 0 and
        // the kernel takes no split branch, so the null scratch is never dereferenced).
        // (5) A TMA kernel gets one more warp than `shape` (its producer) and the dynamic shared
        // memory of tma_shared_bytes, which holds at least two stages of the size the kernel
        // derives from its block size (row_tile_tma.cuh); its bulk copies run only where flag
        // bit 0 and n % 4 == 0 make them aligned (else it copies through registers).
        unsafe { l.launch(launch_shape) }?;
        Ok(())
    }
}

/// Dynamic shared memory the TMA kernels aim to stay within per thread block (below the 48 KiB
/// a launch gets without opting in).
pub const TMA_SHARED_BUDGET: u32 = 40 << 10;

/// Most stages a TMA kernel keeps in flight.
pub const TMA_MAX_STAGES: u32 = 8;

/// Dynamic shared memory of a TMA row-tile launch with `consumer_warps` consumer warps on
/// `window_rows`-row windows: as many stages as [`TMA_SHARED_BUDGET`] holds (2 to
/// [`TMA_MAX_STAGES`]), each 8 B rows of `32·warps + 8` floats, the block's fragment tile
/// (`window_rows · 8` floats) and 20 bytes of barriers and valid mask (row_tile_tma.cuh divides
/// the size by the same stage size to find the stage count).
pub fn tma_shared_bytes(consumer_warps: u32, window_rows: u32) -> u32 {
    let stage = 8 * (32 * consumer_warps + 8) * 4 + window_rows * 8 * 4 + 20;
    (TMA_SHARED_BUDGET / stage).clamp(2, TMA_MAX_STAGES) * stage
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_formats::csr::csr_from_triplets;

    #[test]
    fn schedules_build_and_print() {
        let rwo = [0u32, 2, 22, 22, 25];
        let packed = RowTileSchedule::Packed(2).build(&rwo);
        packed.validate(&rwo).unwrap();
        assert_eq!(packed.work().len(), 2);
        assert_eq!(packed.num_split_windows(), 0);
        let split = RowTileSchedule::Split { max_blocks: 4 }.build(&rwo);
        split.validate(&rwo).unwrap();
        assert!(split.max_blocks_per_tb() <= 4);
        assert_eq!(split.window_split(), [0, 1, 0, 0]);
        assert_eq!(RowTileSchedule::Packed(0).to_string(), "1 window per TB");
        assert_eq!(RowTileSchedule::Packed(16).to_string(), "16 windows per TB");
        assert_eq!(
            RowTileSchedule::Split { max_blocks: 8 }.to_string(),
            "split, ≤ 8 blocks per TB"
        );
    }

    #[test]
    fn split_caps_fill_about_two_waves() {
        // N = 128: 4 warps per TB, 8 TBs per SM, 132 SMs → 1056 per wave.
        assert_eq!(split_caps(1_000, 128, 132), [4, 16]);
        assert_eq!(split_caps(2 * 1056 * 10, 128, 132), [10, 40]);
        // N = 512: 8 warps, 2 feature tiles → 132 · 4 / 2 = 264 TBs along x per wave.
        assert_eq!(split_caps(2 * 264 * 7, 512, 132), [7, 28]);
        assert_eq!(split_caps(usize::MAX / 4, 128, 132), [1 << 16, 1 << 18]);
    }

    #[test]
    fn every_kernel_has_its_entry_and_name() {
        let names: Vec<String> = KERNELS.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            ["TC16", "TC16d", "TC16d-tma", "TC32", "TC32d", "TC32d-tma"]
        );
        for (k, e) in KERNELS.iter().zip(ENTRIES) {
            assert_eq!(k.entry(), Some(e));
            let sig = k.signature().unwrap();
            assert_eq!(sig.name, e);
            let want: &[ParamKind] = if k.dense_tiles {
                &DENSE_PARAMS
            } else {
                &MASKED_PARAMS
            };
            assert_eq!(sig.params, want);
        }
        assert_eq!(RowTileKernel::new(64, false).entry(), None);
        assert_eq!(RowTileKernel::new(64, false).signature(), None);
        assert_eq!(
            SIGNATURES.len(),
            KERNELS.len() + 2 + TYPED_KERNELS.len() + FINISH_ENTRIES.len()
        );
    }

    #[test]
    fn tma_shared_memory_holds_two_to_eight_whole_stages_below_48_kib() {
        for warps in 1..=8u32 {
            for rows in [16u32, 32] {
                let bytes = tma_shared_bytes(warps, rows);
                // The kernel's stage: 8 padded B rows, the fragment tile, barriers and mask.
                let stage = 8 * (32 * warps + 8) * 4 + 32 * rows + 20;
                assert!(
                    (2..=8).contains(&(bytes / stage)),
                    "{warps} warps, {rows} rows"
                );
                assert!(bytes <= 48 << 10);
            }
        }
        assert_eq!(tma_shared_bytes(4, 16), 8 * (4352 + 512 + 20));
        assert_eq!(tma_shared_bytes(8, 32), 4 * (8448 + 1024 + 20));
    }

    #[test]
    fn tma_kernels_share_their_register_kernels_layout() {
        for (tma, reg) in [
            (RowTileKernel::TC16D_TMA, RowTileKernel::TC16D),
            (RowTileKernel::TC32D_TMA, RowTileKernel::TC32D),
        ] {
            assert!(tma.tma && tma.dense_tiles && !reg.tma);
            assert_eq!(tma.on_registers(), reg);
            assert_eq!(reg.on_registers(), reg);
            assert_eq!(
                tma.signature().unwrap().params,
                reg.signature().unwrap().params
            );
        }
    }

    #[test]
    fn typed_kernels_are_masked_and_named_by_their_arithmetic() {
        let names: Vec<String> = TYPED_KERNELS.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "TC16 3xTF32",
                "TC32 3xTF32",
                "TC16 f16",
                "TC32 f16",
                "TC16 bf16",
                "TC32 bf16"
            ]
        );
        for (k, e) in TYPED_KERNELS.iter().zip(TYPED_ENTRIES) {
            assert!(!k.dense_tiles);
            assert_ne!(k.arith, RowTileArith::Tf32);
            assert_eq!(k.entry(), Some(e));
            let sig = k.signature().unwrap();
            let want: &[ParamKind] = if k.arith.is_half() {
                &HALF_PARAMS
            } else {
                &MASKED_PARAMS
            };
            assert_eq!((sig.name, sig.params), (e, want));
        }
        // No dense-tile kernel in another arithmetic; TF32 kernels keep their names.
        for a in [RowTileArith::Tf32x3, RowTileArith::F16, RowTileArith::Bf16] {
            assert_eq!(RowTileKernel::TC16D.with_arith(a).entry(), None);
            assert_eq!(RowTileKernel::TC32D.with_arith(a).signature(), None);
        }
        assert_eq!(
            RowTileKernel::TC16.with_arith(RowTileArith::Tf32),
            RowTileKernel::TC16
        );
    }

    /// The f16 / bf16 kernels' fragment mapping, emulated lane by lane on the CPU: each lane
    /// decodes its tile values from the masks as `row_tile_spmm` does, packs them as
    /// `mma_row_tiles_half` does (k = 2t ↔ slot t, k = 2t + 1 ↔ slot t + 4), the m16n8k8 MMA
    /// runs on the matrices the PTX ISA's f16 fragment layouts assemble from the 32 lanes, and
    /// the C fragments go to the features `visit_row_tiles` writes. The result must be the
    /// product of the half-rounded A with B, for both window heights and a partial last
    /// feature group.
    #[test]
    #[allow(clippy::needless_range_loop)] // (indices as the kernel computes them)
    fn half_fragment_mapping_emulated_gives_the_product() {
        let t: Vec<(u32, u32, f32)> = (0..45u32)
            .flat_map(|r| {
                (0..40u32)
                    .filter(move |c| (r * 7 + c * 5) % 9 < 4)
                    .map(move |c| (r, c, 0.5 + ((r * 13 + c * 29) % 17) as f32 / 7.0))
            })
            .collect();
        let a = csr_from_triplets(45, 40, &t).unwrap();
        let n = 40usize; // one full 32-feature warp and a partial one
        let b: Vec<f32> = (0..40 * n)
            .map(|i| half::f16::from_f32(((i * 37) % 23) as f32 / 8.0 - 1.0).to_f32())
            .collect();
        // A goes up as f16(a / s), s = half_scale (a power of two); α·s restores the product.
        let scale = half_scale(a.data(), RowTileArith::F16);
        let round = |v: f32| half::f16::from_f32(v / scale).to_f32() * scale;
        let mut want = vec![0f64; 45 * n];
        for &(r, c, v) in &t {
            for f in 0..n {
                want[r as usize * n + f] += round(v) as f64 * b[c as usize * n + f] as f64;
            }
        }
        for rows in [16usize, 32] {
            let m = RowTileTcf::from_csr(&a, rows).unwrap();
            assert_eq!(half_scale(m.values(), RowTileArith::F16), scale);
            let vals: Vec<f32> = half_bits(m.values(), RowTileArith::F16, scale)
                .into_iter()
                .map(|h| half::f16::from_bits(h).to_f32())
                .collect();
            let mt = rows / 16;
            let mut got = vec![0f64; 45 * n];
            let bval = |col: u32, f: usize| {
                if col == SENTINEL || f >= n {
                    0.0
                } else {
                    b[col as usize * n + f] as f64
                }
            };
            for w in 0..m.num_windows() {
                for f0 in (0..n).step_by(32) {
                    // acc[lane][i][j][e]
                    let mut acc = vec![[[[0f64; 4]; 4]; 2]; 32];
                    let rwo = m.row_window_offset();
                    for blk in rwo[w] as usize..rwo[w + 1] as usize {
                        let cols = &m.block_cols()[8 * blk..8 * blk + 8];
                        let mut base = m.block_value_offset()[blk] as usize;
                        for i in 0..mt {
                            let (lo, hi) = (
                                m.masks()[2 * mt * blk + 2 * i],
                                m.masks()[2 * mt * blk + 2 * i + 1],
                            );
                            let base_hi = base + lo.count_ones() as usize;
                            let value = |mask: u64, base: usize, p: u32| {
                                if (mask >> p) & 1 == 1 {
                                    vals[base + (mask & ((1u64 << p) - 1)).count_ones() as usize]
                                        as f64
                                } else {
                                    0.0
                                }
                            };
                            // The 16×8 A and 8×8 B of one MMA, assembled from the lanes'
                            // packed registers by the PTX f16 m16n8k8 layouts.
                            let mut am = [[0f64; 8]; 16];
                            let mut bm = [[[0f64; 8]; 8]; 4];
                            for lane in 0..32 {
                                let (g, tt) = (lane / 4, lane % 4);
                                let p0 = (8 * g + tt) as u32;
                                // a01 = {T[g][t], T[g][t+4]}, a23 = {T[g+8][t], T[g+8][t+4]}
                                let a01 = [value(lo, base, p0), value(lo, base, p0 + 4)];
                                let a23 = [value(hi, base_hi, p0), value(hi, base_hi, p0 + 4)];
                                am[g][2 * tt] = a01[0];
                                am[g][2 * tt + 1] = a01[1];
                                am[g + 8][2 * tt] = a23[0];
                                am[g + 8][2 * tt + 1] = a23[1];
                                for (j, bj) in bm.iter_mut().enumerate() {
                                    let f = f0 + 4 * g + j;
                                    // b[j] = {B[col[t]][f], B[col[t+4]][f]} = B rows 2t, 2t+1, column g
                                    bj[2 * tt][g] = bval(cols[tt], f);
                                    bj[2 * tt + 1][g] = bval(cols[tt + 4], f);
                                }
                            }
                            for (j, bj) in bm.iter().enumerate() {
                                for lane in 0..32 {
                                    let (g, tt) = (lane / 4, lane % 4);
                                    // c0, c1 = D[g][2t], D[g][2t+1]; c2, c3 = D[g+8][..]
                                    for (e, (r, c)) in [
                                        (g, 2 * tt),
                                        (g, 2 * tt + 1),
                                        (g + 8, 2 * tt),
                                        (g + 8, 2 * tt + 1),
                                    ]
                                    .into_iter()
                                    .enumerate()
                                    {
                                        acc[lane][i][j][e] +=
                                            (0..8).map(|k| am[r][k] * bj[k][c]).sum::<f64>();
                                    }
                                }
                            }
                            base = base_hi + hi.count_ones() as usize;
                        }
                    }
                    // visit_row_tiles: [0] (16i+g, f0+8t+j), [1] (16i+g, f0+8t+4+j),
                    // [2] (16i+g+8, f0+8t+j), [3] (16i+g+8, f0+8t+4+j).
                    for (lane, al) in acc.iter().enumerate() {
                        let (g, tt) = (lane / 4, lane % 4);
                        for (i, ai) in al.iter().enumerate().take(mt) {
                            for (j, aj) in ai.iter().enumerate() {
                                for (e, &v) in aj.iter().enumerate() {
                                    let row = rows * w + 16 * i + g + 8 * (e / 2);
                                    let f = f0 + 8 * tt + 4 * (e % 2) + j;
                                    if row < 45 && f < n {
                                        got[row * n + f] += scale as f64 * v; // the launch's α·s
                                    }
                                }
                            }
                        }
                    }
                }
            }
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "rows {rows}, element {k}: {g} vs {w}"
                );
            }
        }
    }

    /// The f16 scale puts the largest finite |value| in [2¹⁴, 2¹⁵) (so nothing overflows and
    /// the small values keep f16's normal range), ignores NaN and ∞, and is 1 for bf16, the f32
    /// kernels and matrices without a finite nonzero.
    #[test]
    fn f16_scale_centres_the_largest_value_below_the_range() {
        for max in [1.0f32, 0.75, 1e-5, 3.0e4, 65504.0, 1e10, 3.0e38, 1e-30] {
            let v = [max / 3.0, -max, f32::NAN, f32::INFINITY, 0.0];
            let s = half_scale(&v, RowTileArith::F16);
            assert_eq!(s.log2().fract(), 0.0, "{max}: a power of two");
            let top = max / s;
            assert!((16384.0..32768.0).contains(&top), "{max}: {top}");
            let h = half_bits(&v, RowTileArith::F16, s);
            // The largest value comes back within f16's relative rounding, and so does a third
            // of it.
            for (i, want) in [(0usize, max / 3.0), (1, -max)] {
                let back = half::f16::from_bits(h[i]).to_f32() as f64 * s as f64;
                let err = (back - want as f64).abs();
                assert!(
                    err <= 2f64.powi(-11) * (want as f64).abs(),
                    "{max}: {back} vs {want}"
                );
            }
        }
        for arith in [RowTileArith::Bf16, RowTileArith::Tf32, RowTileArith::Tf32x3] {
            assert_eq!(half_scale(&[1e10, 3.0], arith), 1.0);
        }
        assert_eq!(half_scale(&[0.0, f32::NAN], RowTileArith::F16), 1.0);
        assert_eq!(half_scale(&[], RowTileArith::F16), 1.0);
    }

    /// A's values go up rounded to the kernel's type as `half` rounds (to nearest even, beyond
    /// the range ±∞, NaN stays NaN), after the division by the scale (exact, a power of two).
    #[test]
    fn half_values_round_as_half_does() {
        let v = [
            1.0f32,
            0.1,
            -65519.0,
            65520.0,
            1e-8,
            f32::NAN,
            f32::INFINITY,
            3.0e38,
        ];
        let f = half_bits(&v, RowTileArith::F16, 1.0);
        let b = half_bits(&v, RowTileArith::Bf16, 1.0);
        for ((&x, &hf), &hb) in v.iter().zip(&f).zip(&b) {
            let (hf, hb) = (half::f16::from_bits(hf), half::bf16::from_bits(hb));
            if x.is_nan() {
                assert!(hf.is_nan() && hb.is_nan());
                continue;
            }
            assert_eq!(hf, half::f16::from_f32(x), "{x}");
            assert_eq!(hb, half::bf16::from_f32(x), "{x}");
        }
        assert_eq!(half::f16::from_bits(f[2]).to_f32(), -65504.0);
        assert_eq!(half::f16::from_bits(f[3]).to_f32(), f32::INFINITY);
        // bf16 has f32's range: 3e38 stays finite.
        assert!(half::bf16::from_bits(b[7]).to_f32().is_finite());
    }

    #[test]
    fn dense_tiles_are_not_tried_without_nonzeros_or_when_too_sparse() {
        let empty = RowTileTcf::from_csr(&csr_from_triplets(40, 40, &[]).unwrap(), 16).unwrap();
        assert_eq!(dense_slots_per_nnz(&empty), f64::INFINITY);
        assert!(!dense_tiles_worth_trying(&empty));
        // One nonzero per 16×8 block: 128 slots per nonzero.
        let diag: Vec<_> = (0..64u32).step_by(16).map(|i| (i, i, 1.0)).collect();
        let sparse = RowTileTcf::from_csr(&csr_from_triplets(64, 64, &diag).unwrap(), 16).unwrap();
        assert_eq!(dense_slots_per_nnz(&sparse), 128.0);
        assert!(!dense_tiles_worth_trying(&sparse));
        // A full 16×8 block: 1 slot per nonzero.
        let full: Vec<_> = (0..16u32)
            .flat_map(|r| (0..8u32).map(move |c| (r, c, 1.0)))
            .collect();
        let dense = RowTileTcf::from_csr(&csr_from_triplets(16, 8, &full).unwrap(), 16).unwrap();
        assert_eq!(dense_slots_per_nnz(&dense), 1.0);
        assert!(dense_tiles_worth_trying(&dense));
    }

    /// Every fragment slot holds the tile entry the kernel's a0..a3 mapping names, TF32-rounded,
    /// for both heights (rebuilt here from the CSR, not from the masks).
    #[test]
    fn fragment_tiles_follow_the_mma_a_layout() {
        let t: Vec<(u32, u32, f32)> = (0..45u32)
            .flat_map(|r| {
                (0..40u32)
                    .filter(move |c| (r * 5 + c * 3) % 7 < 3)
                    .map(move |c| (r, c, 1.0 + r as f32 / 3.0 + c as f32 / 1024.0))
            })
            .collect();
        let a = csr_from_triplets(45, 40, &t).unwrap();
        let dense = |r: usize, c: u32| {
            t.iter()
                .find(|&&(tr, tc, _)| tr as usize == r && tc == c)
                .map_or(0.0, |&(_, _, v)| to_tf32(v))
        };
        for rows in [16usize, 32] {
            let m = RowTileTcf::from_csr(&a, rows).unwrap();
            let frag = fragment_tiles(&m);
            let mt = rows / 16;
            assert_eq!(frag.len(), m.num_blocks() * rows * 8);
            assert!((dense_slots_per_nnz(&m) - frag.len() as f64 / a.nnz() as f64).abs() < 1e-12);
            for w in 0..m.num_windows() {
                for j in m.row_window_offset()[w] as usize..m.row_window_offset()[w + 1] as usize {
                    let cols = &m.block_cols()[8 * j..8 * j + 8];
                    let at = |row: usize, slot: usize| {
                        let r = rows * w + row;
                        if r >= a.rows() || cols[slot] == SENTINEL {
                            0.0
                        } else {
                            dense(r, cols[slot])
                        }
                    };
                    for lane in 0..32 {
                        let (g, s) = (lane / 4, lane % 4);
                        for i in 0..mt {
                            let got = &frag[(j * 32 * mt + lane * mt + i) * 4..][..4];
                            let r0 = 16 * i + g;
                            let want = [at(r0, s), at(r0 + 8, s), at(r0, s + 4), at(r0 + 8, s + 4)];
                            assert_eq!(got, want, "rows {rows}, block {j}, lane {lane}, tile {i}");
                        }
                    }
                }
            }
        }
    }
}
