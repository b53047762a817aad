//! `tcsparse`: the facade. One dependency gives the whole pipeline: read or generate a matrix,
//! reorder it, build a tensor-core format, plan, upload once and run products many times
//! (`Engine::prepare(csr, opts) -> Prepared`), on the GPU when there is one and on the CPU reference
//! path otherwise.
//!
//! ```no_run
//! use tcsparse::{Engine, PrepareOptions};
//! # fn main() -> Result<(), tcsparse::Error> {
//! let a = tcsparse::formats::csr::csr_from_triplets(3, 3, &[(0, 0, 1.0), (1, 2, 2.0), (2, 1, 3.0)])?;
//! let engine = Engine::new(); // probes the GPU; falls back to the CPU reference path
//! println!("{}", engine.message());
//! let mut prepared = engine.prepare(&a, &PrepareOptions::default())?;
//! let (n, b) = (4, vec![1.0f32; 3 * 4]);
//! let mut c = vec![0.0f32; 3 * 4];
//! prepared.spmm(1.0, &b, n, n, 0.0, &mut c, n)?; // C = A·B, original row order
//! println!("{}", prepared.plan().reason);
//! # Ok(()) }
//! ```

mod engine;
mod error;
mod options;
mod report;
mod spmm;

pub use engine::{Backend, Engine, FORCE_CPU_ENV};
pub use error::Error;
pub use options::{Balance, KernelRequest, PrepareOptions, ReorderChoice};
pub use report::{ExecKernel, PrepareReport, ScheduleKind, TuneSample};
pub use spmm::{CSR_TUNED_CHUNKS, Prepared, ROW_TILE_SPLIT_BLOCKS, TUNED_SCHEDULES};
pub use tcsparse_formats as formats;
pub use tcsparse_gpu as gpu;
pub use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit};
pub use tcsparse_gpu::spmm::row_tile::{RowTileKernel, RowTileSchedule};
pub use tcsparse_planner as planner;
pub use tcsparse_reorder as reorder;
