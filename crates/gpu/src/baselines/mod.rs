//! Vendor baselines the bench and the facade compare against: [`cusparse`] (SpMM, SpMV, BSR SpMV)
//! and [`cublas`] (dense GEMM), [`cublas_ex`] (GemmEx: f16 and FAST_TF32, for SpAMM).

pub mod cublas;
pub mod cublas_ex;
pub mod cusparse;
