//! Our CUDA-core CSR SpMM (`kernels-ptx/csr_spmm.cu`): `C = α·A·B + β·C`, f32, B (`K × n`) and C
//! (`M × n`) dense row-major with leading dimension `n`. With β = 0, C is never read.
//!
//! [`CsrSpmm::new`] uploads A once; [`CsrSpmm::run`] checks the dense operands' lengths and launches.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use tcsparse_formats::Csr;

use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name.
pub const ENTRY: &str = "csr_spmm_f32";
/// Rows (warps) per thread block.
pub const ROWS_PER_BLOCK: u32 = 4;
/// Columns of C one warp covers per pass (4 per lane).
pub const COLS_PER_WARP: u32 = 128;

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[KernelSignature {
    module: KernelModule::CsrSpmm,
    name: ENTRY,
    params: &[
        ParamKind::Ptr, // indptr  (u32, m+1)
        ParamKind::Ptr, // indices (u32, nnz)
        ParamKind::Ptr, // values  (f32, nnz)
        ParamKind::Ptr, // B       (f32, k*n)
        ParamKind::Ptr, // C       (f32, m*n)
        ParamKind::U32, // m
        ParamKind::U32, // n
        ParamKind::F32, // alpha
        ParamKind::F32, // beta
    ],
}];

/// A CSR matrix resident on the GPU, ready for repeated SpMM.
///
/// Invariants (from [`Csr`], re-checked in [`CsrSpmm::new`]): `indptr` has `m+1` non-decreasing
/// entries from 0 to nnz, every column index is `< k`, and `m`, `k`, nnz fit in `u32`.
pub struct CsrSpmm {
    gpu: Gpu,
    m: usize,
    k: usize,
    indptr: CudaSlice<u32>,
    indices: CudaSlice<u32>,
    values: CudaSlice<f32>,
    func: CudaFunction,
}

impl std::fmt::Debug for CsrSpmm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsrSpmm")
            .field("m", &self.m)
            .field("k", &self.k)
            .field("nnz", &self.indices.len())
            .finish()
    }
}

/// Checks the CSR invariants the kernel's reads rely on.
pub fn check_csr(a: &Csr) -> Result<(), GpuError> {
    let (m, k) = (a.rows(), a.cols());
    let indptr = a.indptr();
    let ip = indptr.raw_storage();
    let bad = |s: String| Err(GpuError::Invalid(s));
    if m >= u32::MAX as usize || k >= u32::MAX as usize || a.nnz() >= u32::MAX as usize {
        return bad(format!(
            "{m}×{k} with {} nnz does not fit u32 indices",
            a.nnz()
        ));
    }
    if ip.len() != m + 1 || ip[0] != 0 || ip[m] as usize != a.nnz() {
        return bad("indptr must have m+1 entries from 0 to nnz".into());
    }
    if ip.windows(2).any(|w| w[1] < w[0]) {
        return bad("indptr decreases".into());
    }
    if a.indices().iter().any(|&c| c as usize >= k) {
        return bad("column index ≥ cols".into());
    }
    Ok(())
}

pub(crate) fn upload_nonempty<T: cudarc::driver::DeviceRepr + Default + Clone>(
    gpu: &Gpu,
    data: &[T],
) -> Result<CudaSlice<T>, GpuError> {
    if data.is_empty() {
        gpu.upload(&[T::default()])
    } else {
        gpu.upload(data)
    }
}

impl CsrSpmm {
    /// Validates and uploads `a`.
    pub fn new(gpu: &Gpu, a: &Csr) -> Result<Self, GpuError> {
        check_csr(a)?;
        let indptr = a.indptr();
        Ok(Self {
            gpu: gpu.clone(),
            m: a.rows(),
            k: a.cols(),
            indptr: gpu.upload(indptr.raw_storage())?,
            indices: upload_nonempty(gpu, a.indices())?,
            values: upload_nonempty(gpu, a.data())?,
            func: gpu.function(KernelModule::CsrSpmm, ENTRY)?,
        })
    }

    /// Rows of A.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns of A.
    pub fn cols(&self) -> usize {
        self.k
    }

    /// Launch configuration for `n` columns.
    pub fn launch_config(&self, n: usize) -> LaunchConfig {
        let slabs = n.div_ceil(COLS_PER_WARP as usize).clamp(1, 65_535) as u32;
        LaunchConfig {
            grid_dim: ((self.m as u32).div_ceil(ROWS_PER_BLOCK), slabs, 1),
            block_dim: (32, ROWS_PER_BLOCK, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Enqueues `C = α·A·B + β·C` on the GPU's stream. `b` holds `k·n`, `c` holds `m·n` f32 (row-major).
    pub fn run(
        &self,
        alpha: f32,
        b: &CudaSlice<f32>,
        beta: f32,
        c: &mut CudaSlice<f32>,
        n: usize,
    ) -> Result<(), GpuError> {
        if b.len() < self.k * n || c.len() < self.m * n {
            return Err(GpuError::Invalid(format!(
                "B needs {}·{n} and C {}·{n} elements, got {} and {}",
                self.k,
                self.m,
                b.len(),
                c.len()
            )));
        }
        if n > u32::MAX as usize {
            return Err(GpuError::Invalid(format!("n = {n} exceeds u32")));
        }
        if self.m == 0 || n == 0 {
            return Ok(());
        }
        let (m32, n32) = (self.m as u32, n as u32);
        let cfg = self.launch_config(n);
        let stream = self.gpu.stream();
        let mut l = stream.launch_builder(&self.func);
        l.arg(&self.indptr)
            .arg(&self.indices)
            .arg(&self.values)
            .arg(b)
            .arg(&mut *c)
            .arg(&m32)
            .arg(&n32)
            .arg(&alpha)
            .arg(&beta);
        // SAFETY: (1) types and order match `csr_spmm_f32(const u32*, const u32*, const float*,
        // const float*, float*, u32, u32, float, float)` (checked against the PTX by SIGNATURES).
        // (2) Only C is written and it is borrowed mutably; A's buffers are private and never written.
        // (3) Reads stay in bounds: check_csr proved indptr has m+1 entries ending at nnz and every
        // column < k, so B reads are < k·n ≤ b.len(); rows ≥ m exit, columns ≥ n are guarded, and
        // c.len() ≥ m·n was checked above.
        unsafe { l.launch(cfg) }?;
        Ok(())
    }
}
