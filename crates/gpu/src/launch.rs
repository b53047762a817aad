//! The one way this crate launches a kernel. `launch_checked` is the only call of the driver's
//! `cuLaunchKernel`: arguments are passed by value as [`Arg`]s and checked against the kernel's
//! parameter list from the signature tables ([`crate::signature`], themselves checked against the
//! PTX by a CPU test) before the driver sees them, so an argument list cannot drift from the
//! kernel's in count or kind. It queues on a raw stream (the graph-capture streams of
//! [`crate::spmv::graph`] are not cudarc's); `Launch` is its front for a cudarc stream, holding
//! the stream-order guards of the device buffers it borrows until the kernel is queued.

use std::ffi::c_void;

use cudarc::driver::{CudaFunction, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop, result, sys};

use crate::{GpuError, KernelSignature, ParamKind};

/// Most arguments one launch passes.
pub const MAX_ARGS: usize = 24;

/// One kernel argument, by value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A device pointer (`.u64`).
    Ptr(u64),
    /// `unsigned int`.
    U32(u32),
    /// `int`.
    I32(i32),
    /// `unsigned long long`.
    U64(u64),
    /// `float`.
    F32(f32),
}

impl Arg {
    /// The parameter kind this argument fills.
    pub fn kind(self) -> ParamKind {
        match self {
            Arg::Ptr(_) => ParamKind::Ptr,
            Arg::U32(_) => ParamKind::U32,
            Arg::I32(_) => ParamKind::I32,
            Arg::U64(_) => ParamKind::U64,
            Arg::F32(_) => ParamKind::F32,
        }
    }

    fn as_param(&mut self) -> *mut c_void {
        match self {
            Arg::Ptr(v) | Arg::U64(v) => v as *mut u64 as *mut c_void,
            Arg::U32(v) => v as *mut u32 as *mut c_void,
            Arg::I32(v) => v as *mut i32 as *mut c_void,
            Arg::F32(v) => v as *mut f32 as *mut c_void,
        }
    }
}

/// `args` fill `params` exactly (count and kind, in order), else [`GpuError::Invalid`] naming
/// `name` and the first mismatch.
pub fn check_args(name: &str, params: &[ParamKind], args: &[Arg]) -> Result<(), GpuError> {
    if args.len() != params.len() || args.len() > MAX_ARGS {
        return Err(GpuError::Invalid(format!(
            "{name}: {} arguments for {} parameters",
            args.len(),
            params.len()
        )));
    }
    match params.iter().zip(args).position(|(p, a)| *p != a.kind()) {
        None => Ok(()),
        Some(i) => Err(GpuError::Invalid(format!(
            "{name}: argument {i} is {:?}, the kernel takes {:?}",
            args[i].kind(),
            params[i]
        ))),
    }
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Grid dimensions.
    pub grid: (u32, u32, u32),
    /// Block dimensions.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory in bytes.
    pub shared_bytes: u32,
}

impl Shape {
    /// One thread per element of a 1-D range of `threads`, in blocks of 256 (the kernel's extra
    /// threads in the last block exit), no dynamic shared memory.
    pub fn per_thread(threads: u64) -> Shape {
        Shape {
            grid: (threads.div_ceil(256) as u32, 1, 1),
            block: (256, 1, 1),
            shared_bytes: 0,
        }
    }

    /// `blocks` thread blocks of `warps` warps each (block `(32, warps, 1)`), no dynamic shared
    /// memory.
    pub fn warps(blocks: u32, warps: u32) -> Shape {
        Shape {
            grid: (blocks, 1, 1),
            block: (32, warps, 1),
            shared_bytes: 0,
        }
    }
}

/// Launches `func` (entry `name`, parameters `params`) on `stream` with `args`, after
/// [`check_args`].
///
/// # Safety
/// cudarc's launch conditions beyond the argument list: `params` is the kernel's real parameter
/// list (a signature table entry), every pointer argument points at device memory of `stream`'s
/// context that holds what the kernel reads and writes at this shape, nothing else writes it
/// until the kernel completes, and `stream` is a live stream of that context.
pub(crate) unsafe fn launch_checked(
    func: &CudaFunction,
    name: &str,
    params: &[ParamKind],
    shape: Shape,
    stream: sys::CUstream,
    args: &[Arg],
) -> Result<(), GpuError> {
    check_args(name, params, args)?;
    let mut vals = [Arg::U32(0); MAX_ARGS];
    vals[..args.len()].copy_from_slice(args);
    let mut ptrs = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
    for (p, v) in ptrs.iter_mut().zip(vals.iter_mut()).take(args.len()) {
        *p = v.as_param();
    }
    // SAFETY: each pointer in `ptrs[..len]` points at a live argument value in `vals` (both live
    // until the call returns; the driver copies the values at launch), of the kind the kernel's
    // parameter at that position takes (checked above against `params`, the caller's promise for
    // the kernel's list); the rest is the caller's contract.
    unsafe {
        result::launch_kernel(
            func.cu_function(),
            shape.grid,
            shape.block,
            shape.shared_bytes,
            stream,
            &mut ptrs[..args.len()],
        )
    }?;
    Ok(())
}

impl From<Shape> for cudarc::driver::LaunchConfig {
    fn from(s: Shape) -> Self {
        Self {
            grid_dim: s.grid,
            block_dim: s.block,
            shared_mem_bytes: s.shared_bytes,
        }
    }
}

impl From<cudarc::driver::LaunchConfig> for Shape {
    fn from(c: cudarc::driver::LaunchConfig) -> Self {
        Self {
            grid: c.grid_dim,
            block: c.block_dim,
            shared_bytes: c.shared_mem_bytes,
        }
    }
}

/// One launch of `sig`'s kernel on a cudarc stream: device buffers are borrowed with
/// [`Launch::input`] / [`Launch::output`] (or [`Launch::borrow`] / [`Launch::borrow_mut`] where the
/// launch needs the address itself, e.g. for an alignment flag), whose stream-order guards are
/// held until the kernel is queued, as cudarc's launch builder does; scalars by value. The
/// argument list is checked against `sig` by [`launch_checked`] when launched.
pub(crate) struct Launch<'a> {
    stream: &'a CudaStream,
    func: &'a CudaFunction,
    sig: &'a KernelSignature,
    args: [Arg; MAX_ARGS],
    len: usize,
    /// More arguments than [`MAX_ARGS`] were pushed (refused at launch).
    overflow: bool,
    guards: Vec<SyncOnDrop<'a>>,
}

impl<'a> Launch<'a> {
    /// A launch of `func`, the kernel `sig` describes (an entry of its module's signature table).
    pub fn new(stream: &'a CudaStream, func: &'a CudaFunction, sig: &'a KernelSignature) -> Self {
        Self {
            stream,
            func,
            sig,
            args: [Arg::U32(0); MAX_ARGS],
            len: 0,
            overflow: false,
            guards: Vec::with_capacity(sig.params.len()),
        }
    }

    /// Appends one argument by value.
    pub fn arg(&mut self, a: Arg) -> &mut Self {
        match self.args.get_mut(self.len) {
            Some(slot) => {
                *slot = a;
                self.len += 1;
            }
            None => self.overflow = true,
        }
        self
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.arg(Arg::U32(v))
    }

    /// Appends an `f32`.
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.arg(Arg::F32(v))
    }

    /// Appends B and C by address with their leading dimensions, in the order the SpMM kernels
    /// take them (`B, ldb, C, ldc`); the addresses come from [`Launch::borrow`] and
    /// [`Launch::borrow_mut`].
    pub fn dense_operands(&mut self, b: u64, ldb: u32, c: u64, ldc: u32) -> &mut Self {
        self.arg(Arg::Ptr(b)).u32(ldb).arg(Arg::Ptr(c)).u32(ldc)
    }

    /// The address of `buf`, read by the kernel: the stream waits for earlier writes of it, and
    /// the read is recorded once the kernel is queued.
    pub fn borrow<T, B: DevicePtr<T> + ?Sized>(&mut self, buf: &'a B) -> u64 {
        let (p, g) = buf.device_ptr(self.stream);
        self.guards.push(g);
        p
    }

    /// The address of `buf`, written by the kernel: the stream waits for earlier work on it, and
    /// the write is recorded once the kernel is queued.
    pub fn borrow_mut<T, B: DevicePtrMut<T> + ?Sized>(&mut self, buf: &'a mut B) -> u64 {
        let (p, g) = buf.device_ptr_mut(self.stream);
        self.guards.push(g);
        p
    }

    /// Appends the address of `buf`, read by the kernel ([`Launch::borrow`]).
    pub fn input<T, B: DevicePtr<T> + ?Sized>(&mut self, buf: &'a B) -> &mut Self {
        let p = self.borrow(buf);
        self.arg(Arg::Ptr(p))
    }

    /// Appends the address of `buf`, written by the kernel ([`Launch::borrow_mut`]).
    pub fn output<T, B: DevicePtrMut<T> + ?Sized>(&mut self, buf: &'a mut B) -> &mut Self {
        let p = self.borrow_mut(buf);
        self.arg(Arg::Ptr(p))
    }

    /// Queues the kernel at `shape` on the stream, after [`check_args`] against the signature.
    ///
    /// # Safety
    /// cudarc's launch conditions beyond the argument list ([`launch_checked`]): `func` is the
    /// kernel `sig` describes, every buffer holds what the kernel reads and writes at this shape
    /// (the caller's bounds checks), and no buffer written is also passed as read.
    pub unsafe fn launch(self, shape: Shape) -> Result<(), GpuError> {
        if self.overflow {
            return Err(GpuError::Invalid(format!(
                "{}: more than {MAX_ARGS} arguments",
                self.sig.name
            )));
        }
        self.stream.context().bind_to_thread()?;
        // SAFETY: the stream is a live cudarc stream whose context was just bound; every pointer
        // argument was borrowed on it with its guard held until after this call; the rest is
        // the caller's contract.
        unsafe {
            launch_checked(
                self.func,
                self.sig.name,
                self.sig.params,
                shape,
                self.stream.cu_stream(),
                &self.args[..self.len],
            )
        }
        // (The guards drop here, after the kernel is queued, recording its reads and writes.)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_thread_shapes_cover_every_thread_with_the_fewest_blocks() {
        for (threads, blocks) in [(0u64, 0u32), (1, 1), (256, 1), (257, 2), (8 * 256 * 3, 24)] {
            let s = Shape::per_thread(threads);
            assert_eq!(
                (s.grid, s.block, s.shared_bytes),
                ((blocks, 1, 1), (256, 1, 1), 0)
            );
        }
        let w = Shape::warps(5, 8);
        assert_eq!(
            (w.grid, w.block, w.shared_bytes),
            ((5, 1, 1), (32, 8, 1), 0)
        );
    }

    #[test]
    fn arguments_must_fill_the_parameters_exactly() {
        let params = [ParamKind::Ptr, ParamKind::U32, ParamKind::F32];
        assert!(check_args("k", &params, &[Arg::Ptr(8), Arg::U32(1), Arg::F32(0.5)]).is_ok());
        let short = check_args("k", &params, &[Arg::Ptr(8), Arg::U32(1)]).unwrap_err();
        assert!(
            short.to_string().contains("2 arguments for 3 parameters"),
            "{short}"
        );
        let swapped = check_args("k", &params, &[Arg::Ptr(8), Arg::F32(0.5), Arg::U32(1)]);
        let e = swapped.unwrap_err().to_string();
        assert!(e.contains("argument 1 is F32, the kernel takes U32"), "{e}");
        // A pointer is not a u64 count, even though both are 8 bytes.
        assert!(check_args("k", &[ParamKind::U64], &[Arg::Ptr(0)]).is_err());
        let too_many = vec![Arg::U32(0); MAX_ARGS + 1];
        assert!(check_args("k", &[ParamKind::U32; MAX_ARGS + 1], &too_many).is_err());
    }

    #[test]
    fn parameter_pointers_address_the_values() {
        let mut vals = [
            Arg::Ptr(7),
            Arg::U32(3),
            Arg::I32(-2),
            Arg::U64(9),
            Arg::F32(1.5),
        ];
        // SAFETY: each pointer is read as the type its variant holds.
        unsafe {
            assert_eq!(*(vals[0].as_param() as *const u64), 7);
            assert_eq!(*(vals[1].as_param() as *const u32), 3);
            assert_eq!(*(vals[2].as_param() as *const i32), -2);
            assert_eq!(*(vals[3].as_param() as *const u64), 9);
            assert_eq!(*(vals[4].as_param() as *const f32), 1.5);
        }
    }
}
