//! `tcsparse`: the facade. One dependency gives the whole pipeline: read or generate a matrix,
//! reorder it, build a tensor-core format, plan, upload once and run products many times
//! (`Engine::prepare(csr, opts) -> Prepared`), on the GPU when there is one and on the CPU reference
//! path otherwise.

pub use tcsparse_formats as formats;
pub use tcsparse_gpu as gpu;
pub use tcsparse_planner as planner;
pub use tcsparse_reorder as reorder;
