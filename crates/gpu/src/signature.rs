//! Expected kernel signatures: each launch module declares the `.entry` parameter list it passes, and
//! a CPU test compares that table with the embedded PTX (so a changed `.cu` cannot silently
//! desynchronise from its Rust launch code).

use crate::KernelModule;

/// Kind of one kernel argument as the launch code passes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// A device pointer (`.u64`).
    Ptr,
    /// `unsigned int` (`.u32`).
    U32,
    /// `int` (`.s32`).
    I32,
    /// `unsigned long long` (`.u64`).
    U64,
    /// `float` (`.f32`).
    F32,
}

impl ParamKind {
    /// The PTX type name (without the dot) NVRTC writes in `.param` declarations.
    pub fn ptx_type(self) -> &'static str {
        match self {
            ParamKind::Ptr | ParamKind::U64 => "u64",
            ParamKind::U32 => "u32",
            ParamKind::I32 => "s32",
            ParamKind::F32 => "f32",
        }
    }
}

/// `head` followed by `tail`, not both empty (parameter lists that share a prefix or suffix,
/// signature tables built in parts; `N` = the two lengths together, checked at compile time when
/// used in a `const`).
pub const fn concat<T: Copy, const N: usize>(head: &[T], tail: &[T]) -> [T; N] {
    assert!(head.len() + tail.len() == N);
    let mut p = [if head.is_empty() { tail[0] } else { head[0] }; N];
    let mut i = 0;
    while i < N {
        p[i] = if i < head.len() {
            head[i]
        } else {
            tail[i - head.len()]
        };
        i += 1;
    }
    p
}

/// One kernel as the launch code expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSignature {
    /// Module holding the kernel.
    pub module: KernelModule,
    /// `extern "C"` name.
    pub name: &'static str,
    /// Parameters in order.
    pub params: &'static [ParamKind],
}
