//! Vendor baselines the bench and the facade compare against: [`cusparse`] (SpMM, SpMV, BSR SpMV)
//! and [`cublas`] (dense GEMM).

pub mod cublas;
pub mod cusparse;
