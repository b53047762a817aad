//! bitBSR SpMV on tensor cores (`kernels-ptx/spmv.cu`): `y = α·A·X + β·y` for 1 to 8 right-hand
//! sides, X (`K × n`) and y (`M × n`) row-major f32.
//!
//! [`BitBsrSpmv::new`] uploads a [`DeviceBitBsr`] (f16 or TF32 tiles) and its tile-balanced work
//! list ([`spmv_work`]); its [`crate::DeviceProduct::enqueue`] queues the call on [`Gpu::stream`], and
//! its raw-pointer path on a capture stream for the graph timings ([`graph::time_spmv`]). One call
//! is: `spmv_x16` (f16 tiles only: X to scaled f16 pairs), the main kernel, and `spmv_fixup` (only
//! when some tile-row is split over several halves, and only after the MMA kernels: the walks of
//! [`CORE_LAYOUTS`] sum a split row's partial slots in the chunk that finishes the row last, so a
//! walk call is one kernel node). Every element of y is written exactly once; with β = 0 y is never
//! read.
//!
//! With [`BitBsrSpmv::set_core_layout`] a call with one right-hand side runs a CUDA-core walk instead
//! (`spmv_core_f16` / `spmv_core_f32`: 8 lanes per tile-row, X read as f32, no `spmv_x16` node);
//! calls with more right-hand sides keep the MMA kernels. F32 storage starts on the CUDA-core walk.
//! The layouts [`MULTI_LAYOUTS`] (the set-bit walks `spmv_bits{n}_*` and `spmv_seg{n}_*`) serve
//! every n from 1 to 8 on CUDA cores, reading A once for all n right-hand sides; the layout `tc`
//! ([`TC_LAYOUTS`], `spmv_tc{n}_*`) walks the same work list on TF32 MMAs, loading each tile's x
//! segment once instead of one x row per nonzero (a TF32 product).
//!
//! [`csr`] holds a CSR walk for 2 to 8 right-hand sides on A's CSR arrays (for sparse tiles, where a
//! tile record outweighs its one to five values), [`baseline`] the cuSPARSE product the tunings
//! time against (each of its CSR algorithms), [`graph`] the CUDA-graph timing.

pub mod baseline;
pub mod csr;
pub mod graph;

use std::sync::OnceLock;

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr};
use tcsparse_formats::bitbsr_device::{DeviceBitBsr, TileStorage, TileValues};
use tcsparse_planner::wave::spmv_wave_chunk;
use tcsparse_planner::work::spmv::{SpmvWork, spmv_work};

use crate::launch::{Arg, Shape, launch_checked};
use crate::schedule::upload_nonempty;
use crate::{Gpu, GpuError, KernelModule};
use graph::RawCall;

mod entries;

pub use entries::*;

/// A work list on the device.
struct DeviceWork {
    chunk_tiles: u32,
    num_items: u32,
    items: CudaSlice<u32>,
    num_fix: u32,
    fix: CudaSlice<u32>,
    /// `slots · 8 · MAX_RHS` f32.
    partial: CudaSlice<f32>,
    /// Per slot: the first and end slot of its tile-row (`2 · slots` u32).
    split: CudaSlice<u32>,
    /// Per slot: chunks of its tile-row finished in the running call (only first slots used; zero
    /// between calls: the last chunk resets it).
    count: CudaSlice<u32>,
}

impl DeviceWork {
    fn build(gpu: &Gpu, ptr: &[u32], chunk: u32) -> Result<Self, GpuError> {
        let w: SpmvWork = spmv_work(ptr, chunk);
        // The kernels index tiles, rows and slots through this list: re-check it.
        w.check(ptr)
            .map_err(|e| GpuError::Invalid(format!("SpMV work list: {e}")))?;
        if w.items.len() >= (u32::MAX / 2) as usize {
            return Err(GpuError::Invalid("too many SpMV work items".into()));
        }
        let flat: Vec<u32> = w.items.iter().flatten().flatten().copied().collect();
        let fix: Vec<u32> = w.fix.iter().flatten().copied().collect();
        // `check` passed: each split row's slots are first..end, consecutive and ≤ slots.
        let split = w.split_table();
        Ok(Self {
            chunk_tiles: w.chunk_tiles,
            num_items: w.items.len() as u32,
            items: upload_nonempty(gpu, &flat)?,
            num_fix: w.fix.len() as u32,
            fix: upload_nonempty(gpu, &fix)?,
            partial: gpu.alloc_zeros((w.slots as usize * 8 * MAX_RHS).max(1))?,
            split: upload_nonempty(gpu, &split)?,
            count: gpu.alloc_zeros((w.slots as usize).max(1))?,
        })
    }
}

/// Elements of `elem_bytes` bytes in `len` values padded to whole 16-byte pieces (at least one).
fn padded16_len(len: usize, elem_bytes: usize) -> usize {
    let per_piece = 16 / elem_bytes;
    len.max(1).next_multiple_of(per_piece)
}

/// Uploads a value array zero-padded to whole 16-byte pieces. The `staged` walks copy a stage's
/// values as 16-byte `cp.async` pieces, the last one cut at the array's end (`src-size` < 16);
/// compute-sanitizer's memcheck counts the whole 16-byte piece as read (an out-of-bounds read of
/// the last piece, H200, 2026-11-28), so every piece must lie inside the allocation.
fn upload_values_padded<T: cudarc::driver::DeviceRepr + Default + Clone>(
    gpu: &Gpu,
    data: &[T],
) -> Result<CudaSlice<T>, GpuError> {
    let mut padded = Vec::with_capacity(padded16_len(data.len(), size_of::<T>()));
    padded.extend_from_slice(data);
    padded.resize(padded.capacity(), T::default());
    gpu.upload(&padded)
}

/// Values on the device, zero-padded to whole 16-byte pieces ([`upload_values_padded`]).
enum DeviceValues {
    F16(CudaSlice<u16>),
    F32(CudaSlice<f32>),
}

/// A bitBSR matrix on the GPU, ready for repeated SpMV with up to [`MAX_RHS`] right-hand sides.
pub struct BitBsrSpmv {
    gpu: Gpu,
    rows: usize,
    cols: usize,
    nnz: usize,
    a_bytes: usize,
    storage: TileStorage,
    row_ptr: Vec<u32>,
    tiles: CudaSlice<u32>,
    values: DeviceValues,
    row_scale: CudaSlice<f32>,
    ptr: CudaSlice<u32>,
    work: DeviceWork,
    /// X as scaled f16 pairs (`⌈K/8⌉·4·MAX_RHS` u32) and its scales (`⌈K/8⌉·MAX_RHS`), f16 only.
    x16: CudaSlice<u32>,
    xs: CudaSlice<f32>,
    main: [CudaFunction; 2],
    /// The CUDA-core walks of this storage, one per [`CORE_LAYOUTS`] entry: (layout, entry, halves
    /// per block, function).
    core_fns: Vec<(&'static str, &'static str, u32, CudaFunction)>,
    /// The multi-RHS walks of this storage: (layout, functions for n = 2..=8, index n − 2), each
    /// loaded from its module on first use (n = 1 runs the entry in `core_fns`), so a preparation
    /// or call compiles only the modules of the n it runs.
    multi_fns: Vec<(&'static str, [OnceLock<CudaFunction>; MAX_RHS - 1])>,
    /// Layout (index into `core_fns`) one-RHS calls run on (every call when it is one of
    /// [`MULTI_LAYOUTS`]), or None for the MMA kernel.
    core: Option<usize>,
    x16_fn: CudaFunction,
    fixup: CudaFunction,
}

impl_debug!(BitBsrSpmv, |s|
    rows: s.rows, cols: s.cols, storage: s.storage, core: s.core, chunk_tiles: s.work.chunk_tiles,
    items: s.work.num_items, split_rows: s.work.num_fix);

fn ptr_of<T>(s: &CudaSlice<T>, gpu: &Gpu) -> u64 {
    let (p, _g) = s.device_ptr(gpu.stream());
    p
}

impl BitBsrSpmv {
    /// Uploads `a` with the default tile budget per half.
    pub fn new(gpu: &Gpu, a: &DeviceBitBsr) -> Result<Self, GpuError> {
        Self::with_chunk(gpu, a, DEFAULT_CHUNK_TILES)
    }

    /// Uploads `a` with at most `chunk_tiles` tiles per half ([`spmv_work`]).
    pub fn with_chunk(gpu: &Gpu, a: &DeviceBitBsr, chunk_tiles: u32) -> Result<Self, GpuError> {
        let (rows, cols) = (a.rows(), a.cols());
        if rows >= u32::MAX as usize / 2 || cols >= u32::MAX as usize / 2 {
            return Err(GpuError::Invalid(format!(
                "{rows}×{cols} exceeds u32 indices"
            )));
        }
        let ptr = a.tile_row_ptr();
        let ntiles = a.tiles().len();
        // The kernel's reads rely on: ptr has tile-rows + 1 entries from 0 to the tile count and
        // never decreases; every tile's column < ⌈K/8⌉ and its values inside the value array.
        let segs = cols.div_ceil(8);
        let bad = |s: &str| Err(GpuError::Invalid(format!("device bitBSR: {s}")));
        if ptr.len() != rows.div_ceil(8) + 1
            || ptr[0] != 0
            || *ptr.last().unwrap_or(&0) as usize != ntiles
        {
            return bad("tile-row offsets");
        }
        if ptr.windows(2).any(|w| w[1] < w[0]) {
            return bad("tile-row offsets decrease");
        }
        // Bits of the last segment's columns ≥ K (the set-bit walk reads the x row of every set
        // bit without a K guard): none may be set.
        let tail = cols % 8;
        let beyond: u64 = if tail == 0 {
            0
        } else {
            let row = (0xffu64 << tail) & 0xff;
            (0..8).fold(0, |m, r| m | (row << (8 * r)))
        };
        // Value offsets: each tile's values follow the previous tile's (the `staged` walk copies a
        // stage's values as one contiguous range and indexes it by offset).
        let mut next_value = 0usize;
        for t in a.tiles() {
            let pop = t[0].count_ones() + t[1].count_ones();
            if t[2] as usize >= segs || t[3] as usize + pop as usize > a.nnz() {
                return bad("tile column or value offset out of range");
            }
            if t[3] as usize != next_value {
                return bad("tile value offsets not consecutive");
            }
            next_value += pop as usize;
            let bits = u64::from(t[0]) | (u64::from(t[1]) << 32);
            if t[2] as usize + 1 == segs && bits & beyond != 0 {
                return bad("tile bit beyond the last column");
            }
        }
        let flat: Vec<u32> = a.tiles().iter().flatten().copied().collect();
        let (values, row_scale) = match a.values() {
            TileValues::F16 { bits, row_scale } => (
                DeviceValues::F16(upload_values_padded(gpu, bits)?),
                upload_nonempty(gpu, row_scale)?,
            ),
            TileValues::Tf32(v) | TileValues::F32(v) => (
                DeviceValues::F32(upload_values_padded(gpu, v)?),
                gpu.upload(&[1f32])?,
            ),
        };
        let f16 = a.storage() == TileStorage::F16;
        let name = |wide: bool| {
            KERNELS
                .iter()
                .find(|k| k.0 == a.storage() && k.1 == wide)
                .map(|k| k.2)
                .unwrap_or("spmv_f16_r1")
        };
        let mut core_fns = Vec::with_capacity(CORE_LAYOUTS.len());
        for (layout, per_block) in CORE_LAYOUTS {
            let entry = core_entry(a.storage(), layout)
                .ok_or_else(|| GpuError::Invalid(format!("no SpMV core layout {layout:?}")))?;
            core_fns.push((
                layout,
                entry,
                per_block,
                gpu.function(KernelModule::Spmv, entry)?,
            ));
        }
        let multi_fns = MULTI_LAYOUTS
            .iter()
            .map(|&l| (l, std::array::from_fn(|_| OnceLock::new())))
            .collect();
        let default_core = CORE_LAYOUTS.iter().position(|l| l.0 == DEFAULT_CORE_LAYOUT);
        Ok(Self {
            gpu: gpu.clone(),
            rows,
            cols,
            nnz: a.nnz(),
            a_bytes: a.bytes(),
            storage: a.storage(),
            row_ptr: ptr.to_vec(),
            tiles: upload_nonempty(gpu, &flat)?,
            values,
            row_scale,
            ptr: gpu.upload(ptr)?,
            work: DeviceWork::build(gpu, ptr, chunk_tiles)?,
            x16: gpu.alloc_zeros(if f16 { (segs * 4 * MAX_RHS).max(1) } else { 1 })?,
            xs: gpu.alloc_zeros(if f16 { (segs * MAX_RHS).max(1) } else { 1 })?,
            main: [
                gpu.function(KernelModule::Spmv, name(false))?,
                gpu.function(KernelModule::Spmv, name(true))?,
            ],
            core_fns,
            multi_fns,
            core: if a.storage() == TileStorage::F32 {
                default_core
            } else {
                None
            },
            x16_fn: gpu.function(KernelModule::Spmv, ENTRY_X16)?,
            fixup: gpu.function(KernelModule::Spmv, ENTRY_FIXUP)?,
        })
    }

    /// Rebuilds the work list with at most `chunk_tiles` tiles per half; A stays uploaded.
    pub fn set_chunk(&mut self, chunk_tiles: u32) -> Result<(), GpuError> {
        self.work = DeviceWork::build(&self.gpu, &self.row_ptr, chunk_tiles)?;
        Ok(())
    }

    /// Runs calls with one right-hand side on the CUDA-core walk with `layout` (a
    /// [`CORE_LAYOUTS`] name), or on the MMA kernel with `None`.
    pub fn set_core_layout(&mut self, layout: Option<&str>) -> Result<(), GpuError> {
        self.core = match layout {
            None => None,
            Some(l) => Some(
                self.core_fns
                    .iter()
                    .position(|c| c.0 == l)
                    .ok_or_else(|| GpuError::Invalid(format!("no SpMV core layout {l:?}")))?,
            ),
        };
        Ok(())
    }

    /// The CUDA-core layout one-RHS calls run on (None: the MMA kernel).
    pub fn core_layout(&self) -> Option<&'static str> {
        self.core.map(|i| self.core_fns[i].0)
    }

    /// Halves of walk `layout` ([`CORE_LAYOUTS`]) resident on this device at once: SM count ×
    /// thread blocks per SM (driver occupancy query) × halves per block.
    pub fn resident_halves(&self, layout: &str) -> Result<u64, GpuError> {
        let (_, _, per_block, f) = self
            .core_fns
            .iter()
            .find(|c| c.0 == layout)
            .ok_or_else(|| GpuError::Invalid(format!("no SpMV core layout {layout:?}")))?;
        let blocks = f
            .occupancy_max_active_blocks_per_multiprocessor(32 * WARPS_PER_BLOCK, 0, None)?
            .max(1);
        Ok(u64::from(self.gpu.info().sm_count.max(1)) * u64::from(blocks) * u64::from(*per_block))
    }

    /// The tile budgets a tuning times with `layout` (None: the MMA kernel): `base`, or for
    /// [`WAVE_FITTED_LAYOUTS`] those of `base` from [`WAVE_FITTED_MIN_CHUNK`] on and
    /// [`spmv_wave_chunk`] of this matrix for the layout's resident halves, or for
    /// [`BLOCK_LAYOUTS`] their own budgets (none, i.e. the layout is not timed, where the tile-rows
    /// are shorter on average than the layout's minimum).
    pub fn tuning_chunks(&self, layout: Option<&str>, base: &[u32]) -> Result<Vec<u32>, GpuError> {
        if let Some(&(_, chunks, min_mean)) = BLOCK_LAYOUTS.iter().find(|b| Some(b.0) == layout) {
            return Ok(if mean_tiles_per_row(&self.row_ptr) >= min_mean {
                chunks.to_vec()
            } else {
                Vec::new()
            });
        }
        match layout.filter(|l| WAVE_FITTED_LAYOUTS.contains(l)) {
            Some(l) => Ok(wave_fitted_chunks(
                base,
                spmv_wave_chunk(&self.row_ptr, self.resident_halves(l)?),
            )),
            None => Ok(base.to_vec()),
        }
    }

    /// Loads the multi-RHS walks for `n` right-hand sides (every layout of [`MULTI_LAYOUTS`]) from
    /// their module, compiling it on the driver's first use; later calls with `n` find them
    /// loaded. Calls load them anyway; tunings call this before capturing graphs.
    pub fn load_walks(&self, n: usize) -> Result<(), GpuError> {
        if !(2..=MAX_RHS).contains(&n) {
            return Ok(());
        }
        for (layout, cells) in &self.multi_fns {
            let Some(entries) = multi_entries(layout, self.storage) else {
                continue;
            };
            self.walk_in(&cells[n - 2], n, entries[n - 1])?;
        }
        Ok(())
    }

    /// The walk `entry` for `n` ≥ 2 right-hand sides kept in `cell`, loaded from n's module
    /// ([`KernelModule::spmv_for_rhs`]) on first use.
    fn walk_in<'a>(
        &self,
        cell: &'a OnceLock<CudaFunction>,
        n: usize,
        entry: &'static str,
    ) -> Result<&'a CudaFunction, GpuError> {
        if let Some(f) = cell.get() {
            return Ok(f);
        }
        let f = self.gpu.function(KernelModule::spmv_for_rhs(n), entry)?;
        // (Another thread may have set it meanwhile: the same function either way.)
        Ok(cell.get_or_init(|| f))
    }

    /// Whether a call with `n` right-hand sides runs the CUDA-core walk (n = 1, or every n on
    /// [`MULTI_LAYOUTS`]).
    pub fn uses_core(&self, n: usize) -> bool {
        self.core_entry(n).is_some()
    }

    /// The walk a call with `n` right-hand sides runs: (entry, halves per block).
    fn core_entry(&self, n: usize) -> Option<(&'static str, u32)> {
        let c = &self.core_fns[self.core?];
        match n {
            1 => Some((c.1, c.2)),
            2..=MAX_RHS => Some((multi_entries(c.0, self.storage)?[n - 1], c.2)),
            _ => None,
        }
    }

    /// The walk a call with `n` right-hand sides runs: (function, halves per block), loading a
    /// multi-RHS walk from its module ([`KernelModule::spmv_for_rhs`]) on first use.
    fn core_fn(&self, n: usize) -> Result<Option<(&CudaFunction, u32)>, GpuError> {
        let Some((entry, per_block)) = self.core_entry(n) else {
            return Ok(None);
        };
        if n == 1 {
            return Ok(self.core.map(|i| (&self.core_fns[i].3, per_block)));
        }
        let layout = self.core.map(|i| self.core_fns[i].0);
        let Some((_, cells)) = self.multi_fns.iter().find(|m| Some(m.0) == layout) else {
            return Ok(None);
        };
        Ok(Some((self.walk_in(&cells[n - 2], n, entry)?, per_block)))
    }

    /// Stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// Tile storage.
    pub fn storage(&self) -> TileStorage {
        self.storage
    }
    /// Tile budget per half.
    pub fn chunk_tiles(&self) -> u32 {
        self.work.chunk_tiles
    }
    /// Tile-rows split over several halves.
    pub fn num_split_rows(&self) -> usize {
        self.work.num_fix as usize
    }
    /// Bytes one call must move at least: A's device arrays, X and y (read when β ≠ 0 is not
    /// counted), for `n` right-hand sides.
    pub fn min_bytes(&self, n: usize) -> usize {
        self.a_bytes + 4 * n * (self.cols + self.rows)
    }

    /// Name of the kernel a call with `n` right-hand sides runs.
    pub fn kernel_name(&self, n: usize) -> &'static str {
        if let Some((entry, _)) = self.core_entry(n) {
            return entry;
        }
        let wide = n > 1;
        KERNELS
            .iter()
            .find(|k| k.0 == self.storage && k.1 == wide)
            .map(|k| k.2)
            .unwrap_or("?")
    }
}

impl graph::GraphSpmv for BitBsrSpmv {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn max_width(&self) -> usize {
        MAX_RHS
    }

    fn prepare_width(&mut self, n: usize) -> Result<(), GpuError> {
        self.load_walks(n)
    }

    /// Queues one call on `stream` with raw device pointers (for graph capture). The first call
    /// with a new n on a multi-RHS walk loads that n's module ([`BitBsrSpmv::load_walks`] does it
    /// ahead: a stream capture in global mode may refuse the driver call).
    ///
    /// # Safety
    /// `x` must point at `cols·n` and `y` at `rows·n` f32 of this context that stay alive and are
    /// not written by others until the call completes; `stream` must be a live stream of this
    /// context, ordered after the uploads of [`BitBsrSpmv::new`] (synchronise the GPU's stream
    /// first), and no other call of this value may run concurrently (scratch buffers are shared).
    unsafe fn enqueue_raw(&self, call: RawCall) -> Result<(), GpuError> {
        let RawCall {
            stream,
            alpha,
            x,
            beta,
            y,
            n,
        } = call;
        if n == 0 || n > MAX_RHS {
            return Err(GpuError::Invalid(format!("n = {n} not in 1..={MAX_RHS}")));
        }
        if self.rows == 0 {
            return Ok(());
        }
        let g = &self.gpu;
        let (rows, cols, n32) = (self.rows as u32, self.cols as u32, n as u32);
        let core = self.uses_core(n);
        let f16 = self.storage == TileStorage::F16 && !core;
        let (p_x16, p_xs) = (ptr_of(&self.x16, g), ptr_of(&self.xs, g));
        let mut x_in = x;
        if f16 {
            let segs = self.cols.div_ceil(8) as u64 * n as u64;
            if segs > 0 {
                let args = [
                    Arg::Ptr(x),
                    Arg::U32(cols),
                    Arg::U32(n32),
                    Arg::Ptr(p_x16),
                    Arg::Ptr(p_xs),
                ];
                // SAFETY: `spmv_x16(const float*, u32, u32, u32*, float*)` (X16_PARAMS, the
                // signature table's); the kernel reads x[r·n + j] for r < K, j < n (caller's
                // contract) and writes segs·4·n ≤ x16.len() and segs·n ≤ xs.len() elements
                // (allocated for MAX_RHS ≥ n); one thread per (segment, RHS), extra threads exit.
                unsafe {
                    launch_checked(
                        &self.x16_fn,
                        ENTRY_X16,
                        X16_PARAMS,
                        Shape::per_thread(segs),
                        stream,
                        &args,
                    )
                }?;
            }
            x_in = p_x16;
        }
        let a_tiles = ptr_of(&self.tiles, g);
        let a_vals = match &self.values {
            DeviceValues::F16(v) => ptr_of(v, g),
            DeviceValues::F32(v) => ptr_of(v, g),
        };
        let a_scale = ptr_of(&self.row_scale, g);
        let a_ptr = ptr_of(&self.ptr, g);
        let w_items = ptr_of(&self.work.items, g);
        let items = self.work.num_items;
        let partial = ptr_of(&self.work.partial, g);
        let split = ptr_of(&self.work.split, g);
        // The walks sum their split rows themselves (the row's last chunk) at n = 1; at n ≥ 2 a
        // null count leaves them to spmv_fixup, as the MMA kernels do (the in-walk sum made the
        // n = 8 walks 40-80 % slower on small matrices with split rows, H200, f20e728).
        let walk_fixes = core && n == 1;
        let count = if walk_fixes {
            ptr_of(&self.work.count, g)
        } else {
            0
        };
        if items > 0 {
            let args = [
                Arg::Ptr(a_tiles),
                Arg::Ptr(a_vals),
                Arg::Ptr(a_scale),
                Arg::Ptr(a_ptr),
                Arg::Ptr(w_items),
                Arg::U32(items),
                Arg::Ptr(x_in),
                Arg::Ptr(p_xs),
                Arg::Ptr(y),
                Arg::Ptr(partial),
                Arg::U32(rows),
                Arg::U32(cols),
                Arg::U32(n32),
                Arg::F32(alpha),
                Arg::F32(beta),
                Arg::Ptr(split),
                Arg::Ptr(count),
            ];
            // The MMA kernels take the first 15 (MAIN_PARAMS), the walks all 17 (WALK_PARAMS).
            let (func, grid, params) = if let Some((f, per_block)) = self.core_fn(n)? {
                (f, (2 * items).div_ceil(per_block), &WALK_PARAMS[..])
            } else {
                (
                    &self.main[usize::from(n > 1)],
                    items.div_ceil(WARPS_PER_BLOCK),
                    MAIN_PARAMS,
                )
            };
            // SAFETY: (1) parameter types/order match the main kernels' entries (SIGNATURES,
            // checked against the PTX by a CPU test; the walks take the 17 of WALK_PARAMS, the
            // MMA kernels the first 15); the r1 and core kernels are only used with
            // n = 1, spmv_bits{n} / spmv_seg{n} with their own n; the core walks (`blockw`
            // included) read X as cols f32 (guarded by K; float4 loads only when X is 16-byte
            // aligned, checked in the kernel), the set-bit walks, `lane` and `blocklane` X rows
            // k < K only (a set bit's column: `new` checked the last segment's bits), n
            // floats each (vector loads only when X is aligned for them, checked in the kernel),
            // spmv_tc{n} X rows k < K only (guarded by cols in the kernel), `staged*` copy X
            // segments guarded by K (zero-filled past it) and a stage's values as the byte range
            // from its first tile's offset to its last tile's end (inside the value array: `new`
            // checked that the offsets are consecutive), one warp per item,
            // and each covers 2·items halves with the layout's halves per block (CORE_LAYOUTS;
            // extra groups / warps exit; the block layouts' shared memory is static, their
            // halves span ≤ MAX_ROWS_PER_HALF rows: `SpmvWork::check`).
            // (2) Reads stay in bounds: `new` checked the tile-row offsets (rows/8 + 1 entries
            // from 0 to the tile count), every tile's column (< ⌈K/8⌉: X reads are guarded by K in
            // the TF32 kernel, x16/xs hold whole segments) and value range; the work list passed
            // `SpmvWork::check` (every half inside the tiles/rows, slots < slots·8·MAX_RHS partial
            // floats), and the split table holds, for each of the `slots` slots, its row's
            // first and end slot (≤ slots: the counts index `count[first]` < slots; a null count,
            // n ≥ 2, is never dereferenced: split_last returns first); y writes are
            // guarded by rows and n ≤ MAX_RHS. (3) y is the only buffer written besides this
            // value's scratch (partial, count, x16, xs), which no concurrent call uses (caller's
            // contract; the counts are back to 0 when a call completes).
            unsafe {
                launch_checked(
                    func,
                    self.kernel_name(n),
                    params,
                    Shape::warps(grid, WARPS_PER_BLOCK),
                    stream,
                    &args[..params.len()],
                )
            }?;
        }
        // The walks at n = 1 sum their split rows themselves (the row's last chunk); the MMA
        // kernels and the walks at n ≥ 2 leave it to spmv_fixup.
        if self.work.num_fix > 0 && !walk_fixes {
            let args = [
                Arg::Ptr(ptr_of(&self.work.fix, g)),
                Arg::U32(self.work.num_fix),
                Arg::Ptr(ptr_of(&self.work.partial, g)),
                Arg::Ptr(y),
                Arg::U32(rows),
                Arg::U32(n32),
                Arg::F32(beta),
            ];
            let threads = self.work.num_fix as u64 * 8 * n as u64;
            // SAFETY: types/order match `spmv_fixup(const u32*, u32, const float*, float*, u32,
            // u32, float)`; fix holds num_fix checked triples (rows < tile-rows, slots < slots),
            // rows ≥ M are skipped, y holds rows·n (caller's contract); same stream as the main
            // kernel, so the partials are complete.
            unsafe {
                launch_checked(
                    &self.fixup,
                    ENTRY_FIXUP,
                    FIXUP_PARAMS,
                    Shape::per_thread(threads),
                    stream,
                    &args,
                )
            }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_arrays_pad_to_whole_16_byte_pieces() {
        // (values, bytes each) -> padded element count: a multiple of 16 bytes, never empty, and
        // never shorter than the data (89,409 halves: the array the staged f16 walk overran).
        for (len, eb, want) in [
            (0, 2, 8),
            (1, 2, 8),
            (8, 2, 8),
            (89_409, 2, 89_416),
            (0, 4, 4),
            (5, 4, 8),
            (12, 4, 12),
        ] {
            let got = padded16_len(len, eb);
            assert_eq!(got, want, "{len} values of {eb} bytes");
            assert_eq!(got * eb % 16, 0);
            assert!(got >= len.max(1));
        }
    }

    #[test]
    fn every_core_layout_has_an_entry_per_storage() {
        use TileStorage::{F16, F32, Tf32};
        let got: Vec<_> = CORE_LAYOUTS
            .iter()
            .map(|&(l, _)| [F16, Tf32, F32].map(|st| core_entry(st, l)))
            .collect();
        // (F16 storage's entry, F32 storage's), TF32 storage taking F32's.
        let want = [
            ("spmv_core_f16", "spmv_core_f32"),
            ("spmv_corew1_f16", "spmv_corew1_f32"),
            ("spmv_corew2_f16", "spmv_corew2_f32"),
            ("spmv_lane_f16", "spmv_lane_f32"),
            ("spmv_staged_f16", "spmv_staged_f32"),
            ("spmv_staged16_f16", "spmv_staged16_f32"),
            ("spmv_blocklane_f16", "spmv_blocklane_f32"),
            ("spmv_blockw_f16", "spmv_blockw_f32"),
            ("spmv_bits1_f16", "spmv_bits1_f32"),
            ("spmv_seg1_f16", "spmv_seg1_f32"),
            ("spmv_bitsw1_f16", "spmv_bitsw1_f32"),
            ("spmv_segw1_f16", "spmv_segw1_f32"),
            ("spmv_blockbw1_f16", "spmv_blockbw1_f32"),
            ("spmv_tc1_f16", "spmv_tc1_f32"),
        ];
        assert_eq!(got, want.map(|(h, f)| [Some(h), Some(f), Some(f)]));
        assert_eq!(core_entry(F32, "nope"), None);
    }

    #[test]
    fn tunings_time_the_walks_without_tc_or_untuned_layouts() {
        let one = tuned_walk_layouts(1);
        assert_eq!(
            one,
            [
                "core",
                "corew1",
                "corew2",
                "lane",
                "staged",
                "staged16",
                "blocklane",
                "blockw",
                "bits",
                "bitsw",
                "segw",
                "blockbw"
            ]
        );
        for n in 2..=MAX_RHS {
            assert_eq!(tuned_walk_layouts(n), ["bits", "bitsw", "segw", "blockbw"]);
        }
    }

    #[test]
    fn mean_tiles_per_row_skips_empty_rows() {
        assert_eq!(mean_tiles_per_row(&[0, 300, 300, 500]), 250.0);
        assert_eq!(mean_tiles_per_row(&[0, 0, 0]), 0.0);
        assert_eq!(mean_tiles_per_row(&[0]), 0.0);
        assert_eq!(mean_tiles_per_row(&[]), 0.0);
    }

    #[test]
    fn wave_fitted_layouts_time_the_large_budgets_and_the_wave() {
        assert_eq!(wave_fitted_chunks(&[4, 8, 32, 128], 169), [32, 128, 169]);
        assert_eq!(wave_fitted_chunks(&[4, 8, 32, 128], 32), [32, 128]);
        assert_eq!(wave_fitted_chunks(&[4, 8], 9), [9]);
    }

    /// The signature table lists every entry the launch code can pick exactly once (the PTX test
    /// then checks each one's parameters).
    #[test]
    fn signatures_list_every_entry_once() {
        let others = [
            "spmv_f16_r1",
            "spmv_f16_r8",
            "spmv_tf32_r1",
            "spmv_tf32_r8",
            ENTRY_X16,
            ENTRY_FIXUP,
        ];
        let mut want: Vec<&str> = others.to_vec();
        want.extend(CORE_ENTRIES.iter().flat_map(|(_, e)| *e));
        for table in MULTI_ENTRIES {
            want.extend(table.iter().flatten());
        }
        // Each layout's own entries: `spmv_{layout}{n}_{f16|f32}`.
        for l in MULTI_LAYOUTS {
            for (st, suffix) in [(TileStorage::F16, "f16"), (TileStorage::F32, "f32")] {
                let e = multi_entries(l, st).expect("a multi-RHS layout");
                for (i, name) in e.iter().enumerate() {
                    assert_eq!(*name, format!("spmv_{l}{}_{suffix}", i + 1));
                }
            }
        }
        assert_eq!(multi_entries("core", TileStorage::F16), None);
        let mut got: Vec<&str> = SIGNATURES.iter().map(|s| s.name).collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
        assert!(got.windows(2).all(|w| w[0] != w[1]), "a name listed twice");
        for s in SIGNATURES {
            // A multi-RHS walk for n ≥ 2 lives in n's module, the rest in spmv.ptx.
            let rhs = MULTI_LAYOUTS
                .iter()
                .flat_map(|&l| [TileStorage::F16, TileStorage::F32].map(|st| multi_entries(l, st)))
                .flatten()
                .find_map(|e| e.iter().position(|&name| name == s.name))
                .map_or(1, |i| i + 1);
            assert_eq!(s.module, KernelModule::spmv_for_rhs(rhs), "{}", s.name);
            let walk = !others.contains(&s.name);
            assert_eq!(s.params == &WALK_PARAMS[..], walk, "{}", s.name);
        }
    }
}
