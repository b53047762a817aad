//! [`Engine`] (probe the GPU once) → [`Engine::prepare`] (reorder → BitTCF → plan → upload, each
//! stage timed) → [`Prepared::spmm`] (host data, original row order) or [`Prepared::spmm_device`]
//! (device data, prepared order: the hot path for benchmarks).

use std::collections::HashMap;
use std::time::Instant;

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::csr::CsrError;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::acc_spmm::{AccSpmmDevice, AccSpmmError, AccVariant, check_dense};
use tcsparse_gpu::csr_spmm::CsrSpmm;
use tcsparse_gpu::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::row_tile_spmm::{
    KERNELS as ROW_TILE_KERNELS, RowTileDevice, dense_slots_per_nnz, dense_tiles_worth_trying,
    split_caps,
};
pub use tcsparse_gpu::row_tile_spmm::{RowTileKernel, RowTileSchedule};
use tcsparse_gpu::{Gpu, GpuError, GpuStatus};
use tcsparse_planner::{
    AccSchedule, DeviceSpec, Eq4Model, KernelChoice, MatrixFeatures, Plan, plan_spmm,
};
use tcsparse_reorder::{Mode, Permutation, ReorderError, ReorderReport};
use thiserror::Error;

/// Environment variable that makes [`Engine::new`] skip the GPU (`1`): the CPU reference path.
pub const FORCE_CPU_ENV: &str = "TCSPARSE_FORCE_CPU";

/// Errors of the facade.
#[derive(Debug, Error)]
pub enum Error {
    /// Building a CSR matrix failed.
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// Reordering failed (unknown method, non-square matrix in symmetric mode, …).
    #[error("reordering: {0}")]
    Reorder(#[from] ReorderError),
    /// Building the BitTCF format failed.
    #[error("building BitTCF: {0}")]
    Format(String),
    /// The GPU runtime failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// The Acc-SpMM launch path rejected its inputs or failed.
    #[error(transparent)]
    Acc(#[from] AccSpmmError),
    /// Arguments do not fit the prepared matrix.
    #[error("invalid argument: {0}")]
    InvalidArgs(String),
    /// The operation needs something this engine does not have (e.g. a device call on the CPU path).
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// Where products run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A CUDA GPU (device 0).
    Gpu,
    /// The CPU reference path (no usable GPU, or forced).
    Cpu,
}

/// Reordering step of [`PrepareOptions`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ReorderChoice {
    /// Keep the input order.
    None,
    /// Data-affinity reordering, kept only when it raises MeanNNZTC.
    #[default]
    Auto,
    /// A named method of `tcsparse_reorder::by_name` (`affinity`, `rabbit`, `lsh`, `degree`, `rcm`,
    /// `none`), always applied.
    Method(String),
    /// This permutation (`perm[new] = old`, e.g. computed once by an earlier preparation and
    /// reused): applied like `Auto`'s choice, so CSR kernels still run on the original order.
    Given(Permutation),
}

/// Load balancing of the Acc-SpMM schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Balance {
    /// The planner decides (IBD plus the hub check).
    #[default]
    Auto,
    /// Always the Eq. 4 packed schedule.
    On,
    /// Always one thread block per row window.
    Off,
    /// This many consecutive row windows per thread block, nothing split: neighbouring windows
    /// of banded or clustered matrices gather mostly the same B rows, which one thread block then
    /// finds in L1 instead of L2 (0 is treated as 1).
    Packed(u32),
    /// Experimental: [`Balance::Packed`] run by the kernel variant with a per-warp cache of
    /// `cache_rows` B rows in shared memory (a power of two from 8 to 1024), so the rows
    /// neighbouring windows share are read from shared memory. Measured slower than
    /// [`Balance::Packed`] on every matrix so far (docs/kernels/acc-spmm.md, v4). Larger caches
    /// need more shared memory per thread block: a combination the device cannot launch at the
    /// product's N is an error at `spmm` time (a tuned preparation keeps cuSPARSE instead).
    PackedCached {
        /// Consecutive row windows per thread block (0 is treated as 1).
        windows: u32,
        /// B rows cached per warp (power of two, 8..=1024).
        cache_rows: u32,
    },
    /// CUDA-core CSR kernel only ([`KernelRequest::Csr`]): warp items of at most this many
    /// nonzeros (longer rows are split across warps; 0 is treated as 1). A tuned preparation
    /// tries [`CSR_TUNED_CHUNKS`]; without this, a requested CSR kernel uses
    /// `tcsparse_gpu::csr_spmm::DEFAULT_CHUNK_NNZ`.
    NnzPerWarp(u32),
}

/// Which kernel [`Engine::prepare`] sets up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KernelRequest {
    /// The planner decides (Acc-SpMM where it is predicted faster, cuSPARSE otherwise).
    #[default]
    Auto,
    /// Acc-SpMM on BitTCF.
    AccSpmm,
    /// cuSPARSE SpMM on CSR.
    Cusparse,
    /// The CUDA-core CSR kernel.
    Csr,
    /// A row-tile tensor-core kernel (TC16, TC16d, TC32, TC32d). `Balance::Packed(k)` runs it
    /// with k windows per thread block, `Balance::On` splits heavy windows at
    /// [`ROW_TILE_SPLIT_BLOCKS`] blocks per thread block, anything else packs 4 windows per
    /// thread block.
    RowTile(RowTileKernel),
}

/// What [`Prepared`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecKernel {
    /// Acc-SpMM (BitTCF, TF32 tensor cores) with the given schedule kind.
    AccSpmm {
        /// How row windows map to thread blocks.
        schedule: ScheduleKind,
    },
    /// cuSPARSE SpMM (CSR, f32).
    Cusparse,
    /// CUDA-core CSR SpMM (f32).
    CsrCuda {
        /// Most nonzeros one warp item holds (longer rows are split across warps).
        chunk_nnz: u32,
    },
    /// A row-tile tensor-core kernel (TF32, row-tile TCF): one gather of 8 B rows serves every
    /// row of a window (16 or 32 rows).
    RowTile {
        /// Window height and tile storage.
        kernel: RowTileKernel,
        /// How windows map to thread blocks.
        schedule: RowTileSchedule,
    },
    /// CPU: the BitTCF walk (`BitTcf::spmm_cpu`), f32.
    CpuBitTcf,
}

impl std::fmt::Display for ExecKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecKernel::AccSpmm { schedule } => write!(f, "Acc-SpMM ({schedule})"),
            ExecKernel::Cusparse => write!(f, "cuSPARSE"),
            ExecKernel::CsrCuda { chunk_nnz } => {
                write!(f, "CSR (CUDA cores, ≤ {chunk_nnz} nonzeros per warp)")
            }
            ExecKernel::RowTile { kernel, schedule } => {
                let storage = if kernel.dense_tiles {
                    "dense tiles, "
                } else {
                    ""
                };
                write!(
                    f,
                    "{} ({}-row tiles, {storage}{schedule})",
                    kernel.name(),
                    kernel.window_rows,
                )
            }
            ExecKernel::CpuBitTcf => write!(f, "CPU reference (BitTCF walk)"),
        }
    }
}

/// How the Acc-SpMM schedule maps row windows to thread blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// One thread block per row window.
    Unbalanced,
    /// Eq. 4 packing (heavy windows split with atomics, light ones packed).
    Balanced,
    /// This many consecutive windows per thread block, nothing split.
    Packed(u32),
    /// Packed windows run by the kernel variant with a per-warp B-row cache of `2^log2_rows` rows
    /// in shared memory.
    PackedCached {
        /// Consecutive row windows per thread block.
        windows: u32,
        /// log2 of the B rows cached per warp.
        log2_rows: u8,
    },
}

impl ScheduleKind {
    /// The kernel variant this kind runs.
    pub fn variant(self) -> AccVariant {
        match self {
            ScheduleKind::PackedCached { log2_rows, .. } => AccVariant::CachedRows {
                log2_slots: log2_rows,
            },
            _ => AccVariant::RegisterMeta,
        }
    }
}

impl std::fmt::Display for ScheduleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleKind::Unbalanced => write!(f, "unbalanced"),
            ScheduleKind::Balanced => write!(f, "balanced"),
            ScheduleKind::Packed(k) => write!(f, "{}", per_tb(*k)),
            ScheduleKind::PackedCached { windows, log2_rows } => {
                write!(f, "{}, {}-row B cache", per_tb(*windows), 1u32 << log2_rows)
            }
        }
    }
}

/// "1 window per TB", "4 windows per TB".
fn per_tb(k: u32) -> String {
    if k == 1 {
        "1 window per TB".into()
    } else {
        format!("{k} windows per TB")
    }
}

/// One measured candidate of a tuned [`Engine::prepare`].
#[derive(Clone, Debug, PartialEq)]
pub struct TuneSample {
    /// What ran (kernel, order, schedule).
    pub candidate: String,
    /// Median time of the timed launches, milliseconds.
    pub ms: f64,
}

/// Options of [`Engine::prepare`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrepareOptions {
    /// Reordering step.
    pub reorder: ReorderChoice,
    /// Symmetric (`P·A·Pᵀ`, square only) or row-only (`P·A`); `None` picks symmetric for square
    /// matrices.
    pub mode: Option<Mode>,
    /// Load balancing of the Acc-SpMM schedule.
    pub balance: Balance,
    /// Kernel choice.
    pub kernel: KernelRequest,
    /// Seed of randomized reorderings.
    pub seed: u64,
    /// The N (columns of B) the plan (and tuning) is made for; products may use any N.
    pub n: usize,
    /// On the GPU with [`KernelRequest::Auto`]: time the candidates (cuSPARSE in the original
    /// order; Acc-SpMM under the planner's and the other schedules, unless `balance` fixes one)
    /// with a random B of `n` columns and keep the fastest, instead of trusting the planner's
    /// model alone. Costs a few dozen launches at preparation.
    pub tune: bool,
}

impl Default for PrepareOptions {
    fn default() -> Self {
        Self {
            reorder: ReorderChoice::Auto,
            mode: None,
            balance: Balance::Auto,
            kernel: KernelRequest::Auto,
            seed: 0,
            n: 128,
            tune: true,
        }
    }
}

/// What [`Engine::prepare`] did, with the time of each stage (seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct PrepareReport {
    /// Backend the products run on.
    pub backend: Backend,
    /// The kernel set up.
    pub kernel: ExecKernel,
    /// Why that kernel (the plan's reason, plus any override).
    pub kernel_note: String,
    /// Rows, columns and nonzeros of A.
    pub rows: usize,
    /// Columns of A.
    pub cols: usize,
    /// Stored nonzeros of A.
    pub nnz: usize,
    /// Reordering report (method, its own time, MeanNNZTC before/after), when one was computed.
    pub reorder: Option<ReorderReport>,
    /// Whether the permutation was applied (Auto drops one that does not help).
    pub reordered: bool,
    /// Symmetric or row-only.
    pub mode: Mode,
    /// Reorder stage: computing and applying the permutation.
    pub reorder_s: f64,
    /// BitTCF build.
    pub build_s: f64,
    /// Planning.
    pub plan_s: f64,
    /// Upload (and kernel module load), until the device is idle again.
    pub upload_s: f64,
    /// TC blocks of the prepared BitTCF.
    pub blocks: usize,
    /// MeanNNZTC of the prepared matrix (nnz / blocks).
    pub mean_nnz_tc: f64,
    /// Thread blocks of the Acc-SpMM schedule (0 for other kernels).
    pub thread_blocks: usize,
    /// Split windows of the Acc-SpMM schedule.
    pub split_windows: usize,
    /// Tuning: every candidate timed, in the order measured (empty when not tuned).
    pub tuning: Vec<TuneSample>,
    /// Tuning stage: preparing the extra candidates and timing them.
    pub tune_s: f64,
}

/// The entry point: probes the GPU once.
#[derive(Debug)]
pub struct Engine {
    gpu: Option<Gpu>,
    message: String,
    device: DeviceSpec,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    /// Probes device 0 (never panics). Without a usable GPU, or with `TCSPARSE_FORCE_CPU=1`, the
    /// engine runs on the CPU reference path and [`Engine::message`] says why.
    pub fn new() -> Self {
        if std::env::var(FORCE_CPU_ENV).is_ok_and(|v| v == "1") {
            return Self::cpu(format!("{FORCE_CPU_ENV}=1"));
        }
        match Gpu::probe() {
            GpuStatus::Ready(g) => Self::with_gpu(g),
            GpuStatus::NoDriver(m) | GpuStatus::NoDevice(m) | GpuStatus::Failed(m) => Self::cpu(m),
        }
    }

    /// A CPU-only engine; `why` goes into the message.
    pub fn cpu(why: impl std::fmt::Display) -> Self {
        Self {
            gpu: None,
            message: format!("no GPU ({why}): using the CPU reference path"),
            device: DeviceSpec::h200(),
        }
    }

    /// An engine on an already opened GPU. Plans use the H200 preset with the device's SM count
    /// and L2 size.
    pub fn with_gpu(gpu: Gpu) -> Self {
        let info = gpu.info();
        let mut device = DeviceSpec::h200();
        device.sm_count = info.sm_count.max(1);
        if info.l2_bytes > 0 {
            device.l2_bytes = info.l2_bytes;
        }
        let message = format!(
            "GPU: {} ({} SMs, compute {}.{})",
            info.name, info.sm_count, info.compute_capability.0, info.compute_capability.1
        );
        Self {
            gpu: Some(gpu),
            message,
            device,
        }
    }

    /// Where products run.
    pub fn backend(&self) -> Backend {
        if self.gpu.is_some() {
            Backend::Gpu
        } else {
            Backend::Cpu
        }
    }

    /// One line: the GPU found, or why there is none.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The GPU, when there is one.
    pub fn gpu(&self) -> Option<&Gpu> {
        self.gpu.as_ref()
    }

    /// The device description plans are made for.
    pub fn device_spec(&self) -> &DeviceSpec {
        &self.device
    }

    /// Reorders, builds BitTCF, plans and uploads once. See [`PrepareOptions`].
    pub fn prepare(&self, a: &Csr, opts: &PrepareOptions) -> Result<Prepared, Error> {
        if let Balance::PackedCached { cache_rows, .. } = opts.balance {
            let max = 1u32 << tcsparse_gpu::acc_spmm::MAX_CACHE_LOG2;
            if !cache_rows.is_power_of_two() || !(8..=max).contains(&cache_rows) {
                return Err(Error::InvalidArgs(format!(
                    "B-row cache of {cache_rows} rows: must be a power of two from 8 to {max}"
                )));
            }
        }
        if matches!(opts.balance, Balance::NnzPerWarp(_)) && opts.kernel != KernelRequest::Csr {
            return Err(Error::InvalidArgs(format!(
                "a nonzero budget per warp applies only to the CSR kernel, not to {:?}",
                opts.kernel
            )));
        }
        if let (Some(gpu), true, KernelRequest::Auto) = (&self.gpu, opts.tune, opts.kernel) {
            return self.prepare_tuned(gpu, a, opts);
        }
        let stage = self.reorder_stage(a, opts)?;
        self.prepare_reordered(a, stage, opts)
    }

    /// Reordering, as `opts.reorder` asks (Auto keeps data-affinity only when it raises MeanNNZTC).
    fn reorder_stage(&self, a: &Csr, opts: &PrepareOptions) -> Result<Reordered, Error> {
        let square = a.rows() == a.cols();
        let mode = opts.mode.unwrap_or(if square {
            Mode::Symmetric
        } else {
            Mode::RowOnly
        });
        if mode == Mode::Symmetric && !square {
            return Err(Error::InvalidArgs(format!(
                "symmetric reordering needs a square matrix, got {}×{}",
                a.rows(),
                a.cols()
            )));
        }

        // Reorder.
        let t = Instant::now();
        let (method, forced) = match &opts.reorder {
            ReorderChoice::None | ReorderChoice::Given(_) => (None, false),
            // CSR kernels run in the original order (prepare_reordered drops an automatic
            // reordering for them), so an automatic reordering would be computed for nothing.
            ReorderChoice::Auto
                if matches!(opts.kernel, KernelRequest::Cusparse | KernelRequest::Csr) =>
            {
                (None, false)
            }
            ReorderChoice::Auto => (Some("affinity".to_string()), false),
            ReorderChoice::Method(m) => (Some(m.clone()), true),
        };
        let mut report = None;
        let mut perm = None;
        let mut a_re = None;
        if let ReorderChoice::Given(p) = &opts.reorder
            && p.len() != a.rows()
        {
            return Err(Error::InvalidArgs(format!(
                "the given permutation has {} entries, the matrix {} rows",
                p.len(),
                a.rows()
            )));
        }
        if let ReorderChoice::Given(p) = &opts.reorder
            && !p.is_identity()
        {
            a_re = Some(tcsparse_reorder::apply(p, a, mode)?);
            perm = Some(p.clone());
        }
        if let Some(m) = method {
            let r = tcsparse_reorder::by_name(&m, opts.seed)?.reorder(a, mode)?;
            let helps = r.report.mean_nnz_tc_after > r.report.mean_nnz_tc_before;
            if (forced || helps) && !r.perm.is_identity() {
                a_re = Some(tcsparse_reorder::apply(&r.perm, a, mode)?);
                perm = Some(r.perm);
            }
            report = Some(r.report);
        }
        let reorder_s = t.elapsed().as_secs_f64();
        Ok(Reordered {
            a_re: a_re.unwrap_or_else(|| a.clone()),
            mode,
            report,
            perm,
            forced,
            reorder_s,
        })
    }

    /// Build, plan, choose and upload, after [`Engine::reorder_stage`].
    fn prepare_reordered(
        &self,
        a: &Csr,
        stage: Reordered,
        opts: &PrepareOptions,
    ) -> Result<Prepared, Error> {
        let Reordered {
            a_re,
            mode,
            report,
            mut perm,
            forced,
            reorder_s,
        } = stage;
        let mut a_re = a_re;

        // Build.
        let t = Instant::now();
        let mut bittcf = BitTcf::from_csr(&a_re).map_err(|e| Error::Format(e.to_string()))?;
        let mut build_s = t.elapsed().as_secs_f64();

        // Plan.
        let t = Instant::now();
        let blocks = bittcf.num_blocks();
        let mean_nnz_tc = if blocks == 0 {
            0.0
        } else {
            a_re.nnz() as f64 / blocks as f64
        };
        let features = MatrixFeatures {
            rows: a_re.rows(),
            cols: a_re.cols(),
            nnz: a_re.nnz() as u64,
            n: opts.n.max(1),
            blocks_8x8: blocks as u64,
            mean_nnz_tc,
            hrpb_alpha: None,
            metcf_blocks: None,
            ibd: None,
        };
        let rwo = bittcf.row_window_offset();
        let plan = plan_spmm(&features, rwo, &self.device);
        let (kernel, mut kernel_note, schedule) = self.choose(&plan, opts, rwo);
        let plan_s = t.elapsed().as_secs_f64();

        // A reordering chosen automatically only serves the tensor-core kernel: CSR kernels
        // (cuSPARSE, ours) lose the input's locality with it (H200, R-MAT scale 20, N = 128:
        // cuSPARSE 1.13 ms in the original order, 3.62 ms after affinity reordering). Keep the
        // original order for them unless the caller asked for the reordering.
        if !forced
            && perm.is_some()
            && matches!(kernel, ExecKernel::Cusparse | ExecKernel::CsrCuda { .. })
        {
            let t = Instant::now();
            perm = None;
            a_re = a.clone();
            bittcf = BitTcf::from_csr(&a_re).map_err(|e| Error::Format(e.to_string()))?;
            build_s += t.elapsed().as_secs_f64();
            kernel_note.push_str(
                "; reordering dropped: CSR kernels run on the original order, which keeps its locality",
            );
        }
        let blocks = bittcf.num_blocks();
        let mean_nnz_tc = if blocks == 0 {
            0.0
        } else {
            a_re.nnz() as f64 / blocks as f64
        };
        let rwo = bittcf.row_window_offset();

        // Upload.
        let t = Instant::now();
        let mut thread_blocks = 0;
        let mut split_windows = 0;
        let dev = match (&self.gpu, kernel) {
            (Some(gpu), ExecKernel::AccSpmm { .. }) => {
                let sched = schedule.unwrap_or_else(|| AccSchedule::unbalanced(rwo));
                let mut d = AccSpmmDevice::upload(gpu, &bittcf, &sched)?;
                if let ExecKernel::AccSpmm { schedule: kind } = kernel {
                    d.set_variant(gpu, kind.variant())?;
                }
                thread_blocks = d.num_tbs();
                split_windows = d.num_split_windows();
                gpu.synchronize()?;
                DeviceState::Acc(Box::new(d))
            }
            (Some(gpu), ExecKernel::Cusparse) => {
                let csr = CusparseCsr::new(gpu, &a_re)?;
                gpu.synchronize()?;
                DeviceState::Cusparse {
                    csr,
                    spmm: HashMap::new(),
                }
            }
            (Some(gpu), ExecKernel::CsrCuda { chunk_nnz }) => {
                let k = CsrSpmm::with_chunk(gpu, &a_re, chunk_nnz)?;
                gpu.synchronize()?;
                DeviceState::Csr(Box::new(k))
            }
            (Some(gpu), ExecKernel::RowTile { kernel, schedule }) => {
                let m = RowTileTcf::from_csr(&a_re, kernel.window_rows as usize)
                    .map_err(|e| Error::Format(e.to_string()))?;
                let d = RowTileDevice::upload(gpu, &m, kernel.dense_tiles, schedule)?;
                thread_blocks = d.num_tbs();
                split_windows = d.num_split_windows();
                gpu.synchronize()?;
                DeviceState::RowTile(Box::new(d))
            }
            _ => DeviceState::Cpu,
        };
        let upload_s = t.elapsed().as_secs_f64();

        let report = PrepareReport {
            backend: self.backend(),
            kernel,
            kernel_note,
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            reorder: report,
            reordered: perm.is_some(),
            mode,
            reorder_s,
            build_s,
            plan_s,
            upload_s,
            blocks,
            mean_nnz_tc,
            thread_blocks,
            split_windows,
            tuning: Vec::new(),
            tune_s: 0.0,
        };
        Ok(Prepared {
            plan,
            report,
            perm,
            a: a_re,
            bittcf,
            gpu: self.gpu.clone(),
            dev,
        })
    }

    /// The Acc-SpMM schedule of `kind` for a matrix with these row windows at width `n`.
    fn schedule(&self, rwo: &[u32], kind: ScheduleKind, n: usize) -> AccSchedule {
        match kind {
            ScheduleKind::Unbalanced => AccSchedule::unbalanced(rwo),
            ScheduleKind::Balanced => {
                AccSchedule::balanced(rwo, &Eq4Model::paper(&self.device), n.max(1))
            }
            ScheduleKind::Packed(k) | ScheduleKind::PackedCached { windows: k, .. } => {
                AccSchedule::packed(rwo, k)
            }
        }
    }

    /// [`Engine::prepare`] with tuning: reorder once, prepare Acc-SpMM (reordered as asked) and
    /// cuSPARSE (original order unless the reordering was forced), time cuSPARSE, each Acc-SpMM
    /// schedule and (with `Balance::Auto`) each row-tile kernel on the Acc-SpMM candidate's matrix
    /// at width `opts.n`, keep the fastest. An Acc-SpMM candidate that cannot be prepared (too large
    /// for the u32 layout, …) leaves cuSPARSE, without timing the row-tile kernels.
    fn prepare_tuned(&self, gpu: &Gpu, a: &Csr, opts: &PrepareOptions) -> Result<Prepared, Error> {
        let n = opts.n.max(1);
        let stage = self.reorder_stage(a, opts)?;
        let t = Instant::now();
        let fixed = |kernel, balance| PrepareOptions {
            kernel,
            balance,
            tune: false,
            ..opts.clone()
        };
        let cus_stage = if stage.forced || stage.perm.is_none() {
            stage.clone()
        } else {
            Reordered {
                a_re: a.clone(),
                perm: None,
                ..stage.clone()
            }
        };
        let mut cus =
            self.prepare_reordered(a, cus_stage, &fixed(KernelRequest::Cusparse, Balance::Auto))?;
        let acc = self.prepare_reordered(a, stage, &fixed(KernelRequest::AccSpmm, opts.balance));
        let b = gpu.upload(&tuning_b(a.cols(), n))?;
        let mut c = gpu.alloc_zeros::<f32>(a.rows() * n)?;
        let mut tuning = Vec::new();
        let cus_name = if cus.perm.is_some() {
            "cuSPARSE (reordered)"
        } else {
            "cuSPARSE (original order)"
        };
        let cus_ms = time_prepared(gpu, &mut cus, &b, &mut c, n)?;
        tuning.push(TuneSample {
            candidate: cus_name.into(),
            ms: cus_ms,
        });
        // Our CUDA-core CSR kernel on the same (original-order) matrix as cuSPARSE, at each
        // nonzero budget per warp.
        let csr_best = tune_csr(gpu, &cus.a, &b, &mut c, n, &mut tuning)?;
        let mut best: Option<(f64, Candidate)> = None;
        let beats =
            |best: &Option<(f64, Candidate)>, ms: f64| best.as_ref().is_none_or(|b| ms < b.0);
        let mut acc_err = None;
        let mut acc = match acc {
            Ok(p) => Some(p),
            Err(e) => {
                acc_err = Some(e.to_string());
                None
            }
        };
        if let Some(p) = acc.as_mut() {
            let ExecKernel::AccSpmm { schedule: planned } = p.report.kernel else {
                unreachable!("prepared with KernelRequest::AccSpmm on a GPU engine");
            };
            let mut kinds = vec![planned];
            if opts.balance == Balance::Auto {
                for k in TUNED_SCHEDULES {
                    if !kinds.contains(&k) {
                        kinds.push(k);
                    }
                }
            }
            let order = if p.perm.is_some() {
                "reordered"
            } else {
                "original order"
            };
            for (i, &kind) in kinds.iter().enumerate() {
                if i > 0 {
                    let sched = self.schedule(p.bittcf.row_window_offset(), kind, n);
                    p.set_schedule(&sched, kind)?;
                }
                // A candidate the device cannot launch at this N (a row cache larger than its
                // shared memory) is skipped, not fatal.
                if let Some(why) = p.launch_refusal(n) {
                    tracing::debug!("tuning: skipping Acc-SpMM ({kind}): {why}");
                    continue;
                }
                let ms = time_prepared(gpu, p, &b, &mut c, n)?;
                tuning.push(TuneSample {
                    candidate: format!("Acc-SpMM ({order}, {kind})"),
                    ms,
                });
                if beats(&best, ms) {
                    best = Some((ms, Candidate::Acc(kind)));
                }
            }
            // The row-tile kernels on the same (reordered) matrix, each layout built once per
            // window height; a candidate keeps its device only while it is the fastest so far.
            // Dense-tile kernels are skipped where their tile copy would be too large
            // (dense_tiles_worth_trying).
            if opts.balance == Balance::Auto {
                for same_height in ROW_TILE_KERNELS.chunk_by(|x, y| x.window_rows == y.window_rows)
                {
                    let m = RowTileTcf::from_csr(&p.a, same_height[0].window_rows as usize)
                        .map_err(|e| Error::Format(e.to_string()))?;
                    for &rt in same_height {
                        if rt.dense_tiles && !dense_tiles_worth_trying(&m) {
                            tracing::debug!(
                                "tuning: skipping {}: {:.1} tile slots per nonzero",
                                rt.name(),
                                dense_slots_per_nnz(&m)
                            );
                            continue;
                        }
                        if let Some((ms, dev)) =
                            tune_row_tile(gpu, &m, rt, &b, &mut c, n, order, &mut tuning)?
                            && beats(&best, ms)
                        {
                            best = Some((ms, Candidate::RowTile(dev)));
                        }
                    }
                }
            }
        }
        let tune_s = t.elapsed().as_secs_f64();
        let summary = tuning
            .iter()
            .map(|s| format!("{} {:.3} ms", s.candidate, s.ms))
            .collect::<Vec<_>>()
            .join(", ");
        let csr_best = csr_best.filter(|(ms, _)| *ms < cus_ms && beats(&best, *ms));
        let mut chosen = match (csr_best, acc, best) {
            (Some((_, dev)), _, _) => {
                cus.report.kernel = ExecKernel::CsrCuda {
                    chunk_nnz: dev.chunk_nnz(),
                };
                cus.report.kernel_note = format!(
                    "tuned at N = {n}: {} fastest ({summary}); planner: {}",
                    cus.report.kernel, cus.plan.reason
                );
                cus.dev = DeviceState::Csr(Box::new(dev));
                cus
            }
            (None, Some(mut p), Some((ms, Candidate::Acc(kind)))) if ms < cus_ms => {
                if p.report.kernel != (ExecKernel::AccSpmm { schedule: kind }) {
                    let sched = self.schedule(p.bittcf.row_window_offset(), kind, n);
                    p.set_schedule(&sched, kind)?;
                }
                p.report.kernel_note = format!(
                    "tuned at N = {n}: Acc-SpMM ({kind}) fastest ({summary}); planner: {}",
                    p.plan.reason
                );
                p
            }
            (None, Some(mut p), Some((ms, Candidate::RowTile(d)))) if ms < cus_ms => {
                p.report.thread_blocks = d.num_tbs();
                p.report.split_windows = d.num_split_windows();
                p.report.kernel = ExecKernel::RowTile {
                    kernel: d.kernel(),
                    schedule: d.schedule(),
                };
                p.dev = DeviceState::RowTile(d);
                p.report.kernel_note = format!(
                    "tuned at N = {n}: {} fastest ({summary}); planner: {}",
                    p.report.kernel, p.plan.reason
                );
                p
            }
            _ => {
                let why = acc_err.map_or_else(
                    || format!("fastest ({summary})"),
                    |e| format!("Acc-SpMM could not be prepared: {e}"),
                );
                cus.report.kernel_note = format!(
                    "tuned at N = {n}: cuSPARSE {why}; planner: {}",
                    cus.plan.reason
                );
                cus
            }
        };
        chosen.report.tuning = tuning;
        chosen.report.tune_s = tune_s;
        Ok(chosen)
    }

    fn choose(
        &self,
        plan: &Plan,
        opts: &PrepareOptions,
        rwo: &[u32],
    ) -> (ExecKernel, String, Option<AccSchedule>) {
        if self.gpu.is_none() {
            return (
                ExecKernel::CpuBitTcf,
                format!(
                    "CPU reference path ({}); on the GPU the plan would be: {}",
                    self.message, plan.reason
                ),
                None,
            );
        }
        let plan_balanced = match plan.choice {
            KernelChoice::AccSpmm { balanced } => Some(balanced),
            _ => plan.imbalance.as_ref().map(|d| d.balanced),
        };
        let acc = |note: String| {
            let kind = match opts.balance {
                Balance::On => ScheduleKind::Balanced,
                Balance::Off => ScheduleKind::Unbalanced,
                Balance::Packed(k) => ScheduleKind::Packed(k.max(1)),
                Balance::PackedCached {
                    windows,
                    cache_rows,
                } => ScheduleKind::PackedCached {
                    windows: windows.max(1),
                    log2_rows: cache_rows.max(1).ilog2() as u8,
                },
                // (NnzPerWarp is refused for every kernel but CSR in `prepare`.)
                Balance::Auto | Balance::NnzPerWarp(_) if plan_balanced.unwrap_or(false) => {
                    ScheduleKind::Balanced
                }
                Balance::Auto | Balance::NnzPerWarp(_) => ScheduleKind::Unbalanced,
            };
            let sched = match (&plan.schedule, kind) {
                (Some(s), ScheduleKind::Balanced) if s.is_balanced() => s.clone(),
                (Some(s), ScheduleKind::Unbalanced) if !s.is_balanced() => s.clone(),
                _ => self.schedule(rwo, kind, opts.n),
            };
            (ExecKernel::AccSpmm { schedule: kind }, note, Some(sched))
        };
        match opts.kernel {
            KernelRequest::AccSpmm => acc(format!("Acc-SpMM requested (planner: {})", plan.reason)),
            KernelRequest::Cusparse => (
                ExecKernel::Cusparse,
                format!("cuSPARSE requested (planner: {})", plan.reason),
                None,
            ),
            KernelRequest::Csr => (
                ExecKernel::CsrCuda {
                    chunk_nnz: match opts.balance {
                        Balance::NnzPerWarp(k) => k.max(1),
                        _ => tcsparse_gpu::csr_spmm::DEFAULT_CHUNK_NNZ,
                    },
                },
                format!("CSR kernel requested (planner: {})", plan.reason),
                None,
            ),
            KernelRequest::RowTile(rt) => {
                let kernel = ExecKernel::RowTile {
                    kernel: rt,
                    schedule: match opts.balance {
                        Balance::Packed(k) => RowTileSchedule::Packed(k.max(1)),
                        Balance::On => RowTileSchedule::Split {
                            max_blocks: ROW_TILE_SPLIT_BLOCKS,
                        },
                        _ => RowTileSchedule::Packed(ROW_TILE_DEFAULT_WINDOWS),
                    },
                };
                (
                    kernel,
                    format!("{kernel} requested (planner: {})", plan.reason),
                    None,
                )
            }
            KernelRequest::Auto => match plan.choice {
                KernelChoice::AccSpmm { .. } => acc(plan.reason.clone()),
                KernelChoice::Cusparse => (ExecKernel::Cusparse, plan.reason.clone(), None),
                other => (
                    ExecKernel::Cusparse,
                    format!(
                        "planner chose {other:?}, which the facade does not run yet: cuSPARSE instead ({})",
                        plan.reason
                    ),
                    None,
                ),
            },
        }
    }
}

/// Schedules a tuned preparation tries besides the planner's (when `balance` is Auto). The B-row
/// cache kinds ([`ScheduleKind::PackedCached`]) are not tried: on the H200 they were 1.4–3.2×
/// slower than the same packing without the cache on every matrix measured
/// (docs/kernels/acc-spmm.md, v4).
pub const TUNED_SCHEDULES: [ScheduleKind; 4] = [
    ScheduleKind::Unbalanced,
    ScheduleKind::Balanced,
    ScheduleKind::Packed(4),
    ScheduleKind::Packed(16),
];

/// Windows per thread block of the packed row-tile candidates a tuned preparation times, in this
/// order (stopping once a larger pack is slower), before the two split schedules of
/// `split_caps` (wave-aware block caps).
const ROW_TILE_TUNED_WINDOWS: [u32; 3] = [1, 4, 16];
/// Windows per thread block of an explicitly requested row-tile kernel without `Balance::Packed`
/// or `Balance::On`.
const ROW_TILE_DEFAULT_WINDOWS: u32 = 4;
/// Most blocks per thread block of an explicitly requested row-tile kernel with `Balance::On`.
pub const ROW_TILE_SPLIT_BLOCKS: u32 = 16;

/// A tuning candidate on the tensor cores.
#[derive(Debug)]
enum Candidate {
    /// Acc-SpMM (BitTCF) under this schedule.
    Acc(ScheduleKind),
    /// A row-tile kernel: its device, set to its fastest schedule.
    RowTile(Box<RowTileDevice>),
}

/// Times row-tile kernel `rt` on `m` (B and C of width `n`) at 1/4/16 windows per thread block,
/// stopping once a larger pack is slower, then split at the two `split_caps`; records every
/// sample in `tuning` (the matrix's `order` in its name) and returns the device set to its fastest
/// schedule.
#[allow(clippy::too_many_arguments)]
fn tune_row_tile(
    gpu: &Gpu,
    m: &RowTileTcf,
    rt: RowTileKernel,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
    order: &str,
    tuning: &mut Vec<TuneSample>,
) -> Result<Option<(f64, Box<RowTileDevice>)>, Error> {
    let first = RowTileSchedule::Packed(ROW_TILE_TUNED_WINDOWS[0]);
    let mut dev = Box::new(RowTileDevice::upload(gpu, m, rt.dense_tiles, first)?);
    let mut time = |dev: &mut RowTileDevice, schedule| -> Result<f64, Error> {
        dev.set_schedule(gpu, schedule)?;
        let ms = time_median(gpu, || Ok(dev.launch(gpu, 1.0, b, n, 0.0, c, n, n)?))?;
        let kernel = ExecKernel::RowTile {
            kernel: rt,
            schedule,
        };
        tuning.push(TuneSample {
            candidate: format!("{kernel} ({order})"),
            ms,
        });
        Ok(ms)
    };
    let mut fastest: Option<(f64, RowTileSchedule)> = None;
    let mut keep = |ms: f64, schedule| {
        if fastest.is_none_or(|(f, _)| ms < f) {
            fastest = Some((ms, schedule));
        }
    };
    let mut previous = f64::INFINITY;
    for k in ROW_TILE_TUNED_WINDOWS {
        let schedule = RowTileSchedule::Packed(k);
        let ms = time(&mut dev, schedule)?;
        keep(ms, schedule);
        // More windows per thread block only help while they keep helping.
        if ms > previous {
            break;
        }
        previous = ms;
    }
    for max_blocks in split_caps(m.num_blocks(), n, gpu.info().sm_count) {
        let schedule = RowTileSchedule::Split { max_blocks };
        keep(time(&mut dev, schedule)?, schedule);
    }
    let Some((ms, schedule)) = fastest else {
        return Ok(None);
    };
    dev.set_schedule(gpu, schedule)?;
    Ok(Some((ms, dev)))
}

/// Nonzero budgets per warp item a tuned preparation times for the CSR kernel.
pub const CSR_TUNED_CHUNKS: [u32; 3] = [64, 256, 1024];

/// Times the CUDA-core CSR kernel on `a` at each of [`CSR_TUNED_CHUNKS`], recording every sample
/// in `tuning`; returns the kernel set to its fastest budget (`None` when `a` has no rows).
fn tune_csr(
    gpu: &Gpu,
    a: &Csr,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
    tuning: &mut Vec<TuneSample>,
) -> Result<Option<(f64, CsrSpmm)>, Error> {
    if a.rows() == 0 {
        return Ok(None);
    }
    let mut dev = CsrSpmm::with_chunk(gpu, a, CSR_TUNED_CHUNKS[0])?;
    let mut fastest: Option<(f64, u32)> = None;
    for chunk in CSR_TUNED_CHUNKS {
        if chunk != dev.chunk_nnz() {
            dev.set_chunk(chunk)?;
        }
        let ms = time_median(gpu, || Ok(dev.run(1.0, b, 0.0, c, n)?))?;
        tuning.push(TuneSample {
            candidate: ExecKernel::CsrCuda { chunk_nnz: chunk }.to_string(),
            ms,
        });
        if fastest.is_none_or(|(f, _)| ms < f) {
            fastest = Some((ms, chunk));
        }
    }
    let Some((ms, chunk)) = fastest else {
        return Ok(None);
    };
    if chunk != dev.chunk_nnz() {
        dev.set_chunk(chunk)?;
    }
    Ok(Some((ms, dev)))
}

/// Launches per candidate when tuning: untimed, then timed (median kept).
const TUNE_WARMUP: usize = 2;
const TUNE_ITERS: usize = 9;

/// Deterministic B for tuning (values in [-1, 1); timing does not depend on them).
fn tuning_b(rows: usize, n: usize) -> Vec<f32> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..rows * n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Median ms of `p`'s product on (b, c) at width n.
fn time_prepared(
    gpu: &Gpu,
    p: &mut Prepared,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
) -> Result<f64, Error> {
    time_median(gpu, || p.spmm_device(1.0, b, n, 0.0, c, n, n))
}

/// Median ms of `launch` over the tuning launches; its own error is returned as it is.
fn time_median(gpu: &Gpu, mut launch: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    let mut err = None;
    let timing = gpu.time_launches(TUNE_WARMUP, TUNE_ITERS, || {
        launch().map_err(|e| {
            let msg = e.to_string();
            err = Some(e);
            GpuError::Invalid(msg)
        })
    });
    match (timing, err) {
        (_, Some(e)) => Err(e),
        (Ok(t), None) => Ok(t.median_ms),
        (Err(e), None) => Err(e.into()),
    }
}

/// The output of [`Engine::reorder_stage`].
#[derive(Clone)]
struct Reordered {
    a_re: Csr,
    mode: Mode,
    report: Option<ReorderReport>,
    perm: Option<Permutation>,
    forced: bool,
    reorder_s: f64,
}

enum DeviceState {
    Cpu,
    Acc(Box<AccSpmmDevice>),
    Cusparse {
        csr: CusparseCsr,
        spmm: HashMap<usize, CusparseSpmm>,
    },
    Csr(Box<CsrSpmm>),
    RowTile(Box<RowTileDevice>),
}

/// A matrix prepared for repeated products: reordered, in BitTCF, planned and (on the GPU)
/// uploaded once.
pub struct Prepared {
    plan: Plan,
    report: PrepareReport,
    perm: Option<Permutation>,
    a: Csr,
    bittcf: BitTcf,
    gpu: Option<Gpu>,
    dev: DeviceState,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("report", &self.report)
            .field("plan", &self.plan)
            .finish()
    }
}

impl Prepared {
    /// The planner's output (kernel choice, reason, schedule) for the prepared matrix.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What preparation did and how long each stage took.
    pub fn report(&self) -> &PrepareReport {
        &self.report
    }

    /// The kernel products run on.
    pub fn kernel(&self) -> ExecKernel {
        self.report.kernel
    }

    /// The reordering applied (`perm[new] = old`), if any.
    pub fn permutation(&self) -> Option<&Permutation> {
        self.perm.as_ref()
    }

    /// The prepared (reordered) matrix.
    pub fn matrix(&self) -> &Csr {
        &self.a
    }

    /// The prepared matrix in BitTCF.
    pub fn bittcf(&self) -> &BitTcf {
        &self.bittcf
    }

    /// Swaps the Acc-SpMM schedule (device matrix kept); no-op on other kernels.
    fn set_schedule(&mut self, sched: &AccSchedule, kind: ScheduleKind) -> Result<(), Error> {
        if let (DeviceState::Acc(d), Some(gpu)) = (&mut self.dev, &self.gpu) {
            d.set_schedule(gpu, sched)?;
            d.set_variant(gpu, kind.variant())?;
            self.report.kernel = ExecKernel::AccSpmm { schedule: kind };
            self.report.thread_blocks = d.num_tbs();
            self.report.split_windows = d.num_split_windows();
        }
        Ok(())
    }

    /// Why the prepared kernel cannot run at width `n` on this device (an Acc-SpMM row cache that
    /// needs more shared memory than a thread block may have), or `None` when it can.
    fn launch_refusal(&self, n: usize) -> Option<String> {
        let DeviceState::Acc(d) = &self.dev else {
            return None;
        };
        d.launch_refusal(n)
    }

    /// Row of the original matrix that prepared row `i` came from.
    fn orig_row(&self, i: usize) -> usize {
        self.perm.as_ref().map_or(i, |p| p.as_slice()[i] as usize)
    }

    /// `C = α·A·B + β·C` on host data in the ORIGINAL row order: B is `cols × n` row-major with
    /// leading dimension `ldb`, C is `rows × n` with `ldc`. With β = 0, C is never read. Permutes B
    /// and un-permutes C as the reordering mode requires.
    #[allow(clippy::too_many_arguments)]
    pub fn spmm(
        &mut self,
        alpha: f32,
        b: &[f32],
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut [f32],
        ldc: usize,
    ) -> Result<(), Error> {
        let (rows, cols) = (self.a.rows(), self.a.cols());
        check_dense("B", b.len(), cols, n, ldb)?;
        check_dense("C", c.len(), rows, n, ldc)?;
        if n == 0 || rows == 0 {
            return Ok(());
        }
        // B in prepared order, compact (ld = n).
        let symmetric = self.report.mode == Mode::Symmetric;
        let mut bp = vec![0f32; cols * n];
        for (j, dst) in bp.chunks_exact_mut(n).enumerate() {
            let src = if symmetric { self.orig_row(j) } else { j };
            dst.copy_from_slice(&b[src * ldb..src * ldb + n]);
        }
        // C in prepared order, compact; only read when β ≠ 0.
        let mut cp = vec![0f32; rows * n];
        if beta != 0.0 {
            for (i, dst) in cp.chunks_exact_mut(n).enumerate() {
                let src = self.orig_row(i);
                dst.copy_from_slice(&c[src * ldc..src * ldc + n]);
            }
        }
        if matches!(self.dev, DeviceState::Cpu) {
            let y = self.bittcf.spmm_cpu(&bp, n, n);
            for (out, &v) in cp.iter_mut().zip(&y) {
                *out = if beta == 0.0 {
                    alpha * v
                } else {
                    alpha * v + beta * *out
                };
            }
        } else {
            let gpu = self
                .gpu
                .clone()
                .ok_or_else(|| Error::Unavailable("no GPU".into()))?;
            let bd = gpu.upload(&bp)?;
            let mut cd = if beta != 0.0 {
                gpu.upload(&cp)?
            } else {
                gpu.alloc_zeros(rows * n)?
            };
            self.spmm_device(alpha, &bd, n, beta, &mut cd, n, n)?;
            cp = gpu.download(&cd)?;
        }
        for (i, src) in cp.chunks_exact(n).enumerate() {
            let r = self.orig_row(i);
            c[r * ldc..r * ldc + n].copy_from_slice(src);
        }
        Ok(())
    }

    /// `C = α·A·B + β·C` on device buffers in PREPARED (reordered) order, queued on the GPU's stream
    /// (no synchronization): the hot path for benchmarks. B is `cols × n` (leading dimension `ldb`),
    /// C is `rows × n` (`ldc`); cuSPARSE needs `ldb = ldc = n`.
    #[allow(clippy::too_many_arguments)]
    pub fn spmm_device(
        &mut self,
        alpha: f32,
        b: &CudaSlice<f32>,
        ldb: usize,
        beta: f32,
        c: &mut CudaSlice<f32>,
        ldc: usize,
        n: usize,
    ) -> Result<(), Error> {
        let gpu = self.gpu.as_ref().ok_or_else(|| {
            Error::Unavailable("spmm_device needs a GPU; this engine runs on the CPU path".into())
        })?;
        match &mut self.dev {
            DeviceState::Cpu => {
                return Err(Error::Unavailable("prepared for the CPU path".into()));
            }
            DeviceState::Acc(d) => d.launch(gpu, alpha, b, ldb, beta, c, ldc, n)?,
            DeviceState::RowTile(d) => d.launch(gpu, alpha, b, ldb, beta, c, ldc, n)?,
            DeviceState::Cusparse { csr, spmm } => {
                if ldb != n || ldc != n {
                    return Err(Error::InvalidArgs(format!(
                        "cuSPARSE path needs ldb = ldc = n (got {ldb}, {ldc}, n = {n})"
                    )));
                }
                if n == 0 || csr.rows() == 0 {
                    return Ok(());
                }
                let s = match spmm.entry(n) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(CusparseSpmm::new(gpu, csr, n, SpmmAlg::Default)?)
                    }
                };
                s.run(alpha, b, beta, c)?;
            }
            DeviceState::Csr(k) => {
                if ldb != n || ldc != n {
                    return Err(Error::InvalidArgs(format!(
                        "CSR kernel needs ldb = ldc = n (got {ldb}, {ldc}, n = {n})"
                    )));
                }
                k.run(alpha, b, beta, c, n)?;
            }
        }
        Ok(())
    }
}
