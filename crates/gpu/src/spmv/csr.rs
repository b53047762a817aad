//! The CSR walk for 2 to 8 right-hand sides (`spmv_csr{n}` in `kernels-ptx/spmv.cu`): `y = α·A·X +
//! β·y` on A's CSR arrays, X (`K × n`) and y (`M × n`) row-major f32.
//!
//! Where bitBSR's 8×8 tiles hold one to five nonzeros (graphs), a tile walk reads a 16-byte record
//! for as few products and its set-bit loops idle most lanes; this walk gives each nonzero a group
//! of 8 lanes, lane j multiplying right-hand side j (one 32-byte X row per nonzero, four nonzeros
//! per warp step). Work is balanced by nonzeros with the CSR SpMM's warp items
//! ([`csr_work`]: up to 32 whole rows within a nonzero budget, or one chunk of a longer row). A row
//! is summed in a fixed order (each lane group's nonzeros in order, then the four groups in order),
//! written once; a split row's chunks write α-scaled partial sums that `spmv_csr_fixup` (a second
//! kernel node, only when some row is split) adds in item order before writing y once. With β = 0,
//! y is never read.
//!
//! Two walks share the items, the arrays and the fix-up ([`CsrWalk`]): the step walk above
//! (`spmv_csr{n}`: the four groups take consecutive nonzeros of each 32 whatever their rows, runs of
//! a row summed into shared memory) and the row walk (`spmv_csrrows{n}`: an item's rows cut into
//! four row-aligned runs of about equal nonzeros, each group summing its rows in a register and
//! writing each once; a one-row item summed by the whole warp). The tunings time both at every
//! budget.
//!
//! [`CsrSpmv::new`] shares an uploaded [`DeviceCsr`] (the one the cuSPARSE baseline reads too,
//! [`crate::baselines::cusparse::CusparseCsr::device`]: no second upload) and packs the
//! work list; it is a [`crate::DeviceProduct`] whose calls can also be timed inside CUDA graphs
//! ([`super::graph::time_spmv`]).

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaFunction, CudaSlice};
use tcsparse_formats::Csr;

use super::graph::RawCall;
use super::{MAX_RHS, WARPS_PER_BLOCK, ptr_of};
use crate::device_csr::DeviceCsr;
use crate::launch::{Arg, Shape, launch_checked};
use crate::schedule::upload_nonempty;
use crate::spmm::csr::csr_work;
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// The nonzero budgets per warp item the tunings time (`csr_work`'s `chunk_nnz`).
pub const CSR_CHUNKS: [u32; 3] = [32, 64, 256];
/// `spmv_csr_fixup` entry (in `spmv.ptx`).
pub const ENTRY_CSR_FIXUP: &str = "spmv_csr_fixup";
/// The step walk's entry for `n` right-hand sides, index n − 2 (`spmv_csr{n}` in `spmv_n{n}.ptx`).
pub const CSR_ENTRIES: [&str; MAX_RHS - 1] = [
    "spmv_csr2",
    "spmv_csr3",
    "spmv_csr4",
    "spmv_csr5",
    "spmv_csr6",
    "spmv_csr7",
    "spmv_csr8",
];
/// The row walk's entry for `n` right-hand sides, index n − 2 (`spmv_csrrows{n}` in
/// `spmv_n{n}.ptx`).
pub const CSR_ROWS_ENTRIES: [&str; MAX_RHS - 1] = [
    "spmv_csrrows2",
    "spmv_csrrows3",
    "spmv_csrrows4",
    "spmv_csrrows5",
    "spmv_csrrows6",
    "spmv_csrrows7",
    "spmv_csrrows8",
];

/// How a warp item's nonzeros are spread over its four lane groups (same items, arrays, results
/// up to summation order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CsrWalk {
    /// `spmv_csr{n}`: each group takes 8 consecutive nonzeros of each 32, whatever their rows; a
    /// binary search of the row ends finds each nonzero's row and runs of one row are added to
    /// per-group row sums in shared memory (docs/kernels/spmv.md v14: the CSR walk's v3).
    #[default]
    Steps,
    /// `spmv_csrrows{n}`: the item's rows cut at row ends into four runs of about a quarter of
    /// its nonzeros, group g summing run g's rows one after another in a register (spmv.md v15).
    Rows,
}

impl CsrWalk {
    /// Both walks, in the order the tunings time them.
    pub const ALL: [CsrWalk; 2] = [CsrWalk::Steps, CsrWalk::Rows];

    /// The walk's entry for `n` right-hand sides (2..=[`MAX_RHS`]).
    pub fn entry(self, n: usize) -> Result<&'static str, GpuError> {
        if !(2..=MAX_RHS).contains(&n) {
            return Err(GpuError::Invalid(format!(
                "the CSR walk serves 2..={MAX_RHS} right-hand sides, not {n}"
            )));
        }
        Ok(match self {
            CsrWalk::Steps => CSR_ENTRIES[n - 2],
            CsrWalk::Rows => CSR_ROWS_ENTRIES[n - 2],
        })
    }

    /// A short name for plans and logs (`steps`, `rows`).
    pub fn name(self) -> &'static str {
        match self {
            CsrWalk::Steps => "steps",
            CsrWalk::Rows => "rows",
        }
    }
}

const CSR_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // indptr (u32, rows + 1)
    ParamKind::Ptr, // indices (u32, nnz)
    ParamKind::Ptr, // values (f32, nnz)
    ParamKind::Ptr, // work (uint4 per item)
    ParamKind::U32, // items
    ParamKind::Ptr, // x
    ParamKind::Ptr, // y
    ParamKind::Ptr, // partial (f32, items · n)
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
];

/// `spmv_csr_fixup`'s parameters.
const CSR_FIXUP_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // fix ({row, first item, end item} per split row)
    ParamKind::U32, // num_fix
    ParamKind::Ptr, // partial
    ParamKind::Ptr, // y
    ParamKind::U32, // n
    ParamKind::F32, // beta
];

/// The `.entry` signatures of the CSR walk (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &{
    let mut s = [KernelSignature {
        module: KernelModule::Spmv,
        name: ENTRY_CSR_FIXUP,
        params: CSR_FIXUP_PARAMS,
    }; 2 * MAX_RHS - 1];
    let mut i = 0;
    while i < MAX_RHS - 1 {
        s[i + 1] = KernelSignature {
            module: KernelModule::spmv_for_rhs(i + 2),
            name: CSR_ENTRIES[i],
            params: CSR_PARAMS,
        };
        s[i + MAX_RHS] = KernelSignature {
            module: KernelModule::spmv_for_rhs(i + 2),
            name: CSR_ROWS_ENTRIES[i],
            params: CSR_PARAMS,
        };
        i += 1;
    }
    s
};

/// A CSR matrix on the GPU with the CSR walk's work list for one nonzero budget.
pub struct CsrSpmv {
    gpu: Gpu,
    a: Arc<DeviceCsr>,
    /// Host row offsets (the work list is repacked by [`CsrSpmv::set_chunk`]).
    row_offsets: Vec<u32>,
    chunk: u32,
    walk: CsrWalk,
    work: CsrWalkWork,
    /// Loaded entries, `[walk][n − 2]` (walk: the index in [`CsrWalk::ALL`]).
    walks: [[OnceLock<CudaFunction>; MAX_RHS - 1]; CsrWalk::ALL.len()],
    fixup: CudaFunction,
}

/// The device work list of one budget.
struct CsrWalkWork {
    /// `{row_begin, row_end, nnz_begin, nnz_end}` per item.
    items: CudaSlice<u32>,
    num_items: u32,
    /// `{row, first item, end item}` per split row.
    fix: CudaSlice<u32>,
    num_fix: u32,
    /// `items · MAX_RHS` floats: a split chunk's α-scaled sums (item-major).
    partial: CudaSlice<f32>,
}

impl CsrWalkWork {
    fn pack(gpu: &Gpu, row_offsets: &[u32], chunk: u32) -> Result<Self, GpuError> {
        let w = csr_work(row_offsets, chunk);
        let num_items = u32::try_from(w.items.len())
            .map_err(|_| GpuError::Invalid("more CSR warp items than u32 counts".into()))?;
        let fix = split_fixes(row_offsets, &w.items);
        let num_fix = (fix.len() / 3) as u32;
        let partial_len = if num_fix > 0 {
            w.items.len() * MAX_RHS
        } else {
            1
        };
        Ok(Self {
            items: upload_nonempty(gpu, w.items.as_flattened())?,
            num_items,
            fix: upload_nonempty(gpu, &fix)?,
            num_fix,
            partial: gpu.alloc_zeros(partial_len)?,
        })
    }
}

/// `{row, first item, end item}` for each row split over several of `items` (csr_work's items over
/// row offsets `row_offsets`): the single-row items that miss some of their row's nonzeros, whose
/// chunks are consecutive (csr_work walks rows in order). The kernel tells a split chunk the same
/// way.
fn split_fixes(row_offsets: &[u32], items: &[[u32; 4]]) -> Vec<u32> {
    let mut fix = Vec::new();
    let mut i = 0usize;
    while i < items.len() {
        let [rb, re, nb, ne] = items[i];
        let (lo, hi) = (row_offsets[rb as usize], row_offsets[rb as usize + 1]);
        if re == rb + 1 && (nb > lo || ne < hi) {
            let first = i;
            while i < items.len() && items[i][0] == rb && items[i][1] == re {
                i += 1;
            }
            fix.extend_from_slice(&[rb, first as u32, i as u32]);
        } else {
            i += 1;
        }
    }
    fix
}

impl CsrSpmv {
    /// The CSR walk ([`CsrWalk::Steps`]; [`CsrSpmv::set_walk`] changes it) over `ca` (the upload
    /// of `a`: shapes checked) with nonzero budget `chunk_nnz` per warp item (0 is taken as 1).
    pub fn new(gpu: &Gpu, a: &Csr, ca: &Arc<DeviceCsr>, chunk_nnz: u32) -> Result<Self, GpuError> {
        if (a.rows(), a.cols(), a.nnz()) != (ca.rows(), ca.cols(), ca.nnz()) {
            return Err(GpuError::Invalid(format!(
                "CSR walk: a {}×{} matrix with {} nonzeros, device arrays of {}×{} with {}",
                a.rows(),
                a.cols(),
                a.nnz(),
                ca.rows(),
                ca.cols(),
                ca.nnz()
            )));
        }
        if u32::try_from(a.nnz()).is_err() || u32::try_from(a.rows()).is_err() {
            return Err(GpuError::Invalid(
                "CSR walk: rows and nonzeros must fit u32".into(),
            ));
        }
        let chunk = chunk_nnz.max(1);
        let row_offsets = a.row_offsets().to_vec();
        let work = CsrWalkWork::pack(gpu, &row_offsets, chunk)?;
        let fixup = gpu.function(KernelModule::Spmv, ENTRY_CSR_FIXUP)?;
        Ok(Self {
            gpu: gpu.clone(),
            a: ca.clone(),
            row_offsets,
            chunk,
            walk: CsrWalk::Steps,
            work,
            walks: Default::default(),
            fixup,
        })
    }

    /// Repacks the work list for nonzero budget `chunk_nnz` (0 is taken as 1).
    pub fn set_chunk(&mut self, chunk_nnz: u32) -> Result<(), GpuError> {
        let chunk = chunk_nnz.max(1);
        if chunk != self.chunk {
            self.work = CsrWalkWork::pack(&self.gpu, &self.row_offsets, chunk)?;
            self.chunk = chunk;
        }
        Ok(())
    }

    /// Nonzero budget per warp item.
    pub fn chunk_nnz(&self) -> u32 {
        self.chunk
    }

    /// Chooses the walk (the work list is the same for both).
    pub fn set_walk(&mut self, walk: CsrWalk) {
        self.walk = walk;
    }

    /// The walk the calls run.
    pub fn walk(&self) -> CsrWalk {
        self.walk
    }

    /// Times every walk ([`CsrWalk::ALL`]) at every budget ([`CSR_CHUNKS`]) for `n` right-hand
    /// sides with `time` (called with this value set to the candidate; each walk's module is
    /// loaded before its first candidate, so `time` may capture graphs), then keeps the fastest
    /// set and returns it with its time (ms, as `time` gave it). What the tunings and the bench
    /// share.
    pub fn tune<E: From<GpuError>>(
        &mut self,
        n: usize,
        mut time: impl FnMut(&Self) -> Result<f64, E>,
    ) -> Result<(f64, CsrWalk, u32), E> {
        let mut best: Option<(f64, CsrWalk, u32)> = None;
        for walk in CsrWalk::ALL {
            self.set_walk(walk);
            self.load(n)?;
            for chunk in CSR_CHUNKS {
                self.set_chunk(chunk)?;
                let ms = time(self)?;
                if best.is_none_or(|b| ms < b.0) {
                    best = Some((ms, walk, chunk));
                }
            }
        }
        // (ALL and CSR_CHUNKS are not empty.)
        let (ms, walk, chunk) = best.unwrap_or((f64::NAN, CsrWalk::Steps, CSR_CHUNKS[0]));
        self.set_walk(walk);
        self.set_chunk(chunk)?;
        Ok((ms, walk, chunk))
    }

    /// Rows split over several warp items at this budget.
    pub fn split_rows(&self) -> u32 {
        self.work.num_fix
    }

    /// The entry the calls run for `n` right-hand sides (the current walk's).
    pub fn kernel_name(&self, n: usize) -> Result<&'static str, GpuError> {
        self.walk.entry(n)
    }

    /// Loads the current walk for `n` right-hand sides from its module (compiling it on the
    /// driver's first use); tunings call this (for each walk they time) before capturing graphs.
    pub fn load(&self, n: usize) -> Result<&CudaFunction, GpuError> {
        let name = self.walk.entry(n)?;
        let w = CsrWalk::ALL
            .iter()
            .position(|&w| w == self.walk)
            .unwrap_or(0);
        let cell = &self.walks[w][n - 2];
        if let Some(f) = cell.get() {
            return Ok(f);
        }
        let f = self.gpu.function(KernelModule::spmv_for_rhs(n), name)?;
        Ok(cell.get_or_init(|| f))
    }

    /// Bytes one call must move at least: A's CSR arrays, X and y once.
    pub fn min_bytes(&self, n: usize) -> usize {
        4 * (self.a.rows() + 1) + 8 * self.a.nnz() + 4 * n * (self.a.rows() + self.a.cols())
    }
}

impl super::graph::GraphSpmv for CsrSpmv {
    fn shape(&self) -> (usize, usize) {
        (self.a.rows(), self.a.cols())
    }

    fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    fn max_width(&self) -> usize {
        MAX_RHS
    }

    fn prepare_width(&mut self, n: usize) -> Result<(), GpuError> {
        self.load(n).map(drop)
    }

    /// Queues one call on `stream` with raw device pointers (for graph capture). The first call
    /// with a new n loads its module ([`CsrSpmv::load`] does it ahead).
    ///
    /// # Safety
    /// `x` must point at `cols·n` and `y` at `rows·n` f32 of this context that stay alive and are
    /// not written by others until the call completes; `stream` must be a live stream of this
    /// context ordered after [`CsrSpmv::new`] / [`CsrSpmv::set_chunk`] (synchronise the GPU's
    /// stream first); no other call of this value may run concurrently (the partial sums are
    /// shared scratch).
    unsafe fn enqueue_raw(&self, call: RawCall) -> Result<(), GpuError> {
        let RawCall {
            stream,
            alpha,
            x,
            beta,
            y,
            n,
        } = call;
        let func = self.load(n)?;
        let g = &self.gpu;
        if self.work.num_items > 0 {
            let (indptr, indices, values) = self.a.buffers();
            let args = [
                Arg::Ptr(ptr_of(indptr, g)),
                Arg::Ptr(ptr_of(indices, g)),
                Arg::Ptr(ptr_of(values, g)),
                Arg::Ptr(ptr_of(&self.work.items, g)),
                Arg::U32(self.work.num_items),
                Arg::Ptr(x),
                Arg::Ptr(y),
                Arg::Ptr(ptr_of(&self.work.partial, g)),
                Arg::F32(alpha),
                Arg::F32(beta),
            ];
            // SAFETY: (1) parameter types and order match `spmv_csr{n}` / `spmv_csrrows{n}`
            // (SIGNATURES, checked against the PTX by a CPU test), the entry of this walk and n. (2) Reads in bounds: the CSR
            // arrays are a `Csr`'s (offsets non-decreasing from 0 to nnz, columns < K), checked
            // against `a`'s shape in `new`; the items come from `csr_work` over those offsets
            // (rows < M, at most MAX_ROWS_PER_ITEM = the kernel's 32 per item, nonzero ranges
            // inside their rows); X rows read are columns < K, n floats each (caller's contract:
            // cols·n); one warp per item, extra warps exit. (3) Writes: y rows < M, n floats each
            // (caller's contract), and a split chunk's partial[item·n + j] < items·MAX_RHS
            // (allocated when any row is split, the only case that writes it); no concurrent call
            // (caller's contract).
            unsafe {
                launch_checked(
                    func,
                    self.kernel_name(n)?,
                    CSR_PARAMS,
                    Shape::warps(
                        self.work.num_items.div_ceil(WARPS_PER_BLOCK),
                        WARPS_PER_BLOCK,
                    ),
                    stream,
                    &args,
                )
            }?;
        }
        if self.work.num_fix > 0 {
            let args = [
                Arg::Ptr(ptr_of(&self.work.fix, g)),
                Arg::U32(self.work.num_fix),
                Arg::Ptr(ptr_of(&self.work.partial, g)),
                Arg::Ptr(y),
                Arg::U32(n as u32),
                Arg::F32(beta),
            ];
            let threads = u64::from(self.work.num_fix) * n as u64;
            // SAFETY: types and order match `spmv_csr_fixup(const u32*, u32, const float*, float*,
            // u32, float)`; fix holds num_fix triples {row < M, first item, end item ≤ items}
            // (built in `CsrWalkWork::pack`), partial items·MAX_RHS floats with n ≤ MAX_RHS
            // (checked by `load`), y rows·n (caller's contract); one thread per (row, RHS), extra
            // threads exit; same stream as the walk, so the partials are complete.
            unsafe {
                launch_checked(
                    &self.fixup,
                    ENTRY_CSR_FIXUP,
                    CSR_FIXUP_PARAMS,
                    Shape::per_thread(threads),
                    stream,
                    &args,
                )
            }?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_rows_list_their_consecutive_chunks() {
        // Rows of 3, 10, 0, 2 and 9 nonzeros, budget 4: rows 1 (3 chunks) and 4 (3 chunks) split.
        let offsets = [0u32, 3, 13, 13, 15, 24];
        let w = csr_work(&offsets, 4);
        let fix = split_fixes(&offsets, &w.items);
        assert_eq!(fix.len(), 3 * w.split_rows.len());
        let rows: Vec<u32> = fix.chunks(3).map(|f| f[0]).collect();
        assert_eq!(rows, w.split_rows);
        assert_eq!(rows, [1, 4]);
        for f in fix.chunks(3) {
            let (row, first, end) = (f[0], f[1] as usize, f[2] as usize);
            // The chunks cover the row's nonzeros in order, each within the budget.
            let mut at = offsets[row as usize];
            for item in &w.items[first..end] {
                assert_eq!(item[..3], [row, row + 1, at]);
                assert!(item[3] - item[2] <= 4);
                at = item[3];
            }
            assert_eq!(at, offsets[row as usize + 1]);
        }
        // No split row: nothing to fix.
        assert!(split_fixes(&offsets, &csr_work(&offsets, 16).items).is_empty());
    }

    #[test]
    fn the_kernel_holds_as_many_rows_per_item_as_csr_work_packs() {
        use crate::spmm::csr::MAX_ROWS_PER_ITEM;
        // `SPMV_CSR_MAX_ROWS` in spmv_csr.cuh sizes the walk's shared sums.
        assert_eq!(MAX_ROWS_PER_ITEM, 32);
        assert!(
            include_str!("../../kernels-ptx/spmv_csr.cuh").contains("#define SPMV_CSR_MAX_ROWS 32")
        );
    }

    #[test]
    fn entries_name_their_walk_and_right_hand_sides() {
        for n in 2..=MAX_RHS {
            assert_eq!(CsrWalk::Steps.entry(n).unwrap(), format!("spmv_csr{n}"));
            assert_eq!(CsrWalk::Rows.entry(n).unwrap(), format!("spmv_csrrows{n}"));
        }
        for w in CsrWalk::ALL {
            assert!(w.entry(1).is_err());
            assert!(w.entry(9).is_err());
        }
        // Every entry has a signature for the CPU check against the PTX.
        for w in CsrWalk::ALL {
            for n in 2..=MAX_RHS {
                let name = w.entry(n).unwrap();
                assert_eq!(
                    SIGNATURES.iter().filter(|s| s.name == name).count(),
                    1,
                    "{name}"
                );
            }
        }
    }
}
