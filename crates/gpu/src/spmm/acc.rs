//! Acc-SpMM (BitTCF, TF32 tensor cores) launch code: `C = α·A·B + β·C` with A in BitTCF, B and C
//! dense row-major f32 on the device.
//!
//! [`AccSpmmDevice::upload`] validates the BitTCF arrays and the [`AccSchedule`] once (every index
//! the kernel will dereference is checked here, see [`check_parts`] and [`flatten_schedule`]) and
//! uploads them; its [`crate::DeviceProduct::enqueue`] then only checks the dense operands' sizes
//! and launches `acc_spmm_tf32` (plus `acc_spmm_prescale` when the schedule splits windows). The
//! kernel itself is documented in `kernels-ptx/acc_spmm.cu` and `docs/kernels/acc-spmm.md`.
//!
//! Everything that is not a launch (validation, launch shapes, and [`emulate`], a lane-exact CPU model
//! of the kernel's data path) runs and is tested without a GPU.

use cudarc::driver::{CudaFunction, CudaSlice};
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_planner::AccSchedule;

pub use super::{
    AccSpmmError, LaunchShape, MAX_WARPS, check_dense, launch_flags, launch_flags_at, launch_shape,
    to_tf32,
};
use crate::launch::Launch;
use crate::product::{Checked, DeviceProduct};
use crate::schedule::{DeviceSchedule, upload_nonempty, upload_values};
pub use crate::schedule::{
    ENTRY_PRESCALE, FlatSchedule, flatten_acc_schedule, flatten_schedule, unbalanced_schedule,
};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Column id marking a padding slot of a TC block (its B row is treated as zero).
pub const SENTINEL: u32 = u32::MAX;
/// Kernel entry with block metadata staged by `cp.async` in shared memory (the paper's pipeline).
pub const ENTRY_SHARED: &str = "acc_spmm_tf32";
/// Kernel entry with block metadata loaded into registers by every warp (no barriers).
pub const ENTRY_REGISTER: &str = "acc_spmm_tf32_reg";
/// Kernel entry with register metadata and a per-warp B-row cache in shared memory.
pub const ENTRY_CACHE: &str = "acc_spmm_tf32_cache";
/// Kernel entry of the paper's whole pipeline: [`ENTRY_SHARED`] plus its cache policy (B rows by
/// `ld.global.ca`, C by `st.global.wt`).
pub const ENTRY_PAPER: &str = "acc_spmm_tf32_paper";
/// Largest B-row cache: 2^10 slots per warp (132 KiB per warp; the launch also checks the device's
/// shared-memory limit).
pub const MAX_CACHE_LOG2: u8 = 10;
/// Shared-memory bytes per cache slot: a 128-byte row slice (32 features) and a 4-byte tag.
const CACHE_SLOT_BYTES: u32 = 132;

/// Parameters of the main entries, in order (`acc_spmm_tf32`, `acc_spmm_tf32_reg`,
/// `acc_spmm_tf32_paper`).
const MAIN_PARAMS: [ParamKind; 16] = crate::signature::concat(
    &[
        ParamKind::Ptr, // rwo
        ParamKind::Ptr, // bvo
        ParamKind::Ptr, // a2b
        ParamKind::Ptr, // bits
        ParamKind::Ptr, // values
    ],
    &super::SCHEDULED_TAIL,
);

/// Parameters of `acc_spmm_tf32_cache`: [`MAIN_PARAMS`] and `cache_log2`.
const CACHE_PARAMS: [ParamKind; MAIN_PARAMS.len() + 1] =
    crate::signature::concat(&MAIN_PARAMS, &[ParamKind::U32]); // cache_log2

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test), one
/// per [`AccVariant`].
pub const SIGNATURES: &[KernelSignature] = &[
    AccVariant::SharedMeta.signature(),
    AccVariant::RegisterMeta.signature(),
    AccVariant::CachedRows { log2_slots: 0 }.signature(),
    AccVariant::Paper.signature(),
];

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
    /// The paper's whole pipeline: [`AccVariant::SharedMeta`] with its cache policy, B rows loaded
    /// with `ld.global.ca` (through L1; the other entries use the read-only path `ld.global.nc`) and
    /// C written with `st.global.wt` (write-through). Same results as the other variants; the
    /// ablation of docs/results (issue 20).
    Paper,
}

impl AccVariant {
    /// The PTX entry name.
    pub fn entry(self) -> &'static str {
        match self {
            Self::SharedMeta => ENTRY_SHARED,
            Self::RegisterMeta => ENTRY_REGISTER,
            Self::CachedRows { .. } => ENTRY_CACHE,
            Self::Paper => ENTRY_PAPER,
        }
    }

    /// The entry's signature.
    pub const fn signature(self) -> KernelSignature {
        let (name, params): (&str, &[ParamKind]) = match self {
            Self::SharedMeta => (ENTRY_SHARED, &MAIN_PARAMS),
            Self::RegisterMeta => (ENTRY_REGISTER, &MAIN_PARAMS),
            Self::CachedRows { .. } => (ENTRY_CACHE, &CACHE_PARAMS),
            Self::Paper => (ENTRY_PAPER, &MAIN_PARAMS),
        };
        KernelSignature {
            module: KernelModule::AccSpmm,
            name,
            params,
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
            Self::Paper => write!(f, "paper pipeline: shared metadata, B ld.ca, C st.wt"),
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

/// Lane-exact CPU model of `acc_spmm_tf32`: walks the flattened schedule per thread block, feature
/// tile and warp, forms each lane's mma.sync fragments with exactly the kernel's index expressions
/// (`a0 = B[col[t]][f0+4g+2h]`, …, `b0 = T[g][t]` decoded by popcount, …), multiplies them with the documented
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

/// A BitTCF matrix and its schedule resident on the GPU, ready for repeated products.
///
/// Invariant: the arrays passed [`check_parts`] and the schedule passed [`flatten_schedule`] before
/// upload, and the device buffers are never written afterwards.
pub struct AccSpmmDevice {
    /// The GPU it was uploaded to ([`DeviceProduct`] calls queue on its stream).
    gpu: Gpu,
    rows: usize,
    cols: usize,
    /// Stored values (`values` holds one dummy element when 0).
    nnz: usize,
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

impl_debug!(AccSpmmDevice, |s|
    rows: s.rows, cols: s.cols, num_tbs: s.sched.num_tbs, num_split: s.sched.split.count(),
    variant: s.variant);

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
        let (main, max_dynamic_smem) = main_function(gpu, variant)?;
        Ok(Self {
            gpu: gpu.clone(),
            rows: parts.rows,
            cols: parts.cols,
            nnz: parts.values.len(),
            variant,
            rwo_host: parts.row_window_offset.to_vec(),
            rwo: upload_nonempty(gpu, parts.row_window_offset)?,
            bvo: upload_nonempty(gpu, parts.block_value_offset)?,
            a2b: upload_nonempty(gpu, parts.sparse_a_to_b)?,
            bits: upload_nonempty(gpu, parts.tc_local_bit)?,
            values: upload_nonempty(gpu, parts.values)?,
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

    /// Replaces the values (same pattern: BitTCF value order, `values.len()` = the uploaded
    /// matrix's nonzeros) with one upload; schedule and kernel stay.
    pub fn set_values(&mut self, gpu: &Gpu, values: &[f32]) -> Result<(), AccSpmmError> {
        self.values = upload_values(gpu, values, self.nnz).map_err(|e| match e {
            GpuError::Invalid(why) => AccSpmmError::InvalidArgs(why),
            e => e.into(),
        })?;
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
}

/// `C = α·A·B + β·C` on the GPU's stream (asynchronous): B is `K × n` row-major, C is
/// `M × n`, at any leading dimensions ≥ n (any device buffer or view); with β = 0, C is
/// never read.
impl DeviceProduct for AccSpmmDevice {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError> {
        let (alpha, beta, n, ldb, ldc) = (call.alpha, call.beta, call.n, call.ldb, call.ldc);
        let (b, c) = call.operands();
        let gpu = &self.gpu;
        let Some(shape) = launch_shape(n, self.sched.num_tbs)? else {
            return Ok(());
        };
        let smem = self
            .smem_for(&shape, n)
            .map_err(AccSpmmError::InvalidArgs)?;
        let (m, n32, ldb32, ldc32) = (self.rows as u32, n as u32, ldb as u32, ldc as u32);
        self.sched
            .split
            .prescale(gpu, c, ldc, self.rows, n, beta, 8)?;
        let sig = self.variant.signature();
        let mut l = Launch::new(gpu.stream(), &self.main, &sig);
        let b_ptr = l.borrow(b);
        let c_ptr = l.borrow_mut(c);
        let flags = launch_flags_at(ldb, ldc, b_ptr, c_ptr);
        l.input(&self.rwo)
            .input(&self.bvo)
            .input(&self.a2b)
            .input(&self.bits)
            .input(&self.values)
            .input(&self.sched.work)
            .input(&self.sched.window_split)
            .dense_operands(b_ptr, ldb32, c_ptr, ldc32)
            .u32(m)
            .u32(n32)
            .f32(alpha)
            .f32(beta)
            .u32(flags);
        if let AccVariant::CachedRows { log2_slots } = self.variant {
            l.u32(u32::from(log2_slots));
        }
        // SAFETY: (1) the arguments fill `acc_spmm_tf32[_reg|_paper](const u32* rwo, const u32*
        // bvo, const u32* a2b, const u64* bits, const float* values, const u32* work, const u8*
        // window_split, const float* B, u32 ldb, float* C, u32 ldc, u32 M, u32 N, float alpha, float
        // beta, u32 flags)` in kernels-ptx/acc_spmm.cu (`acc_spmm_tf32_cache` takes one more u32,
        // cache_log2 ≤ MAX_CACHE_LOG2, pushed above; its dynamic shared memory, warps · 132 ·
        // 2^cache_log2 bytes, was checked against the opt-in limit set on the function; SIGNATURES
        // is checked against the PTX by a CPU test); flag bit 0 (float4 access) is set only
        // when ldb and ldc are multiples of 4 and B and C start 16-byte aligned (launch_flags_at),
        // so every float4 address is 16-byte aligned. (2) Only C is written, and it is borrowed mutably for
        // this call (raw pointers through device_ptr/device_ptr_mut, whose guards order the launch
        // after earlier work on B and C and record it); the BitTCF/schedule buffers are private and never written after upload.
        // (3) Every index is in bounds: check_parts proved the offsets are monotone and end at the
        // array lengths, each block's value count equals its mask's popcount (so value reads stay
        // below block_value_offset[j+1] ≤ values.len()) and every column id is < K or the sentinel
        // (never dereferenced); flatten_schedule proved every work entry lies inside the window and
        // block counts; checked_width (check_dense) proved (K−1)·ldb + n ≤ B.len() and (M−1)·ldc + n ≤ C.len(), and
        // the kernel guards features ≥ n and rows ≥ M.
        unsafe { l.launch(shape.config(smem).into()) }?;
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
