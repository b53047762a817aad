//! Acc-SpMM (BitTCF, TF32 tensor cores) launch code: `C = α·A·B + β·C` with A in BitTCF, B and C
//! dense row-major f32 on the device.
//!
//! [`AccSpmmDevice::upload`] validates the BitTCF arrays and the [`AccSchedule`] once (every index
//! the kernel will dereference is checked here, see [`check_parts`] and [`flatten_schedule`]) and
//! uploads them; [`AccSpmmDevice::launch`] then only checks the dense operands' sizes and launches
//! `acc_spmm_tf32` (plus `acc_spmm_prescale` when the schedule splits windows). The kernel itself is
//! documented in `kernels-ptx/acc_spmm.cu` and `docs/kernels/acc-spmm.md`.
//!
//! Everything that is not a launch (validation, launch shapes, and [`emulate`], a lane-exact CPU model
//! of the kernel's data path) runs and is tested without a GPU.

use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_planner::AccSchedule;
use thiserror::Error;

use crate::csr_spmm::upload_nonempty;
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Column id marking a padding slot of a TC block (its B row is treated as zero).
pub const SENTINEL: u32 = u32::MAX;
/// Kernel entry with block metadata staged by `cp.async` in shared memory (the paper's pipeline).
pub const ENTRY_SHARED: &str = "acc_spmm_tf32";
/// Kernel entry with block metadata loaded into registers by every warp (no barriers).
pub const ENTRY_REGISTER: &str = "acc_spmm_tf32_reg";
/// Kernel entry with register metadata and a per-warp B-row cache in shared memory.
pub const ENTRY_CACHE: &str = "acc_spmm_tf32_cache";
/// Kernel entry that pre-scales the rows of split windows by β.
pub const ENTRY_PRESCALE: &str = "acc_spmm_prescale";
/// Largest B-row cache: 2^10 slots per warp (132 KiB per warp; the launch also checks the device's
/// shared-memory limit).
pub const MAX_CACHE_LOG2: u8 = 10;
/// Shared-memory bytes per cache slot: a 128-byte row slice (32 features) and a 4-byte tag.
const CACHE_SLOT_BYTES: u32 = 132;

/// Parameters of the main entries, in order (`acc_spmm_tf32`, `acc_spmm_tf32_reg`).
const MAIN_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // rwo
    ParamKind::Ptr, // bvo
    ParamKind::Ptr, // a2b
    ParamKind::Ptr, // bits
    ParamKind::Ptr, // values
    ParamKind::Ptr, // work
    ParamKind::Ptr, // window_split
    ParamKind::Ptr, // B
    ParamKind::U32, // ldb
    ParamKind::Ptr, // C
    ParamKind::U32, // ldc
    ParamKind::U32, // M
    ParamKind::U32, // N
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::U32, // flags
];

/// Parameters of `acc_spmm_tf32_cache`: [`MAIN_PARAMS`] and `cache_log2`.
const CACHE_PARAMS: [ParamKind; MAIN_PARAMS.len() + 1] = {
    let mut p = [ParamKind::U32; MAIN_PARAMS.len() + 1];
    let mut i = 0;
    while i < MAIN_PARAMS.len() {
        p[i] = MAIN_PARAMS[i];
        i += 1;
    }
    p // the last one stays U32: cache_log2
};

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[
    KernelSignature {
        module: KernelModule::AccSpmm,
        name: ENTRY_SHARED,
        params: MAIN_PARAMS,
    },
    KernelSignature {
        module: KernelModule::AccSpmm,
        name: ENTRY_REGISTER,
        params: MAIN_PARAMS,
    },
    KernelSignature {
        module: KernelModule::AccSpmm,
        name: ENTRY_CACHE,
        params: &CACHE_PARAMS,
    },
    KernelSignature {
        module: KernelModule::AccSpmm,
        name: ENTRY_PRESCALE,
        params: &[
            ParamKind::Ptr, // split_windows
            ParamKind::U32, // count
            ParamKind::Ptr, // C
            ParamKind::U32, // ldc
            ParamKind::U32, // M
            ParamKind::U32, // N
            ParamKind::F32, // beta
            ParamKind::U32, // window_rows
        ],
    },
];
/// Most warps per thread block (the kernel's `__launch_bounds__`).
pub const MAX_WARPS: u32 = 8;
/// Threads per block of the pre-scale kernel.
const PRESCALE_THREADS: u32 = 256;

/// Errors of the Acc-SpMM launch path. Bad inputs are reported, never launched.
#[derive(Debug, Error)]
pub enum AccSpmmError {
    /// The BitTCF arrays break an invariant the kernel relies on.
    #[error("invalid BitTCF arrays: {0}")]
    InvalidFormat(String),
    /// The schedule does not cover the matrix as the kernel needs.
    #[error("invalid Acc-SpMM schedule: {0}")]
    InvalidSchedule(String),
    /// Dense operands or sizes do not match the prepared matrix.
    #[error("invalid SpMM arguments: {0}")]
    InvalidArgs(String),
    /// The GPU runtime failed (module load, allocation).
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0:?}")]
    Driver(cudarc::driver::DriverError),
}

impl From<cudarc::driver::DriverError> for AccSpmmError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Self::Driver(e)
    }
}

/// Which kernel entry executes the product (same results, different metadata staging).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccVariant {
    /// Block metadata by `cp.async` into a shared double buffer, one barrier per block (the
    /// paper's design; 10–40 % slower than [`AccVariant::RegisterMeta`] on the H200).
    SharedMeta,
    /// Block metadata loaded into registers by each warp, no barriers (the default: faster on every
    /// matrix measured, see docs/kernels/acc-spmm.md).
    #[default]
    RegisterMeta,
    /// [`AccVariant::RegisterMeta`] plus a per-warp direct-mapped cache of `2^log2_slots` B-row
    /// slices in shared memory (`132 · 2^log2_slots` bytes per warp): row windows that share
    /// columns (banded, clustered matrices under a packed schedule) read B rows from shared memory
    /// instead of L1/L2. Same results as the other variants.
    CachedRows {
        /// log2 of the slots per warp, at most [`MAX_CACHE_LOG2`].
        log2_slots: u8,
    },
}

impl AccVariant {
    /// The PTX entry name.
    pub fn entry(self) -> &'static str {
        match self {
            Self::SharedMeta => ENTRY_SHARED,
            Self::RegisterMeta => ENTRY_REGISTER,
            Self::CachedRows { .. } => ENTRY_CACHE,
        }
    }

    /// Dynamic shared memory of one thread block of `warps` warps, in bytes (0 without a cache).
    pub fn dynamic_smem_bytes(self, warps: u32) -> u32 {
        match self {
            Self::CachedRows { log2_slots } => {
                warps * (CACHE_SLOT_BYTES << log2_slots.min(MAX_CACHE_LOG2))
            }
            _ => 0,
        }
    }
}

impl std::fmt::Display for AccVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SharedMeta => write!(f, "shared metadata"),
            Self::RegisterMeta => write!(f, "register metadata"),
            Self::CachedRows { log2_slots } => {
                write!(f, "B-row cache of {} rows", 1u32 << log2_slots)
            }
        }
    }
}

/// The BitTCF arrays as plain slices (what the kernel reads). Built from a [`BitTcf`] with
/// [`AccSpmmParts::from_bittcf`], or directly by tests.
#[derive(Clone, Copy, Debug)]
pub struct AccSpmmParts<'a> {
    /// Rows of A (M).
    pub rows: usize,
    /// Columns of A (K), i.e. rows of B.
    pub cols: usize,
    /// Prefix of blocks per 8-row window, `ceil(M/8) + 1` entries.
    pub row_window_offset: &'a [u32],
    /// Prefix of values per block, `blocks + 1` entries.
    pub block_value_offset: &'a [u32],
    /// 8 column ids per block, [`SENTINEL`] for padding.
    pub sparse_a_to_b: &'a [u32],
    /// One mask per block, bit = local_row·8 + slot.
    pub tc_local_bit: &'a [u64],
    /// Values per block in bit order.
    pub values: &'a [f32],
}

impl<'a> AccSpmmParts<'a> {
    /// Borrows the arrays of a BitTCF matrix.
    pub fn from_bittcf(m: &'a BitTcf) -> Self {
        Self {
            rows: m.rows(),
            cols: m.cols(),
            row_window_offset: m.row_window_offset(),
            block_value_offset: m.block_value_offset(),
            sparse_a_to_b: m.sparse_a_to_b(),
            tc_local_bit: m.tc_local_bit(),
            values: m.values(),
        }
    }

    /// Number of 8-row windows.
    pub fn num_windows(&self) -> usize {
        self.row_window_offset.len().saturating_sub(1)
    }

    /// Number of TC blocks.
    pub fn num_blocks(&self) -> usize {
        self.tc_local_bit.len()
    }
}

/// Checks every invariant of the BitTCF arrays that the kernel's memory accesses rely on: window
/// count = ⌈M/8⌉, offsets start at 0, never decrease and end at the block / value counts, each block's
/// value count equals its mask's popcount, every column id is `< K` or [`SENTINEL`], and all sizes fit
/// the kernel's u32 indices.
pub fn check_parts(p: &AccSpmmParts<'_>) -> Result<(), AccSpmmError> {
    let bad = |s: String| Err(AccSpmmError::InvalidFormat(s));
    let windows = p.rows.div_ceil(8);
    if p.rows > u32::MAX as usize - 8 || p.cols >= u32::MAX as usize {
        return bad(format!(
            "{}×{} is too large for u32 indices",
            p.rows, p.cols
        ));
    }
    if p.row_window_offset.len() != windows + 1 {
        return bad(format!(
            "row_window_offset has {} entries, need ⌈{}/8⌉ + 1 = {}",
            p.row_window_offset.len(),
            p.rows,
            windows + 1
        ));
    }
    let blocks = p.tc_local_bit.len();
    if blocks >= (u32::MAX / 8) as usize || p.values.len() >= u32::MAX as usize {
        return bad(format!(
            "{blocks} blocks / {} values exceed u32 indices",
            p.values.len()
        ));
    }
    if p.row_window_offset[0] != 0 || p.row_window_offset[windows] as usize != blocks {
        return bad(format!(
            "row_window_offset must run from 0 to {blocks}, runs from {} to {}",
            p.row_window_offset[0], p.row_window_offset[windows]
        ));
    }
    if let Some(w) = p.row_window_offset.windows(2).position(|x| x[1] < x[0]) {
        return bad(format!("row_window_offset decreases at window {w}"));
    }
    if p.block_value_offset.len() != blocks + 1 || p.sparse_a_to_b.len() != 8 * blocks {
        return bad(format!(
            "{blocks} blocks need {} value offsets and {} column ids, got {} and {}",
            blocks + 1,
            8 * blocks,
            p.block_value_offset.len(),
            p.sparse_a_to_b.len()
        ));
    }
    if p.block_value_offset[0] != 0 || p.block_value_offset[blocks] as usize != p.values.len() {
        return bad(format!(
            "block_value_offset must run from 0 to {}, runs from {} to {}",
            p.values.len(),
            p.block_value_offset[0],
            p.block_value_offset[blocks]
        ));
    }
    for (j, &mask) in p.tc_local_bit.iter().enumerate() {
        let (lo, hi) = (p.block_value_offset[j], p.block_value_offset[j + 1]);
        if hi < lo || hi - lo != mask.count_ones() {
            return bad(format!(
                "block {j}: {} values stored but its mask has {} bits",
                hi as i64 - lo as i64,
                mask.count_ones()
            ));
        }
    }
    if let Some(i) = p
        .sparse_a_to_b
        .iter()
        .position(|&c| c != SENTINEL && c as usize >= p.cols)
    {
        return bad(format!(
            "column id {} at slot {i} is ≥ K = {}",
            p.sparse_a_to_b[i], p.cols
        ));
    }
    Ok(())
}

/// A validated schedule in the kernel's layout: 4 u32 per thread block (window_begin, window_end,
/// block_begin, block_end), one split flag per window, and the list of split windows (for the β
/// pre-scale kernel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatSchedule {
    /// `[window_begin, window_end, block_begin, block_end]` per thread block, flattened.
    pub work: Vec<u32>,
    /// 1 where a window is spread over several thread blocks (atomicAdd after β pre-scale).
    pub window_split: Vec<u8>,
    /// The windows with `window_split == 1`, ascending.
    pub split_windows: Vec<u32>,
}

impl FlatSchedule {
    /// Number of thread blocks.
    pub fn num_tbs(&self) -> usize {
        self.work.len() / 4
    }
}

/// Validates a schedule given as `(window_begin, window_end, block_begin, block_end)` per thread
/// block plus per-window split flags, against the BitTCF `row_window_offset`, and flattens it.
///
/// Checks: every range inside the matrix; a thread block's blocks lie inside its windows
/// (`rwo[wb] ≤ bb ≤ be ≤ rwo[we]`); the block ranges tile `[0, blocks)` exactly once; every window is
/// in at least one thread block's range and an unsplit window in exactly one (so its rows are written
/// once, non-atomically, and nothing is left unwritten).
pub fn flatten_schedule(
    row_window_offset: &[u32],
    work: impl IntoIterator<Item = [u64; 4]>,
    window_split: &[u8],
) -> Result<FlatSchedule, AccSpmmError> {
    let bad = |s: String| Err(AccSpmmError::InvalidSchedule(s));
    let windows = row_window_offset.len().saturating_sub(1);
    let blocks = row_window_offset.last().copied().unwrap_or(0) as u64;
    if window_split.len() != windows {
        return bad(format!(
            "{} split flags for {windows} windows",
            window_split.len()
        ));
    }
    let mut flat = Vec::new();
    let mut cover = vec![0i64; windows + 1];
    let mut ranges = Vec::new();
    for (tb, [wb, we, bb, be]) in work.into_iter().enumerate() {
        if wb > we || we > windows as u64 || bb > be || be > blocks {
            return bad(format!(
                "thread block {tb}: ranges {wb}..{we} / {bb}..{be} out of bounds"
            ));
        }
        if wb < we {
            let (lo, hi) = (
                row_window_offset[wb as usize] as u64,
                row_window_offset[we as usize] as u64,
            );
            if bb < lo || be > hi {
                return bad(format!(
                    "thread block {tb}: blocks {bb}..{be} outside its windows' blocks {lo}..{hi}"
                ));
            }
            cover[wb as usize] += 1;
            cover[we as usize] -= 1;
        } else if bb < be {
            return bad(format!("thread block {tb} has blocks but no windows"));
        }
        if bb < be {
            ranges.push((bb, be, tb));
        }
        flat.extend([wb as u32, we as u32, bb as u32, be as u32]);
    }
    ranges.sort_unstable();
    let mut next = 0u64;
    for &(bb, be, tb) in &ranges {
        if bb != next {
            return bad(format!(
                "blocks {next}..{bb} {} (at thread block {tb})",
                if bb > next {
                    "are in no thread block"
                } else {
                    "are in two thread blocks"
                }
            ));
        }
        next = be;
    }
    if next != blocks {
        return bad(format!("blocks {next}..{blocks} are in no thread block"));
    }
    let mut count = 0i64;
    let mut split_windows = Vec::new();
    for w in 0..windows {
        count += cover[w];
        let split = window_split[w];
        if split > 1 {
            return bad(format!("window {w}: split flag {split} is not 0 or 1"));
        }
        if count == 0 {
            return bad(format!(
                "window {w} is in no thread block's range (rows left unwritten)"
            ));
        }
        if split == 0 && count != 1 {
            return bad(format!(
                "window {w} is not flagged split but {count} thread blocks cover it"
            ));
        }
        if split == 1 {
            split_windows.push(w as u32);
        }
    }
    Ok(FlatSchedule {
        work: flat,
        window_split: window_split.to_vec(),
        split_windows,
    })
}

/// [`flatten_schedule`] for a planner [`AccSchedule`].
pub fn flatten_acc_schedule(
    row_window_offset: &[u32],
    schedule: &AccSchedule,
) -> Result<FlatSchedule, AccSpmmError> {
    flatten_schedule(
        row_window_offset,
        schedule.work().iter().map(|w| {
            [
                w.window_begin as u64,
                w.window_end as u64,
                w.block_begin as u64,
                w.block_end as u64,
            ]
        }),
        schedule.window_split(),
    )
}

/// The unbalanced schedule (one thread block per window, nothing split), built locally so that the
/// kernel can run without a planner schedule.
pub fn unbalanced_schedule(row_window_offset: &[u32]) -> FlatSchedule {
    let windows = row_window_offset.len().saturating_sub(1);
    let mut work = Vec::with_capacity(4 * windows);
    for w in 0..windows {
        work.extend([
            w as u32,
            w as u32 + 1,
            row_window_offset[w],
            row_window_offset[w + 1],
        ]);
    }
    FlatSchedule {
        work,
        window_split: vec![0; windows],
        split_windows: Vec::new(),
    }
}

/// Grid and block shape of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Warps per thread block (each owns 32 features).
    pub warps: u32,
    /// Features per thread block, `32 · warps`.
    pub features_per_tb: u32,
    /// Thread blocks along x (one per schedule entry).
    pub grid_x: u32,
    /// Feature tiles along y, `⌈N / features_per_tb⌉`.
    pub grid_y: u32,
}

impl LaunchShape {
    /// As a cudarc launch configuration with `shared_mem_bytes` of dynamic shared memory.
    pub fn config(&self, shared_mem_bytes: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.grid_x, self.grid_y, 1),
            block_dim: (32 * self.warps, 1, 1),
            shared_mem_bytes,
        }
    }
}

/// Launch shape for `n` features and `num_tbs` schedule entries: `⌈n/32⌉` warps are split into
/// `⌈warps/8⌉` feature tiles of equal width (so N = 384 runs 2 tiles of 6 warps, not 8 + 4).
/// `None` when there is nothing to launch (`n == 0` or no thread blocks).
pub fn launch_shape(n: usize, num_tbs: usize) -> Result<Option<LaunchShape>, AccSpmmError> {
    if n == 0 || num_tbs == 0 {
        return Ok(None);
    }
    if num_tbs > i32::MAX as usize || n > u32::MAX as usize / 2 {
        return Err(AccSpmmError::InvalidArgs(format!(
            "n = {n}, {num_tbs} thread blocks too large"
        )));
    }
    let total_warps = n.div_ceil(32);
    let tiles = total_warps.div_ceil(MAX_WARPS as usize);
    let warps = total_warps.div_ceil(tiles);
    if tiles > 65_535 {
        return Err(AccSpmmError::InvalidArgs(format!(
            "n = {n} needs {tiles} > 65535 feature tiles"
        )));
    }
    Ok(Some(LaunchShape {
        warps: warps as u32,
        features_per_tb: 32 * warps as u32,
        grid_x: num_tbs as u32,
        grid_y: tiles as u32,
    }))
}

/// Kernel flags: bit 0 = float4 loads of B and stores of C (needs `ldb` and `ldc` multiples of 4,
/// with 16-byte aligned buffers, which device allocations are).
pub fn launch_flags(ldb: usize, ldc: usize) -> u32 {
    u32::from(ldb.is_multiple_of(4) && ldc.is_multiple_of(4))
}

/// Checks that a row-major operand of `rows × n` with leading dimension `ld` fits in `len` elements.
pub fn check_dense(
    what: &str,
    len: usize,
    rows: usize,
    n: usize,
    ld: usize,
) -> Result<(), AccSpmmError> {
    if ld < n {
        return Err(AccSpmmError::InvalidArgs(format!(
            "{what}: leading dimension {ld} < n = {n}"
        )));
    }
    if ld > u32::MAX as usize {
        return Err(AccSpmmError::InvalidArgs(format!(
            "{what}: leading dimension {ld} > u32::MAX"
        )));
    }
    let need = if rows == 0 || n == 0 {
        0
    } else {
        (rows - 1) * ld + n
    };
    if len < need {
        return Err(AccSpmmError::InvalidArgs(format!(
            "{what}: {len} elements, a {rows}×{n} matrix with leading dimension {ld} needs {need}"
        )));
    }
    Ok(())
}

/// Rounds an f32 to TF32 the way `cvt.rna.tf32.f32` does (nearest, ties away from zero; 10 explicit
/// mantissa bits). Non-finite values pass through.
pub fn to_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    f32::from_bits((x.to_bits().wrapping_add(0x1000)) & 0xFFFF_E000)
}

/// Lane-exact CPU model of `acc_spmm_tf32`: walks the flattened schedule per thread block, feature
/// tile and warp, forms each lane's mma.sync fragments with exactly the kernel's index expressions
/// (a0 = B[col[t]][f0+4g+2h], …, b0 = T[g][t] decoded by popcount, …), multiplies them with the documented
/// m16n8k8 layout (TF32 inputs, f32 accumulate in k order) and scatters c0..c3 as the kernel does,
/// including the split-window β pre-scale and the atomic adds. It is the CPU test that the kernel's
/// mapping, guards and schedule walk are right; the GPU tests then check the hardware agrees.
///
/// Inputs must have passed [`check_parts`], [`flatten_schedule`] and [`check_dense`].
#[allow(clippy::too_many_arguments)]
pub fn emulate(
    p: &AccSpmmParts<'_>,
    s: &FlatSchedule,
    alpha: f32,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    n: usize,
) {
    let Ok(Some(shape)) = launch_shape(n, s.num_tbs()) else {
        return;
    };
    let rows = p.rows;
    // β pre-scale of split windows.
    for &w in &s.split_windows {
        for r in 8 * w as usize..(8 * w as usize + 8).min(rows) {
            for f in 0..n {
                let v = &mut c[r * ldc + f];
                *v = if beta == 0.0 { 0.0 } else { beta * *v };
            }
        }
    }
    let load_b = |col: u32, f: usize| -> f32 {
        if col == SENTINEL || f >= n {
            0.0
        } else {
            b[col as usize * ldb + f]
        }
    };
    for tb in 0..s.num_tbs() {
        let [wb, we, bb, be] = [0, 1, 2, 3].map(|i| s.work[4 * tb + i] as usize);
        for y in 0..shape.grid_y as usize {
            for warp in 0..shape.warps as usize {
                let f0 = y * shape.features_per_tb as usize + 32 * warp;
                if f0 >= n {
                    continue;
                }
                let mut blk = bb;
                for w in wb..we {
                    let wend = (p.row_window_offset[w + 1] as usize).min(be);
                    let touched = blk < wend;
                    // acc[lane][h][k]
                    let mut acc = [[[0f32; 4]; 2]; 32];
                    while blk < wend {
                        let mask = p.tc_local_bit[blk];
                        let vo = p.block_value_offset[blk] as usize;
                        let cols = &p.sparse_a_to_b[8 * blk..8 * blk + 8];
                        // Per-lane operands, exactly as the kernel loads them.
                        let mut a = [[[0f32; 4]; 2]; 32];
                        let mut bop = [[0f32; 2]; 32];
                        for (lane, (a_l, b_l)) in a.iter_mut().zip(bop.iter_mut()).enumerate() {
                            let (g, t) = (lane / 4, lane % 4);
                            let (clo, chi) = (cols[t], cols[t + 4]);
                            for (h, a_h) in a_l.iter_mut().enumerate() {
                                let fa = f0 + 4 * g + 2 * h;
                                *a_h = [
                                    load_b(clo, fa),
                                    load_b(clo, fa + 1),
                                    load_b(chi, fa),
                                    load_b(chi, fa + 1),
                                ]
                                .map(to_tf32);
                            }
                            for (i, p_bit) in [8 * g + t, 8 * g + t + 4].into_iter().enumerate() {
                                b_l[i] = if mask >> p_bit & 1 == 1 {
                                    let idx =
                                        vo + (mask & ((1u64 << p_bit) - 1)).count_ones() as usize;
                                    to_tf32(p.values[idx])
                                } else {
                                    0.0
                                };
                            }
                        }
                        // Reassemble the fragments with the documented layout and multiply.
                        for h in 0..2 {
                            if h == 1 && f0 + 2 >= n {
                                continue;
                            }
                            let mut am = [[0f32; 8]; 16];
                            let mut bm = [[0f32; 8]; 8];
                            for lane in 0..32 {
                                let (g, t) = (lane / 4, lane % 4);
                                am[g][t] = a[lane][h][0];
                                am[g + 8][t] = a[lane][h][1];
                                am[g][t + 4] = a[lane][h][2];
                                am[g + 8][t + 4] = a[lane][h][3];
                                bm[t][g] = bop[lane][0];
                                bm[t + 4][g] = bop[lane][1];
                            }
                            for (lane, acc_l) in acc.iter_mut().enumerate() {
                                let (g, t) = (lane / 4, lane % 4);
                                let d = |m: usize, nn: usize| {
                                    (0..8).map(|k| am[m][k] * bm[k][nn]).sum::<f32>()
                                };
                                acc_l[h][0] += d(g, 2 * t);
                                acc_l[h][1] += d(g, 2 * t + 1);
                                acc_l[h][2] += d(g + 8, 2 * t);
                                acc_l[h][3] += d(g + 8, 2 * t + 1);
                            }
                        }
                        blk += 1;
                    }
                    let split = s.window_split[w] != 0;
                    if split && !touched {
                        continue;
                    }
                    for (lane, acc_l) in acc.iter().enumerate() {
                        let (g, t) = (lane / 4, lane % 4);
                        for (h, acc_h) in acc_l.iter().enumerate() {
                            for (k, &v) in acc_h.iter().enumerate() {
                                let row = 8 * w + 2 * t + (k & 1);
                                let f = f0 + 4 * g + 2 * h + (k >> 1);
                                if row >= rows || f >= n {
                                    continue;
                                }
                                let dst = &mut c[row * ldc + f];
                                let v = alpha * v;
                                *dst = if split {
                                    *dst + v
                                } else if beta == 0.0 {
                                    v
                                } else {
                                    v + beta * *dst
                                };
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Copies `data` to the device; an empty array becomes one default element (never read), so no
/// zero-byte allocation is made.
pub(crate) fn upload<T: DeviceRepr + Default + Clone>(
    stream: &Arc<CudaStream>,
    data: &[T],
) -> Result<CudaSlice<T>, AccSpmmError> {
    if data.is_empty() {
        Ok(stream.clone_htod(&[T::default()])?)
    } else {
        Ok(stream.clone_htod(data)?)
    }
}

/// A BitTCF matrix and its schedule resident on the GPU, ready for repeated products.
///
/// Invariant: the arrays passed [`check_parts`] and the schedule passed [`flatten_schedule`] before
/// upload, and the device buffers are never written afterwards.
pub struct AccSpmmDevice {
    rows: usize,
    cols: usize,
    variant: AccVariant,
    /// Host copy of `row_window_offset` (schedules are validated against it).
    rwo_host: Vec<u32>,
    rwo: CudaSlice<u32>,
    bvo: CudaSlice<u32>,
    a2b: CudaSlice<u32>,
    bits: CudaSlice<u64>,
    values: CudaSlice<f32>,
    sched: DeviceSchedule,
    main: CudaFunction,
    /// Most dynamic shared memory a launch of `main` may use (the device's opt-in limit when the
    /// variant has a row cache, else 0).
    max_dynamic_smem: u32,
}

impl std::fmt::Debug for AccSpmmDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccSpmmDevice")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("num_tbs", &self.sched.num_tbs)
            .field("num_split", &self.sched.split.count())
            .field("variant", &self.variant)
            .finish()
    }
}

impl AccSpmmDevice {
    /// Validates and uploads a BitTCF matrix with a planner schedule (once; launch many times).
    pub fn upload(gpu: &Gpu, m: &BitTcf, schedule: &AccSchedule) -> Result<Self, AccSpmmError> {
        let parts = AccSpmmParts::from_bittcf(m);
        let flat = flatten_acc_schedule(parts.row_window_offset, schedule)?;
        Self::upload_parts(gpu, &parts, &flat, AccVariant::default())
    }

    /// Validates and uploads raw BitTCF arrays with a flattened schedule and a kernel variant.
    pub fn upload_parts(
        gpu: &Gpu,
        parts: &AccSpmmParts<'_>,
        schedule: &FlatSchedule,
        variant: AccVariant,
    ) -> Result<Self, AccSpmmError> {
        check_parts(parts)?;
        // Re-validate (a FlatSchedule can be built by hand): same checks, same result.
        let schedule = flatten_schedule(
            parts.row_window_offset,
            schedule
                .work
                .chunks_exact(4)
                .map(|w| [0, 1, 2, 3].map(|i| w[i] as u64)),
            &schedule.window_split,
        )?;
        let stream = gpu.stream();
        let (main, max_dynamic_smem) = main_function(gpu, variant)?;
        Ok(Self {
            rows: parts.rows,
            cols: parts.cols,
            variant,
            rwo_host: parts.row_window_offset.to_vec(),
            rwo: upload(stream, parts.row_window_offset)?,
            bvo: upload(stream, parts.block_value_offset)?,
            a2b: upload(stream, parts.sparse_a_to_b)?,
            bits: upload(stream, parts.tc_local_bit)?,
            values: upload(stream, parts.values)?,
            sched: DeviceSchedule::upload(gpu, &schedule)?,
            main,
            max_dynamic_smem,
        })
    }

    /// Replaces the schedule, keeping the uploaded matrix (for tuning: the same BitTCF arrays
    /// under several schedules). The schedule is validated against the uploaded matrix's windows;
    /// on error the old schedule stays in place.
    pub fn set_schedule(&mut self, gpu: &Gpu, schedule: &AccSchedule) -> Result<(), AccSpmmError> {
        let flat = flatten_acc_schedule(&self.rwo_host, schedule)?;
        self.sched = DeviceSchedule::upload(gpu, &flat)?;
        Ok(())
    }

    /// Switches the kernel entry (same uploaded matrix and schedule), e.g. to time variants.
    pub fn set_variant(&mut self, gpu: &Gpu, variant: AccVariant) -> Result<(), AccSpmmError> {
        let (main, max_dynamic_smem) = main_function(gpu, variant)?;
        self.main = main;
        self.max_dynamic_smem = max_dynamic_smem;
        self.variant = variant;
        Ok(())
    }

    /// Why a launch at width `n` is impossible on this device (the variant's row cache needs more
    /// shared memory per thread block than the device allows), or `None` when it can run.
    pub fn launch_refusal(&self, n: usize) -> Option<String> {
        let shape = launch_shape(n, self.sched.num_tbs).ok()??;
        self.smem_for(&shape, n).err()
    }

    /// Dynamic shared memory of a launch of `shape` (width `n`), or why the device cannot give it.
    fn smem_for(&self, shape: &LaunchShape, n: usize) -> Result<u32, String> {
        let smem = self.variant.dynamic_smem_bytes(shape.warps);
        if smem <= self.max_dynamic_smem {
            return Ok(smem);
        }
        Err(format!(
            "{} with {} warps per thread block (n = {n}) needs {smem} bytes of shared memory, \
             the device allows {}",
            self.variant, shape.warps, self.max_dynamic_smem
        ))
    }

    /// Rows of A (M): C has this many rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of A (K): B has this many rows.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Thread blocks per feature tile (schedule entries).
    pub fn num_tbs(&self) -> usize {
        self.sched.num_tbs
    }

    /// Windows spread over several thread blocks (written with atomics after a β pre-scale).
    pub fn num_split_windows(&self) -> usize {
        self.sched.split.count()
    }

    /// The kernel entry used.
    pub fn variant(&self) -> AccVariant {
        self.variant
    }

    /// Enqueues `C = α·A·B + β·C` on the GPU's stream (asynchronous). B is `K × n` row-major with
    /// leading dimension `ldb`, C is `M × n` with `ldc`; with β = 0, C is never read.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        gpu: &Gpu,
        alpha: f32,
        b: &CudaSlice<f32>,
        ldb: usize,
        beta: f32,
        c: &mut CudaSlice<f32>,
        ldc: usize,
        n: usize,
    ) -> Result<(), AccSpmmError> {
        check_dense("B", b.len(), self.cols, n, ldb)?;
        check_dense("C", c.len(), self.rows, n, ldc)?;
        let Some(shape) = launch_shape(n, self.sched.num_tbs)? else {
            return Ok(());
        };
        let flags = launch_flags(ldb, ldc);
        let smem = self
            .smem_for(&shape, n)
            .map_err(AccSpmmError::InvalidArgs)?;
        let stream = gpu.stream();
        let (m, n32, ldb32, ldc32) = (self.rows as u32, n as u32, ldb as u32, ldc as u32);
        self.sched
            .split
            .prescale(gpu, c, ldc, self.rows, n, beta, 8)?;
        let mut l = stream.launch_builder(&self.main);
        l.arg(&self.rwo)
            .arg(&self.bvo)
            .arg(&self.a2b)
            .arg(&self.bits)
            .arg(&self.values)
            .arg(&self.sched.work)
            .arg(&self.sched.window_split)
            .arg(b)
            .arg(&ldb32)
            .arg(&mut *c)
            .arg(&ldc32)
            .arg(&m)
            .arg(&n32)
            .arg(&alpha)
            .arg(&beta)
            .arg(&flags);
        let cache_log2 = match self.variant {
            AccVariant::CachedRows { log2_slots } => u32::from(log2_slots),
            _ => 0,
        };
        if matches!(self.variant, AccVariant::CachedRows { .. }) {
            l.arg(&cache_log2);
        }
        // SAFETY: (1) argument types and order match `acc_spmm_tf32[_reg](const u32* rwo, const u32*
        // bvo, const u32* a2b, const u64* bits, const float* values, const u32* work, const u8*
        // window_split, const float* B, u32 ldb, float* C, u32 ldc, u32 M, u32 N, float alpha, float
        // beta, u32 flags)` in kernels-ptx/acc_spmm.cu (`acc_spmm_tf32_cache` takes one more u32,
        // cache_log2 ≤ MAX_CACHE_LOG2, pushed above; its dynamic shared memory, warps · 132 ·
        // 2^cache_log2 bytes, was checked against the opt-in limit set on the function; SIGNATURES
        // is checked against the PTX by a CPU test); flag bit 0 (float4 access) is set only
        // when ldb and ldc are multiples of 4, and CudaSlice buffers start at cuMemAlloc's
        // ≥ 256-byte alignment, so every float4 address is 16-byte aligned. (2) Only C is written, and it is borrowed mutably for
        // this call; the BitTCF/schedule buffers are private and never written after upload.
        // (3) Every index is in bounds: check_parts proved the offsets are monotone and end at the
        // array lengths, each block's value count equals its mask's popcount (so value reads stay
        // below block_value_offset[j+1] ≤ values.len()) and every column id is < K or the sentinel
        // (never dereferenced); flatten_schedule proved every work entry lies inside the window and
        // block counts; check_dense proved (K−1)·ldb + n ≤ B.len() and (M−1)·ldc + n ≤ C.len(), and
        // the kernel guards features ≥ n and rows ≥ M.
        unsafe { l.launch(shape.config(smem)) }?;
        Ok(())
    }
}

/// A validated schedule ([`FlatSchedule`]) on the device, with its split windows. Shared by the
/// BitTCF and row-tile kernels, which read the same work list.
pub(crate) struct DeviceSchedule {
    /// `[window_begin, window_end, block_begin, block_end]` per thread block.
    pub work: CudaSlice<u32>,
    /// One split flag per window.
    pub window_split: CudaSlice<u8>,
    /// The windows with `window_split == 1` and their β pre-scale.
    pub split: SplitRows,
    /// Thread blocks per feature tile.
    pub num_tbs: usize,
}

impl DeviceSchedule {
    /// Uploads `flat` (validated by [`flatten_schedule`]).
    pub fn upload(gpu: &Gpu, flat: &FlatSchedule) -> Result<Self, AccSpmmError> {
        let stream = gpu.stream();
        Ok(Self {
            work: upload(stream, &flat.work)?,
            window_split: upload(stream, &flat.window_split)?,
            split: SplitRows::upload(gpu, &flat.split_windows)?,
            num_tbs: flat.num_tbs(),
        })
    }
}

/// Groups of C's rows that a kernel accumulates into with atomics (split windows of `group_rows`
/// rows; single rows, `group_rows` = 1, for the CSR kernel), on the device, with their β
/// pre-scale `acc_spmm_prescale`, which must run before that kernel on the same stream.
pub(crate) struct SplitRows {
    /// Group ids (uploaded with one element when empty).
    ids: CudaSlice<u32>,
    count: usize,
    /// `acc_spmm_prescale`, loaded only when there is a group to scale.
    prescale: Option<CudaFunction>,
}

impl SplitRows {
    /// Uploads the group ids `ids`.
    pub fn upload(gpu: &Gpu, ids: &[u32]) -> Result<Self, GpuError> {
        Ok(Self {
            ids: upload_nonempty(gpu, ids)?,
            count: ids.len(),
            prescale: if ids.is_empty() {
                None
            } else {
                Some(gpu.function(KernelModule::AccSpmm, ENTRY_PRESCALE)?)
            },
        })
    }

    /// Number of groups.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Enqueues `C = β·C` (0 when β = 0, C not read) on the groups' rows, groups being
    /// `group_rows` rows high; nothing when there is no group.
    ///
    /// Callers guarantee that every id is `< ⌈rows / group_rows⌉` (the ids come from a schedule
    /// flattened against this matrix's windows, or from `csr_work` over its rows) and that
    /// `(rows − 1)·ldc + n ≤ c.len()` was checked.
    #[allow(clippy::too_many_arguments)]
    pub fn prescale(
        &self,
        gpu: &Gpu,
        c: &mut CudaSlice<f32>,
        ldc: usize,
        rows: usize,
        n: usize,
        beta: f32,
        group_rows: u32,
    ) -> Result<(), GpuError> {
        let Some(func) = &self.prescale else {
            return Ok(());
        };
        let count = self.count as u32;
        let cfg = LaunchConfig {
            grid_dim: (count.min(65_535 * 4), 1, 1),
            block_dim: (PRESCALE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (ldc, m, n) = (ldc as u32, rows as u32, n as u32);
        let mut l = gpu.stream().launch_builder(func);
        l.arg(&self.ids)
            .arg(&count)
            .arg(c)
            .arg(&ldc)
            .arg(&m)
            .arg(&n)
            .arg(&beta)
            .arg(&group_rows);
        // SAFETY: (1) argument types and order match `acc_spmm_prescale(const u32*, u32, float*,
        // u32, u32, u32, float, u32)` (SIGNATURES, checked against the PTX by a CPU test). (2) The
        // only written buffer is C, borrowed mutably here. (3) Reads/writes stay in bounds: `ids`
        // holds `count` group ids < ⌈M / group_rows⌉ (caller contract), rows ≥ M are skipped in
        // the kernel and the caller checked (M−1)·ldc + n ≤ C.len().
        unsafe { l.launch(cfg) }?;
        Ok(())
    }
}

/// The main kernel of `variant` and the dynamic shared memory it may use. A cached variant gets
/// the device's opt-in shared-memory limit set on the function (launches above 48 KiB need it).
fn main_function(gpu: &Gpu, variant: AccVariant) -> Result<(CudaFunction, u32), AccSpmmError> {
    let f = gpu.function(KernelModule::AccSpmm, variant.entry())?;
    let AccVariant::CachedRows { log2_slots } = variant else {
        return Ok((f, 0));
    };
    if log2_slots > MAX_CACHE_LOG2 {
        return Err(AccSpmmError::InvalidArgs(format!(
            "B-row cache of 2^{log2_slots} slots: at most 2^{MAX_CACHE_LOG2}"
        )));
    }
    use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
    let optin = gpu
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
    // The kernel's static shared memory (the cp.async metadata buffer, unused by this entry but
    // possibly kept) counts against the same limit.
    let optin = optin.saturating_sub(128).max(0);
    f.set_attribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        optin,
    )?;
    Ok((f, optin as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_shape_tiles_features() {
        let s = |n| launch_shape(n, 10).unwrap().map(|s| (s.warps, s.grid_y));
        assert_eq!(s(0), None);
        assert_eq!(s(8), Some((1, 1)));
        assert_eq!(s(16), Some((1, 1)));
        assert_eq!(s(32), Some((1, 1)));
        assert_eq!(s(64), Some((2, 1)));
        assert_eq!(s(128), Some((4, 1)));
        assert_eq!(s(256), Some((8, 1)));
        assert_eq!(s(384), Some((6, 2)));
        assert_eq!(s(512), Some((8, 2)));
        assert_eq!(s(1024), Some((8, 4)));
        assert_eq!(s(1000), Some((8, 4)));
        assert_eq!(launch_shape(128, 0).unwrap(), None);
        for n in 1..3000 {
            let sh = launch_shape(n, 1).unwrap().unwrap();
            assert!(sh.warps >= 1 && sh.warps <= MAX_WARPS);
            let covered = (sh.grid_y * sh.features_per_tb) as usize;
            assert!(
                covered >= n && covered - n < sh.features_per_tb as usize,
                "n = {n}"
            );
        }
    }

    #[test]
    fn tf32_rounding_is_nearest_away() {
        assert_eq!(to_tf32(1.0), 1.0);
        let ulp = 2f32.powi(-10);
        assert_eq!(to_tf32(1.0 + ulp / 2.0), 1.0 + ulp); // tie → away from zero
        assert_eq!(to_tf32(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(to_tf32(1.0 + ulp / 4.0), 1.0);
        assert!(to_tf32(f32::NAN).is_nan());
    }

    #[test]
    fn dense_checks() {
        assert!(check_dense("B", 10, 2, 5, 5).is_ok());
        assert!(check_dense("B", 9, 2, 5, 5).is_err());
        assert!(check_dense("B", 100, 2, 5, 4).is_err());
        assert!(check_dense("B", 0, 0, 5, 5).is_ok());
    }
}
