//! Device memory and streams another library owns (PyTorch tensors reached through DLPack or
//! `__cuda_array_interface__`, PyTorch's current stream), wrapped for this crate's products: the
//! FFI boundary where a caller vouches for a raw address or stream handle. The facade orders
//! products on such a stream (`tcsparse::external`).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

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
        // Ordering with the owner's work is the caller's (the facade's `Prepared::spmm_on_stream` makes it
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
        // owner's work is made by the facade's `Prepared::spmm_on_stream`.
        let s = unsafe { ctx.wrap_borrowed_stream(handle as cudarc::driver::sys::CUstream) };
        Self(s)
    }

    /// The wrapped stream.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.0
    }
}
