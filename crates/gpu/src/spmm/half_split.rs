//! The split groups of the f16 / bf16 kernels (row-tile windows, CSR rows): a 16-bit C cannot take
//! partial sums, so the thread blocks of a split group add theirs into f32 scratch rows, zeroed
//! before the kernel, and a finish kernel (`split_rows_finish` of `kernels-ptx/tc_common.cuh`)
//! rounds scratch + β·C into C after it.

use cudarc::driver::{CudaFunction, CudaSlice};

use super::row_tile::RowTileHalf;
use crate::launch::{Launch, Shape};
use crate::product::DenseMut;
use crate::{Gpu, GpuError, KernelModule, KernelSignature, ParamKind};

/// The finish entries' parameters (`split_rows_finish`): C = round(scratch + β·C) on the split
/// groups' rows.
const FINISH_PARAMS: [ParamKind; 9] = [
    ParamKind::Ptr, // ids (the split groups, ascending)
    ParamKind::U32, // count
    ParamKind::Ptr, // scratch
    ParamKind::Ptr, // C (16-bit)
    ParamKind::U32, // ldc
    ParamKind::U32, // M
    ParamKind::U32, // N
    ParamKind::F32, // beta
    ParamKind::U32, // group_rows
];

/// The signature of a finish entry `name` of `module`.
pub(crate) const fn finish_signature(module: KernelModule, name: &'static str) -> KernelSignature {
    KernelSignature {
        module,
        name,
        params: &FINISH_PARAMS,
    }
}

/// A kernel's split groups in f16 / bf16: the finish entry and the f32 rows the groups add into
/// (grown to the largest length asked so far).
pub(crate) struct HalfSplit {
    finish: CudaFunction,
    sig: &'static KernelSignature,
    scratch: Option<CudaSlice<f32>>,
}

impl HalfSplit {
    /// The finish entry of `sig`, loaded; no scratch yet.
    pub(crate) fn new(gpu: &Gpu, sig: &'static KernelSignature) -> Result<Self, GpuError> {
        Ok(Self {
            finish: gpu.function(sig.module, sig.name)?,
            sig,
            scratch: None,
        })
    }

    /// One product with split groups: `main` launches the kernel on C with the scratch (at least
    /// `count · group_rows · n` floats, zeroed on the GPU's stream; `None` without split groups),
    /// then [`HalfSplit::launch_finish`] rounds the groups' rows into C; the scratch is kept for
    /// the next product. `groups` = (ids, count, group_rows) as `launch_finish` takes them.
    pub(crate) fn run<'d, T: RowTileHalf>(
        &mut self,
        gpu: &Gpu,
        groups: (&CudaSlice<u32>, usize, u32),
        rows: usize,
        beta: f32,
        c: &mut DenseMut<'d, T>,
        main: impl FnOnce(&mut DenseMut<'d, T>, Option<&mut CudaSlice<f32>>) -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        let (ids, count, group_rows) = groups;
        let mut scratch = self.take_zeroed(gpu, count * group_rows as usize * c.n())?;
        let result = main(c, scratch.as_mut()).and_then(|()| match &scratch {
            Some(s) => self.launch_finish(gpu, ids, count, group_rows, s, c, rows, beta),
            None => Ok(()),
        });
        self.put_back(scratch);
        result
    }

    /// Scratch of at least `len` floats, taken out (zeroed on the GPU's stream for its first
    /// `len`); hand it back with [`HalfSplit::put_back`]. `None` when `len` is 0.
    fn take_zeroed(&mut self, gpu: &Gpu, len: usize) -> Result<Option<CudaSlice<f32>>, GpuError> {
        if len == 0 {
            return Ok(None);
        }
        match self.scratch.take() {
            Some(mut s) if s.len() >= len => {
                gpu.stream().memset_zeros(&mut s.slice_mut(..len))?;
                Ok(Some(s))
            }
            _ => Ok(Some(gpu.alloc_zeros::<f32>(len)?)),
        }
    }

    /// Keeps `scratch` for the next product.
    fn put_back(&mut self, scratch: Option<CudaSlice<f32>>) {
        if scratch.is_some() {
            self.scratch = scratch;
        }
    }

    /// The finish on C (16-bit, `rows × n`, leading dimension `ldc`, checked by the caller
    /// against `rows`): C = round(scratch + β·C) on the rows of the `count` groups `ids`
    /// (ascending group ids, each `group_rows` rows, all < ⌈rows / group_rows⌉), after the main
    /// kernel filled `scratch` (at least `count · group_rows · n` floats) on the same stream.
    #[allow(clippy::too_many_arguments)]
    fn launch_finish<T: RowTileHalf>(
        &self,
        gpu: &Gpu,
        ids: &CudaSlice<u32>,
        count: usize,
        group_rows: u32,
        scratch: &CudaSlice<f32>,
        c: &mut DenseMut<'_, T>,
        rows: usize,
        beta: f32,
    ) -> Result<(), GpuError> {
        let grid = (count as u32).min(65_535);
        let (ldc, m, n) = (c.ld() as u32, rows as u32, c.n() as u32);
        let mut l = Launch::new(gpu.stream(), &self.finish, self.sig);
        l.input(ids)
            .u32(count as u32)
            .input(scratch)
            .output(c.buf())
            .u32(ldc)
            .u32(m)
            .u32(n)
            .f32(beta)
            .u32(group_rows);
        // SAFETY: (1) the arguments fill `split_rows_finish`'s entry (`sig`: (const u32*, u32,
        // const float*, u16*, u32, u32, u32, float, u32), checked against the PTX by a CPU test);
        // C holds a 16-bit type (T: RowTileHalf), the entry's (the caller made this HalfSplit
        // for T's type). (2) Only C is written, borrowed mutably for this call; the scratch is read after
        // the main kernel on the same stream. (3) In bounds: `ids` holds `count` ascending group
        // ids < ⌈rows / group_rows⌉ and the kernel skips rows ≥ rows and features ≥ n; scratch
        // holds count · group_rows · n floats and (rows − 1)·ldc + n ≤ C.len() (the caller's
        // contract, checked by check_dense / checked_width).
        unsafe {
            l.launch(Shape {
                grid: (grid, 1, 1),
                block: (256, 1, 1),
                shared_bytes: 0,
            })
        }
    }
}
