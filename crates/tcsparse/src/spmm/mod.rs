//! SpMM: [`Engine::prepare_spmm`](crate::Engine::prepare_spmm) (reorder → format → plan → tune
//! → upload) gives a [`Prepared`] matrix; [`Prepared::spmm`] runs on host data and
//! [`Prepared::spmm_device`] on device data, both in the original row order unless the prepared
//! order is asked for ([`crate::RowOrder`]); [`Prepared::spmm_typed`] and
//! [`Prepared::spmm_device_typed`] take B and C in any [`crate::Element`] type.
//!
//! The room has the parts of every operation: `options` ([`crate::PrepareOptions`]), `prepare`
//! (the entry points and the plan cache's hit paths, over `build`: the reorder stage and one
//! candidate's build, and `choose`: the kernel choice), `tune` (the timing harness: candidates
//! in, timed choice out) with `candidates` (what a tuned preparation builds and hands to it),
//! `run` (the products), and beside them `cache` (the prepared-plan cache, its byte codec in
//! `codec`), `split` (one matrix over several GPUs) and `family/` (the kernel families: each
//! described in one file, registered in one list).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_gpu::Gpu;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::permute::{PermuteElement, RowPermutation};
use tcsparse_gpu::spmm::AccSpmmError;
use tcsparse_gpu::spmm::acc::AccSpmmDevice;
use tcsparse_gpu::spmm::row_tile::{RowTileDevice, RowTileHalf};
use tcsparse_planner::{AccSchedule, Plan};
use tcsparse_reorder::{CheckedReorder, Permutation};

use crate::element::{bf16, f16};
use crate::{DType, Error, ExecKernel, Precision, PrepareReport, RowOrder, ScheduleKind};
use family::FamilyDevice;

mod build;
mod cache;
mod candidates;
mod choose;
mod codec;
pub(crate) mod family;
pub(crate) mod options;
mod prepare;
mod run;
mod split;
mod tune;

pub use cache::{PLAN_VERSION, pattern_checksum};
pub use candidates::{PRUNE_MIN_NNZ, STAGED_TUNED_MAX_NNZ, TUNED_SCHEDULES};
pub use choose::{ROW_TILE_SPLIT_BLOCKS, model_kernel};
pub use family::csr::CSR_TUNED_CHUNKS;
pub(crate) use split::row_block;
pub(crate) use split::row_split;
pub use split::{SplitPrepared, prepare_on_group, prepare_split};

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
    /// A kernel family's layout ([`family`]).
    Family(Box<dyn FamilyDevice>),
    RowTile(Box<RowTileDevice>),
}

impl DeviceState {
    /// The kernel this state runs where the state names it: every state but Acc-SpMM's, whose
    /// schedule kind only the preparation knows.
    pub(crate) fn kernel(&self) -> Option<ExecKernel> {
        Some(match self {
            DeviceState::Cpu => ExecKernel::CpuBitTcf,
            DeviceState::Acc(_) => return None,
            DeviceState::Cusparse { alg, .. } => ExecKernel::Cusparse { alg: *alg },
            DeviceState::Family(d) => d.kernel(),
            DeviceState::RowTile(d) => ExecKernel::RowTile {
                kernel: d.kernel(),
                schedule: d.schedule(),
            },
        })
    }

    /// The thread blocks of a launch at width `n` and the split windows among them (row windows
    /// that several thread blocks add into), as the report gives them: Acc-SpMM's and the
    /// row-tile kernels' schedules, HRPB's wave split (no split windows), none elsewhere.
    pub(crate) fn blocks(&self, n: usize) -> Result<(usize, usize), Error> {
        Ok(match self {
            DeviceState::Acc(d) => (d.num_tbs(), d.num_split_windows()),
            DeviceState::RowTile(d) => (d.num_tbs(), d.num_split_windows()),
            DeviceState::Family(d) => d.blocks(n)?,
            _ => (0, 0),
        })
    }
}

/// A 16-bit element type of the GPU's f16 / bf16 products (the row-tile kernels' and the kernel
/// families' with [`FamilyDevice::half`]), permuted on the device as its bits.
pub(crate) trait HalfElement: RowTileHalf + PermuteElement {
    /// The scratch buffers of this type.
    fn half_scratch(s: &mut Scratch) -> &mut ScratchPair<Self>;

    /// B and C of a family's product in this type.
    fn operands<'a, 'b>(
        b: &'a tcsparse_gpu::Dense<'b, Self>,
        c: &'a mut tcsparse_gpu::DenseMut<'b, Self>,
    ) -> family::HalfOperands<'a, 'b>;
}

/// [`HalfElement`] for `$t`: its scratch field and its variant of [`family::HalfOperands`].
macro_rules! half_element {
    ($t:ty, $field:ident, $variant:ident) => {
        impl HalfElement for $t {
            fn half_scratch(s: &mut Scratch) -> &mut ScratchPair<Self> {
                &mut s.$field
            }

            fn operands<'a, 'b>(
                b: &'a tcsparse_gpu::Dense<'b, Self>,
                c: &'a mut tcsparse_gpu::DenseMut<'b, Self>,
            ) -> family::HalfOperands<'a, 'b> {
                family::HalfOperands::$variant(b, c)
            }
        }
    };
}
half_element!(f16, f16, F16);
half_element!(bf16, bf16, Bf16);

/// A matrix prepared for repeated products: reordered, in BitTCF, planned and (on the GPU)
/// uploaded once.
pub struct Prepared {
    pub(crate) plan: Plan,
    pub(crate) report: PrepareReport,
    pub(crate) perm: Option<Permutation>,
    /// The prepared matrix (shared with the caller where [`Engine::prepare_spmm_shared`] ran it in
    /// its original order; copied on write by [`Prepared::update_values`]; after a plan-cache
    /// hit whose layout was built on the GPU, reordered on first use).
    pub(crate) a: PreparedMatrix,
    /// The prepared matrix in BitTCF: built during preparation for the kernels that run on it
    /// (Acc-SpMM, the CPU path), else on first use of [`Prepared::bittcf`].
    pub(crate) bittcf: OnceLock<BitTcf>,
    pub(crate) gpu: Option<Gpu>,
    pub(crate) dev: DeviceState,
    /// Columns of B and C in the products ([`Prepared::n`]).
    pub(crate) n: usize,
    /// Element type of B and C in the products ([`Prepared::dtype`]).
    pub(crate) dtype: DType,
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
        a.longest_row()
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

/// Device scratch buffers of [`RowOrder::Original`] products (B and C in prepared order), in
/// f32 and in each 16-bit type.
#[derive(Default)]
pub(crate) struct Scratch {
    f32: ScratchPair<f32>,
    f16: ScratchPair<f16>,
    bf16: ScratchPair<bf16>,
}

/// [`Scratch`]'s B and C in one element type.
pub(crate) struct ScratchPair<E> {
    b: Option<CudaSlice<E>>,
    c: Option<CudaSlice<E>>,
}

impl<E> Default for ScratchPair<E> {
    fn default() -> Self {
        Self { b: None, c: None }
    }
}

/// `buf` if it holds at least `len` elements, else a new zeroed buffer of `len`.
fn at_least<T: DeviceRepr + ValidAsZeroBits>(
    gpu: &Gpu,
    buf: Option<CudaSlice<T>>,
    len: usize,
) -> Result<CudaSlice<T>, Error> {
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
    /// Columns of B and C in the products: [`PrepareOptions::n`](crate::PrepareOptions::n), the
    /// width the plan and the tuning were made for, until [`Prepared::set_n`].
    pub fn n(&self) -> usize {
        self.n
    }

    /// Products from now on take B and C of `n` columns (any `n`; the kernel, chosen for the
    /// preparation's width, stays).
    pub fn set_n(&mut self, n: usize) {
        self.n = n;
    }

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

    /// Bound on `|C − C_exact|` per element of a product C = A·B, relative to `(|A|·|B|)` of that
    /// element (with other α and β, the f32 arithmetic adds up to three roundings of 2⁻²⁴ relative
    /// to |α|·|A|·|B| + |β|·|C₀|: α's product, β's and their sum):
    /// [`Precision::scaled_error_bound`] of the kernel's precision for this matrix's longest row
    /// (the GPU's f16 / bf16 row-tile kernels: [`DType::rounded_a_bound`]), plus the rounding of
    /// C to the element type ([`DType::scaled_error_bound`]; nothing for f32).
    pub fn error_bound(&self) -> f64 {
        let k = self.a.longest_row();
        let product = if self.rounds_a() {
            self.dtype.rounded_a_bound(k)
        } else {
            self.report.precision().scaled_error_bound(k)
        };
        self.dtype.scaled_error_bound(product)
    }

    /// Whether the kernel kept rounds A's values to the element type: the GPU's f16 / bf16
    /// row-tile kernels ([`DType::rounded_a_bound`]); every other kernel keeps them in f32.
    fn rounds_a(&self) -> bool {
        matches!(self.report.kernel, ExecKernel::RowTile { kernel, .. } if kernel.arith.is_half())
    }

    /// [`Prepared::error_bound`] as a formula, for reports: the GPU's f16 / bf16 row-tile kernels
    /// round A ([`DType::gpu_bound_text`]); every other kernel adds the rounding of C to the
    /// precision's bound ([`DType::bound_text`]; the CSR kernel in f16 / bf16 keeps A in f32 and
    /// runs at f32's).
    pub fn bound_text(&self) -> &'static str {
        if self.rounds_a() {
            self.dtype.gpu_bound_text()
        } else {
            self.dtype.bound_text()
        }
    }

    /// The element type of B and C in the products
    /// ([`PrepareOptions::dtype`](crate::PrepareOptions::dtype)).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The arithmetic products use (the kernel's).
    pub fn precision(&self) -> Precision {
        self.report.precision()
    }
}
