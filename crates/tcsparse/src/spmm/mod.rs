//! SpMM: [`Engine::prepare`](crate::Engine::prepare) (reorder → format → plan → upload, in
//! [`prepare`], with tuning in [`tune`]) gives a [`Prepared`] matrix; [`Prepared::spmm`] runs on
//! host data in the original row order, [`Prepared::spmm_device`] on device data in the prepared
//! order (the hot path for benchmarks).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::Gpu;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::permute::RowPermutation;
use tcsparse_gpu::spmm::AccSpmmError;
use tcsparse_gpu::spmm::acc::{AccSpmmDevice, check_dense};
use tcsparse_gpu::spmm::csr::CsrSpmm;
use tcsparse_gpu::spmm::hrpb::HrpbSpmm;
use tcsparse_gpu::spmm::row_tile::RowTileDevice;
use tcsparse_planner::{AccSchedule, Plan};
use tcsparse_reorder::{CheckedReorder, Mode, Permutation};

use crate::{Error, ExecKernel, Precision, PrepareReport, RowOrder, ScheduleKind};

mod cache;
mod prepare;
mod split;
mod tune;

pub use cache::{PLAN_VERSION, pattern_checksum};
pub use prepare::{ROW_TILE_SPLIT_BLOCKS, model_kernel};
pub(crate) use split::row_block;
pub use split::{SplitPrepared, prepare_on_group, prepare_split, split_rows_by_nonzeros};
pub use tune::{CSR_TUNED_CHUNKS, PRUNE_MIN_NNZ, TUNED_SCHEDULES};

/// What a [`Prepared`] matrix runs on.
pub(crate) enum DeviceState {
    Cpu,
    Acc(Box<AccSpmmDevice>),
    /// cuSPARSE: the matrix's descriptor, the algorithm products run (a tuned preparation's
    /// fastest, else [`SpmmAlg::Default`]) and one [`CusparseSpmm`] per width and algorithm, set
    /// up on first use (tuning sets up every algorithm it times, then keeps only its winner's).
    Cusparse {
        csr: CusparseCsr,
        alg: SpmmAlg,
        spmm: HashMap<(usize, SpmmAlg), CusparseSpmm>,
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
    /// The prepared matrix (shared with the caller where [`Engine::prepare_shared`] ran it in
    /// its original order; copied on write by [`Prepared::update_values`]; after a plan-cache
    /// hit whose layout was built on the GPU, reordered on first use).
    pub(crate) a: PreparedMatrix,
    /// The prepared matrix in BitTCF: built during preparation for the kernels that run on it
    /// (Acc-SpMM, the CPU path), else on first use of [`Prepared::bittcf`].
    pub(crate) bittcf: OnceLock<BitTcf>,
    pub(crate) gpu: Option<Gpu>,
    pub(crate) dev: DeviceState,
    /// Row order of B and C in [`Prepared::spmm_device`].
    pub(crate) device_order: RowOrder,
    /// The permutation on the device (for [`RowOrder::Original`]), uploaded on first use.
    pub(crate) device_perm: Option<RowPermutation>,
    /// Prepared-order copies of B and C (for [`RowOrder::Original`]), kept between calls.
    pub(crate) scratch: Scratch,
    /// For each stored value of the ORIGINAL matrix (CSR order), its position in the prepared
    /// matrix; computed by the first [`Prepared::update_values`] on a reordered matrix.
    pub(crate) value_map: Option<Vec<u32>>,
    /// For each BitTCF value slot, its position in the prepared CSR (`BitTcf::csr_positions`);
    /// computed by the first [`Prepared::update_values`].
    pub(crate) bittcf_slots: Option<Vec<u32>>,
    /// The prepared matrix's 8×8, 16×4 and 16×8 block counts (the planner's features), for the
    /// plan cache.
    pub(crate) block_counts: [u64; 3],
}

/// The prepared matrix: held, or made on first use from the caller's shared matrix and a
/// checked reordering (a plan-cache hit that built its layout on the GPU needs no host copy, and
/// most users never ask for one). Its shape and nonzero count never need the copy.
pub(crate) struct PreparedMatrix {
    /// The matrix, once held or made.
    made: OnceLock<Arc<Csr>>,
    /// What `made` is made from while it is empty.
    from: Option<CheckedReorder>,
    rows: usize,
    cols: usize,
    nnz: usize,
}

impl PreparedMatrix {
    /// `a` itself.
    pub(crate) fn held(a: Arc<Csr>) -> Self {
        let (rows, cols, nnz) = (a.rows(), a.cols(), a.nnz());
        Self {
            made: OnceLock::from(a),
            from: None,
            rows,
            cols,
            nnz,
        }
    }

    /// The reordered matrix `r` makes, made on first use.
    pub(crate) fn reordered_later(r: CheckedReorder, rows: usize, cols: usize, nnz: usize) -> Self {
        Self {
            made: OnceLock::new(),
            from: Some(r),
            rows,
            cols,
            nnz,
        }
    }

    fn make(&self) -> Csr {
        match &self.from {
            Some(r) => r.apply(),
            // (Never: `held` fills `made`, `reordered_later` sets `from`.)
            None => Csr::new(
                (self.rows, self.cols),
                vec![0; self.rows + 1],
                Vec::new(),
                Vec::new(),
            ),
        }
    }

    /// The matrix (made now if it is still to be made).
    pub(crate) fn arc(&self) -> &Arc<Csr> {
        self.made.get_or_init(|| Arc::new(self.make()))
    }

    /// The matrix for writing: made if need be, copied first if shared (copy on write).
    pub(crate) fn make_mut(&mut self) -> &mut Csr {
        let a = match self.made.take() {
            Some(a) => a,
            None => Arc::new(self.make()),
        };
        self.from = None;
        self.made = OnceLock::from(a);
        Arc::make_mut(self.made.get_mut().expect("set just above"))
    }

    /// Stored values of the longest row (no copy made: a reordering keeps the row lengths).
    pub(crate) fn longest_row(&self) -> usize {
        let a = match (self.made.get(), &self.from) {
            (Some(a), _) => a,
            (None, Some(r)) => r.source(),
            (None, None) => return 0,
        };
        let ip = a.indptr();
        ip.raw_storage()
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Rows (no copy made).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (no copy made).
    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    /// Stored values (no copy made).
    pub(crate) fn nnz(&self) -> usize {
        self.nnz
    }
}

impl std::ops::Deref for PreparedMatrix {
    type Target = Csr;
    fn deref(&self) -> &Csr {
        self.arc()
    }
}

/// Device scratch buffers of [`RowOrder::Original`] products.
#[derive(Default)]
pub(crate) struct Scratch {
    b: Option<CudaSlice<f32>>,
    c: Option<CudaSlice<f32>>,
}

/// `buf` if it holds at least `len` elements, else a new zeroed buffer of `len`.
fn at_least(gpu: &Gpu, buf: Option<CudaSlice<f32>>, len: usize) -> Result<CudaSlice<f32>, Error> {
    match buf {
        Some(b) if b.len() >= len.max(1) => Ok(b),
        _ => Ok(gpu.alloc_zeros(len.max(1))?),
    }
}

/// `AccSpmmError`'s argument errors as [`Error::InvalidArgs`].
fn args_error(e: AccSpmmError) -> Error {
    match e {
        AccSpmmError::InvalidArgs(s) => Error::InvalidArgs(s),
        other => Error::Acc(other),
    }
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

    /// The prepared matrix in BitTCF (built now if the kernel does not run on it; a matrix too
    /// large for BitTCF's u32 layout, which no kernel on it could run, gives an empty layout).
    pub fn bittcf(&self) -> &BitTcf {
        self.bittcf.get_or_init(|| {
            BitTcf::from_csr(&self.a).unwrap_or_else(|e| {
                tracing::warn!("BitTCF of the prepared matrix: {e}; an empty layout instead");
                BitTcf::empty()
            })
        })
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

    /// Sets the cuSPARSE SpMM algorithm products run (its [`CusparseSpmm`] set up on the next
    /// launch at a width it has none for); `false`, and nothing changed, on other kernels.
    pub(crate) fn set_cusparse_alg(&mut self, alg: SpmmAlg) -> bool {
        let DeviceState::Cusparse { alg: current, .. } = &mut self.dev else {
            return false;
        };
        *current = alg;
        true
    }

    /// Drops the cuSPARSE set-up of `alg` at width `n` (its workspace freed), if any.
    pub(crate) fn drop_cusparse_setup(&mut self, n: usize, alg: SpmmAlg) {
        if let DeviceState::Cusparse { spmm, .. } = &mut self.dev {
            spmm.remove(&(n, alg));
        }
    }

    /// Keeps cuSPARSE algorithm `alg` (the report's kernel names it) and drops the set-ups of
    /// every other algorithm (their workspaces freed); no-op on other kernels.
    pub(crate) fn keep_cusparse_alg(&mut self, alg: SpmmAlg) {
        if let DeviceState::Cusparse {
            alg: current, spmm, ..
        } = &mut self.dev
        {
            *current = alg;
            spmm.retain(|&(_, a), _| a == alg);
            self.report.kernel = ExecKernel::Cusparse { alg };
        }
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

    /// Bound on `|C − C_exact|` per element of a product, relative to `(|A|·|B|)` of that element:
    /// [`Precision::scaled_error_bound`] of the kernel's precision for this matrix's longest row.
    pub fn error_bound(&self) -> f64 {
        self.report
            .precision()
            .scaled_error_bound(self.a.longest_row())
    }

    /// The arithmetic products use (the kernel's).
    pub fn precision(&self) -> Precision {
        self.report.precision()
    }

    /// `C = α·A·B + β·C` on host data in the ORIGINAL row order: B is `cols × n` row-major with
    /// leading dimension `ldb`, C is `rows × n` with `ldc`. With β = 0, C is never read. Permutes B
    /// and un-permutes C as the reordering mode requires.
    ///
    /// Non-finite B: the tensor-core kernels (Acc-SpMM, row-tile, HRPB) multiply a block's absent
    /// entries (zeros) by its rows of B, so an ∞ or NaN in B can give NaN in a row of the same
    /// block that has no entry in that column, where cuSPARSE and the CSR kernel give a finite
    /// value ([`Prepared::report`] names the kernel kept).
    ///
    /// ```
    /// # fn main() -> Result<(), tcsparse::Error> {
    /// use tcsparse::{Engine, PrepareOptions};
    /// // A = [[1, 0, 2], [0, 3, 0]] times B = [1, 10, 100]ᵀ (n = 1), on the CPU path.
    /// let a = tcsparse::formats::csr::csr_from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)])?;
    /// let mut p = Engine::cpu("doctest").prepare(&a, &PrepareOptions::default())?;
    /// let mut c = vec![0.0f32; 2];
    /// p.spmm(1.0, &[1.0, 10.0, 100.0], 1, 1, 0.0, &mut c, 1)?;
    /// assert_eq!(c, [201.0, 30.0]);
    /// # Ok(()) }
    /// ```
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
        check_dense("B", b.len(), cols, n, ldb).map_err(args_error)?;
        check_dense("C", c.len(), rows, n, ldc).map_err(args_error)?;
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
            let y = tcsparse_formats::layout::Layout::spmm_cpu(self.bittcf(), &bp, n, n)
                .map_err(|e| Error::Format(e.to_string()))?;
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
            self.launch_prepared(alpha, &bd, n, n, beta, &mut cd, n)?;
            cp = gpu.download(&cd)?;
        }
        for (i, src) in cp.chunks_exact(n).enumerate() {
            let r = self.orig_row(i);
            c[r * ldc..r * ldc + n].copy_from_slice(src);
        }
        Ok(())
    }

    /// `C = α·A·B + β·C` on device data, queued on the engine's stream (no synchronization): the
    /// hot path for benchmarks. Same argument order as [`Prepared::spmm`]: B is `cols × n`
    /// row-major with leading dimension `ldb`, C is `rows × n` with `ldc`; with β = 0, C is never
    /// read. B and C may be whole buffers ([`CudaSlice`]) or views into larger ones
    /// ([`cudarc::driver::CudaView`] / [`cudarc::driver::CudaViewMut`], e.g. `buf.slice(..)`).
    /// Rows are in PREPARED (reordered) order unless the matrix was prepared with
    /// [`RowOrder::Original`] (`PrepareOptions::device_order`).
    ///
    /// Leading dimensions larger than `n` work on every kernel but cuSPARSE, which needs
    /// `ldb = ldc = n`; shapes, lengths and leading dimensions are checked before any work
    /// ([`Error::InvalidArgs`]).
    #[allow(clippy::too_many_arguments)]
    pub fn spmm_device<B: DevicePtr<f32>, C: DevicePtr<f32> + DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
    ) -> Result<(), Error> {
        if self.gpu.is_none() {
            return Err(Error::Unavailable(
                "spmm_device needs a GPU; this engine runs on the CPU path".into(),
            ));
        }
        let (rows, cols) = (self.a.rows(), self.a.cols());
        check_dense("B", b.len(), cols, n, ldb).map_err(args_error)?;
        check_dense("C", c.len(), rows, n, ldc).map_err(args_error)?;
        if matches!(self.dev, DeviceState::Cusparse { .. }) && (ldb != n || ldc != n) {
            return Err(Error::InvalidArgs(format!(
                "the cuSPARSE path needs ldb = ldc = n (got ldb = {ldb}, ldc = {ldc}, n = {n})"
            )));
        }
        if matches!(self.dev, DeviceState::Cpu) {
            return Err(Error::Unavailable("prepared for the CPU path".into()));
        }
        if self.device_order == RowOrder::Prepared || self.perm.is_none() {
            return self.launch_prepared(alpha, b, n, ldb, beta, c, ldc);
        }
        if n == 0 || rows == 0 {
            return Ok(());
        }
        // Original order: gather B (symmetric mode) and C (β ≠ 0) into prepared order, multiply,
        // scatter C back.
        let gpu = self
            .gpu
            .clone()
            .ok_or_else(|| Error::Unavailable("no GPU".into()))?;
        if self.device_perm.is_none() {
            let perm = self.perm.as_ref().map(|p| p.as_slice()).unwrap_or(&[]);
            self.device_perm = Some(RowPermutation::new(&gpu, perm)?);
        }
        let symmetric = self.report.mode == Mode::Symmetric;
        let mut cp = at_least(&gpu, self.scratch.c.take(), rows * n)?;
        let mut bp = if symmetric {
            Some(at_least(&gpu, self.scratch.b.take(), cols * n)?)
        } else {
            None
        };
        let result = (|| {
            let perm = self
                .device_perm
                .as_ref()
                .ok_or_else(|| Error::Unavailable("no device permutation".into()))?;
            if let Some(bp) = bp.as_mut() {
                perm.gather(b, ldb, bp, n, n)?;
            }
            if beta != 0.0 {
                perm.gather(c, ldc, &mut cp, n, n)?;
            }
            match bp.as_ref() {
                Some(bp) => self.launch_prepared(alpha, bp, n, n, beta, &mut cp, n)?,
                None => self.launch_prepared(alpha, b, n, ldb, beta, &mut cp, n)?,
            }
            let perm = self
                .device_perm
                .as_ref()
                .ok_or_else(|| Error::Unavailable("no device permutation".into()))?;
            perm.scatter(&cp, n, c, ldc, n)?;
            Ok(())
        })();
        self.scratch.b = bp;
        self.scratch.c = Some(cp);
        result
    }

    /// The product in prepared order on the device kernel (arguments as [`Prepared::spmm_device`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch_prepared<B: DevicePtr<f32>, C: DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        b: &B,
        n: usize,
        ldb: usize,
        beta: f32,
        c: &mut C,
        ldc: usize,
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
            DeviceState::Cusparse { csr, alg, spmm } => {
                if ldb != n || ldc != n {
                    return Err(Error::InvalidArgs(format!(
                        "the cuSPARSE path needs ldb = ldc = n (got ldb = {ldb}, ldc = {ldc}, n = {n})"
                    )));
                }
                if n == 0 || csr.rows() == 0 {
                    return Ok(());
                }
                let s = match spmm.entry((n, *alg)) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    // Set up on the caller's B and C (no temporaries of their size).
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(CusparseSpmm::with_buffers(gpu, csr, n, *alg, b, c)?)
                    }
                };
                s.run(alpha, b, beta, c)?;
            }
            DeviceState::Csr(k) => k.launch(alpha, b, ldb, beta, c, ldc, n)?,
            DeviceState::Hrpb(k) => k.launch(alpha, b, ldb, beta, c, ldc, n)?,
        }
        Ok(())
    }

    /// Replaces the matrix's values, keeping its pattern (GNN edge weights, iterative solvers):
    /// `values` holds one value per stored nonzero in the ORIGINAL matrix's CSR order. No
    /// reordering, planning or tuning: the values are moved into the prepared order through a map
    /// from original to prepared positions (computed once, on the first call, when the matrix was
    /// reordered), the host copies (prepared CSR and its BitTCF) are refilled, and the device copy
    /// of the kernel's values is replaced with one upload (cuSPARSE: its CSR arrays). The BitTCF
    /// values are refilled through a map from its value slots to prepared CSR positions
    /// (`BitTcf::csr_positions`, computed on the first call), O(nnz) without a build; the
    /// row-tile and HRPB layouts (when one of those kernels runs) are still rebuilt from the
    /// prepared CSR, O(nnz), as they have no slot map yet.
    /// Afterwards products equal those of a fresh preparation on the new values with the same
    /// options (bit for bit on the CPU path). A wrong length is [`Error::ValueCount`].
    pub fn update_values(&mut self, values: &[f32]) -> Result<(), Error> {
        let nnz = self.a.nnz();
        if values.len() != nnz {
            return Err(Error::ValueCount {
                expected: nnz,
                got: values.len(),
            });
        }
        if self.perm.is_some() && self.value_map.is_none() {
            self.value_map = Some(self.original_to_prepared()?);
        }
        match &self.value_map {
            Some(map) if self.perm.is_some() => {
                let data = self.a.make_mut().data_mut();
                for (&v, &q) in values.iter().zip(map) {
                    data[q as usize] = v;
                }
            }
            _ => self.a.make_mut().data_mut().copy_from_slice(values),
        }
        // A BitTCF not built yet will be built from the refilled CSR when asked for.
        if let Some(bittcf) = self.bittcf.get_mut() {
            if self.bittcf_slots.is_none() {
                self.bittcf_slots =
                    Some(BitTcf::csr_positions(&self.a).map_err(|e| Error::Format(e.to_string()))?);
            }
            if let Some(slots) = &self.bittcf_slots {
                let data = self.a.data();
                for (v, &p) in bittcf.values_mut().iter_mut().zip(slots) {
                    *v = data[p as usize];
                }
            }
        }
        let Some(gpu) = self.gpu.clone() else {
            return Ok(());
        };
        if matches!(self.dev, DeviceState::Acc(_)) {
            // Built during preparation for Acc-SpMM; this only guards the refill above.
            self.bittcf();
        }
        match &mut self.dev {
            DeviceState::Cpu => {}
            DeviceState::Acc(d) => {
                let bittcf = self.bittcf.get_or_init(BitTcf::empty);
                d.set_values(&gpu, bittcf.values())?
            }
            DeviceState::Csr(k) => k.set_values(self.a.data())?,
            DeviceState::Cusparse { csr, spmm, .. } => {
                *csr = CusparseCsr::new(&gpu, &self.a)?;
                spmm.clear();
            }
            DeviceState::RowTile(d) => {
                let m = RowTileTcf::from_csr(&self.a, d.kernel().window_rows as usize)
                    .map_err(|e| Error::Format(e.to_string()))?;
                d.set_values(&gpu, &m)?;
            }
            DeviceState::Hrpb(k) => {
                let h = tcsparse_formats::hrpb::Hrpb::from_csr(&self.a)
                    .map_err(|e| Error::Format(e.to_string()))?;
                let (mma, split) = (k.mma(), k.split());
                **k = HrpbSpmm::from_hrpb(&gpu, &h, mma, split)?;
            }
        }
        Ok(())
    }

    /// For each stored value of the original matrix (CSR order), its position in the prepared
    /// matrix: the prepared matrix with each value replaced by a tag of its own position, put back
    /// into the original order by the inverse permutation (values are moved, never computed on,
    /// so the tags come back exact).
    fn original_to_prepared(&self) -> Result<Vec<u32>, Error> {
        let Some(perm) = &self.perm else {
            return Ok((0..self.a.nnz() as u32).collect());
        };
        // Tags q + 1 are finite, nonzero f32 bit patterns below the exponent of ∞.
        if self.a.nnz() >= 0x7F80_0000 {
            return Err(Error::InvalidArgs(format!(
                "{} nonzeros: too many to map for a value update",
                self.a.nnz()
            )));
        }
        let mut tagged = (*self.a).clone();
        for (q, v) in tagged.data_mut().iter_mut().enumerate() {
            *v = f32::from_bits(q as u32 + 1);
        }
        let original = tcsparse_reorder::apply(&perm.inverse(), &tagged, self.report.mode)?;
        original
            .data()
            .iter()
            .map(|v| match v.to_bits().checked_sub(1) {
                Some(q) if (q as usize) < self.a.nnz() => Ok(q),
                _ => Err(Error::InvalidArgs(
                    "value map: the reordering changed the stored values".into(),
                )),
            })
            .collect()
    }
}
