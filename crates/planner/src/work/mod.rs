//! Work lists: how the rows of a matrix are cut into the items one thread block, warp or MMA half
//! executes. One vocabulary for every kernel:
//!
//! * A matrix is a sequence of **rows** (CSR rows, 8- or 16-row windows, 8-row tile-rows), each
//!   holding a contiguous range of **units** (nonzeros, TC blocks, tiles) given by a prefix array
//!   (`indptr`, `row_window_offset`, `tile_row_ptr`).
//! * An **item** is either a run of whole consecutive rows whose units fit a **budget**, or one
//!   **chunk** of a row longer than the budget. Every unit lies in exactly one item, every row in
//!   some item, items in row order.
//! * A row held in several chunks is **split**: its chunks accumulate, with atomics after a β
//!   pre-scale of just those rows ([`csr`], [`flat`]) or into partial slots a fix-up sums
//!   ([`spmv`]).
//!
//! | kernel | rows, units | builder | list |
//! |---|---|---|---|
//! | CSR SpMM, CSR SpMV walk | CSR rows, nonzeros | [`csr::csr_work`] | [`csr::CsrWork`] |
//! | Acc-SpMM, row-tile | windows, TC blocks | [`acc::AccSchedule`] (unbalanced, packed, Eq. 4) | [`flat::FlatSchedule`] ([`flat::flatten_acc_schedule`]) |
//! | HRPB | 16-row panels, blocks | [`wave::wave_split`] (cuTeSpMM Eq. 6–7) | [`wave::WaveSplit`] |
//! | bitBSR SpMV | tile-rows, tiles | [`spmv::spmv_work`] ([`wave::spmv_wave_chunk`] picks the budget) | [`spmv::SpmvWork`] |
//!
//! Every list is checked before a kernel indexes device memory with it (`AccSchedule::validate`,
//! [`flat::flatten_schedule`], `SpmvWork::check`; `csr_work` builds only what its tests prove).

pub mod acc;
pub mod csr;
pub mod flat;
pub mod spmv;
pub mod wave;
