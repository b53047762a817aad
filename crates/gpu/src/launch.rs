//! One raw launch helper for kernels queued on streams cudarc does not own (graph capture:
//! [`crate::spmv::graph`]): arguments are passed by value as [`Arg`]s and checked against the
//! kernel's parameter list from the signature tables ([`crate::signature`], themselves checked
//! against the PTX by a CPU test) before the driver sees them, so an argument list cannot drift
//! from the kernel's in count or kind.

use std::ffi::c_void;

use cudarc::driver::{CudaFunction, result, sys};

use crate::{GpuError, ParamKind};

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

#[cfg(test)]
mod tests {
    use super::*;

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
