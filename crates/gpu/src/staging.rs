//! Large uploads through pinned staging buffers (issue 19, the upload stage of a preparation).
//!
//! A copy from pageable memory goes through the driver's own staging, filled by one host thread:
//! about 4 GB/s on the H200 host (31 ms for R-MAT scale 20's 134 MB CSR, 47 ms for
//! clustered256k's 250 MB). Here all cores copy the array, one chunk at a time, into one of two
//! pinned buffers of the [`Gpu`](crate::Gpu) while the copy engine drains the other one.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, DriverError,
    PinnedHostSlice, sys,
};
use rayon::prelude::*;

/// Uploads of at least this many bytes go through the staging buffers; smaller ones through the
/// driver's pageable copy (where the pinned buffers' one-time allocation would not pay).
pub const MIN_BYTES: usize = 4 << 20;
/// Bytes of each of the two staging buffers (one chunk of an upload).
pub const CHUNK_BYTES: usize = 8 << 20;
/// Bytes each host thread copies at a time into a staging buffer.
const PIECE_BYTES: usize = 256 << 10;

/// Two pinned buffers of [`CHUNK_BYTES`] and, for each, an event recorded after the last copy
/// that reads it (refilled only once that event has completed).
pub(crate) struct Staging {
    bufs: [PinnedHostSlice<u8>; 2],
    done: [CudaEvent; 2],
}

impl Staging {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, DriverError> {
        // SAFETY: the buffers' bytes are never read before a chunk of an upload has been copied
        // into them (only the first `len` bytes of each chunk are handed to the driver).
        let bufs = unsafe {
            [
                ctx.alloc_pinned(CHUNK_BYTES)?,
                ctx.alloc_pinned(CHUNK_BYTES)?,
            ]
        };
        Ok(Self {
            bufs,
            done: [ctx.new_event(None)?, ctx.new_event(None)?],
        })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // The copies still reading the buffers finish before they are freed.
        for e in &self.done {
            let _ = e.synchronize();
        }
    }
}

/// A raw byte address that may cross to rayon's threads (each piece is written by one thread).
#[derive(Clone, Copy)]
struct Addr(usize);

/// Copies `data` into a new device buffer on `stream` through `staging` (allocated on first use).
/// Returns once every byte of `data` has been read (the last chunks may still be on their way to
/// the device, ordered before any later work on `stream`).
pub(crate) fn upload<T: DeviceRepr>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    staging: &std::sync::Mutex<Option<Staging>>,
    data: &[T],
) -> Result<CudaSlice<T>, DriverError> {
    let t = std::time::Instant::now();
    let bytes = std::mem::size_of_val(data);
    // Busy (another thread's upload, or this thread's own from inside the parallel copy below,
    // should rayon run such a job there): the driver's pageable copy instead of waiting.
    let mut guard = match staging.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return stream.clone_htod(data),
    };
    let st = match &mut *guard {
        Some(st) => st,
        slot @ None => {
            let t = std::time::Instant::now();
            let st = slot.insert(Staging::new(ctx)?);
            tracing::debug!(
                "staging buffers allocated in {:.1} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
            st
        }
    };
    // SAFETY: every byte of the new buffer is written by the copies below before the buffer is
    // returned (chunks cover 0..bytes).
    let mut dst = unsafe { stream.alloc::<T>(data.len()) }?;
    let (dptr, record) = dst.device_ptr_mut(stream);
    let src = Addr(data.as_ptr() as *const u8 as usize);
    for (k, off) in (0..bytes).step_by(CHUNK_BYTES).enumerate() {
        let len = CHUNK_BYTES.min(bytes - off);
        let h = k % 2;
        // The previous copy out of this buffer has finished: it may be refilled.
        st.done[h].synchronize()?;
        let buf = Addr(st.bufs[h].as_mut_ptr()? as usize);
        (0..len.div_ceil(PIECE_BYTES))
            .into_par_iter()
            .for_each(|p| {
                let at = p * PIECE_BYTES;
                let n = PIECE_BYTES.min(len - at);
                // SAFETY: source bytes off + at .. off + at + n lie inside `data` (off + len ≤
                // bytes); destination bytes at .. at + n inside the pinned buffer (len ≤
                // CHUNK_BYTES), which no copy reads now (its event completed above); the pieces of
                // one chunk are disjoint. An untyped byte copy, so padding bytes of T may be copied.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (src.0 as *const u8).add(off + at),
                        (buf.0 as *mut u8).add(at),
                        n,
                    );
                }
            });
        // SAFETY: the destination range off .. off + len lies inside `dst` (bytes long); the
        // source is `len` initialised bytes of the pinned buffer, which stays untouched until
        // the event recorded right after this copy has completed.
        unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                dptr + off as u64,
                buf.0 as *const std::ffi::c_void,
                len,
                stream.cu_stream(),
            )
        }
        .result()?;
        st.done[h].record(stream)?;
    }
    drop(record);
    tracing::debug!(
        "staged upload of {bytes} bytes read in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(dst)
}
