//! `tcsparse-formats`: every sparse layout the tcsparse kernels read, and the CPU side around them.
//!
//! * Input: [`mtx`] (Matrix Market, plain or gzip, parsed in parallel), [`npz`] (scipy CSR `.npz`),
//!   [`generate`] (seeded generators), [`stats`] (row-length statistics); every file is opened
//!   through [`file`] (regular files only, read with a size limit).
//! * Layouts, each keeping the [`layout::Layout`] contract (built from CSR in parallel, converted
//!   back exactly, validated, multiplied on the CPU the way its kernel walks it): [`bittcf`] (Acc-SpMM),
//!   [`metcf`] (DTC-SpMM), [`rowtile`] (ME-TCF blocks with tile masks, 16/32-row windows), [`tcf`] (TC-GNN, for compression ratios), [`hrpb`] (cuTeSpMM),
//!   [`bitbsr`] (Spaden), [`staged`] (window-staged CSR, the staged SpMM kernel's); besides them [`normmap`] (cuSpAMM's dense tile norms).
//! * [`metrics`] per layout, a versioned on-disk [`cache`], f64 [`reference`](mod@reference) products and
//!   the pattern products of an SpMM's gradient ([`sddmm`](mod@sddmm)).
//!
//! The crate never touches CUDA: it builds and tests on any machine.
//!
//! The common matrix type is [`Csr`]: a checked wrapper of `sprs::CsMatI<f32, u32>` (CSR storage,
//! offsets from 0, sorted, duplicate-free rows). Whatever scales with a declared size is checked
//! against a memory budget first ([`limits`]).

pub mod bitbsr;
pub mod bitbsr_device;
pub mod bittcf;
pub mod cache;
pub mod csr;
pub mod file;
pub mod generate;
pub mod hrpb;
pub mod layout;
pub mod limits;
pub mod metcf;
pub mod metrics;
pub mod mtx;
pub mod normmap;
pub mod npz;
pub mod reference;
pub mod rowtile;
pub mod sddmm;
pub mod staged;
pub mod stats;
pub mod tcf;
mod windowed;

pub use csr::{Csr, CsrError};
pub use limits::{BudgetError, Limits};
/// The sprs version [`Csr`] wraps, so callers build the matrices `Csr::try_from` takes without
/// pinning it themselves.
pub use sprs;
