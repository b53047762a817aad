//! `tcsparse`: the facade. One dependency gives the whole pipeline: read or generate a matrix,
//! reorder it, build a tensor-core format, plan, upload once and run products many times, on the
//! GPU when there is one and on the CPU reference path otherwise. `cargo run --release -p
//! tcsparse --example quickstart` is a complete first program (examples/quickstart.rs).
//!
//! Every operation has the same shape: options built with a builder, one `Engine::prepare_*`
//! call, then products on the prepared matrix, in the original row order, with one
//! [`Precision`] type and one [`Error`] type (every library error of the workspace converts into
//! it; [`read`] reads a matrix file).
//!
//! | operation | options | prepare | product |
//! |---|---|---|---|
//! | SpMM `C = α·A·B + β·C` | [`PrepareOptions`] | [`Engine::prepare_spmm`] → [`Prepared`] | [`Prepared::spmm`], [`Prepared::spmm_device`] |
//! | SpMV `y = α·A·X + β·y` (1–8 columns) | [`SpmvOptions`] | [`Engine::prepare_spmv`] → [`PreparedSpmv`] | [`PreparedSpmv::spmv`], [`PreparedSpmv::spmv_device`] |
//! | SpAMM `C ≈ A·B` (dense decay matrices) | [`SpammOptions`] | [`Engine::prepare_spamm`] → [`PreparedSpamm`] | [`PreparedSpamm::spamm`] |
//!
//! What a preparation did is in [`PrepareReport`] (SpMM), [`PreparedSpmv::kernel`] and
//! [`PreparedSpmv::samples`] (SpMV) and [`SpammReport`] (SpAMM).
//!
//! SpMM:
//!
//! ```
//! use tcsparse::{Engine, PrepareOptions, Precision};
//! # fn main() -> Result<(), tcsparse::Error> {
//! let a = tcsparse::formats::csr::csr_from_triplets(3, 3, &[(0, 0, 1.0), (1, 2, 2.0), (2, 1, 3.0)])?;
//! let engine = Engine::new(); // probes the GPU; falls back to the CPU reference path
//! println!("{}", engine.message());
//! let opts = PrepareOptions::builder().n(4).precision(Precision::Tf32).build();
//! let mut prepared = engine.prepare_spmm(&a, &opts)?;
//! let b = vec![1.0f32; 3 * 4]; // 3 × n, row-major
//! let mut c = vec![0.0f32; 3 * 4];
//! prepared.spmm(1.0, &b, 0.0, &mut c)?; // C = A·B, original row order
//! assert_eq!(c, [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0]);
//! println!("{} ({})", prepared.kernel(), prepared.precision());
//! # Ok(()) }
//! ```
//!
//! SpMV, here on the CPU reference path ([`Engine::cpu`]):
//!
//! ```
//! use tcsparse::{Engine, Precision, SpmvOptions};
//! # fn main() -> Result<(), tcsparse::Error> {
//! let a = tcsparse::formats::csr::csr_from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)])?;
//! let opts = SpmvOptions::builder().n(1).precision(Precision::F32).build();
//! let mut prepared = Engine::cpu("example").prepare_spmv(&a, &opts)?;
//! let mut y = vec![0.0f32; 2];
//! prepared.spmv(1.0, &[1.0, 10.0, 100.0], 0.0, &mut y)?;
//! assert_eq!(y, [201.0, 30.0]);
//! # Ok(()) }
//! ```
//!
//! SpAMM of a decay matrix with itself, τ chosen for a relative error of at most 1e-4:
//!
//! ```
//! use tcsparse::spamm::{DenseRef, SpammOptions, TauTarget};
//! # fn main() -> Result<(), tcsparse::Error> {
//! let n = 96;
//! let data = tcsparse::formats::generate::exponential_decay_dense(n, 0.2);
//! let a = DenseRef::new(&data, n, n);
//! let opts = SpammOptions::builder().target(TauTarget::RelError(1e-4)).build();
//! let mut prepared = tcsparse::Engine::cpu("example").prepare_spamm(a, &opts)?;
//! let (c, report) = prepared.spamm(a)?;
//! assert_eq!(c.len(), n * n);
//! assert!(report.rel_bound <= 1e-4);
//! println!("τ {:.2e}: {:.1}% of the tile products", report.tau, 100.0 * report.valid_ratio);
//! # Ok(()) }
//! ```
//!
//! # Threads and streams
//!
//! [`Engine`] (and the [`gpu::Gpu`] inside it) is `Send + Sync`: share one engine between threads
//! by reference or `Arc`. A prepared matrix ([`Prepared`], [`spmv::PreparedSpmv`]) is `Send` but
//! not `Sync`: a product takes `&mut self`, because the prepared matrix owns per-product device
//! state (cuSPARSE handles and descriptors, which one thread at a time may use; the scratch of
//! split rows and of original-order products, which two products in flight at once would both
//! write) and queues its work on the one stream of the engine that prepared it. So:
//!
//! * one prepared matrix serves one product at a time: move it to the thread that multiplies, or
//!   share it behind a `Mutex` (products from several threads then take turns on its stream);
//! * for products that overlap, give each thread an engine on its own stream
//!   (`Engine::with_gpu(gpu.with_new_stream()?)`, or [`Engine::from_cuda`] on the application's
//!   stream) and its own preparation; [`Engine::prepare_spmm_shared`] shares the host matrix between
//!   them without a copy.
//!
//! `tests/concurrency.rs` checks both on the GPU (results bit for bit equal to one thread's).
//!
//! # GPU failures
//!
//! Every GPU failure is an [`Error`], never an abort: [`Error::gpu_kind`] says which kind
//! ([`gpu::GpuErrorKind`]: device out of memory, a failed launch, a lost device, a missing or too
//! old cuSPARSE/cuBLAS, …). A failed preparation frees everything it allocated. Device
//! out-of-memory can be forced for tests with an allocation budget on the engine's GPU
//! ([`gpu::Gpu::set_alloc_budget`], or `TCSPARSE_GPU_ALLOC_BUDGET` for every GPU handle of the
//! process).
//!
//! A kernel fault or a lost device leaves the CUDA context unusable: the call that meets it and
//! every later one on the device (in any engine of the process) return [`Error::DeviceLost`],
//! whose message says so; only a new process can use the GPU again. Dropping prepared matrices
//! and the engine on a lost context is safe.

pub mod accuracy;
pub mod distributed;
pub mod element;
mod engine;
mod error;
pub mod external;
mod precision;
mod report;
pub mod spamm;
mod spmm;
pub mod spmv;
mod tune;

/// The CUDA bindings the device API uses (`CudaSlice`, `CudaView`, `CudaContext`, …), so callers
/// need not pin the same version by hand.
pub use cudarc;
pub use element::{DType, Element};
pub use engine::{Backend, Engine, FORCE_CPU_ENV, preparation_device_bytes};
pub use error::{Error, Requested};
pub use precision::Precision;
pub use report::{
    CacheOutcome, ExecKernel, PrepareReport, ScheduleKind, TuneSample, break_even_calls,
    format_break_even,
};
pub use spamm::{DenseRef, PreparedSpamm, SpammOptions, SpammOptionsBuilder, SpammReport};
pub use spmm::family::kernels::*;
pub use spmm::options::{
    Balance, KernelRequest, PrepareOptions, PrepareOptionsBuilder, ReorderChoice, RowOrder,
};
pub use spmm::{
    CSR_TUNED_CHUNKS, PLAN_VERSION, PRUNE_MIN_NNZ, Prepared, ROW_TILE_SPLIT_BLOCKS,
    STAGED_TUNED_MAX_NNZ, SplitPrepared, TUNED_SCHEDULES, model_kernel, pattern_checksum,
    prepare_on_group, prepare_split,
};
pub use spmv::{PreparedSpmv, SpmvKernel, SpmvOptions, SpmvOptionsBuilder};
/// The sparse-matrix crate [`formats::Csr`] is built on.
pub use sprs;
pub use tcsparse_formats as formats;
pub use tcsparse_formats::staged::StagedSpec;
pub use tcsparse_gpu as gpu;
pub use tcsparse_gpu::baselines::cusparse::SpmmAlg;
pub use tcsparse_gpu::multi::{DeviceGroup, DeviceSet, Transport};
pub use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit};
pub use tcsparse_gpu::spmm::row_tile::{RowTileArith, RowTileKernel, RowTileSchedule};
pub use tcsparse_gpu::spmm::staged::{Slice as StagedSlice, StageCopy};
pub use tcsparse_planner as planner;
pub use tcsparse_reorder as reorder;

/// Reads a matrix file into a checked [`formats::Csr`], choosing the reader by extension:
/// Matrix Market (`.mtx`, `.mtx.gz`; symmetric storage expanded) or scipy's `.npz`
/// ([`formats::mtx::read_matrix`]). Memory is checked against the process's budget
/// ([`formats::limits`]) before anything a declared size implies is allocated.
pub fn read(path: impl AsRef<std::path::Path>) -> Result<formats::Csr, Error> {
    Ok(formats::mtx::read_matrix(path)?)
}
