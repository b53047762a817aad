//! The device's stream-ordered memory pool (`cuMemAllocAsync`, which every allocation of this
//! crate goes through where the device supports it): how much it keeps between allocations.
//!
//! By default the pool returns every byte it does not hold for a live allocation to the driver at
//! the next synchronisation (release threshold 0). A new process then pays for mapping fresh
//! device memory on each large allocation: 0.1–0.7 ms each for the 4–45 MB arrays of R-MAT scale
//! 20 on the H200, 0.6–1.4 ms of a 5–7 ms plan-cache hit. [`grow_and_keep`] maps it ahead of time.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, sys};

use crate::GpuError;

/// What [`Gpu::reserve_device_memory`](crate::Gpu::reserve_device_memory) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolReserve {
    /// Bytes asked for (after the cap).
    pub bytes: usize,
    /// The pool's release threshold afterwards, in bytes (never lowered).
    pub release_threshold: u64,
    /// Device memory the pool holds afterwards, in bytes (live allocations and kept ones).
    pub reserved: u64,
}

/// Keeps up to `bytes` of freed device memory in `ctx`'s current memory pool (raises its release
/// threshold to at least `bytes`; never lowers it) and grows the pool to that size now, with one
/// allocation on `stream` that is freed again (waits for the stream). `bytes` is capped at half of
/// the device's free memory, so the reservation never takes what the caller's work needs. `None`
/// where the device has no memory pools (allocations then go through `cuMemAlloc`, which keeps
/// nothing) or `bytes` is 0.
pub(crate) fn grow_and_keep(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    bytes: usize,
) -> Result<Option<PoolReserve>, GpuError> {
    if !ctx.has_async_alloc() || bytes == 0 {
        return Ok(None);
    }
    ctx.bind_to_thread()?;
    let (free, _) = ctx.mem_get_info()?;
    let bytes = bytes.min(free / 2);
    if bytes == 0 {
        return Ok(None);
    }
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer; the device handle comes from a live context bound to
    // this thread.
    unsafe { sys::cuDeviceGetMemPool(&mut pool, ctx.cu_device()) }.result()?;
    let threshold = get_u64(
        pool,
        sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
    )?;
    let wanted = threshold.max(bytes as u64);
    if wanted != threshold {
        let mut value = wanted;
        // SAFETY: the release threshold is a cuuint64_t attribute and `value` is a live u64; the
        // pool handle was returned by the driver above.
        unsafe {
            sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut value as *mut u64).cast(),
            )
        }
        .result()?;
    }
    // SAFETY: the buffer is never read or written, only allocated (from the pool) and freed.
    let grown = unsafe { stream.alloc::<u8>(bytes) }?;
    drop(grown);
    stream.synchronize()?;
    Ok(Some(PoolReserve {
        bytes,
        release_threshold: wanted,
        reserved: get_u64(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
        )?,
    }))
}

/// A u64 attribute of a memory pool (the threshold and the memory counters are `cuuint64_t`).
fn get_u64(pool: sys::CUmemoryPool, attr: sys::CUmemPool_attribute) -> Result<u64, GpuError> {
    let mut value = 0u64;
    // SAFETY: `attr` is one of the pool's cuuint64_t attributes (the callers pass the release
    // threshold or a memory counter) and `value` is a live u64 out-location.
    unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&mut value as *mut u64).cast()) }.result()?;
    Ok(value)
}
