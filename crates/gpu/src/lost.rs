//! A lost device: asking a context whether it is still usable ([`Gpu::lost_status`]; after a
//! library reported a failed execution, `sticky_error`), and, for the failure tests, making it
//! unusable on purpose ([`Gpu::poison_with_trap`]).
//!
//! A kernel fault (`trap`, an illegal address, …) or a lost device leaves a CUDA context
//! unusable: the driver returns the same "sticky" status from every later call on it
//! ([`crate::driver_error_kind`] lists them as [`crate::GpuErrorKind::DeviceLost`]), and a driver
//! status of that class converts to [`GpuError::DeviceLost`]. cuSPARSE and cuBLAS report such a
//! failure as their own "execution failed" or "internal error"; `sticky_error` tells the two
//! apart. Dropping buffers, modules, streams and library handles on a lost context is safe:
//! cudarc records the failed frees in the context instead of panicking, this crate's own
//! wrappers ignore them, and a cuBLAS handle (whose cudarc `Drop` unwraps `cublasDestroy`) is
//! left undestroyed there.

use cudarc::driver::{DriverError, sys};

use crate::launch::{Shape, launch_checked};
use crate::{Gpu, GpuError, GpuErrorKind};

/// The status that leaves the calling thread's current CUDA context unusable, if it has one
/// (`cuCtxSynchronize`, which waits for the context's queued work first); `None` without a
/// driver, without a current context, or when the context is fine. Asked only on an error path.
pub(crate) fn sticky_error() -> Option<DriverError> {
    // SAFETY: only tries to dlopen libcuda by its usual names; no driver call is made.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    match cudarc::driver::result::ctx::synchronize() {
        Err(e) if crate::driver_error_kind(&e) == GpuErrorKind::DeviceLost => Some(e),
        _ => None,
    }
}

/// A kernel that executes `trap;` (PTX ISA 7.0, so that every driver of this crate's CUDA
/// version JIT-compiles it for the device at hand).
const TRAP_PTX: &str = "\
.version 7.0
.target sm_52
.address_size 64

.visible .entry tcsparse_trap()
{
\ttrap;
\tret;
}
";

/// The trap kernel's entry name (it takes no parameters).
const TRAP_NAME: &str = "tcsparse_trap";

impl Gpu {
    /// The status that left this handle's CUDA context unusable, `None` while it is usable.
    /// Binds the context to the calling thread and waits for its queued work
    /// (`cuCtxSynchronize`).
    pub fn lost_status(&self) -> Option<DriverError> {
        let lost = |e: DriverError| {
            (crate::driver_error_kind(&e) == GpuErrorKind::DeviceLost).then_some(e)
        };
        // SAFETY: the context is live (this handle holds it); making it current changes only
        // which context this thread's later driver calls use, and every call of this crate binds
        // its own first.
        if let Err(e) = unsafe { cudarc::driver::result::ctx::set_current(self.context().cu_ctx()) }
        {
            return lost(e);
        }
        sticky_error()
    }

    /// Non-blocking check of [`Gpu::stream`] after a vendor library queued work on it: a
    /// [`GpuError::DeviceLost`] when its context has a sticky fault (cuSPARSE queues kernels on a
    /// lost context and still reports success), `Ok` while the context works, queued work
    /// included (`cuStreamQuery`, which never waits). A capturing stream is not queried (the
    /// query would end the capture): `Ok`.
    pub fn stream_fault(&self) -> Result<(), GpuError> {
        let stream = self.stream();
        if stream.capture_status()? != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
            return Ok(());
        }
        // SAFETY: the stream is this handle's live stream; cuStreamQuery only reads its state.
        match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
            sys::cudaError_enum::CUDA_SUCCESS | sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(()),
            e => Err(DriverError(e).into()),
        }
    }

    /// Makes this handle's CUDA context unusable, for tests of what a lost device returns: runs
    /// one thread of a kernel that executes `trap;` on [`Gpu::stream`] and waits for it. Returns
    /// the status the wait reported (a [`GpuError::DeviceLost`]; the driver documents
    /// `CUDA_ERROR_LAUNCH_FAILED` for a trap); an error when the kernel could not be loaded or
    /// launched, or when it completed without a fault.
    ///
    /// Every later call on the context fails, in every handle and clone of this process that
    /// shares it (device 0's primary context for [`Gpu::require`]): run this only in a test
    /// binary of its own.
    #[doc(hidden)]
    pub fn poison_with_trap(&self) -> Result<GpuError, GpuError> {
        let ctx = self.context();
        ctx.bind_to_thread()?;
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(TRAP_PTX))?;
        let func = module.load_function(TRAP_NAME)?;
        // SAFETY: the kernel takes no parameters (an empty list) and touches no memory;
        // the stream is this handle's live stream, of the context just bound.
        unsafe {
            launch_checked(
                &func,
                TRAP_NAME,
                &[],
                Shape {
                    grid: (1, 1, 1),
                    block: (1, 1, 1),
                    shared_bytes: 0,
                },
                self.stream().cu_stream(),
                &[],
            )
        }?;
        match self.synchronize() {
            Err(e) => Ok(e),
            Ok(()) => Err(GpuError::Invalid(
                "the trap kernel completed without a fault".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trap_kernel_is_one_entry_without_parameters() {
        assert!(TRAP_PTX.contains(&format!(".visible .entry {TRAP_NAME}()\n")));
        assert_eq!(TRAP_PTX.matches(".entry").count(), 1);
        assert!(TRAP_PTX.contains("\ttrap;"));
    }

    #[test]
    fn no_driver_or_context_is_no_sticky_error() {
        // Without libcuda there is nothing to ask; with it, this test thread has no current
        // context (or a healthy one), so the answer is the same.
        assert_eq!(sticky_error(), None);
    }
}
