//! Our CUDA-core CSR SpMM (`kernels-ptx/csr_spmm.cu`): `C = α·A·B + β·C`, f32, B (`K × n`) and C
//! (`M × n`) dense row-major with leading dimension `n`. With β = 0, C is never read.
//!
//! Work is balanced by nonzeros ([`csr_work`]): each warp gets either whole consecutive rows (up to
//! a nonzero budget; empty rows cost nothing but their store) or one chunk of a longer row, whose
//! chunks add their partial sums with atomics after a β pre-scale of just those rows. One warp
//! covers 128 features per pass with one float4 gather per nonzero and lane, several in flight.
//!
//! [`CsrSpmm::new`] uploads A and its work list once; [`crate::DeviceProduct::enqueue`] checks the dense operands'
//! lengths and launches.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig};
use rayon::prelude::*;
use tcsparse_formats::Csr;

use super::launch_flags_at;
use crate::device_csr::{DeviceCsr, check_csr};
use crate::launch::{Arg, Launch};
use crate::product::{Checked, DeviceProduct};
use crate::schedule::{SplitRows, upload_nonempty};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name.
pub const ENTRY: &str = "csr_spmm_f32";
/// Warps (work items) per thread block (`CSR_WARPS` in the kernel).
pub const WARPS_PER_BLOCK: u32 = 8;
/// Columns of C one warp covers per pass (4 per lane).
pub const COLS_PER_WARP: u32 = 128;
/// Default nonzero budget of one warp item ([`csr_work`]).
pub const DEFAULT_CHUNK_NNZ: u32 = 256;
/// Most rows one warp item packs (bounds the stores of a run of empty or short rows).
pub const MAX_ROWS_PER_ITEM: u32 = 32;

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[SIG];

const SIG: KernelSignature = KernelSignature {
    module: KernelModule::CsrSpmm,
    name: ENTRY,
    params: &[
        ParamKind::Ptr, // indptr  (u32, m+1)
        ParamKind::Ptr, // indices (u32, nnz)
        ParamKind::Ptr, // values  (f32, nnz)
        ParamKind::Ptr, // work    (u32, 4 per item)
        ParamKind::U32, // items
        ParamKind::Ptr, // B       (f32, k*ldb)
        ParamKind::U32, // ldb
        ParamKind::Ptr, // C       (f32, m*ldc)
        ParamKind::U32, // ldc
        ParamKind::U32, // n
        ParamKind::F32, // alpha
        ParamKind::F32, // beta
        ParamKind::U32, // flags
    ],
};

/// Warp items of a CSR matrix (see [`csr_work`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsrWork {
    /// `{row_begin, row_end, nnz_begin, nnz_end}` per item, items in row order.
    pub items: Vec<[u32; 4]>,
    /// Rows longer than the budget, held in several items (pre-scaled by β, added with atomics).
    pub split_rows: Vec<u32>,
}

/// Rows per independent segment of [`csr_work`] (no item spans two segments; the segments are
/// counted and packed in parallel).
const WORK_SEGMENT_ROWS: usize = 1 << 12;

/// Splits the rows of a CSR matrix (row offsets `indptr`) into warp items of at most `chunk_nnz`
/// nonzeros (0 is treated as 1): runs of consecutive whole rows, at most [`MAX_ROWS_PER_ITEM`] of
/// them, or, for a row longer than `chunk_nnz`, one item per chunk of it (the row is then listed
/// in `split_rows`). Every row lies in some item and every nonzero in exactly one, in order. Runs
/// never cross a multiple of 2^12 rows, so segments of that many rows are walked in parallel,
/// twice: once to count their items, once to write them in place into the one list (the same
/// list on any thread count; R-MAT scale 20: ~3 ms a walk on one thread).
pub fn csr_work(indptr: &[u32], chunk_nnz: u32) -> CsrWork {
    csr_work_in_segments(indptr, chunk_nnz, WORK_SEGMENT_ROWS)
}

/// [`csr_work`] with runs cut at multiples of `segment_rows` (≥ 1) rows.
fn csr_work_in_segments(indptr: &[u32], chunk_nnz: u32, segment_rows: usize) -> CsrWork {
    let m = indptr.len().saturating_sub(1);
    let seg = segment_rows.max(1);
    let range = |s: usize| (s * seg, m.min(s * seg + seg));
    let segments = m.div_ceil(seg);
    // Pass 1: each segment's item and split-row counts.
    let counts: Vec<(usize, usize)> = (0..segments)
        .into_par_iter()
        .map(|s| {
            let (mut items, mut split) = (0, 0);
            walk_rows(indptr, chunk_nnz, range(s), |_| items += 1, |_| split += 1);
            (items, split)
        })
        .collect();
    // Pass 2: every segment writes its own part of the two lists (fresh pages, faulted in by
    // the writers in parallel instead of by one concatenating thread).
    let mut work = CsrWork {
        items: vec![[0; 4]; counts.iter().map(|c| c.0).sum()],
        split_rows: vec![0; counts.iter().map(|c| c.1).sum()],
    };
    let items = split_by_lens(&mut work.items, counts.iter().map(|c| c.0));
    let split = split_by_lens(&mut work.split_rows, counts.iter().map(|c| c.1));
    items
        .into_par_iter()
        .zip(split)
        .enumerate()
        .for_each(|(s, (items, split))| {
            let (mut it, mut sp) = (items.iter_mut(), split.iter_mut());
            walk_rows(
                indptr,
                chunk_nnz,
                range(s),
                |item| {
                    if let Some(slot) = it.next() {
                        *slot = item;
                    }
                },
                |row| {
                    if let Some(slot) = sp.next() {
                        *slot = row;
                    }
                },
            );
            // (Both walks are the same function of the same rows: every slot is written.)
            debug_assert!(it.next().is_none() && sp.next().is_none());
        });
    work
}

/// `v` cut into consecutive pieces of the given lengths (which sum to `v.len()`).
fn split_by_lens<T>(mut v: &mut [T], lens: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut out = Vec::new();
    for n in lens {
        let rest = std::mem::take(&mut v);
        let (head, tail) = rest.split_at_mut(n.min(rest.len()));
        out.push(head);
        v = tail;
    }
    out
}

/// [`csr_work`]'s walk over rows `[begin, end)`: `item` gets each warp item, in order, and
/// `split` each row longer than the budget.
fn walk_rows(
    indptr: &[u32],
    chunk_nnz: u32,
    (begin, end): (usize, usize),
    mut item: impl FnMut([u32; 4]),
    mut split: impl FnMut(u32),
) {
    let chunk = chunk_nnz.max(1);
    let len = |r: usize| indptr[r + 1] - indptr[r];
    let mut row = begin;
    while row < end {
        if len(row) > chunk {
            let (start, stop) = (indptr[row], indptr[row + 1]);
            let mut p = start;
            while p < stop {
                let q = stop.min(p.saturating_add(chunk));
                item([row as u32, row as u32 + 1, p, q]);
                p = q;
            }
            split(row as u32);
            row += 1;
            continue;
        }
        let first = row;
        let mut total = 0;
        while row < end && row - first < MAX_ROWS_PER_ITEM as usize && total + len(row) <= chunk {
            total += len(row);
            row += 1;
        }
        item([first as u32, row as u32, indptr[first], indptr[row]]);
    }
}

/// A CSR matrix resident on the GPU, ready for repeated SpMM.
///
/// Invariants (from [`Csr`], re-checked in [`CsrSpmm::new`]): `indptr` has `m+1` non-decreasing
/// entries from 0 to nnz, every column index is `< k`, and `m`, `k`, nnz fit in `u32`.
pub struct CsrSpmm {
    gpu: Gpu,
    m: usize,
    k: usize,
    nnz: usize,
    /// A on the device.
    csr: DeviceCsr,
    /// Host copy of the row offsets for [`CsrSpmm::set_chunk`], downloaded on its first call (a
    /// copy made at construction cost R-MAT scale 20's plan-cache hit 2.9 ms of its 11.8).
    row_offsets: Option<Vec<u32>>,
    work: DeviceWork,
    func: CudaFunction,
}

/// Loads the modules the CSR kernel's launches need, if not loaded yet: its own and the β
/// pre-scale's (for split rows; loaded too, though some matrices split no row). In a new process
/// that costs 1.1–1.5 ms on the H200 host (the pre-scale's module 0.7–0.9 of it), so a caller
/// that knows a CSR kernel may come (e.g. [`Gpu::warm_up_uploads`]' caller, while a matrix is
/// read) loads them ahead of time.
pub fn load_modules(gpu: &Gpu) -> Result<(), GpuError> {
    gpu.module(KernelModule::CsrSpmm)?;
    SplitRows::load_prescale(gpu)
}

/// The work-list half of a CSR kernel's set-up for one matrix and nonzero budget: its work list
/// ([`csr_work`]) packed and uploaded, and the modules its launches need loaded. It needs no
/// array of the matrix on the device, so a preparation can make it while the matrix goes up (a
/// plan-cache hit of R-MAT scale 20: its 1.2 MB upload then runs beside the values' instead of
/// after them), then hand both to [`CsrSpmm::with_work_on`].
pub struct CsrWorkPlan {
    rows: usize,
    nnz: usize,
    work: DeviceWork,
}

impl CsrWorkPlan {
    /// Packs `a`'s work list at `chunk_nnz` (0 is treated as 1) while the CSR kernel's modules
    /// load beside it ([`load_modules`]; nothing to do once loaded), then uploads it.
    pub fn new(gpu: &Gpu, a: &Csr, chunk_nnz: u32) -> Result<Self, GpuError> {
        check_csr(a)?;
        let t = std::time::Instant::now();
        let (work, loaded) = rayon::join(
            || csr_work(a.row_offsets(), chunk_nnz),
            || -> Result<f64, GpuError> {
                load_modules(gpu)?;
                Ok(t.elapsed().as_secs_f64() * 1e3)
            },
        );
        let modules_ms = loaded?;
        let packed_ms = t.elapsed().as_secs_f64() * 1e3;
        let device = DeviceWork::upload(gpu, chunk_nnz, &work)?;
        tracing::debug!(
            "CSR work list: {} items, {} split rows, packed in {packed_ms:.1} ms (modules loaded beside it in {modules_ms:.1} ms), uploaded after {:.1} ms",
            work.items.len(),
            work.split_rows.len(),
            t.elapsed().as_secs_f64() * 1e3
        );
        Ok(Self {
            rows: a.rows(),
            nnz: a.nnz(),
            work: device,
        })
    }

    /// Nonzero budget per warp item.
    pub fn chunk_nnz(&self) -> u32 {
        self.work.chunk_nnz
    }

    /// `Ok` when the plan was packed for a matrix of `a`'s row and nonzero counts (the caller
    /// vouches that it is the same matrix).
    fn check_matches(&self, a: &Csr) -> Result<(), GpuError> {
        if (self.rows, self.nnz) == (a.rows(), a.nnz()) {
            Ok(())
        } else {
            Err(GpuError::Invalid(format!(
                "a CSR work list for {} rows and {} nonzeros, used for {} rows and {}",
                self.rows,
                self.nnz,
                a.rows(),
                a.nnz()
            )))
        }
    }
}

/// A work list ([`csr_work`]) on the device.
struct DeviceWork {
    /// Nonzero budget it was built with.
    chunk_nnz: u32,
    num_items: usize,
    /// [`CsrWork::items`], flattened.
    items: CudaSlice<u32>,
    /// [`CsrWork::split_rows`] (groups of one row) and their β pre-scale.
    split: SplitRows,
}

impl DeviceWork {
    /// Uploads a work list packed at `chunk_nnz` (0 is treated as 1).
    fn upload(gpu: &Gpu, chunk_nnz: u32, work: &CsrWork) -> Result<Self, GpuError> {
        Ok(Self {
            chunk_nnz: chunk_nnz.max(1),
            num_items: work.items.len(),
            items: upload_nonempty(gpu, work.items.as_flattened())?,
            split: SplitRows::upload(gpu, &work.split_rows)?,
        })
    }
}

impl std::fmt::Debug for CsrSpmm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrSpmm")
            .field("m", &self.m)
            .field("k", &self.k)
            .field("nnz", &self.nnz)
            .field("chunk_nnz", &self.work.chunk_nnz)
            .field("items", &self.work.num_items)
            .field("split_rows", &self.work.split.count())
            .finish()
    }
}

impl CsrSpmm {
    /// Validates and uploads `a` with the default nonzero budget per warp item.
    pub fn new(gpu: &Gpu, a: &Csr) -> Result<Self, GpuError> {
        Self::with_chunk(gpu, a, DEFAULT_CHUNK_NNZ)
    }

    /// Validates and uploads `a` with warp items of at most `chunk_nnz` nonzeros ([`csr_work`]).
    pub fn with_chunk(gpu: &Gpu, a: &Csr, chunk_nnz: u32) -> Result<Self, GpuError> {
        Self::with_chunk_on(gpu, a, chunk_nnz, DeviceCsr::upload(gpu, a)?)
    }

    /// [`CsrSpmm::with_chunk`] on `a`'s arrays already uploaded (`d`, the upload of `a`: its
    /// shape is checked), without a second upload.
    pub fn with_chunk_on(
        gpu: &Gpu,
        a: &Csr,
        chunk_nnz: u32,
        d: DeviceCsr,
    ) -> Result<Self, GpuError> {
        Self::with_work_on(gpu, a, CsrWorkPlan::new(gpu, a, chunk_nnz)?, d)
    }

    /// [`CsrSpmm::with_chunk_on`] with the work list packed already (`plan`, made for `a`: its
    /// shape is checked, as `d`'s).
    pub fn with_work_on(
        gpu: &Gpu,
        a: &Csr,
        plan: CsrWorkPlan,
        d: DeviceCsr,
    ) -> Result<Self, GpuError> {
        check_csr(a)?;
        d.check_matches(a)?;
        plan.check_matches(a)?;
        Ok(Self {
            gpu: gpu.clone(),
            m: a.rows(),
            k: a.cols(),
            nnz: a.nnz(),
            work: plan.work,
            row_offsets: None,
            csr: d,
            func: gpu.function(KernelModule::CsrSpmm, ENTRY)?,
        })
    }

    /// [`CsrSpmm::with_chunk`] on a copy of arrays that already hold `a` on the device
    /// ([`DeviceCsr::copy_from_device`]).
    pub fn with_chunk_from_device(
        gpu: &Gpu,
        a: &Csr,
        chunk_nnz: u32,
        arrays: (&CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<f32>),
    ) -> Result<Self, GpuError> {
        let csr = DeviceCsr::copy_from_device(gpu, a, arrays)?;
        let plan = CsrWorkPlan::new(gpu, a, chunk_nnz)?;
        Ok(Self {
            gpu: gpu.clone(),
            m: a.rows(),
            k: a.cols(),
            nnz: a.nnz(),
            work: plan.work,
            // (The caller, tuning, re-packs at other budgets next: keep the host offsets.)
            row_offsets: Some(a.row_offsets().to_vec()),
            csr,
            func: gpu.function(KernelModule::CsrSpmm, ENTRY)?,
        })
    }

    /// Rebuilds the work list for warp items of at most `chunk_nnz` nonzeros; A stays uploaded
    /// (its row offsets are downloaded on the first call). On error the previous work list stays.
    pub fn set_chunk(&mut self, chunk_nnz: u32) -> Result<(), GpuError> {
        let offsets = match self.row_offsets.take() {
            Some(o) => o,
            None => self.gpu.download(&self.csr.indptr)?,
        };
        let t = std::time::Instant::now();
        let work = csr_work(&offsets, chunk_nnz);
        tracing::debug!(
            "CSR work list at {chunk_nnz} nonzeros: {} items packed in {:.1} ms",
            work.items.len(),
            t.elapsed().as_secs_f64() * 1e3
        );
        self.row_offsets = Some(offsets);
        self.work = DeviceWork::upload(&self.gpu, chunk_nnz, &work)?;
        Ok(())
    }

    /// Rows of A.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns of A.
    pub fn cols(&self) -> usize {
        self.k
    }

    /// Nonzero budget per warp item.
    pub fn chunk_nnz(&self) -> u32 {
        self.work.chunk_nnz
    }

    /// Rows spread over several warp items (added with atomics after a β pre-scale).
    pub fn num_split_rows(&self) -> usize {
        self.work.split.count()
    }

    /// Launch configuration for `n` columns.
    pub fn launch_config(&self, n: usize) -> LaunchConfig {
        let slabs = n.div_ceil(COLS_PER_WARP as usize).clamp(1, 65_535) as u32;
        LaunchConfig {
            grid_dim: (
                (self.work.num_items as u32).div_ceil(WARPS_PER_BLOCK),
                slabs,
                1,
            ),
            block_dim: (32, WARPS_PER_BLOCK, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Replaces the values (same pattern, CSR order, `values.len()` = nonzeros) with one upload.
    pub fn set_values(&mut self, values: &[f32]) -> Result<(), GpuError> {
        if values.len() != self.nnz {
            return Err(GpuError::Invalid(format!(
                "{} values for a matrix with {} nonzeros",
                values.len(),
                self.nnz
            )));
        }
        self.csr.values = upload_nonempty(&self.gpu, values)?;
        Ok(())
    }
}

/// `C = α·A·B + β·C` on the GPU's stream (asynchronous): B is `K × n` row-major, C is
/// `M × n`, at any leading dimensions ≥ n (any device buffer or view); with β = 0, C is
/// never read.
impl DeviceProduct for CsrSpmm {
    fn shape(&self) -> (usize, usize) {
        (self.m, self.k)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError> {
        let (alpha, beta, n, ldb, ldc) = (call.alpha, call.beta, call.n, call.ldb, call.ldc);
        let (b, c) = call.operands();
        let num_items = self.work.num_items;
        if n > u32::MAX as usize / 2 || num_items > u32::MAX as usize / 2 {
            return Err(GpuError::Invalid(format!(
                "n = {n} or {num_items} work items exceed u32"
            )));
        }
        if self.m == 0 || n == 0 {
            return Ok(());
        }
        let (n32, ldb32, ldc32) = (n as u32, ldb as u32, ldc as u32);
        // Split rows (groups of one row): C = β·C there before the chunks add with atomics. Their
        // ids are rows < m (csr_work) and (m−1)·ldc + n ≤ c.len() was checked above.
        self.work
            .split
            .prescale(&self.gpu, c, ldc, self.m, n, beta, 1)?;
        let items = num_items as u32;
        let mut l = Launch::new(self.gpu.stream(), &self.func, &SIG);
        let b_ptr = l.borrow(b);
        let c_ptr = l.borrow_mut(c);
        let flags = launch_flags_at(ldb, ldc, b_ptr, c_ptr);
        l.input(&self.csr.indptr)
            .input(&self.csr.indices)
            .input(&self.csr.values)
            .input(&self.work.items)
            .u32(items)
            .arg(Arg::Ptr(b_ptr))
            .u32(ldb32)
            .arg(Arg::Ptr(c_ptr))
            .u32(ldc32)
            .u32(n32)
            .f32(alpha)
            .f32(beta)
            .u32(flags);
        // SAFETY: (1) the arguments fill `csr_spmm_f32(const u32*, const u32*, const float*,
        // const u32*, u32, const float*, u32, float*, u32, u32, float, float, u32)` (checked against
        // the PTX by SIGNATURES); flag bit 0 (float4 access) only when ldb and ldc are multiples
        // of 4 and B and C start 16-byte aligned (launch_flags_at; each lane's first feature is a
        // multiple of 4), so every float4 address is 16-byte aligned. (2) Only C is written
        // and it is borrowed mutably (raw pointers through device_ptr/device_ptr_mut, whose guards
        // order the launch after earlier work on B and C); A's buffers and the work list are
        // private and never written by a launch. (3) Reads stay in bounds: check_csr proved indptr
        // has m+1 entries ending at nnz and every column < k, so B reads are < (k−1)·ldb + n ≤
        // b.len() (check_dense); csr_work built `items` entries of rows < m with nonzero ranges
        // inside indptr (upload_nonempty keeps one element when empty, and the grid covers exactly
        // `items` warps, the rest exit); features ≥ n are guarded, and (m−1)·ldc + n ≤ c.len()
        // was checked above. (4) Split rows were pre-scaled on the same stream just before, so the
        // atomic adds land on β·C.
        unsafe { l.launch(self.launch_config(n).into()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every nonzero in exactly one item, in order; every row in some item; item budgets and row
    /// counts respected; split rows exactly the rows longer than the budget.
    fn check_work(indptr: &[u32], chunk: u32) {
        for segment in [1, 3, 64, WORK_SEGMENT_ROWS] {
            check_work_in_segments(indptr, chunk, segment);
        }
    }

    fn check_work_in_segments(indptr: &[u32], chunk: u32, segment: usize) {
        let w = csr_work_in_segments(indptr, chunk, segment);
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| csr_work_in_segments(indptr, chunk, segment));
        assert_eq!(w, one_thread, "the same list on any thread count");
        let m = indptr.len() - 1;
        let (mut next_row, mut next_nnz) = (0u32, 0u32);
        for &[rb, re, nb, ne] in &w.items {
            assert!(rb < re && re as usize <= m, "{:?}", [rb, re, nb, ne]);
            assert!(nb <= ne && ne - nb <= chunk.max(1));
            assert!(re - rb <= MAX_ROWS_PER_ITEM);
            assert_eq!(
                rb as usize / segment,
                (re as usize - 1) / segment,
                "crosses a segment"
            );
            // Chunks of one split row repeat the row; otherwise rows follow on.
            assert!(rb == next_row || (rb + 1 == next_row && re == next_row));
            assert_eq!(nb, next_nnz);
            assert!(nb >= indptr[rb as usize] && ne <= indptr[re as usize]);
            if re - rb > 1 || nb == indptr[rb as usize] && ne == indptr[re as usize] {
                assert_eq!((nb, ne), (indptr[rb as usize], indptr[re as usize]));
            }
            next_row = re;
            next_nnz = ne;
        }
        assert_eq!(next_row as usize, m);
        assert_eq!(next_nnz, indptr[m]);
        let long: Vec<u32> = (0..m as u32)
            .filter(|&r| indptr[r as usize + 1] - indptr[r as usize] > chunk.max(1))
            .collect();
        assert_eq!(w.split_rows, long);
    }

    fn indptr_of(lens: &[u32]) -> Vec<u32> {
        std::iter::once(0)
            .chain(lens.iter().scan(0, |s, &l| {
                *s += l;
                Some(*s)
            }))
            .collect()
    }

    #[test]
    fn work_items_cover_every_row_and_nonzero_once() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |k: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % k) as u32
        };
        for case in 0..200 {
            let m = rand(300) as usize;
            // Mostly short rows, some empty, a few hubs.
            let lens: Vec<u32> = (0..m)
                .map(|_| match rand(20) {
                    0..=5 => 0,
                    6 => 200 + rand(3000),
                    _ => rand(12),
                })
                .collect();
            for chunk in [0, 1, 7, 64, 256] {
                check_work(&indptr_of(&lens), chunk);
            }
            if case == 0 {
                check_work(&[0], 16);
            }
        }
    }

    #[test]
    fn work_packs_short_rows_and_splits_long_ones() {
        // Rows of 3, 0, 0, 10, 2 nonzeros with a budget of 4: [0, 3) packs 3 + 0 + 0, row 3 is
        // split into 4 + 4 + 2, row 4 stands alone.
        let w = csr_work(&indptr_of(&[3, 0, 0, 10, 2]), 4);
        assert_eq!(
            w.items,
            [
                [0, 3, 0, 3],
                [3, 4, 3, 7],
                [3, 4, 7, 11],
                [3, 4, 11, 13],
                [4, 5, 13, 15]
            ]
        );
        assert_eq!(w.split_rows, [3]);
        // At most MAX_ROWS_PER_ITEM empty rows per item.
        let w = csr_work(&indptr_of(&[0; 70]), 4);
        assert_eq!(w.items.len(), 3);
        assert!(w.split_rows.is_empty());
    }
}
