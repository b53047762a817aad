//! `tcsparse-gpu`: the GPU runtime. Probes the CUDA driver without panicking, loads the embedded PTX,
//! launches our kernels, wraps the cuSPARSE/cuBLAS baselines and times with CUDA events.
