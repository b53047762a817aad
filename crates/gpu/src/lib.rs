//! `tcsparse-gpu`: the GPU runtime. Probes the CUDA driver without panicking, loads the embedded PTX,
//! launches our kernels, wraps the cuSPARSE/cuBLAS baselines and times with CUDA events.
//!
//! Entry points: [`Gpu::probe`] (never panics, reports why there is no GPU) and [`Gpu::require`]
//! (an error instead). A [`Gpu`] is cheap to clone (an `Arc` inside) and holds one context and one
//! stream (device 0's, or a caller's through [`Gpu::from_parts`]); every upload, launch and library
//! call of this crate goes to that stream.
//!
//! All driver libraries are opened at run time (cudarc `dynamic-loading`), so binaries built on a
//! machine without CUDA start everywhere and report [`GpuStatus::NoDriver`] where there is none.
//!
//! # The kernel contract
//!
//! Every prepared device layout, SpMM and SpMV alike, implements [`DeviceProduct`]: it runs
//! `C = α·A·B + β·C` on its GPU's stream with one argument order,
//! `enqueue(alpha, b, beta, c)`, over typed views of dense row-major device memory ([`Dense`],
//! [`DenseMut`]: a buffer or a view, its width and leading dimension). After
//! [`DeviceProduct::prepare_width`] a call allocates nothing and never waits for the host, so it
//! can be captured in a CUDA graph. Implementations: [`spmm::acc::AccSpmmDevice`],
//! [`spmm::row_tile::RowTileDevice`], [`spmm::hrpb::HrpbSpmm`], [`spmm::csr::CsrSpmm`],
//! [`spmm::staged::StagedSpmm`], [`baselines::cusparse::CusparseSpmm`], [`spmv::BitBsrSpmv`], [`spmv::csr::CsrSpmv`] and
//! [`spmv::baseline::CusparseSpmvGraphable`]. Adding a kernel family is a `.cu` in
//! `kernels-ptx/`, its signature-table entries and one type implementing the trait.
//!
//! Every kernel launch goes through `launch::launch_checked` (through its cudarc-stream front
//! `launch::Launch` where the stream is cudarc's), which checks the argument list against the
//! kernel's signature-table entry ([`signature`]; the tables are checked against the PTX by a
//! CPU test) before the driver sees it; the SpAMM launches ([`spamm`]) still use cudarc's launch
//! builder with their signature tables checked the same way. `unsafe` stays in the launch modules and the FFI
//! wrappers ([`baselines`], [`foreign`], the pinned upload ring, graph capture
//! in [`spmv::graph`]); callers of this crate need none for a product.

use std::sync::{Arc, RwLock};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, DriverError,
    ValidAsZeroBits, sys,
};

/// `impl Debug` for a type holding device buffers or functions (which have no useful `Debug`):
/// the type's name and the listed `name: value` pairs, `value` an expression of the receiver
/// bound to `$s`.
macro_rules! impl_debug {
    ($ty:ident, |$s:ident| $($name:ident: $value:expr),+ $(,)?) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let $s = self;
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($name), &$value))+
                    .finish()
            }
        }
    };
}

pub mod baselines;
pub mod budget;
pub mod device_csr;
pub mod distributed;
mod error;
pub mod foreign;
pub mod launch;
pub mod lost;
mod memory_pool;
pub mod module_image;
pub mod multi;
pub mod permute;
pub mod product;
pub mod schedule;
pub mod sddmm;
pub mod signature;
pub mod spamm;
pub mod spmm;
pub mod spmv;
mod staging;

// The module paths before the re-layout into rooms (`spmm::*`, `baselines::*`), kept for one
// release so that code written against them still builds.
#[doc(hidden)]
pub use baselines::{cublas, cusparse};
#[doc(hidden)]
pub use spmm::{acc as acc_spmm, csr as csr_spmm, row_tile as row_tile_spmm};

pub use error::{GpuError, GpuErrorKind, driver_error_kind};
pub use product::{Dense, DenseMut, DeviceProduct};
pub use signature::{KernelSignature, ParamKind};

/// Driver functions this crate calls that older drivers lack (stream-ordered allocation, graphs,
/// `cuEventElapsedTime_v2` of the CUDA 13 bindings, …): cudarc resolves each on first call and
/// panics when the driver has none, so [`Gpu::probe`] looks them up first and reports a driver
/// that is too old as [`GpuStatus::Failed`].
pub const DRIVER_SYMBOLS: &[&str] = &[
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuMemGetInfo_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",
    "cuMemHostAlloc",
    "cuDeviceGetMemPool",
    "cuMemPoolSetAttribute",
    "cuModuleLoadData",
    "cuLaunchKernel",
    "cuEventElapsedTime_v2",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
];

/// libcuda has every function of [`DRIVER_SYMBOLS`] ([`GpuError::Library`] naming the missing
/// ones, or when libcuda does not load).
pub fn require_driver_functions() -> Result<(), GpuError> {
    baselines::check_loaded("libcuda", sys::is_culib_present, sys::culib, DRIVER_SYMBOLS)
}

/// What [`Gpu::probe`] found.
#[derive(Clone)]
pub enum GpuStatus {
    /// A working device 0 with a context and stream.
    Ready(Gpu),
    /// `libcuda.so` is not present: no NVIDIA driver on this machine.
    NoDriver(String),
    /// The driver loads but reports no device.
    NoDevice(String),
    /// The driver and a device exist but initialisation failed.
    Failed(String),
}

impl std::fmt::Debug for GpuStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuStatus::Ready(g) => write!(f, "Ready({:?})", g.info()),
            GpuStatus::NoDriver(m) => write!(f, "NoDriver({m})"),
            GpuStatus::NoDevice(m) => write!(f, "NoDevice({m})"),
            GpuStatus::Failed(m) => write!(f, "Failed({m})"),
        }
    }
}

/// Static facts about the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Marketing name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// (major, minor), e.g. (9, 0).
    pub compute_capability: (u32, u32),
    /// Global memory in bytes.
    pub memory_bytes: u64,
    /// Driver's CUDA version as `1000*major + 10*minor` (e.g. 13000).
    pub driver_version: i32,
    /// L2 cache in bytes.
    pub l2_bytes: u64,
}

/// Our PTX modules (closed set). The PTX is embedded at build time from `kernels-ptx/<name>.ptx`,
/// through the crate's own `kernels-ptx` link to it, so the packaged crate carries the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelModule {
    /// `kernels-ptx/csr_spmm.ptx`: CUDA-core CSR SpMM.
    CsrSpmm,
    /// `kernels-ptx/acc_spmm.ptx`: Acc-SpMM (BitTCF, tensor cores) and the β pre-scale of split
    /// rows ([`schedule::ENTRY_PRESCALE`]).
    AccSpmm,
    /// `kernels-ptx/row_tile_spmm.ptx`: the row-tile tensor-core kernels (TC16, TC16d, TC16d-tma,
    /// TC32, TC32d, TC32d-tma).
    RowTileSpmm,
    /// `kernels-ptx/permute_rows.ptx`: row gather/scatter of dense operands ([`permute`]).
    Permute,
    /// `kernels-ptx/spamm.ptx`: cuSpAMM norm maps and norm-gated dense products.
    Spamm,
    /// `kernels-ptx/spmv.ptx`: bitBSR SpMV (Spaden, tensor cores): the MMA kernels, the x
    /// conversion, the fix-up and every walk for one right-hand side.
    Spmv,
    /// `kernels-ptx/hrpb_spmm.ptx`: cuTeSpMM (HRPB, tensor cores).
    HrpbSpmm,
    /// `kernels-ptx/spmv_n2.ptx` … `spmv_n8.ptx`: the SpMV walks for 2 … 8 right-hand sides, one
    /// module each, so that a first call pays the driver's compilation of only the walks it uses
    /// ([`KernelModule::spmv_for_rhs`]).
    SpmvN2,
    /// See [`KernelModule::SpmvN2`].
    SpmvN3,
    /// See [`KernelModule::SpmvN2`].
    SpmvN4,
    /// See [`KernelModule::SpmvN2`].
    SpmvN5,
    /// See [`KernelModule::SpmvN2`].
    SpmvN6,
    /// See [`KernelModule::SpmvN2`].
    SpmvN7,
    /// See [`KernelModule::SpmvN2`].
    SpmvN8,
    /// `kernels-ptx/sddmm.ptx`: the SDDMM on a CSR pattern ([`sddmm`]).
    Sddmm,
    /// `kernels-ptx/staged_spmm.ptx`: window-staged CSR SpMM (CUDA cores, B rows staged in shared
    /// memory per window of rows, [`spmm::staged`]).
    StagedSpmm,
}

/// Number of [`KernelModule`] variants.
const MODULE_COUNT: usize = 16;

impl KernelModule {
    /// Every module.
    pub const ALL: [KernelModule; MODULE_COUNT] = [
        KernelModule::CsrSpmm,
        KernelModule::AccSpmm,
        KernelModule::RowTileSpmm,
        KernelModule::Permute,
        KernelModule::Spamm,
        KernelModule::Spmv,
        KernelModule::HrpbSpmm,
        KernelModule::SpmvN2,
        KernelModule::SpmvN3,
        KernelModule::SpmvN4,
        KernelModule::SpmvN5,
        KernelModule::SpmvN6,
        KernelModule::SpmvN7,
        KernelModule::SpmvN8,
        KernelModule::Sddmm,
        KernelModule::StagedSpmm,
    ];

    /// The module holding the SpMV walks for `n` right-hand sides ([`KernelModule::Spmv`] for
    /// n ≤ 1 and beyond 8, where no walk exists).
    pub const fn spmv_for_rhs(n: usize) -> KernelModule {
        match n {
            2 => KernelModule::SpmvN2,
            3 => KernelModule::SpmvN3,
            4 => KernelModule::SpmvN4,
            5 => KernelModule::SpmvN5,
            6 => KernelModule::SpmvN6,
            7 => KernelModule::SpmvN7,
            8 => KernelModule::SpmvN8,
            _ => KernelModule::Spmv,
        }
    }

    /// Position in [`KernelModule::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// File name in `kernels-ptx/`.
    pub fn file_name(self) -> &'static str {
        match self {
            KernelModule::CsrSpmm => "csr_spmm.ptx",
            KernelModule::AccSpmm => "acc_spmm.ptx",
            KernelModule::RowTileSpmm => "row_tile_spmm.ptx",
            KernelModule::Permute => "permute_rows.ptx",
            KernelModule::Spamm => "spamm.ptx",
            KernelModule::Spmv => "spmv.ptx",
            KernelModule::HrpbSpmm => "hrpb_spmm.ptx",
            KernelModule::SpmvN2 => "spmv_n2.ptx",
            KernelModule::SpmvN3 => "spmv_n3.ptx",
            KernelModule::SpmvN4 => "spmv_n4.ptx",
            KernelModule::SpmvN5 => "spmv_n5.ptx",
            KernelModule::SpmvN6 => "spmv_n6.ptx",
            KernelModule::SpmvN7 => "spmv_n7.ptx",
            KernelModule::SpmvN8 => "spmv_n8.ptx",
            KernelModule::Sddmm => "sddmm.ptx",
            KernelModule::StagedSpmm => "staged_spmm.ptx",
        }
    }

    /// The embedded PTX text (stamp comment included).
    pub fn ptx(self) -> &'static str {
        match self {
            KernelModule::CsrSpmm => include_str!("../kernels-ptx/csr_spmm.ptx"),
            KernelModule::AccSpmm => include_str!("../kernels-ptx/acc_spmm.ptx"),
            KernelModule::RowTileSpmm => include_str!("../kernels-ptx/row_tile_spmm.ptx"),
            KernelModule::Permute => include_str!("../kernels-ptx/permute_rows.ptx"),
            KernelModule::Spamm => include_str!("../kernels-ptx/spamm.ptx"),
            KernelModule::Spmv => include_str!("../kernels-ptx/spmv.ptx"),
            KernelModule::HrpbSpmm => include_str!("../kernels-ptx/hrpb_spmm.ptx"),
            KernelModule::SpmvN2 => include_str!("../kernels-ptx/spmv_n2.ptx"),
            KernelModule::SpmvN3 => include_str!("../kernels-ptx/spmv_n3.ptx"),
            KernelModule::SpmvN4 => include_str!("../kernels-ptx/spmv_n4.ptx"),
            KernelModule::SpmvN5 => include_str!("../kernels-ptx/spmv_n5.ptx"),
            KernelModule::SpmvN6 => include_str!("../kernels-ptx/spmv_n6.ptx"),
            KernelModule::SpmvN7 => include_str!("../kernels-ptx/spmv_n7.ptx"),
            KernelModule::SpmvN8 => include_str!("../kernels-ptx/spmv_n8.ptx"),
            KernelModule::Sddmm => include_str!("../kernels-ptx/sddmm.ptx"),
            KernelModule::StagedSpmm => include_str!("../kernels-ptx/staged_spmm.ptx"),
        }
    }
}

/// Event timings of repeated launches, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Median of `samples`.
    pub median_ms: f64,
    /// Minimum of `samples`.
    pub min_ms: f64,
    /// Mean of `samples`.
    pub mean_ms: f64,
    /// One entry per timed call, in order.
    pub samples: Vec<f64>,
}

impl Timing {
    /// Summarises samples; `None` when empty.
    pub fn from_samples(samples: Vec<f64>) -> Option<Timing> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.clone();
        s.sort_by(f64::total_cmp);
        let k = s.len();
        let median_ms = if k % 2 == 1 {
            s[k / 2]
        } else {
            0.5 * (s[k / 2 - 1] + s[k / 2])
        };
        Some(Timing {
            median_ms,
            min_ms: s[0],
            mean_ms: s.iter().sum::<f64>() / k as f64,
            samples,
        })
    }
}

struct Inner {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    modules: RwLock<[Option<Arc<CudaModule>>; MODULE_COUNT]>,
    /// The image each loaded module came from.
    images: RwLock<[Option<module_image::ModuleImage>; MODULE_COUNT]>,
    /// Pinned buffers of large uploads (allocated on the first one).
    staging: std::sync::Mutex<Option<staging::Staging>>,
    /// Pinned buffers of large downloads (allocated on the first one).
    download_staging: std::sync::Mutex<Option<staging::Staging>>,
    /// What this handle's allocations may draw ([`Gpu::set_alloc_budget`]).
    budget: budget::AllocBudget,
    /// The event [`Gpu::join_streams`] records and waits for (made on its first use).
    join_event: std::sync::Mutex<Option<cudarc::driver::CudaEvent>>,
}

/// A CUDA device 0 with one context and one stream. Cheap to clone.
#[derive(Clone)]
pub struct Gpu {
    inner: Arc<Inner>,
}

impl_debug!(Gpu, |s| info: s.inner.info);

fn attr(ctx: &CudaContext, a: sys::CUdevice_attribute) -> Result<i32, DriverError> {
    ctx.attribute(a)
}

impl Gpu {
    /// Looks for a usable device 0. Never panics: a missing driver, no device, and init errors (even
    /// a panic inside the bindings) are reported as the matching [`GpuStatus`] variant.
    pub fn probe() -> GpuStatus {
        // SAFETY: only tries to dlopen libcuda by its usual names; no driver call is made.
        if !unsafe { sys::is_culib_present() } {
            return GpuStatus::NoDriver(
                "libcuda.so could not be loaded: no NVIDIA driver on this machine".into(),
            );
        }
        if let Err(e) = require_driver_functions() {
            return GpuStatus::Failed(e.to_string());
        }
        match std::panic::catch_unwind(Self::open) {
            Ok(s) => s,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                GpuStatus::Failed(format!("CUDA initialisation panicked: {msg}"))
            }
        }
    }

    fn open() -> GpuStatus {
        if let Err(e) = cudarc::driver::result::init() {
            return match e.0 {
                sys::CUresult::CUDA_ERROR_NO_DEVICE => {
                    GpuStatus::NoDevice(format!("cuInit: {e} (driver present, no CUDA device)"))
                }
                _ => GpuStatus::Failed(format!("cuInit failed: {e}")),
            };
        }
        match CudaContext::device_count() {
            Ok(0) => return GpuStatus::NoDevice("the driver reports 0 CUDA devices".into()),
            Ok(_) => {}
            Err(e) => return GpuStatus::Failed(format!("cuDeviceGetCount failed: {e}")),
        }
        match Self::create() {
            Ok(g) => GpuStatus::Ready(g),
            Err(e) => GpuStatus::Failed(format!("creating a context on device 0: {e}")),
        }
    }

    fn create() -> Result<Gpu, GpuError> {
        let ctx = CudaContext::new(0)?;
        let stream = ctx.default_stream();
        Self::from_parts(ctx, stream)
    }

    /// A [`Gpu`] on a context and stream the caller already has (e.g. a host application's own
    /// cudarc stream): every upload, launch and library call of this crate then goes to `stream`.
    /// The stream must belong to `ctx`'s CUDA context (the same `CUcontext`, e.g. device 0's
    /// primary context, which every `CudaContext::new(0)` shares).
    pub fn from_parts(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Gpu, GpuError> {
        if stream.context().cu_ctx() != ctx.cu_ctx() {
            return Err(GpuError::Invalid(
                "the stream belongs to another CUDA context".into(),
            ));
        }
        use sys::CUdevice_attribute::*;
        let (major, minor) = ctx.compute_capability()?;
        let mut driver_version = 0;
        // SAFETY: the driver is initialised (context created); the pointer is valid for writes.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }.result()?;
        let info = DeviceInfo {
            name: ctx.name()?,
            sm_count: attr(&ctx, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as u32,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
            memory_bytes: ctx.total_mem()? as u64,
            driver_version,
            l2_bytes: attr(&ctx, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.max(0) as u64,
        };
        Ok(Gpu {
            inner: Arc::new(Inner {
                ctx,
                stream,
                info,
                modules: RwLock::new([const { None }; MODULE_COUNT]),
                images: RwLock::new([None; MODULE_COUNT]),
                staging: std::sync::Mutex::new(None),
                download_staging: std::sync::Mutex::new(None),
                budget: budget::AllocBudget::from_env(),
                join_event: std::sync::Mutex::new(None),
            }),
        })
    }

    /// Device 0, or [`GpuError::Unavailable`] saying why there is none.
    pub fn require() -> Result<Gpu, GpuError> {
        match Self::probe() {
            GpuStatus::Ready(g) => Ok(g),
            GpuStatus::NoDriver(m) | GpuStatus::NoDevice(m) | GpuStatus::Failed(m) => {
                Err(GpuError::Unavailable(m))
            }
        }
    }

    /// Number of CUDA devices (0 when there is no driver or it fails).
    pub fn device_count() -> usize {
        // SAFETY: only tries to dlopen libcuda by its usual names.
        if !unsafe { sys::is_culib_present() } || cudarc::driver::result::init().is_err() {
            return 0;
        }
        CudaContext::device_count().map_or(0, |c| c.max(0) as usize)
    }

    /// Device `ordinal` (its primary context) with a new stream of its own (multi-GPU work: one
    /// `Gpu` per device).
    pub fn open_device(ordinal: usize) -> Result<Gpu, GpuError> {
        if ordinal >= Self::device_count() {
            return Err(GpuError::Unavailable(format!("no CUDA device {ordinal}")));
        }
        require_driver_functions()?;
        let ctx = CudaContext::new(ordinal)?;
        let stream = ctx.new_stream()?;
        Self::from_parts(ctx, stream)
    }

    /// The same device and context with a new stream (and its own module cache): work queued on
    /// the two handles may overlap.
    pub fn with_new_stream(&self) -> Result<Gpu, GpuError> {
        let stream = self.inner.ctx.new_stream()?;
        Self::from_parts(self.inner.ctx.clone(), stream)
    }

    /// Device facts read at creation.
    pub fn info(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The stream all work of this crate is queued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.inner.stream
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.inner.ctx
    }

    /// Waits for all queued work on [`Gpu::stream`].
    pub fn synchronize(&self) -> Result<(), GpuError> {
        Ok(self.inner.stream.synchronize()?)
    }

    /// The image module `m` was loaded from (`None` before its first use).
    pub fn module_image(&self, m: KernelModule) -> Option<module_image::ModuleImage> {
        self.inner.images.read().unwrap_or_else(|p| p.into_inner())[m.index()]
    }

    /// The loaded module, loading its embedded cubin or PTX ([`module_image`]) on first use.
    pub fn module(&self, m: KernelModule) -> Result<Arc<CudaModule>, GpuError> {
        let i = m.index();
        {
            let r = self.inner.modules.read().unwrap_or_else(|p| p.into_inner());
            if let Some(x) = &r[i] {
                return Ok(x.clone());
            }
        }
        let mut w = self
            .inner
            .modules
            .write()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(x) = &w[i] {
            return Ok(x.clone());
        }
        let t = std::time::Instant::now();
        let (module, image) =
            module_image::load(&self.inner.ctx, m, self.inner.info.compute_capability)
                .map_err(|source| GpuError::load(m, "", source))?;
        self.inner.images.write().unwrap_or_else(|p| p.into_inner())[i] = Some(image);
        let secs = t.elapsed().as_secs_f64();
        if secs >= 1.0 && image == module_image::ModuleImage::Ptx {
            // The driver compiled the PTX for this GPU (its JIT cache was cold: a machine's first
            // run, or CUDA_CACHE_DISABLE); later processes load it from that cache.
            tracing::info!(
                "module {m:?}: {secs:.1} s to compile {} bytes of PTX for this GPU (the driver caches it)",
                m.ptx().len()
            );
        } else {
            tracing::debug!("module {m:?} loaded from {image:?} in {:.1} ms", secs * 1e3);
        }
        w[i] = Some(module.clone());
        Ok(module)
    }

    /// A kernel of one of our modules.
    pub fn function(&self, m: KernelModule, name: &'static str) -> Result<CudaFunction, GpuError> {
        self.module(m)?
            .load_function(name)
            .map_err(|source| GpuError::load(m, name, source))
    }

    /// Copies `data` to a new device buffer (from [`STAGED_UPLOAD_BYTES`] on through a ring of
    /// pinned staging buffers filled by many cores, [`Gpu::staging_layout`]: about 4× the
    /// driver's pageable copy).
    #[tracing::instrument(name = "upload", level = "debug", skip_all, fields(bytes = std::mem::size_of_val(data)))]
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>, GpuError> {
        self.draw(std::mem::size_of_val(data))?;
        if std::mem::size_of_val(data) >= STAGED_UPLOAD_BYTES {
            // SAFETY: no inspector, so no byte of `data` is read as a byte slice.
            let (buf, _) = unsafe { self.upload_staged::<T, ()>(data, None) }?;
            return Ok(buf);
        }
        Ok(self.inner.stream.clone_htod(data)?)
    }

    /// [`Gpu::upload`] that also applies `inspect` to each [`UPLOAD_PIECE_BYTES`] piece of
    /// `data`'s bytes (the last one shorter; none for empty `data`) and returns its results in
    /// piece order. On a staged upload each piece is inspected by the thread that copies it,
    /// right after the copy, while it is in that core's cache: a checksum of an array costs no
    /// second pass over memory (the plan cache's key, issue 19).
    #[tracing::instrument(name = "upload", level = "debug", skip_all, fields(bytes = std::mem::size_of_val(data)))]
    pub fn upload_inspected<T: DeviceRepr + bytemuck::NoUninit, R: Send>(
        &self,
        data: &[T],
        inspect: impl Fn(&[u8]) -> R + Sync,
    ) -> Result<(CudaSlice<T>, Vec<R>), GpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        self.draw(bytes.len())?;
        if bytes.len() >= STAGED_UPLOAD_BYTES {
            // SAFETY: T is NoUninit, so every byte of `data` is initialised.
            return unsafe { self.upload_staged(data, Some(&inspect)) };
        }
        let results = staging::inspect_pieces(bytes, &inspect);
        Ok((self.inner.stream.clone_htod(data)?, results))
    }

    /// The staged path of [`Gpu::upload`] and [`Gpu::upload_inspected`]: through this
    /// context's ring ([`StagingLayout::DEFAULT`] until [`Gpu::set_staging_layout`]).
    ///
    /// # Safety
    /// With `inspect`, every byte of `data` must be initialised (as `staging::upload_pieces`).
    unsafe fn upload_staged<T: DeviceRepr, R: Send>(
        &self,
        data: &[T],
        inspect: Option<staging::PieceInspector<'_, R>>,
    ) -> Result<(CudaSlice<T>, Vec<R>), GpuError> {
        let i = &self.inner;
        // SAFETY: the caller's promise.
        unsafe {
            staging::upload_pieces(
                &i.ctx,
                &i.stream,
                &i.staging,
                StagingLayout::DEFAULT,
                data,
                inspect,
            )
        }
    }

    /// Pays this context's first-use costs of an upload ahead of time: allocates the pinned
    /// staging buffers and sends one full chunk through each of them (H200, a new process: ~22 ms
    /// for the buffers and 30–37 ms for the first upload, most of it the device allocator's
    /// start). Meant for another thread while the caller loads its matrix; an upload that meets
    /// it mid-way goes through the driver's pageable copy instead of waiting.
    pub fn warm_up_uploads(&self) -> Result<(), GpuError> {
        let layout = self.staging_layout();
        let zeros = vec![0u8; layout.chunk_bytes];
        for _ in 0..layout.buffers {
            // (Freed in stream order, after its copy.)
            drop(self.upload(&zeros)?);
        }
        self.synchronize()
    }

    /// Allocates the pinned buffers of large downloads ([`Gpu::download_into`]) now, so that the
    /// first one does not: meant for another thread beside a load, as [`Gpu::warm_up_uploads`].
    pub fn warm_up_downloads(&self) -> Result<(), GpuError> {
        let mut guard = self
            .inner
            .download_staging
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(staging::Staging::for_downloads(
                &self.inner.ctx,
                StagingLayout::DEFAULT,
            )?);
        }
        Ok(())
    }

    /// Maps `bytes` of device memory into the memory pool now and keeps up to that much of freed
    /// memory there from now on (the pool's release threshold, raised, never lowered), so that
    /// the allocations of a preparation that follows reuse it instead of mapping fresh memory
    /// (H200, a new process: 0.1–0.7 ms for each 4–45 MB array of R-MAT scale 20). Capped at
    /// half of the device's free memory; the process then holds up to that much device memory
    /// while it lives. `None` where the device has no memory pools or `bytes` is 0. Waits for
    /// the stream.
    pub fn reserve_device_memory(&self, bytes: usize) -> Result<Option<PoolReserve>, GpuError> {
        let t = std::time::Instant::now();
        let r = memory_pool::grow_and_keep(&self.inner.ctx, &self.inner.stream, bytes)?;
        tracing::debug!(
            "device memory pool: {r:?} in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        Ok(r)
    }

    /// The staging buffers' layout of this context's large uploads ([`StagingLayout::DEFAULT`]
    /// until [`Gpu::set_staging_layout`]).
    pub fn staging_layout(&self) -> StagingLayout {
        let guard = self.inner.staging.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .map_or(StagingLayout::DEFAULT, |s| s.layout())
    }

    /// Replaces the staging buffers of large uploads by a new ring of `layout` (allocated now;
    /// the old buffers are freed once the copies reading them have finished). Waits for an
    /// upload in progress on another thread. An error (a layout out of bounds, pinned memory
    /// refused) leaves the old buffers in place.
    pub fn set_staging_layout(&self, layout: StagingLayout) -> Result<(), GpuError> {
        let new = staging::Staging::new(&self.inner.ctx, layout)?;
        *self.inner.staging.lock().unwrap_or_else(|p| p.into_inner()) = Some(new);
        Ok(())
    }

    /// Copies a device buffer back (waits for the stream).
    pub fn download<T: DeviceRepr>(&self, buf: &CudaSlice<T>) -> Result<Vec<T>, GpuError> {
        Ok(self.inner.stream.clone_dtoh(buf)?)
    }

    /// Copies the first `dst.len()` elements of `src` into `dst` after the work queued on this
    /// stream, and returns once they are there ([`GpuError::Invalid`] where `src` is shorter).
    /// From [`STAGED_UPLOAD_BYTES`] on through a ring of pinned buffers emptied by many cores
    /// ([`StagingLayout::DEFAULT`]), which also faults `dst`'s fresh pages in on every core; the
    /// driver's pageable copy below that.
    #[tracing::instrument(name = "download", level = "debug", skip_all, fields(bytes = std::mem::size_of_val(dst)))]
    pub fn download_into<T: DeviceRepr>(
        &self,
        src: &CudaSlice<T>,
        dst: &mut [T],
    ) -> Result<(), GpuError> {
        let i = &self.inner;
        staging::check_download(src.len(), dst.len())?;
        if std::mem::size_of_val(dst) >= STAGED_UPLOAD_BYTES {
            return staging::download_pieces(
                &i.ctx,
                &i.stream,
                &i.download_staging,
                StagingLayout::DEFAULT,
                src,
                dst,
            );
        }
        i.stream.memcpy_dtoh(&src.slice(..dst.len()), dst)?;
        self.synchronize()
    }

    /// A new zeroed device buffer of `len` elements.
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>, GpuError> {
        self.draw(len.saturating_mul(std::mem::size_of::<T>()))?;
        Ok(self.inner.stream.alloc_zeros(len)?)
    }

    /// Draws `bytes` from this handle's allocation budget ([`GpuError::OutOfMemory`] past it).
    fn draw(&self, bytes: usize) -> Result<(), GpuError> {
        let requested = bytes as u64;
        self.inner
            .budget
            .draw(requested)
            .map_err(|r| GpuError::OutOfMemory {
                requested,
                drawn: r.drawn,
                limit: r.limit,
            })
    }

    /// Sets this handle's device-allocation budget (shared by its clones; `None`: unlimited) and
    /// forgets what was drawn: from now on [`Gpu::upload`], [`Gpu::upload_inspected`] and
    /// [`Gpu::alloc_zeros`] refuse, with [`GpuError::OutOfMemory`], an allocation that would
    /// bring the bytes asked for since this call past `limit` (frees give nothing back; see
    /// [`budget`]). A fault-injection switch: a preparation fails at the same allocation on
    /// every run. A new handle starts from [`budget::ALLOC_BUDGET_ENV`].
    pub fn set_alloc_budget(&self, limit: Option<u64>) {
        self.inner.budget.reset(limit);
    }

    /// Bytes drawn from the allocation budget since it was set, and the budget (`None`:
    /// unlimited).
    pub fn alloc_budget(&self) -> (u64, Option<u64>) {
        (self.inner.budget.drawn(), self.inner.budget.limit())
    }

    /// The device's free and total memory in bytes (`cuMemGetInfo`; free memory counts every
    /// process's allocations, and memory a stream-ordered pool keeps after a free).
    pub fn memory_info(&self) -> Result<(usize, usize), GpuError> {
        self.inner.ctx.bind_to_thread()?;
        Ok(cudarc::driver::result::mem_get_info()?)
    }

    /// Runs `f` `warmup` times untimed, once to calibrate, then takes `iters` (at least 1) samples,
    /// each a batch of [`launches_per_sample`] calls between one pair of timing events
    /// (`CU_EVENT_DEFAULT`) on [`Gpu::stream`] divided by the batch size (1 for launches of
    /// ≥ [`BATCH_TARGET_MS`]); `f` must queue its work there. Times are per call, in ms.
    #[tracing::instrument(name = "run", level = "debug", skip_all, fields(warmup, iters))]
    pub fn time_launches(
        &self,
        warmup: usize,
        iters: usize,
        mut f: impl FnMut() -> Result<(), GpuError>,
    ) -> Result<Timing, GpuError> {
        let stream = &self.inner.stream;
        for _ in 0..warmup {
            f()?;
        }
        stream.synchronize()?;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.inner.ctx.new_event(flags)?;
        let end = self.inner.ctx.new_event(flags)?;
        let mut timed = |batch: usize| -> Result<f64, GpuError> {
            start.record(stream)?;
            for _ in 0..batch {
                f()?;
            }
            end.record(stream)?;
            end.synchronize()?;
            Ok(f64::from(start.elapsed_ms(&end)?) / batch as f64)
        };
        // One calibration launch sets the batch: short launches are timed in batches of at least
        // BATCH_TARGET_MS, so that the host's time between recording the start event and
        // submitting the launch (idle GPU, counted by the events) and the events' resolution
        // shrink to a small share of each sample.
        let one = timed(1)?;
        let batch = launches_per_sample(one);
        let mut samples = Vec::with_capacity(iters.max(1));
        for _ in 0..iters.max(1) {
            samples.push(timed(batch)?);
        }
        Timing::from_samples(samples).ok_or_else(|| GpuError::Invalid("no timing samples".into()))
    }
}

/// Uploads of at least this many bytes go through pinned staging buffers ([`Gpu::upload`]).
pub const STAGED_UPLOAD_BYTES: usize = staging::MIN_BYTES;
pub use memory_pool::PoolReserve;
pub use staging::StagingLayout;
/// Bytes of each piece of [`Gpu::upload_inspected`].
pub const UPLOAD_PIECE_BYTES: usize = staging::PIECE_BYTES;

/// Each timing sample of [`Gpu::time_launches`] spans at least this many milliseconds of launches.
pub const BATCH_TARGET_MS: f64 = 0.25;
/// Most launches per timing sample.
pub const MAX_BATCH: usize = 64;

/// Launches per timing sample for a launch that took `one_ms`: enough to span
/// [`BATCH_TARGET_MS`], at most [`MAX_BATCH`], at least 1.
pub fn launches_per_sample(one_ms: f64) -> usize {
    if one_ms.is_nan() || one_ms <= 0.0 {
        return MAX_BATCH;
    }
    ((BATCH_TARGET_MS / one_ms).ceil() as usize).clamp(1, MAX_BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A type without `Debug`.
    struct NoDebug;

    struct Opaque {
        rows: usize,
        pair: (u8, u8),
        _hidden: NoDebug,
    }

    impl_debug!(Opaque, |o| rows: o.rows, sum: o.pair.0 + o.pair.1);

    #[test]
    fn impl_debug_lists_the_named_values_only() {
        let o = Opaque {
            rows: 3,
            pair: (1, 2),
            _hidden: NoDebug,
        };
        assert_eq!(format!("{o:?}"), "Opaque { rows: 3, sum: 3 }");
    }

    #[test]
    fn short_launches_are_batched_long_ones_not() {
        assert_eq!(launches_per_sample(1.0), 1);
        assert_eq!(launches_per_sample(BATCH_TARGET_MS), 1);
        assert_eq!(launches_per_sample(0.1), 3);
        assert_eq!(launches_per_sample(0.02), 13);
        assert_eq!(launches_per_sample(1e-6), MAX_BATCH);
        assert_eq!(launches_per_sample(0.0), MAX_BATCH);
        assert_eq!(launches_per_sample(f64::NAN), MAX_BATCH);
    }

    #[test]
    fn timing_summary() {
        let t = Timing::from_samples(vec![3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!(t.median_ms, 2.5);
        assert_eq!(t.min_ms, 1.0);
        assert_eq!(t.mean_ms, 4.0);
        assert_eq!(t.samples, vec![3.0, 1.0, 2.0, 10.0]);
        assert!(Timing::from_samples(vec![]).is_none());
    }

    #[test]
    fn spmv_walks_for_n_rhs_live_in_their_module() {
        assert_eq!(KernelModule::spmv_for_rhs(1), KernelModule::Spmv);
        for n in 2..=8 {
            let m = KernelModule::spmv_for_rhs(n);
            assert_eq!(m.file_name(), format!("spmv_n{n}.ptx"));
        }
        assert_eq!(KernelModule::spmv_for_rhs(0), KernelModule::Spmv);
        assert_eq!(KernelModule::spmv_for_rhs(9), KernelModule::Spmv);
    }

    #[test]
    fn a_driver_check_never_panics() {
        // SAFETY: only a dlopen attempt.
        let present = unsafe { sys::is_culib_present() };
        match require_driver_functions() {
            Ok(()) => assert!(present),
            Err(e) => {
                assert_eq!(e.kind(), GpuErrorKind::LibraryMissing);
                assert_eq!(e.to_string().contains("too old"), present, "{e}");
            }
        }
    }

    #[test]
    fn modules_embed_stamped_ptx() {
        for m in KernelModule::ALL {
            assert_eq!(KernelModule::ALL[m.index()], m);
            assert!(m.ptx().contains(".version"), "{m:?}");
        }
    }
}
