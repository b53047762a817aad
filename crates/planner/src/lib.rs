//! `tcsparse-planner`: turns format metrics plus a `DeviceSpec` into a `Plan` a kernel executes.
//!
//! Will own: device presets, Acc-SpMM IBD and Eq.4 packing, cuTeSpMM wave-aware splitting, kernel
//! choice (with the reason in words) and the cuSpAMM τ search. Never touches CUDA.
