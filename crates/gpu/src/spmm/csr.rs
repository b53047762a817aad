//! Our CUDA-core CSR SpMM (`kernels-ptx/csr_spmm.cu`): `C = α·A·B + β·C` with f32 A values and f32
//! accumulation, B (`K × n`) and C (`M × n`) dense row-major, in f32
//! ([`crate::DeviceProduct::enqueue`]) or f16 / bf16 ([`CsrSpmm::enqueue_half`]: B widened
//! exactly, C rounded to the type). With β = 0, C is never read.
//!
//! Work is balanced by nonzeros ([`csr_work`]): each warp gets either whole consecutive rows (up to
//! a nonzero budget; empty rows cost nothing but their store) or one chunk of a longer row, whose
//! chunks add their partial sums with atomics after a β pre-scale of just those rows (in f16 /
//! bf16: into f32 scratch rows, rounded into C after the kernel). One warp covers 128 features per
//! pass with one float4 (16-bit types: 8-byte) gather per nonzero and lane, several in flight.
//!
//! [`CsrSpmm::new`] uploads A and its work list once; [`crate::DeviceProduct::enqueue`] checks the dense operands'
//! lengths and launches.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig};
use tcsparse_formats::Csr;

use super::half_split::{HalfSplit, finish_signature};
use super::launch_flags_at;
use super::row_tile::{RowTileArith, RowTileHalf};
use crate::device_csr::{DeviceCsr, check_csr};
use crate::launch::{Arg, Launch};
use crate::product::{Checked, Dense, DenseMut, DeviceProduct, checked_width};
use crate::schedule::{SplitRows, upload_nonempty, upload_values};
use crate::signature::concat;
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name.
pub const ENTRY: &str = "csr_spmm_f32";
/// Warps (work items) per thread block (`CSR_WARPS` in the kernel).
pub const WARPS_PER_BLOCK: u32 = 8;
/// Columns of C one warp covers per pass (4 per lane).
pub const COLS_PER_WARP: u32 = 128;
/// Default nonzero budget of one warp item ([`csr_work`]).
pub const DEFAULT_CHUNK_NNZ: u32 = 256;

/// The f16 / bf16 entries, `[f16, bf16]`: B and C as their 16-bit bits; a split row's chunks add
/// into its f32 scratch row and [`FINISH_ENTRIES`] round it into C.
pub const HALF_ENTRIES: [&str; 2] = ["csr_spmm_f16", "csr_spmm_bf16"];
/// The split rows' finish of [`HALF_ENTRIES`], same order.
pub const FINISH_ENTRIES: [&str; 2] = ["csr_split_finish_f16", "csr_split_finish_bf16"];

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test): f32,
/// [`HALF_ENTRIES`], then [`FINISH_ENTRIES`].
pub const SIGNATURES: &[KernelSignature] = &[
    SIG,
    HALF_SIGNATURES[0],
    HALF_SIGNATURES[1],
    FINISH_SIGNATURES[0],
    FINISH_SIGNATURES[1],
];

const PARAMS: [ParamKind; 13] = [
    ParamKind::Ptr, // indptr  (u32, m+1)
    ParamKind::Ptr, // indices (u32, nnz)
    ParamKind::Ptr, // values  (f32, nnz)
    ParamKind::Ptr, // work    (u32, 4 per item)
    ParamKind::U32, // items
    ParamKind::Ptr, // B       (f32 / 16-bit, k*ldb)
    ParamKind::U32, // ldb
    ParamKind::Ptr, // C       (f32 / 16-bit, m*ldc)
    ParamKind::U32, // ldc
    ParamKind::U32, // n
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::U32, // flags
];

/// The f16 / bf16 entries: the f32 parameters, then the split rows and their scratch.
const HALF_PARAMS: [ParamKind; 16] = concat(
    &PARAMS,
    &[
        ParamKind::Ptr, // split_ids (the split rows, ascending)
        ParamKind::U32, // split_count
        ParamKind::Ptr, // scratch (split_count · n f32, zeroed)
    ],
);

const SIG: KernelSignature = KernelSignature {
    module: KernelModule::CsrSpmm,
    name: ENTRY,
    params: &PARAMS,
};

const HALF_SIGNATURES: [KernelSignature; 2] = [
    KernelSignature {
        module: KernelModule::CsrSpmm,
        name: HALF_ENTRIES[0],
        params: &HALF_PARAMS,
    },
    KernelSignature {
        module: KernelModule::CsrSpmm,
        name: HALF_ENTRIES[1],
        params: &HALF_PARAMS,
    },
];

const FINISH_SIGNATURES: [KernelSignature; 2] = [
    finish_signature(KernelModule::CsrSpmm, FINISH_ENTRIES[0]),
    finish_signature(KernelModule::CsrSpmm, FINISH_ENTRIES[1]),
];

/// The work list, its builder and its row cap: [`tcsparse_planner::work::csr`].
pub use tcsparse_planner::work::csr::{CsrWork, MAX_ROWS_PER_ITEM, csr_work};

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
    /// Host copy of the row offsets for [`CsrSpmm::set_chunk`], downloaded on its first rebuild (a
    /// copy made at construction cost R-MAT scale 20's plan-cache hit 2.9 ms of its 11.8).
    row_offsets: Option<Vec<u32>>,
    work: DeviceWork,
    func: CudaFunction,
    /// The f16 and bf16 entries (index: bf16) with their split rows' finish (each loaded on
    /// first use).
    half: [Option<HalfKernel>; 2],
}

/// The kernel of one 16-bit type ([`HALF_ENTRIES`]) with its split rows' finish and scratch.
struct HalfKernel {
    main: CudaFunction,
    split: HalfSplit,
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

/// Launch configuration of `num_items` warp items at `n` columns: a warp per item, one grid row per
/// slab of [`COLS_PER_WARP`] columns (at most 65 535; the kernel strides over further slabs).
fn launch_config(num_items: usize, n: usize) -> LaunchConfig {
    let slabs = n.div_ceil(COLS_PER_WARP as usize).clamp(1, 65_535) as u32;
    LaunchConfig {
        grid_dim: ((num_items as u32).div_ceil(WARPS_PER_BLOCK), slabs, 1),
        block_dim: (32, WARPS_PER_BLOCK, 1),
        shared_mem_bytes: 0,
    }
}

impl_debug!(CsrSpmm, |s|
    m: s.m, k: s.k, nnz: s.nnz, chunk_nnz: s.work.chunk_nnz, items: s.work.num_items,
    split_rows: s.work.split.count());

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
        Self::assemble(gpu, a, plan, d, None)
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
        // (The caller, tuning, re-packs at other budgets next: keep the host offsets.)
        Self::assemble(gpu, a, plan, csr, Some(a.row_offsets().to_vec()))
    }

    /// The product of `a` from its device arrays and work list (both made for `a`), keeping
    /// `row_offsets` (`a`'s, or None to download them when first needed).
    fn assemble(
        gpu: &Gpu,
        a: &Csr,
        plan: CsrWorkPlan,
        csr: DeviceCsr,
        row_offsets: Option<Vec<u32>>,
    ) -> Result<Self, GpuError> {
        Ok(Self {
            gpu: gpu.clone(),
            m: a.rows(),
            k: a.cols(),
            nnz: a.nnz(),
            work: plan.work,
            row_offsets,
            csr,
            func: gpu.function(KernelModule::CsrSpmm, ENTRY)?,
            half: [None, None],
        })
    }

    /// Rebuilds the work list for warp items of at most `chunk_nnz` nonzeros (0 is treated as 1;
    /// nothing to do at the current budget); A stays uploaded (its row offsets are downloaded on
    /// the first rebuild). On error the previous work list stays.
    pub fn set_chunk(&mut self, chunk_nnz: u32) -> Result<(), GpuError> {
        if chunk_nnz.max(1) == self.work.chunk_nnz {
            return Ok(());
        }
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
        launch_config(self.work.num_items, n)
    }

    /// Replaces the values (same pattern, CSR order, `values.len()` = nonzeros) with one upload.
    pub fn set_values(&mut self, values: &[f32]) -> Result<(), GpuError> {
        self.csr.values = upload_values(&self.gpu, values, self.nnz)?;
        Ok(())
    }

    /// `C = α·A·B + β·C` with B (`K × n`, leading dimension `ldb`) and C (`M × n`, `ldc`) views in
    /// the 16-bit type `T` (f16 or bf16), queued on the GPU's stream: A's f32 values times B
    /// widened exactly, f32 accumulation, β·C read in `T` (not at all when β = 0), C rounded to `T`
    /// to nearest (beyond its range ±∞, as a cast). Split rows add into f32 scratch rows (zeroed
    /// first) that the finish kernel rounds into C. Operands too short for their shapes are
    /// refused before anything is queued.
    pub fn enqueue_half<T: RowTileHalf>(
        &mut self,
        alpha: f32,
        b: &Dense<'_, T>,
        beta: f32,
        c: &mut DenseMut<'_, T>,
    ) -> Result<(), GpuError> {
        let n = checked_width((self.m, self.k), u32::MAX as usize / 2, false, b, c)?;
        let num_items = self.work.num_items;
        if num_items > u32::MAX as usize / 2 {
            return Err(GpuError::Invalid(format!(
                "{num_items} work items exceed u32"
            )));
        }
        if self.m == 0 || n == 0 {
            return Ok(());
        }
        let bf = usize::from(T::ARITH == RowTileArith::Bf16);
        let gpu = &self.gpu;
        let mut half = match self.half[bf].take() {
            Some(h) => h,
            None => HalfKernel {
                main: gpu.function(KernelModule::CsrSpmm, HALF_ENTRIES[bf])?,
                split: HalfSplit::new(gpu, &FINISH_SIGNATURES[bf])?,
            },
        };
        let split = &self.work.split;
        let (csr, items, m) = (&self.csr, &self.work.items, self.m);
        let main = &half.main;
        let run = half.split.run(
            gpu,
            (split.ids(), split.count(), 1),
            m,
            beta,
            c,
            |c, scratch| {
                let (ldb, ldc) = (b.ld(), c.ld());
                let mut l = Launch::new(gpu.stream(), main, &HALF_SIGNATURES[bf]);
                let b_ptr = l.borrow(b.buf());
                let c_ptr = l.borrow_mut(c.buf());
                let flags = launch_flags_at(ldb, ldc, b_ptr, c_ptr);
                // The split rows' scratch (none: count 0, never dereferenced).
                let s_ptr = scratch.map_or(0, |s| l.borrow_mut(s));
                l.input(&csr.indptr)
                    .input(&csr.indices)
                    .input(&csr.values)
                    .input(items)
                    .u32(num_items as u32)
                    .dense_operands(b_ptr, ldb as u32, c_ptr, ldc as u32)
                    .u32(n as u32)
                    .f32(alpha)
                    .f32(beta)
                    .u32(flags)
                    .input(split.ids())
                    .u32(split.count() as u32)
                    .arg(Arg::Ptr(s_ptr));
                // SAFETY: as `enqueue_checked`'s (1)–(3), for `csr_spmm_f16` / `_bf16` (the entry of
                // T's type, HALF_SIGNATURES checked against the PTX) on B and C of T (16-bit; flag
                // bit 0 only with ldb and ldc multiples of 4 and 16-byte aligned starts, so every
                // 8-byte access is aligned). (4) Split rows: `split` holds the work list's split
                // rows, ascending, and the kernel writes a split row's sums only into its scratch row
                // (found among them), `count · n` floats zeroed just before on this stream (16-byte
                // aligned vector atomics only when n is a multiple of 4); C is not touched there.
                unsafe { l.launch(launch_config(num_items, n).into()) }
            },
        );
        self.half[bf] = Some(half);
        run
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
            .dense_operands(b_ptr, ldb32, c_ptr, ldc32)
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
