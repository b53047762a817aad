//! Large uploads and downloads through pinned staging buffers (issue 19, the upload stage of a
//! preparation; issue 40, a host product's C).
//!
//! A copy from pageable memory goes through the driver's own staging, filled by one host thread:
//! about 4 GB/s on the H200 host (31 ms for R-MAT scale 20's 134 MB CSR, 47 ms for
//! clustered256k's 250 MB). Here all cores copy the array, one chunk at a time, into a ring of
//! pinned buffers of the [`Gpu`](crate::Gpu) while the copy engine drains the ones filled before.
//!
//! The copy engine itself reads pinned memory at 55 GB/s there; the host's filling is the bound
//! (19–32 GB/s for 94–248 MB alone; `examples/cache_hit_speed.rs`, docs/prepare-cost.md, H200,
//! 2026-11-25, 54aa023). An own pool of fill threads beside rayon's measured slower, so there is none.
//!
//! Downloads mirror it: the copy engine fills a ring of pinned buffers (cached, not
//! write-combined: the host reads them) while all cores copy the buffers filled before into the
//! caller's pageable array, faulting its fresh pages in on every core instead of in the driver's
//! one thread.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr,
    PinnedHostSlice, sys,
};
use rayon::prelude::*;

use crate::GpuError;

/// Uploads of at least this many bytes go through the staging buffers; smaller ones through the
/// driver's pageable copy (where the pinned buffers' one-time allocation would not pay).
pub const MIN_BYTES: usize = 4 << 20;
/// Bytes each host thread copies at a time into a staging buffer: the pieces of
/// [`Gpu::upload_inspected`](crate::Gpu::upload_inspected).
pub const PIECE_BYTES: usize = 256 << 10;

/// How staged uploads are cut: a ring of `buffers` pinned buffers of `chunk_bytes` each (one
/// chunk of an upload per buffer), filled by rayon's global pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagingLayout {
    /// Pinned buffers in the ring, 2 to [`StagingLayout::MAX_BUFFERS`].
    pub buffers: usize,
    /// Bytes of each buffer, a positive multiple of 256 KiB (the pieces one thread copies, so
    /// that every chunk starts on a piece); all buffers together at most
    /// [`StagingLayout::MAX_TOTAL_BYTES`].
    pub chunk_bytes: usize,
}

impl StagingLayout {
    /// Four buffers of 16 MiB (64 MiB pinned; measured against two of 8 MiB). On the H200
    /// host a plan-cache hit of R-MAT scale 20 took 3.75–3.81 ms with it against 3.94–4.89 ms,
    /// and one of clustered256k 9.10–10.67 ms against 11.95–13.40 ms (medians of seven or nine,
    /// in one process, three runs; docs/prepare-cost.md, 2026-11-25, 54aa023).
    pub const DEFAULT: StagingLayout = StagingLayout {
        buffers: 4,
        chunk_bytes: 16 << 20,
    };
    /// Most buffers in the ring.
    pub const MAX_BUFFERS: usize = 64;
    /// Most pinned bytes of all buffers together.
    pub const MAX_TOTAL_BYTES: usize = 512 << 20;

    /// `Ok` when the layout is within the bounds above.
    pub fn check(&self) -> Result<(), GpuError> {
        let ok = (2..=Self::MAX_BUFFERS).contains(&self.buffers)
            && self.chunk_bytes >= PIECE_BYTES
            && self.chunk_bytes.is_multiple_of(PIECE_BYTES)
            && self
                .chunk_bytes
                .checked_mul(self.buffers)
                .is_some_and(|t| t <= Self::MAX_TOTAL_BYTES);
        if ok {
            Ok(())
        } else {
            Err(GpuError::Invalid(format!(
                "staging layout {self:?}: needs 2 to {} buffers of a positive multiple of 256 KiB, \
                 at most {} MiB in all",
                Self::MAX_BUFFERS,
                Self::MAX_TOTAL_BYTES >> 20,
            )))
        }
    }
}

/// The ring of pinned buffers and, for each, an event recorded after the last copy that reads it
/// (refilled only once that event has completed).
pub(crate) struct Staging {
    layout: StagingLayout,
    bufs: Vec<PinnedHostSlice<u8>>,
    done: Vec<CudaEvent>,
    /// The buffer the next chunk goes into (the ring carries on across uploads).
    next: usize,
}

impl Staging {
    /// A ring of `layout` for uploads (write-combined buffers: fast for the device to read, slow
    /// for the host to read).
    pub(crate) fn new(ctx: &Arc<CudaContext>, layout: StagingLayout) -> Result<Self, GpuError> {
        Self::with_flags(ctx, layout, sys::CU_MEMHOSTALLOC_WRITECOMBINED)
    }

    /// A ring of `layout` for downloads (cached buffers: the host reads them).
    pub(crate) fn for_downloads(
        ctx: &Arc<CudaContext>,
        layout: StagingLayout,
    ) -> Result<Self, GpuError> {
        Self::with_flags(ctx, layout, 0)
    }

    fn with_flags(
        ctx: &Arc<CudaContext>,
        layout: StagingLayout,
        flags: u32,
    ) -> Result<Self, GpuError> {
        layout.check()?;
        let t = std::time::Instant::now();
        let mut bufs = Vec::with_capacity(layout.buffers);
        let mut done = Vec::with_capacity(layout.buffers);
        for _ in 0..layout.buffers {
            // SAFETY: the buffers' bytes are never read before a chunk has been copied into them
            // (an upload hands only the first `len` bytes it wrote to the driver; a download reads
            // only the first `len` bytes the driver wrote).
            bufs.push(unsafe { ctx.alloc_pinned_with_flags(layout.chunk_bytes, flags) }?);
            done.push(ctx.new_event(None)?);
        }
        tracing::debug!(
            "staging buffers ({layout:?}) allocated in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        Ok(Self {
            layout,
            bufs,
            done,
            next: 0,
        })
    }

    pub(crate) fn layout(&self) -> StagingLayout {
        self.layout
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

/// What an upload applies to each piece of its source's bytes ([`upload_pieces`]).
pub(crate) type PieceInspector<'a, R> = &'a (dyn Fn(&[u8]) -> R + Sync);

/// `inspect` of every [`PIECE_BYTES`] piece of `bytes` (the last one shorter), on all cores, in
/// piece order: the results of an inspected upload that is not staged.
pub(crate) fn inspect_pieces<R: Send>(bytes: &[u8], inspect: PieceInspector<'_, R>) -> Vec<R> {
    bytes.par_chunks(PIECE_BYTES).map(inspect).collect()
}

/// Copies `data` into a new device buffer on `stream` through `staging` (allocated with
/// `layout` on first use), applying `inspect` (where given) to each [`PIECE_BYTES`] piece of
/// `data`'s bytes (the last one shorter) on the thread that copies it, right after the copy, and
/// returning its results in piece order. Returns once every byte of `data` has been read (the
/// last chunks may still be on their way to the device, ordered before any later work on
/// `stream`).
///
/// # Safety
/// With `inspect`, every byte of `data` must be initialised (no padding in `T`): the pieces are
/// handed to it as byte slices.
pub(crate) unsafe fn upload_pieces<T: DeviceRepr, R: Send>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    staging: &std::sync::Mutex<Option<Staging>>,
    layout: StagingLayout,
    data: &[T],
    inspect: Option<PieceInspector<'_, R>>,
) -> Result<(CudaSlice<T>, Vec<R>), GpuError> {
    let t = std::time::Instant::now();
    let bytes = std::mem::size_of_val(data);
    let src = Addr(data.as_ptr() as *const u8 as usize);
    let piece = |at: usize, n: usize| {
        // SAFETY: at every call, bytes at .. at + n lie inside `data` (at + n ≤ bytes),
        // initialised by the caller's promise.
        unsafe { std::slice::from_raw_parts((src.0 as *const u8).add(at), n) }
    };
    // Busy (another thread's upload, or this thread's own from inside the parallel copy below,
    // should rayon run such a job there): the driver's pageable copy instead of waiting.
    let mut guard = match staging.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            let results = inspect.map_or_else(Vec::new, |f| inspect_pieces(piece(0, bytes), f));
            return Ok((stream.clone_htod(data)?, results));
        }
    };
    let st = match &mut *guard {
        Some(st) => st,
        slot @ None => slot.insert(Staging::new(ctx, layout)?),
    };
    let chunk = st.layout.chunk_bytes;
    // SAFETY: every byte of the new buffer is written by the copies below before the buffer is
    // returned (chunks cover 0..bytes).
    let mut dst = unsafe { stream.alloc::<T>(data.len()) }?;
    let alloc_s = t.elapsed().as_secs_f64();
    let (dptr, record) = dst.device_ptr_mut(stream);
    let mut results = Vec::with_capacity(if inspect.is_some() {
        bytes.div_ceil(PIECE_BYTES)
    } else {
        0
    });
    for off in (0..bytes).step_by(chunk) {
        let len = chunk.min(bytes - off);
        let h = st.next;
        st.next = (h + 1) % st.bufs.len();
        // The previous copy out of this buffer has finished: it may be refilled.
        st.done[h].synchronize()?;
        let buf = Addr(st.bufs[h].as_mut_ptr()? as usize);
        // Chunks start on pieces (chunk_bytes is a multiple of PIECE_BYTES), so the pieces of
        // all chunks in order are the pieces of `data`.
        let chunk_results: Vec<Option<R>> = (0..len.div_ceil(PIECE_BYTES))
            .into_par_iter()
            .map(|p| {
                let at = p * PIECE_BYTES;
                let n = PIECE_BYTES.min(len - at);
                // SAFETY: source bytes off + at .. off + at + n lie inside `data` (off + len ≤
                // bytes); destination bytes at .. at + n inside the pinned buffer (len ≤
                // chunk_bytes), which no copy reads now (its event completed above); the pieces
                // of one chunk are disjoint. An untyped byte copy, so padding bytes of T may be
                // copied.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (src.0 as *const u8).add(off + at),
                        (buf.0 as *mut u8).add(at),
                        n,
                    );
                }
                // (From the source, still in this core's cache: the pinned buffer is
                // write-combined, slow to read.)
                inspect.map(|f| f(piece(off + at, n)))
            })
            .collect();
        results.extend(chunk_results.into_iter().flatten());
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
        "staged upload of {bytes} bytes read in {:.1} ms (device allocation {:.2} ms)",
        t.elapsed().as_secs_f64() * 1e3,
        alloc_s * 1e3
    );
    Ok((dst, results))
}

/// `Ok` where a device buffer of `have` elements holds the `want` a download copies.
pub(crate) fn check_download(have: usize, want: usize) -> Result<(), GpuError> {
    if have < want {
        return Err(GpuError::Invalid(format!(
            "download of {want} elements from a device buffer of {have}"
        )));
    }
    Ok(())
}

/// Copies `src[..dst.len()]` into `dst` on `stream` through `staging` (a download ring, allocated
/// with `layout` on first use): the copy engine fills up to `layout.buffers` chunks ahead while
/// all cores copy each filled chunk out, [`PIECE_BYTES`] a thread. Ordered after the work queued
/// on `stream` before it; returns once `dst` holds every byte. Another thread's download in
/// progress (the ring busy): the driver's pageable copy instead of waiting.
pub(crate) fn download_pieces<T: DeviceRepr>(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    staging: &std::sync::Mutex<Option<Staging>>,
    layout: StagingLayout,
    src: &CudaSlice<T>,
    dst: &mut [T],
) -> Result<(), GpuError> {
    check_download(src.len(), dst.len())?;
    let t = std::time::Instant::now();
    let bytes = std::mem::size_of_val(dst);
    let mut guard = match staging.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            let len = dst.len();
            stream.memcpy_dtoh(&src.slice(..len), dst)?;
            return Ok(stream.synchronize()?);
        }
    };
    let st = match &mut *guard {
        Some(st) => st,
        slot @ None => slot.insert(Staging::for_downloads(ctx, layout)?),
    };
    let chunk = st.layout.chunk_bytes;
    let ring = st.bufs.len();
    let chunks = bytes.div_ceil(chunk);
    let out = Addr(dst.as_mut_ptr() as *mut u8 as usize);
    let (sptr, record) = src.device_ptr(stream);
    // Queues chunk `k` into its buffer and records the buffer's event after it.
    let fill = |st: &mut Staging, k: usize| -> Result<(), GpuError> {
        let (off, h) = (k * chunk, k % ring);
        let len = chunk.min(bytes - off);
        let buf = st.bufs[h].as_mut_ptr()? as *mut std::ffi::c_void;
        // SAFETY: the source range off .. off + len lies inside `src` (at least `bytes` long,
        // checked above); the destination is the first `len` ≤ chunk_bytes bytes of a pinned
        // buffer no host thread touches until the event recorded right after has completed
        // (the copy-out of the chunk before in this buffer finished before this call).
        unsafe { sys::cuMemcpyDtoHAsync_v2(buf, sptr + off as u64, len, stream.cu_stream()) }
            .result()?;
        st.done[h].record(stream)?;
        Ok(())
    };
    for k in 0..chunks.min(ring) {
        fill(st, k)?;
    }
    for k in 0..chunks {
        let (off, h) = (k * chunk, k % ring);
        let len = chunk.min(bytes - off);
        st.done[h].synchronize()?;
        let buf = Addr(st.bufs[h].as_mut_ptr()? as usize);
        (0..len.div_ceil(PIECE_BYTES))
            .into_par_iter()
            .for_each(|p| {
                let at = p * PIECE_BYTES;
                let n = PIECE_BYTES.min(len - at);
                // SAFETY: source bytes at .. at + n lie inside the pinned buffer's first `len`
                // bytes, written by the copy whose event completed above; destination bytes off + at
                // .. off + at + n inside `dst` (off + len ≤ bytes), borrowed mutably by this call;
                // the pieces are disjoint. Any bytes are a valid T (DeviceRepr: plain data, as the
                // driver's own copy assumes).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (buf.0 as *const u8).add(at),
                        (out.0 as *mut u8).add(off + at),
                        n,
                    );
                }
            });
        if k + ring < chunks {
            fill(st, k + ring)?;
        }
    }
    drop(record);
    tracing::debug!(
        "staged download of {bytes} bytes in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{PIECE_BYTES, StagingLayout, check_download};

    #[test]
    fn a_download_longer_than_its_source_is_refused() {
        assert!(check_download(8, 8).is_ok());
        assert!(check_download(9, 8).is_ok());
        let e = check_download(7, 8).unwrap_err().to_string();
        assert!(
            e.contains("download of 8 elements from a device buffer of 7"),
            "{e}"
        );
    }

    #[test]
    fn layouts_out_of_bounds_are_refused() {
        let ok = StagingLayout {
            buffers: 4,
            chunk_bytes: 8 << 20,
        };
        assert!(StagingLayout::DEFAULT.check().is_ok());
        assert!(ok.check().is_ok());
        for bad in [
            StagingLayout { buffers: 1, ..ok },
            StagingLayout { buffers: 65, ..ok },
            StagingLayout {
                chunk_bytes: 128 << 10,
                ..ok
            },
            StagingLayout {
                chunk_bytes: (8 << 20) + (4 << 10),
                ..ok
            },
            StagingLayout {
                buffers: 64,
                chunk_bytes: 16 << 20,
            },
            StagingLayout {
                chunk_bytes: usize::MAX & !(PIECE_BYTES - 1),
                ..ok
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
