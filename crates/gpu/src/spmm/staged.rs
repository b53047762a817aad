//! The window-staged CSR SpMM (`kernels-ptx/staged_spmm.cu`): `C = α·A·B + β·C`, f32 FMAs on CUDA
//! cores, B (`K × n`) and C (`M × n`) dense row-major with leading dimension ≥ n. With β = 0, C is
//! never read.
//!
//! A is a [`StagedCsr`]: rows cut into windows whose rows share at most `slot_cap` columns. One
//! thread block per (window, slice of S columns of C) stages the window's unique B rows, S floats
//! each, into shared memory (when B is 16-byte aligned with a leading dimension a multiple of 4
//! and the slice is full: Hopper bulk copies on one mbarrier, or 16-byte `cp.async` chunks, the
//! [`StageCopy`]; plain loads otherwise), then a warp per row multiplies from there. So a B row
//! segment crosses L2 once per window instead of once per nonzero, the gather reduction
//! `nnz / Σ|U_w|` of the layout.
//!
//! [`StagedSpmm::new`] uploads the layout once; [`crate::DeviceProduct::enqueue`] checks the
//! dense operands and launches.

use cudarc::driver::{CudaFunction, CudaSlice};
use tcsparse_formats::staged::{StagedCsr, StagedSpec};

use crate::launch::{Launch, Shape};
use crate::product::{Checked, DeviceProduct};
use crate::schedule::{upload_nonempty, upload_values};
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Warps per thread block (`STAGED_WARPS` in the kernel).
pub const WARPS_PER_BLOCK: u32 = 8;
/// Shared memory a block may use without the opt-in attribute.
const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;
/// The kernel's static shared memory (the mbarrier, as ptxas lays it out), which counts against
/// the same per-block limit as the dynamic part.
const STATIC_SHARED_BYTES: i32 = 128;

/// Columns of C (features) one thread block covers: the width of each staged B row segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slice {
    /// 32 features: one per lane.
    S32,
    /// 64 features: two per lane (a float2 from shared memory).
    S64,
}

impl Slice {
    /// Both slices.
    pub const ALL: [Slice; 2] = [Slice::S32, Slice::S64];

    /// Features per slice.
    pub const fn width(self) -> u32 {
        match self {
            Slice::S32 => 32,
            Slice::S64 => 64,
        }
    }

    /// Kernel entry name.
    pub const fn entry(self) -> &'static str {
        match self {
            Slice::S32 => "staged_spmm_s32_f32",
            Slice::S64 => "staged_spmm_s64_f32",
        }
    }

    /// The default window cut for this slice: 96 KB of staged rows per block at the cap (768
    /// slots of 32 floats, 384 of 64), so two blocks of 8 warps fit an H100/H200 SM's 228 KB,
    /// and windows of at most 128 rows (16 per warp).
    pub const fn default_spec(self) -> StagedSpec {
        StagedSpec {
            max_window_rows: 128,
            slot_cap: 96 * 1024 / (4 * self.width()),
        }
    }

    /// The light window cut: 32 KB of staged rows per block at the cap (256 slots of 32 floats,
    /// 128 of 64) and windows of at most 32 rows (4 per warp), so four blocks share an SM (the
    /// registers' limit) where the default cut's 96 KB allow two: more warps to hide the stage,
    /// for less reuse of each staged row.
    pub const fn light_spec(self) -> StagedSpec {
        StagedSpec {
            max_window_rows: 32,
            slot_cap: 32 * 1024 / (4 * self.width()),
        }
    }

    /// The cuts a tuning times for this slice: [`Slice::default_spec`], [`Slice::light_spec`].
    pub const fn tuned_specs(self) -> [StagedSpec; 2] {
        [self.default_spec(), self.light_spec()]
    }

    fn signature(self) -> &'static KernelSignature {
        match self {
            Slice::S32 => &SIGNATURES[0],
            Slice::S64 => &SIGNATURES[1],
        }
    }
}

/// How a block stages its aligned, full B row segments (the unaligned or partial ones always
/// take plain loads).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StageCopy {
    /// One Hopper bulk copy (`cp.async.bulk`) of S·4 bytes per segment, completing on one
    /// mbarrier.
    Bulk,
    /// 16-byte `cp.async` chunks, consecutive threads on consecutive chunks of a segment.
    Async,
}

impl StageCopy {
    /// Both, in the order a tuning times them.
    pub const ALL: [StageCopy; 2] = [StageCopy::Bulk, StageCopy::Async];

    /// The name in kernel descriptions.
    pub const fn name(self) -> &'static str {
        match self {
            StageCopy::Bulk => "bulk copies",
            StageCopy::Async => "cp.async",
        }
    }
}

const PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // window_rows    (u32, windows+1)
    ParamKind::Ptr, // unique_offsets (u32, windows+1)
    ParamKind::Ptr, // unique_cols    (u32)
    ParamKind::Ptr, // indptr         (u32, m+1)
    ParamKind::Ptr, // slots          (u16, nnz)
    ParamKind::Ptr, // values         (f32, nnz)
    ParamKind::Ptr, // B              (f32, k*ldb)
    ParamKind::U32, // ldb
    ParamKind::Ptr, // C              (f32, m*ldc)
    ParamKind::U32, // ldc
    ParamKind::U32, // n
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::U32, // flags
];

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test), in
/// [`Slice::ALL`] order.
pub const SIGNATURES: &[KernelSignature] = &[
    KernelSignature {
        module: KernelModule::StagedSpmm,
        name: Slice::S32.entry(),
        params: PARAMS,
    },
    KernelSignature {
        module: KernelModule::StagedSpmm,
        name: Slice::S64.entry(),
        params: PARAMS,
    },
];

/// Kernel flags: bit 0 = the aligned stage (B starts 16-byte aligned and `ldb` is a multiple of
/// 4, so every staged segment `B + k·ldb + slice·S` is 16-byte aligned), by bulk copies; bit 1
/// (only with bit 0) = by `cp.async` chunks instead ([`StageCopy::Async`]).
pub fn stage_flags(ldb: usize, b_addr: u64, copy: StageCopy) -> u32 {
    let aligned = ldb.is_multiple_of(4) && b_addr.is_multiple_of(16);
    match (aligned, copy) {
        (false, _) => 0,
        (true, StageCopy::Bulk) => 1,
        (true, StageCopy::Async) => 3,
    }
}

/// Dynamic shared memory of a block: `unique` staged rows of `slice` floats (one row when no
/// window has any, so the launch never asks for 0 bytes with a stage the kernel skips anyway).
pub fn shared_bytes(unique: usize, slice: Slice) -> Option<u32> {
    let bytes = unique.max(1).checked_mul(4 * slice.width() as usize)?;
    u32::try_from(bytes).ok()
}

/// A window-staged CSR matrix resident on the GPU, ready for repeated SpMM at one slice width.
///
/// Invariants (from [`StagedCsr`], whose only constructor builds them from a checked CSR):
/// `indptr` has `m + 1` entries from 0 to nnz; `window_rows` rises strictly from 0 to `m` over
/// `windows + 1` entries; each window's unique list (`unique_offsets`) holds distinct columns
/// `< k`, at most `unique_max` of them; every slot is below its window's count.
pub struct StagedSpmm {
    gpu: Gpu,
    m: usize,
    k: usize,
    nnz: usize,
    windows: usize,
    unique_max: usize,
    slice: Slice,
    spec: StagedSpec,
    copy: StageCopy,
    shared: u32,
    window_rows: CudaSlice<u32>,
    unique_offsets: CudaSlice<u32>,
    unique_cols: CudaSlice<u32>,
    indptr: CudaSlice<u32>,
    slots: CudaSlice<u16>,
    values: CudaSlice<f32>,
    func: CudaFunction,
}

impl_debug!(StagedSpmm, |s|
    m: s.m, k: s.k, nnz: s.nnz, windows: s.windows, unique_max: s.unique_max,
    slice: s.slice, spec: s.spec, copy: s.copy, shared_bytes: s.shared);

impl StagedSpmm {
    /// Uploads `a` for products at slice width `slice`.
    ///
    /// # Errors
    /// [`GpuError::Invalid`] when the matrix does not fit the kernel's u32 indices or grid, or a
    /// block's staged rows exceed the device's shared memory per block; runtime errors as they
    /// come.
    pub fn new(gpu: &Gpu, a: &StagedCsr, slice: Slice) -> Result<Self, GpuError> {
        let (m, k, nnz) = (a.rows(), a.cols(), a.nnz());
        if m >= u32::MAX as usize || k >= u32::MAX as usize || nnz >= u32::MAX as usize {
            return Err(GpuError::Invalid(format!(
                "{m}×{k} with {nnz} nnz does not fit u32 indices"
            )));
        }
        if a.windows() > i32::MAX as usize {
            return Err(GpuError::Invalid(format!(
                "{} windows exceed the grid",
                a.windows()
            )));
        }
        let unique_max = a.max_window_unique();
        let shared = shared_bytes(unique_max, slice).ok_or_else(|| {
            GpuError::Invalid(format!("{unique_max} staged rows overflow shared memory"))
        })?;
        let func = function(gpu, slice, shared)?;
        Ok(Self {
            gpu: gpu.clone(),
            m,
            k,
            nnz,
            windows: a.windows(),
            unique_max,
            slice,
            spec: a.spec(),
            copy: StageCopy::Bulk,
            shared,
            window_rows: gpu.upload(a.window_rows())?,
            unique_offsets: gpu.upload(a.unique_offsets())?,
            unique_cols: upload_nonempty(gpu, a.unique_cols())?,
            indptr: gpu.upload(a.indptr())?,
            slots: upload_nonempty(gpu, a.slots())?,
            values: upload_nonempty(gpu, a.values())?,
            func,
        })
    }

    /// Rows of A.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns of A.
    pub fn cols(&self) -> usize {
        self.k
    }

    /// Windows (thread blocks per slice).
    pub fn windows(&self) -> usize {
        self.windows
    }

    /// The slice width.
    pub fn slice(&self) -> Slice {
        self.slice
    }

    /// The window cut the layout was built with.
    pub fn spec(&self) -> StagedSpec {
        self.spec
    }

    /// How aligned full slices are staged ([`StageCopy::Bulk`] unless set).
    pub fn copy(&self) -> StageCopy {
        self.copy
    }

    /// Stages aligned full slices by `copy` from the next launch on.
    pub fn set_copy(&mut self, copy: StageCopy) {
        self.copy = copy;
    }

    /// Dynamic shared memory per block, bytes.
    pub fn shared_bytes(&self) -> u32 {
        self.shared
    }

    /// Launch shape for `n` columns (`n ≥ 1`): a block per (window, slice), at most 65535 slices
    /// along y (the kernel strides over more).
    pub fn launch_shape(&self, n: usize) -> Shape {
        let slices = n.div_ceil(self.slice.width() as usize).clamp(1, 65_535) as u32;
        Shape {
            grid: (self.windows as u32, slices, 1),
            block: (32, WARPS_PER_BLOCK, 1),
            shared_bytes: self.shared,
        }
    }

    /// Replaces the values (same pattern, CSR order, `values.len()` = nonzeros) with one upload.
    pub fn set_values(&mut self, values: &[f32]) -> Result<(), GpuError> {
        self.values = upload_values(&self.gpu, values, self.nnz)?;
        Ok(())
    }
}

/// Whether a block with `shared` bytes of dynamic shared memory needs the opt-in attribute: the
/// static part counts against the same 48 KB (a launch beyond it without the attribute fails
/// with an invalid-value error).
fn needs_opt_in(shared: u32) -> bool {
    i64::from(shared) + i64::from(STATIC_SHARED_BYTES) > i64::from(DEFAULT_SHARED_BYTES)
}

/// The kernel of `slice`, allowed `shared` bytes of dynamic shared memory: above the default
/// 48 KB the function's limit is raised to the device's opt-in maximum (once per function; every
/// matrix then fits up to that maximum).
fn function(gpu: &Gpu, slice: Slice, shared: u32) -> Result<CudaFunction, GpuError> {
    let f = gpu.function(KernelModule::StagedSpmm, slice.entry())?;
    if !needs_opt_in(shared) {
        return Ok(f);
    }
    use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
    let optin = gpu
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
        .saturating_sub(STATIC_SHARED_BYTES)
        .max(0);
    if i64::from(shared) > i64::from(optin) {
        return Err(GpuError::Invalid(format!(
            "a window stages {shared} bytes, more than the {optin} bytes of shared memory a block may use"
        )));
    }
    f.set_attribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        optin,
    )?;
    Ok(f)
}

/// `C = α·A·B + β·C` on the GPU's stream (asynchronous): B is `K × n` row-major, C is `M × n`, at
/// any leading dimensions ≥ n (any device buffer or view); with β = 0, C is never read.
impl DeviceProduct for StagedSpmm {
    fn shape(&self) -> (usize, usize) {
        (self.m, self.k)
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn enqueue_checked(&mut self, call: Checked<'_>) -> Result<(), GpuError> {
        let (alpha, beta, n, ldb, ldc) = (call.alpha, call.beta, call.n, call.ldb, call.ldc);
        let (b, c) = call.operands();
        if n > u32::MAX as usize / 2 {
            return Err(GpuError::Invalid(format!("n = {n} exceeds u32")));
        }
        if self.m == 0 || n == 0 {
            return Ok(());
        }
        let shape = self.launch_shape(n);
        let sig = self.slice.signature();
        let mut l = Launch::new(self.gpu.stream(), &self.func, sig);
        let b_ptr = l.borrow(b);
        let c_ptr = l.borrow_mut(c);
        let flags = stage_flags(ldb, b_ptr, self.copy);
        l.input(&self.window_rows)
            .input(&self.unique_offsets)
            .input(&self.unique_cols)
            .input(&self.indptr)
            .input(&self.slots)
            .input(&self.values)
            .dense_operands(b_ptr, ldb as u32, c_ptr, ldc as u32)
            .u32(n as u32)
            .f32(alpha)
            .f32(beta)
            .u32(flags);
        // SAFETY: (1) the arguments fill `staged_spmm_s{32,64}_f32(const u32*, const u32*, const
        // u32*, const u32*, const u16*, const float*, const float*, u32, float*, u32, u32, float,
        // float, u32)` (checked against the PTX by SIGNATURES, the entry of `self.slice`, whose
        // function `self.func` is). Flag bit 0 (bulk copies of S·4 bytes, or with bit 1 cp.async
        // chunks of 16 bytes at offsets 16·q < S·4) only when B starts 16-byte aligned and ldb is
        // a multiple of 4 (stage_flags), and the kernel takes those paths only for full slices, so
        // every copy's source `B + k·ldb + slice·S (+ 4q)` and size are multiples of 16 bytes
        // inside the segment; its shared destinations `slot·S·4 (+ 16q)` lie in the dynamic shared
        // memory of `shared` bytes (slots < unique_max, see (3)), which `function` allowed. (2)
        // Only C is written, borrowed mutably (its guard orders the launch after earlier work on
        // B and C); the layout's buffers are private and never written by a launch. (3) Reads stay
        // in bounds by the StagedCsr invariants (struct docs): the grid has one block per window
        // (x) reading window_rows[w], window_rows[w+1] and its unique list; every unique column is
        // < k, so staged B reads are < (k−1)·ldb + n ≤ b.len() (checked by enqueue), features ≥ n
        // guarded (plain path) or absent (bulk path: full slices only); rows < m index indptr (m+1
        // entries ending at nnz), slots and values (nnz entries, or one when empty and then
        // unread); each slot < its window's count ≤ unique_max, so shared reads stay inside the
        // stage. C writes are rows < m, features < n: < (m−1)·ldc + n ≤ c.len() (checked by
        // enqueue). Each element of C is written by one thread of one block.
        unsafe { l.launch(shape) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_specs_stage_96_kb_and_light_ones_32_kb_per_block() {
        for s in Slice::ALL {
            let (default, light) = (s.default_spec(), s.light_spec());
            for (spec, kb) in [(default, 96), (light, 32)] {
                assert_eq!(
                    shared_bytes(spec.slot_cap as usize, s),
                    Some(kb * 1024),
                    "{s:?}"
                );
                assert!(spec.check().is_ok());
            }
            assert_eq!(s.tuned_specs(), [default, light]);
        }
        assert_eq!(Slice::S32.default_spec().slot_cap, 768);
        assert_eq!(Slice::S64.default_spec().slot_cap, 384);
    }

    #[test]
    fn the_opt_in_counts_the_static_shared_memory() {
        let limit = DEFAULT_SHARED_BYTES - STATIC_SHARED_BYTES as u32;
        assert!(!needs_opt_in(0));
        assert!(!needs_opt_in(limit));
        assert!(needs_opt_in(limit + 1));
        // 384 staged rows of 32 floats: exactly 48 KB of dynamic shared memory.
        assert!(needs_opt_in(shared_bytes(384, Slice::S32).unwrap()));
    }

    #[test]
    fn shared_bytes_keep_one_row_and_refuse_overflow() {
        assert_eq!(shared_bytes(0, Slice::S32), Some(128));
        assert_eq!(shared_bytes(10, Slice::S64), Some(2560));
        assert_eq!(shared_bytes(usize::MAX, Slice::S32), None);
    }

    #[test]
    fn aligned_stage_needs_16_byte_rows() {
        for (copy, bits) in [(StageCopy::Bulk, 1), (StageCopy::Async, 3)] {
            assert_eq!(stage_flags(128, 256, copy), bits);
            assert_eq!(stage_flags(130, 256, copy), 0);
            assert_eq!(stage_flags(128, 260, copy), 0);
            assert_eq!(stage_flags(4, 0, copy), bits);
        }
    }

    #[test]
    fn signatures_follow_slice_order() {
        for (s, sig) in Slice::ALL.iter().zip(SIGNATURES) {
            assert_eq!(s.signature().name, sig.name);
            assert_eq!(sig.name, s.entry());
        }
    }
}
