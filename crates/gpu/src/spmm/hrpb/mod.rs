//! cuTeSpMM's HRPB kernel (`kernels-ptx/hrpb_spmm.cu`): `C = α·A·B + β·C`, f32 in, TF32 tensor
//! cores, B (`K × n`) and C (`M × n`) dense row-major with leading dimension `n`. With β = 0, C is
//! never read; every row of C is written (empty panels too).
//!
//! [`HrpbSpmm::new`] builds the device encoding ([`tcsparse_formats::hrpb::HrpbDevice`]) and uploads
//! it once. The work list is cuTeSpMM's wave-aware split (§5, Eq. 6–7, [`tcsparse_planner::wave::wave_split`], then a brick cap) computed from
//! the device, not from an SM table: the SM count of [`Gpu::info`] times the kernel's occupancy
//! (`cuOccupancyMaxActiveBlocksPerMultiprocessor` for its real registers and block size) gives
//! the resident thread blocks, the grid's feature tiles give the waves. Panels cut into several
//! virtual panels are pre-scaled by β (`acc_spmm_prescale` on 16-row groups, the shared
//! `SplitRows`) and accumulated with atomics — or, with [`HrpbMma::K8TS`], not pre-scaled: the
//! panel's first piece stores and publishes a flag, the others add after reading it; the work list
//! is rebuilt when the number of feature tiles (⌈n / 128⌉) changes.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice};
use tcsparse_formats::Csr;
use tcsparse_formats::hrpb::{DEVICE_BRICK_WORDS, Hrpb, HrpbDevice};
use tcsparse_planner::wave::{WaveSplit, wave_split_capped};

use crate::launch::{Launch, Shape};
use crate::product::{Checked, DeviceProduct};
use crate::schedule::{SplitRows, upload_nonempty};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

mod kernels;

pub use kernels::*;

/// Warps per thread block and feature tiles for width `n`.
pub fn tiling(n: usize) -> (u32, u32) {
    let warps = n.div_ceil(TN).clamp(1, MAX_WARPS);
    let tiles = n.div_ceil(TN * warps).max(1);
    (warps as u32, tiles.min(u32::MAX as usize) as u32)
}

/// Work items `{panel, brick_begin, brick_end, flags}` and the split panels, from a [`WaveSplit`]
/// over the panels' brick counts. flags bit 0: a piece of a split panel (added with atomics after
/// the pre-scale, or after the first piece's flag with [`HrpbMma::syncs_split_panels`]); bit 2:
/// that panel's first piece; bits 3..: the panel's slot in the returned list of split panels.
/// Errors when a split panel's pieces do not start with its first one (the flag handshake needs
/// the first piece earlier in the list) or there are 2^29 split panels or more.
pub fn work_items(
    panel_bricks: &[u32],
    split: &WaveSplit,
) -> Result<(Vec<u32>, Vec<u32>), GpuError> {
    let mut items = Vec::with_capacity(4 * split.panels.len());
    let mut split_panels = Vec::new();
    let mut slots = std::collections::HashMap::new();
    for v in &split.panels {
        let base = panel_bricks[v.panel as usize];
        let flags = if v.atomic {
            let slot = if v.block_begin == 0 {
                slots.insert(v.panel, split_panels.len());
                split_panels.push(v.panel);
                split_panels.len() - 1
            } else {
                *slots.get(&v.panel).ok_or_else(|| {
                    GpuError::Invalid(format!(
                        "split panel {} does not start with its first piece",
                        v.panel
                    ))
                })?
            };
            if slot >= 1 << 29 {
                return Err(GpuError::Invalid(format!(
                    "{slot} split panels exceed the work flags"
                )));
            }
            1 | (u32::from(v.block_begin == 0) << 2) | ((slot as u32) << 3)
        } else {
            0
        };
        items.extend_from_slice(&[v.panel, base + v.block_begin, base + v.block_end, flags]);
    }
    Ok((items, split_panels))
}

/// Pads a work list to a multiple of `per_block` items for a kernel with several items per thread
/// block (k8w: 4) with items the kernel skips (flags bit 1).
pub fn pad_warp_items(items: &mut Vec<u32>, per_block: u32) {
    while !(items.len() / 4).is_multiple_of(per_block.max(1) as usize) {
        items.extend_from_slice(&[0, 0, 0, 2]);
    }
}

/// For each of the `slots` split panels of a work list (`work_items`), its waiters: the pieces
/// other than its first (which every other piece waits for under k8ts).
pub fn split_waiters(items: &[u32], slots: usize) -> Vec<u32> {
    let mut waiters = vec![0u32; slots];
    for it in items.chunks_exact(4) {
        let flags = it[3];
        if flags & 1 == 1
            && flags & 4 == 0
            && let Some(w) = waiters.get_mut((flags >> 3) as usize)
        {
            *w += 1;
        }
    }
    waiters
}

/// A work list on the device.
struct DeviceWork {
    items: CudaSlice<u32>,
    count: usize,
    /// The split panels and their β pre-scale (none for k8ts, which runs no pre-scale).
    split: SplitRows,
    /// k8ts: the waiters (pieces but the first) of each split panel, then a flag and a count per
    /// split panel and 32 features, zero between launches (every launch leaves them so).
    sync: CudaSlice<u32>,
    /// Split panels (the length of the waiter region of `sync`).
    slots: u32,
    /// The split it was built from (numbers of Eq. 6–7).
    wave: WaveSplit,
}

/// A work list with the (feature tiles, warps per block) it was built for.
type CachedWork = ((u32, u32), Arc<DeviceWork>);

/// An HRPB matrix resident on the GPU, ready for repeated SpMM.
pub struct HrpbSpmm {
    gpu: Gpu,
    m: usize,
    k: usize,
    nnz: usize,
    /// Host copy of the panel brick prefix (work lists are built from it).
    panel_bricks: Vec<u32>,
    bricks: CudaSlice<u32>,
    values: CudaSlice<f32>,
    bytes: usize,
    mma: HrpbMma,
    split: HrpbSplit,
    func: CudaFunction,
    /// Work list for the last (feature tiles, warps) it was built for.
    work: Mutex<Option<CachedWork>>,
}

impl_debug!(HrpbSpmm, |s|
    m: s.m, k: s.k, nnz: s.nnz, bricks: s.panel_bricks.last().copied().unwrap_or(0), mma: s.mma,
    split: s.split);

impl HrpbSpmm {
    /// Builds HRPB from `a`, validates and uploads it (m16n8k8, wave-aware split).
    pub fn new(gpu: &Gpu, a: &Csr) -> Result<Self, GpuError> {
        let h = Hrpb::from_csr(a).map_err(|e| GpuError::Invalid(e.to_string()))?;
        Self::from_hrpb(gpu, &h, HrpbMma::K8, HrpbSplit::Wave)
    }

    /// Uploads the device encoding of `h` for the given MMA shape and split policy.
    pub fn from_hrpb(
        gpu: &Gpu,
        h: &Hrpb,
        mma: HrpbMma,
        split: HrpbSplit,
    ) -> Result<Self, GpuError> {
        Self::from_device(gpu, &h.device_layout(), mma, split)
    }

    /// Validates and uploads a device encoding.
    pub fn from_device(
        gpu: &Gpu,
        d: &HrpbDevice,
        mma: HrpbMma,
        split: HrpbSplit,
    ) -> Result<Self, GpuError> {
        d.validate().map_err(|e| GpuError::Invalid(e.to_string()))?;
        if d.num_panels() >= i32::MAX as usize {
            return Err(GpuError::Invalid(format!(
                "{} panels exceed the grid",
                d.num_panels()
            )));
        }
        Ok(Self {
            gpu: gpu.clone(),
            m: d.rows,
            k: d.cols,
            nnz: d.values.len(),
            panel_bricks: d.panel_bricks.clone(),
            bricks: upload_nonempty(gpu, &d.bricks)?,
            values: upload_nonempty(gpu, &d.values)?,
            bytes: d.bytes(),
            mma,
            split,
            func: gpu.function(KernelModule::HrpbSpmm, mma.entry())?,
            work: Mutex::new(None),
        })
    }

    /// Changes the MMA shape (A stays uploaded).
    pub fn set_mma(&mut self, mma: HrpbMma) -> Result<(), GpuError> {
        self.func = self.gpu.function(KernelModule::HrpbSpmm, mma.entry())?;
        self.mma = mma;
        *self.work.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }

    /// Changes the split policy (A stays uploaded); the cached work list is dropped only when the
    /// policy changes.
    pub fn set_split(&mut self, split: HrpbSplit) {
        if self.split == split {
            return;
        }
        self.split = split;
        *self.work.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Rows of A.
    pub fn rows(&self) -> usize {
        self.m
    }
    /// Columns of A.
    pub fn cols(&self) -> usize {
        self.k
    }
    /// MMA shape.
    pub fn mma(&self) -> HrpbMma {
        self.mma
    }
    /// Split policy.
    pub fn split(&self) -> HrpbSplit {
        self.split
    }
    /// Bytes of the device encoding.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// Stored bricks.
    pub fn num_bricks(&self) -> usize {
        self.panel_bricks.last().copied().unwrap_or(0) as usize
    }

    /// Thread blocks of the kernel resident per SM at width `n` (driver occupancy query).
    pub fn blocks_per_sm(&self, n: usize) -> Result<u32, GpuError> {
        let (warps, _, _) = self.mma.launch_shape(n);
        Ok(self
            .func
            .occupancy_max_active_blocks_per_multiprocessor(32 * warps, 0, None)?
            .max(1))
    }

    /// Bricks per piece for [`HrpbSplit::Cap`] at width `n` so that the pieces make about two
    /// waves of resident thread blocks (SM count × occupancy): ⌈bricks · tiles / (2 · resident)⌉,
    /// at least 4 (the row-tile kernels' wave-aware cap, docs/kernels/row-tile.md v5).
    pub fn fill_cap(&self, n: usize) -> Result<u32, GpuError> {
        let (tiles, resident) = self.tiles_and_resident(n)?;
        let bricks = self.num_bricks() as u64 * u64::from(tiles);
        Ok(bricks
            .div_ceil(2 * resident.max(1))
            .clamp(4, u32::MAX as u64) as u32)
    }

    /// Bricks per piece of [`HrpbSplit::Wave`] at width `n`: [`tcsparse_planner::wave::fill_cap`]
    /// of this matrix's bricks and panels on this device (SM count × the kernel's occupancy).
    pub fn wave_cap(&self, n: usize) -> Result<u32, GpuError> {
        let (tiles, resident) = self.tiles_and_resident(n)?;
        let sms = self.gpu.info().sm_count.max(1);
        let panels = self.panel_bricks.len().saturating_sub(1) as u64;
        Ok(tcsparse_planner::wave::fill_cap(
            self.num_bricks() as u64,
            panels,
            tiles,
            resident,
            sms,
        ))
    }

    /// (feature tiles, resident work units) at width `n`: the units are thread blocks, or warps
    /// for a kernel with warp items (SM count × occupancy × 4).
    fn tiles_and_resident(&self, n: usize) -> Result<(u32, u64), GpuError> {
        let (_, tiles, units) = self.mma.launch_shape(n);
        let sms = u64::from(self.gpu.info().sm_count.max(1));
        Ok((
            tiles,
            u64::from(self.blocks_per_sm(n)?) * sms * u64::from(units),
        ))
    }

    /// The wave split used at width `n` (Eq. 6–7 numbers and the virtual panels).
    pub fn wave_split(&self, n: usize) -> Result<WaveSplit, GpuError> {
        Ok(self.device_work(n)?.wave.clone())
    }

    /// k8ts's hand-off state at width `n` after the launches queued so far (waits for the
    /// stream): `(split panels, nonzero flag or count words)`. Every launch must leave the second
    /// at 0 (its last waiters reset what its first pieces set); for tests.
    #[doc(hidden)]
    pub fn split_handoff_state(&self, n: usize) -> Result<(u32, usize), GpuError> {
        let work = self.device_work(n)?;
        let words = self.gpu.download(&work.sync)?;
        let slots = work.slots as usize;
        let set = words
            .get(slots..)
            .unwrap_or(&[])
            .iter()
            .filter(|&&w| w != 0)
            .count();
        Ok((work.slots, set))
    }

    fn device_work(&self, n: usize) -> Result<Arc<DeviceWork>, GpuError> {
        let (warps, tiles, _) = self.mma.launch_shape(n);
        let key = (tiles, warps);
        let mut slot = self.work.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((k, w)) = slot.as_ref()
            && *k == key
        {
            return Ok(w.clone());
        }
        let counts: Vec<u32> = self.panel_bricks.windows(2).map(|w| w[1] - w[0]).collect();
        let concurrent = match self.split {
            // One "resident block" per panel-tile: nothing is ever split.
            HrpbSplit::None | HrpbSplit::Cap(_) => u64::MAX,
            HrpbSplit::Wave | HrpbSplit::WaveCoarse(_) => {
                let (_, resident) = self.tiles_and_resident(n)?;
                let coarse = match self.split {
                    HrpbSplit::WaveCoarse(k) => u64::from(k.max(1)),
                    _ => 1,
                };
                (resident / coarse).max(1)
            }
        };
        let wave = match self.split {
            HrpbSplit::None => whole_panels(&counts, tiles),
            HrpbSplit::Cap(cap) => capped_panels(&counts, tiles, cap),
            HrpbSplit::Wave | HrpbSplit::WaveCoarse(_) => {
                let cap = match self.split {
                    HrpbSplit::Wave => self.wave_cap(n)?,
                    _ => u32::MAX,
                };
                wave_split_capped(&counts, concurrent, tiles, cap)
                    .map_err(|e| GpuError::Invalid(e.to_string()))?
            }
        };
        let (mut items, split_panels) = work_items(&self.panel_bricks, &wave)?;
        if self.mma.warp_items() {
            pad_warp_items(&mut items, self.mma.items_per_block());
        }
        if items.len() / 4 >= i32::MAX as usize {
            return Err(GpuError::Invalid("too many virtual panels".into()));
        }
        // k8ts: the waiters of each split panel, then its flags and counts per 32-feature slice
        // (⌈n/32⌉ ≤ 4 · tiles for every width with these tiles); one word for the other kernels,
        // which never read it.
        let sync = if self.mma.syncs_split_panels() {
            let words = split_panels
                .len()
                .checked_mul(8 * tiles as usize)
                .and_then(|w| w.checked_add(split_panels.len()))
                .filter(|&w| w < u32::MAX as usize)
                .ok_or_else(|| GpuError::Invalid("too many split-panel flags".into()))?;
            let mut v = vec![0u32; words];
            for (w, p) in v.iter_mut().zip(split_waiters(&items, split_panels.len())) {
                *w = p;
            }
            v
        } else {
            vec![0]
        };
        let w = Arc::new(DeviceWork {
            items: upload_nonempty(&self.gpu, &items)?,
            count: items.len() / 4,
            split: SplitRows::upload(
                &self.gpu,
                if self.mma.syncs_split_panels() {
                    &[]
                } else {
                    &split_panels
                },
            )?,
            sync: self.gpu.upload(&sync)?,
            slots: split_panels.len() as u32,
            wave,
        });
        *slot = Some((key, w.clone()));
        Ok(w)
    }
}

/// Every panel as one virtual panel.
fn whole_panels(counts: &[u32], tiles: u32) -> WaveSplit {
    use tcsparse_planner::wave::VirtualPanel;
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    WaveSplit {
        panels: counts
            .iter()
            .enumerate()
            .map(|(p, &c)| VirtualPanel {
                panel: p as u32,
                block_begin: 0,
                block_end: c,
                atomic: false,
            })
            .collect(),
        concurrent_tbs: u64::MAX,
        num_waves: (counts.len() as u64 * tiles as u64).max(1),
        mean_blocks: if counts.is_empty() {
            0.0
        } else {
            total as f64 / counts.len() as f64
        },
        split_panels: 0,
    }
}

/// Every panel cut into pieces of at most `cap` bricks (0 is treated as 1), nearly equal in size;
/// a panel of more than one piece is marked atomic.
fn capped_panels(counts: &[u32], tiles: u32, cap: u32) -> WaveSplit {
    use tcsparse_planner::wave::VirtualPanel;
    let cap = cap.max(1);
    let mut s = whole_panels(counts, tiles);
    s.panels.clear();
    for (p, &c) in counts.iter().enumerate() {
        let pieces = c.div_ceil(cap).max(1);
        for i in 0..pieces {
            s.panels.push(VirtualPanel {
                panel: p as u32,
                block_begin: (c as u64 * i as u64 / pieces as u64) as u32,
                block_end: (c as u64 * (i as u64 + 1) / pieces as u64) as u32,
                atomic: pieces > 1,
            });
        }
        if pieces > 1 {
            s.split_panels += 1;
        }
    }
    s
}

/// Bytes per brick of the device encoding (for reports).
pub const BRICK_BYTES: usize = 4 * DEVICE_BRICK_WORDS;

/// `C = α·A·B + β·C` on the GPU's stream (asynchronous): B is `K × n` row-major, C is
/// `M × n`, at any leading dimensions ≥ n (any device buffer or view); with β = 0, C is
/// never read.
impl DeviceProduct for HrpbSpmm {
    fn shape(&self) -> (usize, usize) {
        (self.m, self.k)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn prepare_width(&mut self, n: usize) -> Result<(), GpuError> {
        self.device_work(n).map(drop)
    }

    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError> {
        let (alpha, beta, n, ldb, ldc) = (call.alpha, call.beta, call.n, call.ldb, call.ldc);
        let (b, c) = call.operands();
        if n > u32::MAX as usize / 2 || self.m > u32::MAX as usize / 2 {
            return Err(GpuError::Invalid(format!("n = {n} exceeds u32")));
        }
        if self.m == 0 || n == 0 {
            return Ok(());
        }
        let (warps, tiles, units) = self.mma.launch_shape(n);
        if tiles > 65_535 {
            return Err(GpuError::Invalid(format!(
                "n = {n} needs {tiles} feature tiles (> 65535)"
            )));
        }
        let work = self.device_work(n)?;
        if !self.mma.syncs_split_panels() {
            // Split panels (16-row groups): C = β·C before their pieces add with atomics. Their
            // ids are panels < ⌈m/16⌉ (from the split of this matrix's panels) and
            // (m−1)·ldc + n ≤ c.len() was checked above.
            work.split
                .prescale(&self.gpu, c, ldc, self.m, n, beta, PANEL_ROWS)?;
        }
        let (n32, m32, ldb32, ldc32) = (n as u32, self.m as u32, ldb as u32, ldc as u32);
        let sig = self.mma.signature();
        let mut l = Launch::new(self.gpu.stream(), &self.func, &sig);
        let b_ptr = l.borrow(b);
        let c_ptr = l.borrow_mut(c);
        // Bit 0: float4 B loads (ldb % 4 = 0, B 16-byte aligned); bit 1: float4 C access (ldc).
        let flags = u32::from(ldb.is_multiple_of(4) && b_ptr.is_multiple_of(16))
            | (u32::from(ldc.is_multiple_of(4) && c_ptr.is_multiple_of(16)) << 1);
        let shape = Shape {
            grid: (work.count as u32 / units, tiles, 1),
            block: (32, warps, 1),
            shared_bytes: 0,
        };
        l.input(&work.items)
            .input(&self.bricks)
            .input(&self.values)
            .dense_operands(b_ptr, ldb32, c_ptr, ldc32)
            .u32(m32)
            .u32(n32)
            .f32(alpha)
            .f32(beta)
            .u32(flags)
            .input(&work.sync)
            .u32(work.slots);
        // SAFETY: (1) the arguments fill every `hrpb_spmm_*` entry's (const u32*, const u32*,
        // const float*, const float*, u32, float*, u32, u32, u32, float, float, u32, u32*, u32)
        // (SIGNATURES, checked against the PTX by a CPU test); flag bit 0 (float4 B loads)
        // only when ldb is a multiple of 4 and B starts 16-byte aligned, bit 1 (float4 C)
        // likewise for ldc and C, so every float4 address is 16-byte aligned (each lane's first
        // feature is a multiple of 4).
        // (2) Only C is written and it is borrowed mutably (raw pointers through
        // device_ptr/device_ptr_mut, whose guards order the launch after earlier work on B and C);
        // the layout and work buffers are private and never written after upload. (3) Reads stay
        // in bounds: HrpbDevice::validate proved every brick's values lie inside `values`, every
        // column is < k or the sentinel (never read), and the panel prefix ends at the brick
        // count; work items hold brick ranges inside their panel's (work_items) and the grid has
        // exactly one block per `items_per_block` items (the list is padded to a multiple of it,
        // padding skipped); B reads are < (k−1)·ldb + n ≤ b.len() (check_dense), features ≥ n are
        // not read or stored, rows ≥ m not stored, and (m−1)·ldc + n ≤ c.len() was checked.
        // (4) Split panels were pre-scaled on the same stream just before, so the atomic adds land
        // on β·C; or (k8ts) their first piece stores and then sets its flag, and the other
        // pieces add only after reading it. `sync` holds `slots` waiter counts, then the flags
        // and counts at slots + slot · ⌈n/32⌉ + f0/32 (+ slots · ⌈n/32⌉), all < slots · (1 + 8 ·
        // tiles), its length (slot < slots from work_items, ⌈n/32⌉ ≤ 4 · tiles). The last waiter
        // of a flag zeroes it and its count, so every launch finds them zero (launches are
        // ordered on the one stream; the buffer is private to this work list).
        unsafe { l.launch(shape) }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_has_its_own_signature() {
        assert_eq!(SIGNATURES.len(), HrpbMma::ALL.len());
        for (m, sig) in HrpbMma::ALL.iter().zip(SIGNATURES) {
            assert_eq!(sig.name, m.entry());
            assert_eq!(*sig, m.signature());
        }
        let mut names: Vec<&str> = SIGNATURES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), HrpbMma::ALL.len(), "one entry per kernel");
    }

    #[test]
    fn tiling_covers_any_width() {
        assert_eq!(tiling(8), (1, 1));
        assert_eq!(tiling(32), (1, 1));
        assert_eq!(tiling(100), (4, 1));
        assert_eq!(tiling(128), (4, 1));
        assert_eq!(tiling(129), (4, 2));
        assert_eq!(tiling(1000), (4, 8));
        assert_eq!(tiling(0), (1, 1));
    }

    #[test]
    fn work_items_cover_every_brick_once_and_mark_split_panels() {
        // Panels of 0, 12 and 3 bricks on 1 resident block: panel 1 is cut.
        let pb = [0u32, 0, 12, 15];
        let counts = [0u32, 12, 3];
        let s = tcsparse_planner::wave::wave_split(&counts, 1, 1).unwrap();
        let (items, split) = work_items(&pb, &s).unwrap();
        assert_eq!(
            split,
            s.panels
                .iter()
                .filter(|v| v.atomic && v.block_begin == 0)
                .map(|v| v.panel)
                .collect::<Vec<_>>()
        );
        let mut covered = [0u32; 15];
        for it in items.chunks(4) {
            let (p, b0, b1) = (it[0] as usize, it[1], it[2]);
            assert!(pb[p] <= b0 && b0 <= b1 && b1 <= pb[p + 1]);
            for b in b0..b1 {
                covered[b as usize] += 1;
            }
        }
        assert!(covered.iter().all(|&c| c == 1));
        // The empty panel still has its item (so its rows are written).
        assert_eq!(&items[..4], &[0, 0, 0, 0]);
        // Capped at 5 bricks: panel 1 in 3 pieces of 4, panel 2 whole; every brick once.
        let c = capped_panels(&counts, 1, 5);
        assert_eq!(c.split_panels, 1);
        let (items, split) = work_items(&pb, &c).unwrap();
        assert_eq!(split, [1]);
        let pieces: Vec<(u32, u32)> = items.chunks(4).map(|it| (it[1], it[2])).collect();
        assert_eq!(pieces, [(0, 0), (0, 4), (4, 8), (8, 12), (12, 15)]);
        // Flags: the split panel's first piece 1 | 4 (slot 0), its others 1; whole panels 0.
        let flags: Vec<u32> = items.chunks(4).map(|it| it[3]).collect();
        assert_eq!(flags, [0, 5, 1, 1, 0]);
        // A second split panel gets slot 1; a piece before its panel's first is an error.
        let two = capped_panels(&[5, 12, 3], 1, 4);
        let (items, split) = work_items(&[0, 5, 17, 20], &two).unwrap();
        assert_eq!(split, [0, 1]);
        let flags: Vec<u32> = items.chunks(4).map(|it| it[3]).collect();
        assert_eq!(flags, [5, 1, 4 | 8 | 1, 8 | 1, 8 | 1, 0]);
        let mut bad = two.clone();
        bad.panels.swap(2, 3);
        assert!(work_items(&[0, 5, 17, 20], &bad).is_err());
        assert_eq!(capped_panels(&counts, 1, 0).panels.len(), 1 + 12 + 3);
        // No split: one item per panel.
        let w = whole_panels(&counts, 2);
        let (items, split) = work_items(&pb, &w).unwrap();
        assert_eq!(items.len(), 12);
        assert!(split.is_empty());
    }

    #[test]
    fn warp_items_pad_to_whole_thread_blocks_with_skipped_items() {
        // 5 pieces (the capped split above): padded to 8, the 3 extra skipped (flags bit 1), the
        // real ones untouched; a list already a multiple of 4 items (or empty) is left alone.
        let pb = [0u32, 0, 12, 15];
        let (mut items, _) = work_items(&pb, &capped_panels(&[0, 12, 3], 1, 5)).unwrap();
        let before = items.clone();
        let mut pairs = items.clone();
        pad_warp_items(&mut pairs, 2);
        assert_eq!(pairs.len(), 4 * 6);
        assert_eq!(&pairs[20..], &[0, 0, 0, 2]);
        pad_warp_items(&mut items, 4);
        assert_eq!(items.len(), 4 * 8);
        assert_eq!(&items[..before.len()], &before[..]);
        for it in items[before.len()..].chunks(4) {
            assert_eq!(it, [0, 0, 0, 2]);
        }
        assert!(before.chunks(4).all(|it| it[3] & 2 == 0));
        let mut four = items[..16].to_vec();
        pad_warp_items(&mut four, 4);
        assert_eq!(four.len(), 16);
        let mut none = Vec::new();
        pad_warp_items(&mut none, 4);
        assert!(none.is_empty());
        // Launch shapes: warp items always run 4 warps on ⌈n/32⌉ feature tiles, 4 items per block.
        assert_eq!(HrpbMma::K8W.launch_shape(8), (4, 1, 4));
        assert_eq!(HrpbMma::K8W.launch_shape(1000), (4, 32, 4));
        assert_eq!(HrpbMma::K8.launch_shape(1000), (4, 8, 1));
        assert_eq!(HrpbMma::K8D4.launch_shape(8), (1, 1, 1));
        assert_eq!(HrpbMma::K8O.launch_shape(1000), (4, 8, 1));
        // The untuned choice: k8ts from one panel per SM (132 SMs: 132 panels) up, k8wtd from 16
        // to 32 panels per SM (2112 ≤ panels < 4224).
        assert_eq!(HrpbMma::for_rows(859_254, 132), HrpbMma::K8TS); // REDDIT-BINARY
        assert_eq!(HrpbMma::for_rows(55_476, 132), HrpbMma::K8WTD); // copter2
        assert_eq!(HrpbMma::for_rows(43_471, 132), HrpbMma::K8WTD); // PROTEINS_full
        assert_eq!(HrpbMma::for_rows(16 * 4224, 132), HrpbMma::K8TS);
        assert_eq!(HrpbMma::for_rows(16 * 4224 - 16, 132), HrpbMma::K8WTD);
        assert_eq!(HrpbMma::for_rows(16 * 2112, 132), HrpbMma::K8WTD);
        assert_eq!(HrpbMma::for_rows(16 * 2112 - 16, 132), HrpbMma::K8TS);
        assert_eq!(HrpbMma::for_rows(11_397, 132), HrpbMma::K8TS); // cage10
        assert_eq!(HrpbMma::for_rows(5_196, 132), HrpbMma::K8TS); // BlogCatalog
        assert_eq!(HrpbMma::for_rows(2_708, 132), HrpbMma::K8TS); // cora
        assert_eq!(HrpbMma::for_rows(16 * 132, 132), HrpbMma::K8TS);
        assert_eq!(HrpbMma::for_rows(16 * 132 - 16, 132), HrpbMma::K8W);
        assert_eq!(HrpbMma::for_rows(496, 132), HrpbMma::K8W); // mbeacxc
        assert_eq!(HrpbMma::for_rows(0, 0), HrpbMma::K8W);
        assert!(HrpbMma::K8TS.syncs_split_panels() && !HrpbMma::K8T.syncs_split_panels());
        // Panel 0 whole; panel 1 in three pieces (slot 0), panel 2 in two (slot 1); padding.
        let items = [
            0,
            0,
            4,
            0, //
            1,
            4,
            6,
            1 | 4, //
            1,
            6,
            8,
            1, //
            1,
            8,
            9,
            1, //
            2,
            9,
            10,
            1 | 4 | (1 << 3), //
            2,
            10,
            12,
            1 | (1 << 3), //
            0,
            0,
            0,
            2,
        ];
        assert_eq!(split_waiters(&items, 2), [2, 1]);
        assert_eq!(HrpbMma::K8WSC.launch_shape(1000), (4, 32, 4));
        assert_eq!(HrpbMma::K8SC.launch_shape(1000), (4, 8, 1));
    }
}
