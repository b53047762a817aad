//! `tcsparse-planner`: turns matrix metrics plus a [`DeviceSpec`] into a [`Plan`] a kernel executes.
//!
//! * [`device`]: device presets (H200 measured; H100, A100, RTX 4090 from datasheets) and an
//!   occupancy estimate ([`DeviceSpec::resident_blocks`]).
//! * [`imbalance`]: Acc-SpMM's IBD (Eq. 3) and a better decision ([`ImbalanceDecision`]) that also
//!   catches hub-dominated matrices.
//! * [`work`]: every work list, in one vocabulary: Acc-SpMM Eq. 4 packing into an
//!   [`AccSchedule`] (TB → window range + TC-block range, per-window atomic flags) and its flat,
//!   checked kernel form; cuTeSpMM wave-aware splitting (Eq. 6–7) into virtual row panels; the
//!   CSR kernels' warp items; the bitBSR SpMV halves. [`acc`] and [`wave`] are its modules.
//! * [`choice`]: a bytes/FLOPs roofline model and the kernel choice per matrix and N ([`plan_spmm`]).
//! * [`spamm`]: cuSpAMM τ search and strided tile assignment.
//! * [`split`]: every split of C's rows over GPUs (or ranks): one balancing function
//!   ([`split::split_rows`]) and the loads each operation gives it.
//!
//! The planner never touches CUDA and takes plain inputs (slices, [`MatrixFeatures`]), so it builds
//! and tests on any machine.

pub mod choice;
pub mod device;
pub mod imbalance;
pub mod spamm;
pub mod split;
pub mod work;

pub use work::{acc, wave};

pub use acc::{AccSchedule, Eq4Model, TbWork};
pub use choice::{KernelChoice, KernelPrediction, MatrixFeatures, Plan, plan_spmm};
pub use device::{DeviceSpec, KernelResources};
pub use imbalance::{ImbalanceDecision, decide_imbalance, ibd};
pub use spamm::{NormMaps, StridedAssignment, TauForError, TauResult, strided_assignment};
pub use split::split_rows;
pub use wave::{VirtualPanel, WaveSplit, wave_split};

use thiserror::Error;

/// Errors of the planner (bad inputs; the planner never panics on them).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PlanError {
    /// `row_window_offset` is empty, does not start at 0, or decreases somewhere.
    #[error("invalid row_window_offset: {0}")]
    InvalidRowWindowOffset(String),
    /// A schedule does not satisfy its contract for the given `row_window_offset`.
    #[error("invalid schedule: {0}")]
    InvalidSchedule(String),
    /// Some other argument is out of range (with the reason).
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Checks that `row_window_offset` is a valid exclusive prefix of blocks per window: non-empty,
/// starts at 0, non-decreasing. Returns the number of windows.
pub(crate) fn check_row_window_offset(rwo: &[u32]) -> Result<usize, PlanError> {
    match rwo.first() {
        None => {
            return Err(PlanError::InvalidRowWindowOffset(
                "empty slice (need windows + 1 entries)".into(),
            ));
        }
        Some(&f) if f != 0 => {
            return Err(PlanError::InvalidRowWindowOffset(format!(
                "starts at {f}, not 0"
            )));
        }
        _ => {}
    }
    if let Some(w) = rwo.windows(2).position(|p| p[1] < p[0]) {
        return Err(PlanError::InvalidRowWindowOffset(format!(
            "decreases at window {w}: {} > {}",
            rwo[w],
            rwo[w + 1]
        )));
    }
    Ok(rwo.len() - 1)
}
