//! Device memory and streams another library owns (PyTorch tensors reached through DLPack or
//! `__cuda_array_interface__`, PyTorch's current stream), wrapped for this crate's products: the
//! FFI boundary where a caller vouches for a raw address or stream handle. The facade orders
//! products on such a stream (`tcsparse::external`).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};

use crate::{Gpu, GpuError};

impl Gpu {
    /// Device `ordinal` (its primary context, the one PyTorch and the CUDA runtime use) with a
    /// stream of its own and without cudarc's per-buffer event tracking: every buffer this
    /// handle makes is allocated, used and freed on its one stream, and work on another
    /// library's stream is ordered by [`Gpu::join_streams`], so the events cudarc would record
    /// and wait for at every launch argument (two driver calls per buffer per launch) order
    /// nothing. For a host-bound caller (one small product per Python call) that is most of the
    /// launch's host time. Buffers of this handle must not be used on another stream without an
    /// explicit [`Gpu::join_streams`].
    pub fn open_single_stream(ordinal: usize) -> Result<Gpu, GpuError> {
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: called on a context object that has made no stream and no buffer yet, so no
        // buffer of it carries events; the buffers made through it afterwards are used on this
        // handle's one stream only (the contract above), where stream order alone orders them.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        Self::from_parts(ctx, stream)
    }

    /// Orders `waiter` after the work queued on `from` so far: an event recorded on `from` and
    /// waited for on `waiter`, no host synchronisation. The handle keeps one event for this,
    /// recorded and waited for under a lock (as one step, so concurrent joins never wait for each
    /// other's record), instead of making and destroying an event per join as
    /// `CudaStream::join` does.
    pub fn join_streams(&self, waiter: &CudaStream, from: &CudaStream) -> Result<(), GpuError> {
        let mut slot = self
            .inner
            .join_event
            .lock()
            .map_err(|_| GpuError::Invalid("the join event's lock is poisoned".into()))?;
        let event = match slot.as_mut() {
            Some(e) => e,
            None => slot.insert(self.inner.ctx.new_event(None)?),
        };
        event.record(from)?;
        waiter.wait(event)?;
        Ok(())
    }
}

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
