//! The CUDA path: products on device addresses of PyTorch tensors (taken by the Python layer from
//! `tensor.data_ptr()` after its device, dtype, shape and contiguity checks), ordered on the
//! caller's current stream through the facade's [`tcsparse::external`] room. Nothing is copied and
//! the host never waits.

use std::sync::Arc;

use pyo3::PyResult;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use tcsparse::cudarc::driver::CudaContext;
use tcsparse::external::{ForeignSlice, ForeignStream};
use tcsparse::gpu::sddmm::SddmmPattern;
use tcsparse::{Engine, Prepared};

use crate::{Inner, to_py};

/// The engine's CUDA context, or `RuntimeError` on the CPU path.
pub(crate) fn context(engine: &Engine) -> PyResult<Arc<CudaContext>> {
    engine
        .gpu()
        .map(|g| g.context().clone())
        .ok_or_else(|| PyRuntimeError::new_err("this matrix was prepared for the CPU path"))
}

fn elements(rows: usize, n: usize, what: &str) -> PyResult<usize> {
    rows.checked_mul(n)
        .ok_or_else(|| PyValueError::new_err(format!("{what}: {rows}·{n} elements overflow")))
}

/// `c = alpha·P·b + beta·c` for the prepared `p` (`cols × n` in, `rows × n` out), on `stream`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spmm(
    ctx: &Arc<CudaContext>,
    p: &mut Prepared,
    alpha: f32,
    b: u64,
    cols: usize,
    n: usize,
    beta: f32,
    c: u64,
    rows: usize,
    stream: usize,
) -> PyResult<()> {
    let (bl, cl) = (elements(cols, n, "X")?, elements(rows, n, "out")?);
    // SAFETY: the Python layer passes the current stream of this matrix's device (0 or a stream
    // PyTorch keeps alive for the whole call; the wrapper is dropped before we return).
    let caller = unsafe { ForeignStream::wrap(ctx, stream) };
    let own = caller.stream().clone();
    // SAFETY: `b` and `c` are `data_ptr()`s of C-contiguous float32 CUDA tensors of `bl` and `cl`
    // elements on this context's device, checked by the Python layer, which holds references to
    // both for the whole call. The product is queued on the engine's stream between two stream
    // waits on the caller's stream, so it runs after the caller's earlier work on them and before
    // any later work of the caller's stream (where PyTorch's allocator would reuse their memory).
    let (bs, mut cs) = unsafe {
        (
            ForeignSlice::new(b, bl, own.clone()),
            ForeignSlice::new(c, cl, own),
        )
    };
    p.set_n(n);
    p.spmm_on_stream(&caller, alpha, &bs, beta, &mut cs)
        .map_err(to_py)
}

/// `out = ⟨left_i, right_j⟩` on the matrix's pattern (CSR order) on device memory, ordered on
/// `stream`; the pattern is uploaded on the first call and kept.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sddmm(
    inner: &mut Inner,
    left: u64,
    rows: usize,
    right: u64,
    cols: usize,
    k: usize,
    out: u64,
    stream: usize,
) -> PyResult<()> {
    let ctx = context(&inner.engine)?;
    let gpu = inner
        .engine
        .gpu()
        .ok_or_else(|| PyRuntimeError::new_err("this matrix was prepared for the CPU path"))?
        .clone();
    if inner.sddmm.is_none() {
        inner.sddmm = Some(SddmmPattern::new(&gpu, &inner.a).map_err(|e| to_py(e.into()))?);
    }
    let pattern = inner
        .sddmm
        .as_ref()
        .ok_or_else(|| PyRuntimeError::new_err("the SDDMM pattern was not uploaded"))?;
    let (ll, rl, nnz) = (
        elements(rows, k, "grad")?,
        elements(cols, k, "X")?,
        pattern.nnz(),
    );
    // SAFETY: as in `spmm`: the current stream of this matrix's device, alive for the call.
    let caller = unsafe { ForeignStream::wrap(&ctx, stream) };
    let own = gpu.stream().clone();
    // SAFETY: as in `spmm`: `data_ptr()`s of C-contiguous float32 CUDA tensors of `ll`, `rl` and
    // `nnz` elements on this device, checked and held by the Python layer for the call; the
    // kernel is ordered between two waits on the caller's stream.
    let (ls, rs, mut os) = unsafe {
        (
            ForeignSlice::new(left, ll, own.clone()),
            ForeignSlice::new(right, rl, own.clone()),
            ForeignSlice::new(out, nnz, own),
        )
    };
    inner
        .engine
        .ordered_with(&caller, || {
            pattern
                .launch(1.0, &ls, k, &rs, k, k, &mut os)
                .map_err(tcsparse::Error::from)
        })
        .map_err(to_py)
}
