//! Products on device memory another library owns (PyTorch tensors reached through DLPack or
//! `__cuda_array_interface__`), ordered on that library's CUDA stream.
//!
//! A [`ForeignSlice`] is a device pointer and a length the caller vouches for; it implements
//! cudarc's [`DevicePtr`](cudarc::driver::DevicePtr)/[`DevicePtrMut`](cudarc::driver::DevicePtrMut), so [`Prepared::spmm_device`] takes it as it takes a
//! [`cudarc::driver::CudaSlice`], with no copy. A [`ForeignStream`] is the caller's stream
//! (borrowed, never destroyed here). [`Prepared::spmm_on_stream`] runs a product on the engine's
//! own stream between two stream-to-stream waits — the engine's stream waits for the caller's
//! work, the caller's stream waits for the product — so the product is ordered with the caller's
//! work like a launch on the caller's stream, and the host never waits (no synchronisation).
//!
//! The engine keeps its own stream (rather than launching on the caller's) because a tuned
//! preparation captures CUDA graphs on it, which the legacy default stream (PyTorch's default)
//! does not allow.

pub use tcsparse_gpu::foreign::{ForeignSlice, ForeignStream};

use crate::{Engine, Error, Prepared};

impl Engine {
    /// An engine on CUDA device `ordinal`'s primary context (the one PyTorch and the CUDA runtime
    /// use) with a stream of its own and no per-buffer event tracking
    /// ([`tcsparse_gpu::Gpu::open_single_stream`]: its buffers stay on its stream); products on
    /// another library's stream go through [`Prepared::spmm_on_stream`].
    pub fn on_device(ordinal: usize) -> Result<Self, Error> {
        Ok(Self::with_gpu(tcsparse_gpu::Gpu::open_single_stream(
            ordinal,
        )?))
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
    if own.cu_stream() == caller.stream().cu_stream() {
        return f();
    }
    if caller.stream().context().cu_ctx() != own.context().cu_ctx() {
        return Err(Error::InvalidArgs(
            "the stream belongs to another CUDA context (another device?)".into(),
        ));
    }
    gpu.join_streams(own, caller.stream())?;
    let result = f();
    gpu.join_streams(caller.stream(), own)?;
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
