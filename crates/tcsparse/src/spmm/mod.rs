//! SpMM: [`Engine::prepare`](crate::Engine::prepare) (reorder → format → plan → upload, in
//! [`prepare`], with tuning in [`tune`]) gives a [`Prepared`] matrix; [`Prepared::spmm`] runs on
//! host data in the original row order, [`Prepared::spmm_device`] on device data in the prepared
//! order (the hot path for benchmarks).

use std::collections::HashMap;

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_gpu::Gpu;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::spmm::acc::{AccSpmmDevice, check_dense};
use tcsparse_gpu::spmm::csr::CsrSpmm;
use tcsparse_gpu::spmm::hrpb::HrpbSpmm;
use tcsparse_gpu::spmm::row_tile::RowTileDevice;
use tcsparse_planner::{AccSchedule, Plan};
use tcsparse_reorder::{Mode, Permutation};

use crate::{Error, ExecKernel, PrepareReport, ScheduleKind};

mod prepare;
mod tune;

pub use prepare::ROW_TILE_SPLIT_BLOCKS;
pub use tune::{CSR_TUNED_CHUNKS, TUNED_SCHEDULES};

/// What a [`Prepared`] matrix runs on.
pub(crate) enum DeviceState {
    Cpu,
    Acc(Box<AccSpmmDevice>),
    Cusparse {
        csr: CusparseCsr,
        spmm: HashMap<usize, CusparseSpmm>,
    },
    Csr(Box<CsrSpmm>),
    RowTile(Box<RowTileDevice>),
    Hrpb(Box<HrpbSpmm>),
}

/// A matrix prepared for repeated products: reordered, in BitTCF, planned and (on the GPU)
/// uploaded once.
pub struct Prepared {
    pub(crate) plan: Plan,
    pub(crate) report: PrepareReport,
    pub(crate) perm: Option<Permutation>,
    pub(crate) a: Csr,
    pub(crate) bittcf: BitTcf,
    pub(crate) gpu: Option<Gpu>,
    pub(crate) dev: DeviceState,
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
    pub(crate) fn set_schedule(
        &mut self,
        sched: &AccSchedule,
        kind: ScheduleKind,
    ) -> Result<(), Error> {
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
    pub(crate) fn launch_refusal(&self, n: usize) -> Option<String> {
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
            DeviceState::Hrpb(k) => {
                if ldb != n || ldc != n {
                    return Err(Error::InvalidArgs(format!(
                        "HRPB kernel needs ldb = ldc = n (got {ldb}, {ldc}, n = {n})"
                    )));
                }
                k.run(alpha, b, beta, c, n)?;
            }
        }
        Ok(())
    }
}
