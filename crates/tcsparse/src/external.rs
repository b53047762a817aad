//! Products on device memory another library owns (PyTorch tensors reached through DLPack or
//! `__cuda_array_interface__`), ordered on that library's CUDA stream.
//!
//! A [`ForeignSlice`] is a device pointer and a length the caller vouches for; it implements
//! cudarc's [`DevicePtr`]/[`DevicePtrMut`], so [`Prepared::spmm_device`] takes it as it takes a
//! [`cudarc::driver::CudaSlice`], with no copy. A [`ForeignStream`] is the caller's stream
//! (borrowed, never destroyed here). [`Prepared::spmm_on_stream`] runs a product on the engine's
//! own stream between two stream-to-stream waits — the engine's stream waits for the caller's
//! work, the caller's stream waits for the product — so the product is ordered with the caller's
//! work like a launch on the caller's stream, and the host never waits (no synchronisation).
//!
//! The engine keeps its own stream (rather than launching on the caller's) because a tuned
//! preparation captures CUDA graphs on it, which the legacy default stream (PyTorch's default)
//! does not allow.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

use crate::{Engine, Error, Prepared};

/// `len` f32 values of device memory owned by someone else (e.g. a PyTorch tensor's storage).
#[derive(Debug)]
pub struct ForeignSlice {
    ptr: cudarc::driver::sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
}

impl ForeignSlice {
    /// Wraps `len` f32 values at device address `ptr`, to be used on `stream`.
    ///
    /// # Safety
    /// `ptr` must point to at least `len` f32 values of device memory allocated in `stream`'s
    /// CUDA context, which stay allocated (and are not written by anyone else where this slice is
    /// read, nor accessed at all where it is written) until the work queued on them has run.
    pub unsafe fn new(ptr: u64, len: usize, stream: Arc<CudaStream>) -> Self {
        Self { ptr, len, stream }
    }

    /// The device address.
    pub fn device_address(&self) -> u64 {
        self.ptr
    }
}

impl DeviceSlice<f32> for ForeignSlice {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl DevicePtr<f32> for ForeignSlice {
    fn device_ptr<'a>(
        &'a self,
        _stream: &'a CudaStream,
    ) -> (cudarc::driver::sys::CUdeviceptr, SyncOnDrop<'a>) {
        // Ordering with the owner's work is the caller's ([`Prepared::spmm_on_stream`] makes it
        // with stream waits): nothing to record here.
        (self.ptr, SyncOnDrop::Record(None))
    }
}

impl DevicePtrMut<f32> for ForeignSlice {
    fn device_ptr_mut<'a>(
        &'a mut self,
        _stream: &'a CudaStream,
    ) -> (cudarc::driver::sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Record(None))
    }
}

/// A CUDA stream another library owns (PyTorch's current stream), borrowed: dropping this does
/// not destroy it.
#[derive(Debug, Clone)]
pub struct ForeignStream(Arc<CudaStream>);

impl ForeignStream {
    /// Wraps the raw `CUstream` handle `handle` (0: the legacy default stream) of `ctx`.
    ///
    /// # Safety
    /// `handle` must be 0 or a live stream of `ctx`'s CUDA context that its owner keeps alive
    /// while this value (or a clone) exists.
    pub unsafe fn wrap(ctx: &Arc<CudaContext>, handle: usize) -> Self {
        // SAFETY: the caller's contract above is `wrap_borrowed_stream`'s; ordering with the
        // owner's work is made by `Prepared::spmm_on_stream`.
        let s = unsafe { ctx.wrap_borrowed_stream(handle as cudarc::driver::sys::CUstream) };
        Self(s)
    }

    /// The wrapped stream.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.0
    }
}

impl Engine {
    /// An engine on CUDA device `ordinal`'s primary context (the one PyTorch and the CUDA runtime
    /// use) with a stream of its own; products on another library's stream go through
    /// [`Prepared::spmm_on_stream`].
    pub fn on_device(ordinal: usize) -> Result<Self, Error> {
        let ctx = CudaContext::new(ordinal).map_err(tcsparse_gpu::GpuError::from)?;
        let stream = ctx.new_stream().map_err(tcsparse_gpu::GpuError::from)?;
        Self::from_cuda(ctx, stream)
    }

    /// Runs `f` on the engine's stream, ordered after the work already queued on `caller` and
    /// before the work queued on `caller` afterwards (two stream waits, no host synchronisation;
    /// nothing when `caller` is the engine's stream). The second wait is made even when `f`
    /// fails, so a partly queued product never races the caller's later work.
    pub fn ordered_with<T>(
        &self,
        caller: &ForeignStream,
        f: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        ordered(self.gpu.as_ref(), caller, f)
    }
}

fn ordered<T>(
    gpu: Option<&tcsparse_gpu::Gpu>,
    caller: &ForeignStream,
    f: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    let gpu = gpu.ok_or_else(|| Error::Unavailable("this engine runs on the CPU path".into()))?;
    let own = gpu.stream();
    if own.cu_stream() == caller.0.cu_stream() {
        return f();
    }
    if caller.0.context().cu_ctx() != own.context().cu_ctx() {
        return Err(Error::InvalidArgs(
            "the stream belongs to another CUDA context (another device?)".into(),
        ));
    }
    own.join(&caller.0).map_err(tcsparse_gpu::GpuError::from)?;
    let result = f();
    caller.0.join(own).map_err(tcsparse_gpu::GpuError::from)?;
    result
}

impl Prepared {
    /// [`Prepared::spmm_device`] on foreign memory, ordered on the caller's stream (see
    /// [`Engine::ordered_with`], on the stream of the engine that prepared it). `b` is `cols × n`
    /// and `c` is `rows × n`, contiguous (`n` = [`Prepared::n`]), in the row order the matrix
    /// was prepared for (by default [`crate::RowOrder::Original`], for a caller that knows
    /// nothing of the reordering).
    pub fn spmm_on_stream(
        &mut self,
        caller: &ForeignStream,
        alpha: f32,
        b: &ForeignSlice,
        beta: f32,
        c: &mut ForeignSlice,
    ) -> Result<(), Error> {
        let gpu = self.gpu.clone();
        ordered(gpu.as_ref(), caller, || self.spmm_device(alpha, b, beta, c))
    }
}
