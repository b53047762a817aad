//! cuSPARSE baselines through cudarc's `sys` bindings (cudarc 0.19 has no safe cuSPARSE layer), behind
//! small RAII wrappers: the handle, the CSR descriptor over a [`DeviceCsr`], SpMM (CSR, generic API,
//! row-major B/C, f32) and BSR SpMV (legacy `cusparseSbsrmv`, [`CusparseBsr`] in `bsr.rs`); the SpMV
//! baseline on the same descriptor is [`crate::spmv::baseline`]; SpMM with A, B and C in f16 or
//! bf16 and f32 compute is [`CusparseSpmmHalf`] (`half.rs`).
//!
//! "Prepare once, run many": [`CusparseSpmm::new`] creates the handle and descriptors, asks for the
//! workspace size, allocates it and runs `cusparseSpMM_preprocess`; a product (the
//! [`crate::DeviceProduct`] calls, at the width it was made for) only points the dense descriptors
//! at the caller's buffers and calls `cusparseSpMM`.

use cudarc::cusparse::sys as cs;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use std::ffi::c_void;
use std::sync::Arc;
use tcsparse_formats::Csr;

use crate::device_csr::DeviceCsr;
use crate::device_csr::check_csr;
use crate::schedule::upload_nonempty;
use crate::{Gpu, GpuError};

mod bsr;
mod half;

pub use bsr::CusparseBsr;
pub use half::CusparseSpmmHalf;

pub(crate) fn ok(call: &'static str, s: cs::cusparseStatus_t) -> Result<(), GpuError> {
    s.result().map_err(|e| GpuError::cusparse(call, e))
}

/// A cuSPARSE handle bound to the [`Gpu`]'s stream. Destroyed on drop.
pub struct CusparseHandle {
    handle: cs::cusparseHandle_t,
    gpu: Gpu,
}

// SAFETY: cuSPARSE allows a handle to be used from any thread as long as calls do not overlap; the
// type is Send but not Sync, so only its single owner (on one thread at a time) can call through it.
unsafe impl Send for CusparseHandle {}

impl CusparseHandle {
    /// Creates a handle and sets its stream to [`Gpu::stream`].
    pub fn new(gpu: &Gpu) -> Result<Self, GpuError> {
        // (cudarc panics on a missing library or function: checked first.)
        super::require_cusparse()?;
        gpu.context().bind_to_thread()?;
        let handle = cudarc::cusparse::result::create()
            .map_err(|e| GpuError::cusparse("cusparseCreate", e))?;
        let h = Self {
            handle,
            gpu: gpu.clone(),
        };
        // SAFETY: `handle` is live; the stream belongs to the same context and outlives the handle
        // (the handle holds a `Gpu`, which holds the stream).
        ok("cusparseSetStream", unsafe {
            cs::cusparseSetStream(h.handle, gpu.stream().cu_stream() as cs::cudaStream_t)
        })?;
        Ok(h)
    }

    /// The raw handle.
    ///
    /// # Safety
    /// Do not destroy it or change its stream.
    pub unsafe fn raw(&self) -> cs::cusparseHandle_t {
        self.handle
    }
}

impl Drop for CusparseHandle {
    fn drop(&mut self) {
        let _ = self.gpu.context().bind_to_thread();
        // SAFETY: created in `new`, destroyed exactly once here.
        let _ = unsafe { cs::cusparseDestroy(self.handle) };
    }
}

/// A [`DeviceCsr`] with cuSPARSE's generic-API descriptor over its arrays (32-bit indices, base 0,
/// f32). Cheap to clone (shared); prepared products keep a clone.
///
/// Invariant: the descriptor points at the arrays of the [`DeviceCsr`] held beside it, which are
/// never written.
#[derive(Clone)]
pub struct CusparseCsr {
    inner: std::sync::Arc<CsrInner>,
}

struct CsrInner {
    gpu: Gpu,
    csr: Arc<DeviceCsr>,
    descr: cs::cusparseSpMatDescr_t,
}

impl CusparseCsr {
    /// Validates `a` (indices must fit `i32`) and uploads it.
    pub fn new(gpu: &Gpu, a: &Csr) -> Result<Self, GpuError> {
        Self::check_i32(a)?;
        Self::from_device(gpu, a, DeviceCsr::upload(gpu, a)?)
    }

    /// [`CusparseCsr::new`] on `a`'s arrays already uploaded (`d`, the upload of `a`: its shape
    /// is checked), without a second upload.
    pub fn from_device(gpu: &Gpu, a: &Csr, d: DeviceCsr) -> Result<Self, GpuError> {
        Self::check_i32(a)?;
        d.check_matches(a)?;
        let descr = csr_descriptor(gpu, &d)?;
        Ok(Self {
            inner: Arc::new(CsrInner {
                gpu: gpu.clone(),
                csr: Arc::new(d),
                descr,
            }),
        })
    }

    fn check_i32(a: &Csr) -> Result<(), GpuError> {
        check_csr(a)?;
        if a.nnz() > i32::MAX as usize
            || a.rows() > i32::MAX as usize
            || a.cols() > i32::MAX as usize
        {
            return Err(GpuError::Invalid(
                "cuSPARSE CSR with 32-bit indices needs sizes ≤ i32::MAX".into(),
            ));
        }
        Ok(())
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.inner.csr.rows()
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.inner.csr.cols()
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.inner.csr.nnz()
    }

    /// The device CSR the descriptor points at (shared: our CSR kernels read the same arrays).
    pub fn device(&self) -> &Arc<DeviceCsr> {
        &self.inner.csr
    }

    fn descr(&self) -> cs::cusparseSpMatDescr_t {
        self.inner.descr
    }

    /// The GPU it was uploaded to.
    pub(crate) fn gpu(&self) -> &Gpu {
        &self.inner.gpu
    }

    /// Device CSR arrays (indptr, indices, values), e.g. for a BSR conversion.
    pub fn buffers(&self) -> (&CudaSlice<u32>, &CudaSlice<u32>, &CudaSlice<f32>) {
        self.inner.csr.buffers()
    }

    /// A further generic-API descriptor over the same device arrays (e.g. for a product on another
    /// stream or inside a graph). The caller destroys it (`cusparseDestroySpMat`) before this
    /// matrix's buffers go (keep a clone of `self` beside it).
    pub(crate) fn new_descriptor(&self) -> Result<cs::cusparseSpMatDescr_t, GpuError> {
        csr_descriptor(&self.inner.gpu, &self.inner.csr)
    }
}

/// A cuSPARSE generic-API CSR descriptor (32-bit indices, base 0, f32) over the arrays of `csr`
/// (`rows + 1`, `nnz` and `nnz` elements, one when `nnz` = 0). Sizes were checked to fit `i32`.
/// The descriptor only records the pointers: whoever holds it must destroy it before the buffers
/// are freed.
fn csr_descriptor(gpu: &Gpu, csr: &DeviceCsr) -> Result<cs::cusparseSpMatDescr_t, GpuError> {
    let (rows, cols, nnz) = csr.shape();
    let (indptr, indices, values) = csr.buffers();
    // (The first cuSPARSE call of a matrix, before any handle: cudarc panics on a missing
    // library or function, so both are checked first.)
    super::require_cusparse()?;
    let s = gpu.stream();
    let (p, _g1) = indptr.device_ptr(s);
    let (i, _g2) = indices.device_ptr(s);
    let (v, _g3) = values.device_ptr(s);
    // SAFETY: the pointers are live device buffers of the stated lengths (rows + 1, nnz, nnz; one
    // dummy element when nnz = 0) of f32 values; every holder destroys the descriptor before the
    // buffers are freed (CsrInner's Drop; the SpMV baseline keeps a clone of the matrix).
    unsafe { create_csr((rows, cols, nnz), [p, i, v], cs::cudaDataType::CUDA_R_32F) }
}

/// `cusparseCreateCsr`: a `rows × cols` descriptor of `nnz` entries (32-bit indices, base 0) over
/// the row offsets, column indices and values at `ptrs`, values of type `ty`. Creating it reads
/// none of the arrays.
///
/// # Safety
/// `ptrs` are device buffers of `rows + 1`, `nnz` and `nnz` elements (at least one each) whenever
/// the descriptor is used, and whoever holds it destroys it before they are freed.
pub(crate) unsafe fn create_csr(
    (rows, cols, nnz): (usize, usize, usize),
    [p, i, v]: [u64; 3],
    ty: cs::cudaDataType,
) -> Result<cs::cusparseSpMatDescr_t, GpuError> {
    let mut descr = std::ptr::null_mut();
    // SAFETY: the caller's contract; `descr` is valid for writes.
    ok("cusparseCreateCsr", unsafe {
        cs::cusparseCreateCsr(
            &mut descr,
            rows as i64,
            cols as i64,
            nnz as i64,
            p as *mut c_void,
            i as *mut c_void,
            v as *mut c_void,
            cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            cs::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            cs::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
            ty,
        )
    })?;
    Ok(descr)
}

// SAFETY: the sparse descriptor is created once and never modified afterwards (only read by
// cuSPARSE calls), and the device buffers are never written, so sharing it across threads is sound.
unsafe impl Send for CsrInner {}
// SAFETY: as above: immutable after construction.
unsafe impl Sync for CsrInner {}

impl Drop for CsrInner {
    fn drop(&mut self) {
        let _ = self.gpu.context().bind_to_thread();
        // SAFETY: created in `new`, destroyed once, before the buffers (dropped after this body).
        let _ = unsafe { cs::cusparseDestroySpMat(self.descr) };
    }
}

/// A dense row-major matrix descriptor (values pointer replaced per call). Destroyed on drop.
pub(crate) struct DnMat(pub(crate) cs::cusparseDnMatDescr_t);

impl DnMat {
    /// # Safety
    /// `ptr` must be a device buffer of at least `rows·cols` f32 whenever the descriptor is used.
    pub(crate) unsafe fn new(rows: usize, cols: usize, ptr: u64) -> Result<Self, GpuError> {
        // SAFETY: forwarded from the caller.
        unsafe { Self::new_of(rows, cols, ptr, cs::cudaDataType::CUDA_R_32F) }
    }

    /// [`DnMat::new`] with elements of type `ty`.
    ///
    /// # Safety
    /// `ptr` must be a device buffer of at least `rows·cols` elements of `ty` whenever the
    /// descriptor is used.
    pub(crate) unsafe fn new_of(
        rows: usize,
        cols: usize,
        ptr: u64,
        ty: cs::cudaDataType,
    ) -> Result<Self, GpuError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: forwarded from the caller.
        ok("cusparseCreateDnMat", unsafe {
            cs::cusparseCreateDnMat(
                &mut d,
                rows as i64,
                cols as i64,
                cols.max(1) as i64,
                ptr as *mut c_void,
                ty,
                cs::cusparseOrder_t::CUSPARSE_ORDER_ROW,
            )
        })?;
        Ok(Self(d))
    }
}

/// `set` (re-point the values), `Send` and `Drop` of a dense descriptor type `$ty` through its
/// cuSPARSE functions.
macro_rules! dense_descriptor {
    ($ty:ident, $set:ident, $destroy:ident) => {
        impl $ty {
            /// # Safety
            /// As for the constructor: `ptr` must be a device buffer of the descriptor's size and
            /// type whenever the descriptor is used.
            pub(crate) unsafe fn set(&self, ptr: u64) -> Result<(), GpuError> {
                // SAFETY: forwarded from the caller.
                ok(stringify!($set), unsafe {
                    cs::$set(self.0, ptr as *mut c_void)
                })
            }
        }

        // SAFETY: a descriptor is a host-side struct owned by one value; it is only used through
        // that owner.
        unsafe impl Send for $ty {}

        impl Drop for $ty {
            fn drop(&mut self) {
                // SAFETY: created by the constructor, destroyed once.
                let _ = unsafe { cs::$destroy(self.0) };
            }
        }
    };
}

dense_descriptor!(DnMat, cusparseDnMatSetValues, cusparseDestroyDnMat);

/// A dense vector descriptor. Destroyed on drop.
pub(crate) struct DnVec(pub(crate) cs::cusparseDnVecDescr_t);

impl DnVec {
    /// # Safety
    /// `ptr` must be a device buffer of at least `len` f32 whenever the descriptor is used.
    pub(crate) unsafe fn new(len: usize, ptr: u64) -> Result<Self, GpuError> {
        let mut d = std::ptr::null_mut();
        // SAFETY: forwarded from the caller.
        ok("cusparseCreateDnVec", unsafe {
            cs::cusparseCreateDnVec(
                &mut d,
                len as i64,
                ptr as *mut c_void,
                cs::cudaDataType::CUDA_R_32F,
            )
        })?;
        Ok(Self(d))
    }
}

dense_descriptor!(DnVec, cusparseDnVecSetValues, cusparseDestroyDnVec);

/// cuSPARSE SpMM algorithm for CSR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpmmAlg {
    /// `CUSPARSE_SPMM_ALG_DEFAULT` (for row-major B and C, CSR_ALG2: the same times in the SpMV
    /// bench, H200, 2026-11-25, 7c48977).
    Default,
    /// `CUSPARSE_SPMM_CSR_ALG1`.
    CsrAlg1,
    /// `CUSPARSE_SPMM_CSR_ALG2` (row-major B/C oriented).
    CsrAlg2,
    /// `CUSPARSE_SPMM_CSR_ALG3`.
    CsrAlg3,
}

impl SpmmAlg {
    /// The default and CSR_ALG2 (the algorithms the GPU tests check).
    pub const ALL: [SpmmAlg; 2] = [SpmmAlg::Default, SpmmAlg::CsrAlg2];
    /// Every CSR algorithm, default first: what the bench times for its cuSPARSE baseline (the
    /// fastest that passes the accuracy check is reported). At 8 columns CSR_ALG3 or ALG1 was
    /// 1.4–9.1× faster than the default on the H200 (docs/kernels/spmv.md v13).
    pub const CANDIDATES: [SpmmAlg; 4] = [
        SpmmAlg::Default,
        SpmmAlg::CsrAlg1,
        SpmmAlg::CsrAlg2,
        SpmmAlg::CsrAlg3,
    ];

    /// The algorithms the facade's tuning times: [`SpmmAlg::CANDIDATES`] without CSR_ALG2, which
    /// for row-major B and C (the only layout the facade passes) is the algorithm the default
    /// runs: over the 57 SpMM bench cases of 03f99b4 (H100, 2026-11-28, N = 128–512) the default's time
    /// over ALG2's had median 1.001 (0.84–1.04, the extremes on launches of a few µs), so timing
    /// both only costs a set-up and a probe per tuning.
    pub const TUNED: [SpmmAlg; 3] = [SpmmAlg::Default, SpmmAlg::CsrAlg1, SpmmAlg::CsrAlg3];

    /// cuSPARSE's name, e.g. `SPMM_CSR_ALG3`.
    pub fn name(self) -> &'static str {
        match self {
            SpmmAlg::Default => "SPMM_ALG_DEFAULT",
            SpmmAlg::CsrAlg1 => "SPMM_CSR_ALG1",
            SpmmAlg::CsrAlg2 => "SPMM_CSR_ALG2",
            SpmmAlg::CsrAlg3 => "SPMM_CSR_ALG3",
        }
    }

    pub(crate) fn raw(self) -> cs::cusparseSpMMAlg_t {
        match self {
            SpmmAlg::Default => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_ALG_DEFAULT,
            SpmmAlg::CsrAlg1 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG1,
            SpmmAlg::CsrAlg2 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG2,
            SpmmAlg::CsrAlg3 => cs::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3,
        }
    }
}

/// A prepared cuSPARSE SpMM `C = α·A·B + β·C` for one matrix, one `n` and one algorithm: handle,
/// dense descriptors, workspace and preprocessing are made once in [`CusparseSpmm::new`];
/// products run through [`crate::DeviceProduct`] (packed B and C at that `n`).
pub struct CusparseSpmm {
    dense: DenseSpmm,
    a: CusparseCsr,
}

/// The part of a prepared cuSPARSE SpMM that does not depend on A's value type (f32
/// [`CusparseSpmm`], 16-bit [`CusparseSpmmHalf`]): B's and C's descriptors (re-pointed at the
/// caller's buffers before every product), the handle whose stream products queue on, the width
/// and algorithm they were prepared for, and the workspace cuSPARSE asked for.
pub(crate) struct DenseSpmm {
    // Field order = drop order: descriptors before the handle and workspace.
    b: DnMat,
    c: DnMat,
    handle: CusparseHandle,
    n: usize,
    alg: SpmmAlg,
    workspace: CudaSlice<u8>,
}

impl DenseSpmm {
    /// Asks for the workspace of the product of `a` into B's and C's descriptors `b` and `c`,
    /// allocates it, preprocesses where cuSPARSE takes it (a refusal is logged with `what`) and
    /// waits for the GPU's stream.
    ///
    /// # Safety
    /// `a` is a live sparse descriptor, and `b` and `c` point at live device buffers of their
    /// sizes and element type until this returns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn prepare(
        gpu: &Gpu,
        handle: CusparseHandle,
        a: cs::cusparseSpMatDescr_t,
        (b, c): (DnMat, DnMat),
        n: usize,
        alg: SpmmAlg,
        what: &dyn std::fmt::Debug,
    ) -> Result<Self, GpuError> {
        let call = SpmmCall {
            handle: handle.handle,
            a,
            b: b.0,
            c: c.0,
            alg: alg.raw(),
        };
        // SAFETY: the caller's contract; the handle and the dense descriptors are live.
        let size = unsafe { call.buffer_size() }?;
        let mut workspace: CudaSlice<u8> = gpu.alloc_zeros(size.max(1))?;
        {
            let (pw, _gw) = workspace.device_ptr_mut(gpu.stream());
            // SAFETY: the caller's contract for the descriptors' buffers (live until the
            // synchronize below); the workspace holds `size` bytes and lives as long as the
            // returned value.
            unsafe { call.preprocess_if_taken(pw, what) };
        }
        gpu.synchronize()?;
        Ok(Self {
            b,
            c,
            handle,
            n,
            alg,
            workspace,
        })
    }

    /// Enqueues `C = α·A·B + β·C` (B: `cols × n`, C: `rows × n`, row-major, packed; `shape` = A's
    /// rows and columns) on the handle's stream. β = 0 never reads C.
    ///
    /// # Safety
    /// `a` is a live descriptor of a matrix of `shape`, and `T` is the element type B's and C's
    /// descriptors were made with.
    pub(crate) unsafe fn run<T, B: DevicePtr<T> + ?Sized, C: DevicePtrMut<T> + ?Sized>(
        &mut self,
        a: cs::cusparseSpMatDescr_t,
        shape: (usize, usize),
        alpha: f32,
        b: &B,
        beta: f32,
        c: &mut C,
    ) -> Result<(), GpuError> {
        check_packed(shape, self.n, b.len(), c.len())?;
        let s = self.handle.gpu.stream().clone();
        let (pb, _gb) = b.device_ptr(&s);
        let (pc, _gc) = c.device_ptr_mut(&s);
        let call = SpmmCall {
            handle: self.handle.handle,
            a,
            b: self.b.0,
            c: self.c.0,
            alg: self.alg.raw(),
        };
        let (pw, _gw) = self.workspace.device_ptr_mut(&s);
        // SAFETY: b and c were checked to hold k·n and m·n elements of T (the descriptors' type,
        // the caller's contract) and are borrowed for this call; the descriptors are re-pointed
        // before use; the workspace has the size cuSPARSE asked for with the same matrix, n,
        // types and algorithm; the call is queued on the Gpu's stream, which orders it before any
        // later reuse or free of these buffers on that stream.
        unsafe {
            self.b.set(pb)?;
            self.c.set(pc)?;
            call.run(alpha, beta, pw)
        }
    }
}

const OP_N: cs::cusparseOperation_t = cs::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;

/// `Ok` when packed B (`cols × n`) and C (`rows × n`) fit in `b_len` and `c_len` elements
/// (`shape` = A's rows and columns).
pub(crate) fn check_packed(
    (m, k): (usize, usize),
    n: usize,
    b_len: usize,
    c_len: usize,
) -> Result<(), GpuError> {
    if b_len < k * n || c_len < m * n {
        return Err(GpuError::Invalid(format!(
            "B needs {k}·{n} and C {m}·{n} elements, got {b_len} and {c_len}"
        )));
    }
    Ok(())
}

/// One generic-API SpMM, `C = α·op(A)·B + β·C` (no transposes, f32): the handle, A's CSR
/// descriptor, B's and C's row-major dense descriptors and the algorithm. The one place that
/// calls `cusparseSpMM_bufferSize`, `cusparseSpMM_preprocess` and `cusparseSpMM`, for the SpMM
/// baseline and the SpMV baseline's several right-hand sides alike.
pub(crate) struct SpmmCall {
    pub handle: cs::cusparseHandle_t,
    pub a: cs::cusparseSpMatDescr_t,
    pub b: cs::cusparseDnMatDescr_t,
    pub c: cs::cusparseDnMatDescr_t,
    pub alg: cs::cusparseSpMMAlg_t,
}

/// The argument list `cusparseSpMM_bufferSize`, `cusparseSpMM_preprocess` and `cusparseSpMM` share;
/// `W` is the last argument: where the size goes, or the workspace.
type SpmmFn<W> = unsafe fn(
    cs::cusparseHandle_t,
    cs::cusparseOperation_t,
    cs::cusparseOperation_t,
    *const c_void,
    cs::cusparseConstSpMatDescr_t,
    cs::cusparseConstDnMatDescr_t,
    *const c_void,
    cs::cusparseDnMatDescr_t,
    cs::cudaDataType,
    cs::cusparseSpMMAlg_t,
    W,
) -> cs::cusparseStatus_t;

impl SpmmCall {
    /// Calls `f` (named `name` in errors) with this call's arguments, α and β as host scalars
    /// and `last` as the final argument.
    ///
    /// # Safety
    /// The handle and the descriptors are live, and `last` is what `f` documents for its last
    /// argument (see each caller).
    unsafe fn call<W>(
        &self,
        name: &'static str,
        f: SpmmFn<W>,
        alpha: f32,
        beta: f32,
        last: W,
    ) -> Result<(), GpuError> {
        // SAFETY: the caller's contract; host scalars (default pointer mode) that outlive the
        // call.
        ok(name, unsafe {
            f(
                self.handle,
                OP_N,
                OP_N,
                &alpha as *const f32 as *const c_void,
                self.a,
                self.b,
                &beta as *const f32 as *const c_void,
                self.c,
                cs::cudaDataType::CUDA_R_32F,
                self.alg,
                last,
            )
        })
    }

    /// Workspace bytes the call needs (α = 1, β = 0; the size does not depend on them).
    ///
    /// # Safety
    /// The handle and the descriptors are live.
    pub(crate) unsafe fn buffer_size(&self) -> Result<usize, GpuError> {
        let mut size = 0usize;
        // SAFETY: the caller's contract; `size` is valid for writes.
        unsafe {
            self.call(
                "cusparseSpMM_bufferSize",
                cs::cusparseSpMM_bufferSize,
                1.0,
                0.0,
                &mut size as *mut usize,
            )
        }?;
        Ok(size)
    }

    /// `cusparseSpMM_preprocess` (α = 1, β = 0) with the workspace at `workspace`.
    ///
    /// # Safety
    /// As [`SpmmCall::run`].
    pub(crate) unsafe fn preprocess(&self, workspace: u64) -> Result<(), GpuError> {
        // SAFETY: the caller's contract.
        unsafe {
            self.call(
                "cusparseSpMM_preprocess",
                cs::cusparseSpMM_preprocess,
                1.0,
                0.0,
                workspace as *mut c_void,
            )
        }
    }

    /// [`SpmmCall::preprocess`] where cuSPARSE takes it: preprocessing is an optional speed-up
    /// (cuSPARSE only uses it for some algorithms), so a refusal is logged with `what`, not
    /// returned.
    ///
    /// # Safety
    /// As [`SpmmCall::run`].
    pub(crate) unsafe fn preprocess_if_taken(&self, workspace: u64, what: &dyn std::fmt::Debug) {
        // SAFETY: the caller's contract.
        if let Err(e) = unsafe { self.preprocess(workspace) } {
            tracing::debug!("{e} ({what:?}); running without preprocessing");
        }
    }

    /// Queues the product on the handle's stream.
    ///
    /// # Safety
    /// The handle and the descriptors are live, B's and C's point at device buffers of their
    /// sizes that stay alive (and C unshared) until the call completes on the handle's stream,
    /// and `workspace` points at [`SpmmCall::buffer_size`] bytes used by nothing else meanwhile.
    pub(crate) unsafe fn run(&self, alpha: f32, beta: f32, workspace: u64) -> Result<(), GpuError> {
        // SAFETY: the caller's contract.
        unsafe {
            self.call(
                "cusparseSpMM",
                cs::cusparseSpMM,
                alpha,
                beta,
                workspace as *mut c_void,
            )
        }
    }
}

/// cuSPARSE takes the width of B and C as an `i32`.
pub(crate) fn check_width(n: usize) -> Result<(), GpuError> {
    if n == 0 || n > i32::MAX as usize {
        return Err(GpuError::Invalid(format!(
            "n = {n} must be in 1..=i32::MAX"
        )));
    }
    Ok(())
}

impl CusparseSpmm {
    /// Prepares SpMM with `n` dense columns. Allocates temporary B and C (zero) for the
    /// preprocessing call, then frees them ([`CusparseSpmm::with_buffers`] borrows the caller's
    /// instead: R-MAT scale 20 at n = 128 allocated and zeroed 1 GB here).
    pub fn new(gpu: &Gpu, a: &CusparseCsr, n: usize, alg: SpmmAlg) -> Result<Self, GpuError> {
        check_width(n)?;
        let tmp_b: CudaSlice<f32> = gpu.alloc_zeros((a.cols() * n).max(1))?;
        let mut tmp_c: CudaSlice<f32> = gpu.alloc_zeros((a.rows() * n).max(1))?;
        Self::with_buffers(gpu, a, n, alg, &tmp_b, &mut tmp_c)
    }

    /// [`CusparseSpmm::new`] with the preprocessing call pointed at the caller's B (`cols × n`)
    /// and C (`rows × n`), e.g. those of the first product, instead of temporaries. Neither is
    /// read or written by the preprocessing that matters here; they only have to be live
    /// buffers of the right size.
    pub fn with_buffers<B: DevicePtr<f32>, C: DevicePtrMut<f32>>(
        gpu: &Gpu,
        a: &CusparseCsr,
        n: usize,
        alg: SpmmAlg,
        b_buf: &B,
        c_buf: &mut C,
    ) -> Result<Self, GpuError> {
        check_width(n)?;
        let (m, k) = (a.rows(), a.cols());
        if b_buf.len() < (k * n).max(1) || c_buf.len() < (m * n).max(1) {
            return Err(GpuError::Invalid(format!(
                "B needs {k}·{n} and C {m}·{n} elements, got {} and {}",
                b_buf.len(),
                c_buf.len()
            )));
        }
        let handle = CusparseHandle::new(gpu)?;
        let s = gpu.stream();
        let (pb, _gb) = b_buf.device_ptr(s);
        let (pc, _gc) = c_buf.device_ptr_mut(s);
        // SAFETY: b_buf holds cols·n and c_buf rows·n f32 (at least 1, checked above) and are
        // borrowed until `prepare` has synchronized; `run` re-points both descriptors before
        // every later use.
        let dense = unsafe {
            let bc = (DnMat::new(a.cols(), n, pb)?, DnMat::new(a.rows(), n, pc)?);
            DenseSpmm::prepare(gpu, handle, a.descr(), bc, n, alg, &alg)
        }?;
        drop((_gb, _gc));
        Ok(Self {
            dense,
            a: a.clone(),
        })
    }

    /// The algorithm.
    pub fn alg(&self) -> SpmmAlg {
        self.dense.alg
    }

    /// Workspace bytes cuSPARSE asked for.
    pub fn workspace_bytes(&self) -> usize {
        self.dense.workspace.len()
    }
}

impl crate::DeviceProduct for CusparseSpmm {
    fn shape(&self) -> (usize, usize) {
        (self.a.rows(), self.a.cols())
    }

    fn gpu(&self) -> &Gpu {
        &self.dense.handle.gpu
    }

    /// Its own width only (the descriptors and workspace are made for it).
    fn max_width(&self) -> usize {
        self.dense.n
    }

    fn packed_only(&self) -> bool {
        true
    }

    fn enqueue_checked(&mut self, call: crate::product::Checked<'_>) -> Result<(), GpuError> {
        let (alpha, beta, n) = (call.alpha, call.beta, call.n);
        if n != self.dense.n {
            return Err(GpuError::Invalid(format!(
                "this cuSPARSE product was prepared for n = {}, not {n}",
                self.dense.n
            )));
        }
        let (b, c) = call.operands();
        let shape = (self.a.rows(), self.a.cols());
        // SAFETY: A's descriptor lives as long as `self.a`, of `shape`, with f32 values like
        // B's and C's descriptors.
        unsafe { self.dense.run(self.a.descr(), shape, alpha, b, beta, c) }
    }
}
