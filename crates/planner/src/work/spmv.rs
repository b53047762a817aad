//! The bitBSR SpMV kernels' work list: warp items of two halves over tile-rows.
//!
//! Defined in `tcsparse_formats::bitbsr_device` beside the device encoding, because the CPU walk
//! of the kernels there (`DeviceBitBsr::spmv_cpu`) reads it and `tcsparse-formats` sits below the
//! planner; this is its place in the planner's vocabulary.

pub use tcsparse_formats::bitbsr_device::{
    MAX_ROWS_PER_HALF, SPLIT_BIT, SpmvWork, half_fields, spmv_work,
};
