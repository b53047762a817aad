//! The toolbox the SpMM kernels share: validated work lists ([`FlatSchedule`], uploaded as a
//! `DeviceSchedule`), rows accumulated with atomics and their β pre-scale (`SplitRows`, the
//! `acc_spmm_prescale` kernel), and the one upload helper (`upload_nonempty`).

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtrMut, DeviceRepr};
use tcsparse_planner::AccSchedule;

use crate::launch::{Launch, Shape};
use crate::spmm::AccSpmmError;
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry that pre-scales the rows of split windows by β.
pub const ENTRY_PRESCALE: &str = "acc_spmm_prescale";
/// Threads per block of the pre-scale kernel.
const PRESCALE_THREADS: u32 = 256;

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[SIG_PRESCALE];

const SIG_PRESCALE: KernelSignature = KernelSignature {
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
};

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

/// Copies `data` to a new device buffer on the GPU's stream; an empty array becomes one default
/// element (never read), so no zero-byte allocation is made. The one upload helper of the kernels.
pub(crate) fn upload_nonempty<T: DeviceRepr + Default + Clone>(
    gpu: &Gpu,
    data: &[T],
) -> Result<CudaSlice<T>, GpuError> {
    if data.is_empty() {
        gpu.upload(&[T::default()])
    } else {
        gpu.upload(data)
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
        Ok(Self {
            work: upload_nonempty(gpu, &flat.work)?,
            window_split: upload_nonempty(gpu, &flat.window_split)?,
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

    /// Loads the pre-scale's module ahead of [`SplitRows::upload`] (from another thread, say,
    /// while the matrix goes up): the upload then finds it loaded.
    pub fn load_prescale(gpu: &Gpu) -> Result<(), GpuError> {
        gpu.function(KernelModule::AccSpmm, ENTRY_PRESCALE)?;
        Ok(())
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
    pub fn prescale<C: DevicePtrMut<f32> + ?Sized>(
        &self,
        gpu: &Gpu,
        c: &mut C,
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
        let shape = Shape {
            grid: (count.min(65_535 * 4), 1, 1),
            block: (PRESCALE_THREADS, 1, 1),
            shared_bytes: 0,
        };
        let (ldc, m, n) = (ldc as u32, rows as u32, n as u32);
        let mut l = Launch::new(gpu.stream(), func, &SIG_PRESCALE);
        l.input(&self.ids)
            .u32(count)
            .output(c)
            .u32(ldc)
            .u32(m)
            .u32(n)
            .f32(beta)
            .u32(group_rows);
        // SAFETY: (1) the arguments fill `acc_spmm_prescale(const u32*, u32, float*, u32, u32,
        // u32, float, u32)` (SIG_PRESCALE, checked against the PTX by a CPU test). (2) The
        // only written buffer is C, borrowed mutably here (its guard orders the launch after
        // earlier work on C and records it). (3) Reads/writes stay in bounds: `ids`
        // holds `count` group ids < ⌈M / group_rows⌉ (caller contract), rows ≥ M are skipped in
        // the kernel and the caller checked (M−1)·ldc + n ≤ C.len().
        unsafe { l.launch(shape) }
    }
}
