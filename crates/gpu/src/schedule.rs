//! The toolbox the SpMM kernels share: validated work lists ([`FlatSchedule`], uploaded as a
//! `DeviceSchedule`), rows accumulated with atomics and their β pre-scale (`SplitRows`, the
//! `acc_spmm_prescale` kernel), and the one upload helper (`upload_nonempty`).

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtrMut, DeviceRepr};
use tcsparse_planner::{AccSchedule, PlanError};

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

/// The flat work list and its checks: [`tcsparse_planner::work::flat`].
pub use tcsparse_planner::work::flat::{FlatSchedule, unbalanced_schedule};

/// [`tcsparse_planner::work::flat::flatten_schedule`], its error as an [`AccSpmmError`].
pub fn flatten_schedule(
    row_window_offset: &[u32],
    work: impl IntoIterator<Item = [u64; 4]>,
    window_split: &[u8],
) -> Result<FlatSchedule, AccSpmmError> {
    tcsparse_planner::work::flat::flatten_schedule(row_window_offset, work, window_split)
        .map_err(schedule_error)
}

/// [`tcsparse_planner::work::flat::flatten_acc_schedule`], its error as an [`AccSpmmError`].
pub fn flatten_acc_schedule(
    row_window_offset: &[u32],
    schedule: &AccSchedule,
) -> Result<FlatSchedule, AccSpmmError> {
    tcsparse_planner::work::flat::flatten_acc_schedule(row_window_offset, schedule)
        .map_err(schedule_error)
}

fn schedule_error(e: PlanError) -> AccSpmmError {
    match e {
        PlanError::InvalidSchedule(s) => AccSpmmError::InvalidSchedule(s),
        other => AccSpmmError::InvalidSchedule(other.to_string()),
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

/// The new values of a matrix of `nnz` stored values (same pattern) uploaded with
/// [`upload_nonempty`]; [`GpuError::Invalid`] when `values` has another length.
pub(crate) fn upload_values(
    gpu: &Gpu,
    values: &[f32],
    nnz: usize,
) -> Result<CudaSlice<f32>, GpuError> {
    if values.len() != nnz {
        return Err(GpuError::Invalid(format!(
            "{} values for a matrix with {nnz} nonzeros",
            values.len()
        )));
    }
    upload_nonempty(gpu, values)
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

    /// The group ids, ascending (one element, unused, when there is none).
    pub fn ids(&self) -> &CudaSlice<u32> {
        &self.ids
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
