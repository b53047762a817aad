//! Row-tile tensor-core SpMM (`tc16_spmm_tf32`, `tc32_spmm_tf32`, `tc32h_spmm_tf32`,
//! `tc64h_spmm_tf32` in `kernels-ptx/acc_spmm.cu`, see [`KERNELS`]): `C = α·A·B + β·C` with A in
//! row-tile TCF (16-, 32- or 64-row windows, 8-column blocks over compacted columns, one `u64` tile
//! mask per 8 rows), B and C dense row-major f32 on the device.
//!
//! Each 16×8 row tile of a block is an MMA A-operand and the block's 8 gathered B rows its
//! B-operand, so one gather of 8 B rows serves every row of a window (16, 32 or 64; Acc-SpMM's
//! BitTCF kernel: 8). A warp owns 32 features, or 16 in the half-width kernels (half the
//! accumulators, so taller windows fit in the registers). The tile is decoded from the masks by popcount, like BitTCF's. Thread block x owns
//! `windows_per_tb` consecutive windows; nothing is split, so every row is written with plain
//! stores and no pre-scale or atomics are needed.

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use tcsparse_formats::rowtile::{RowTileTcf, SENTINEL};

use crate::acc_spmm::{AccSpmmError, check_dense, launch_flags, launch_shape_for, upload};
use crate::{Gpu, KernelModule, KernelSignature, ParamKind};

/// One row-tile kernel: the window height it runs on and the features each warp owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowTileKernel {
    /// Rows per window (16, 32 or 64).
    pub window_rows: u32,
    /// Features per warp (32, or 16 for the half-width kernels).
    pub warp_features: u32,
}

impl RowTileKernel {
    /// TC16: 16-row windows, 32 features per warp.
    pub const TC16: Self = Self::new(16, 32);
    /// TC32: 32-row windows, 32 features per warp.
    pub const TC32: Self = Self::new(32, 32);
    /// TC32h: 32-row windows, 16 features per warp.
    pub const TC32H: Self = Self::new(32, 16);
    /// TC64h: 64-row windows, 16 features per warp.
    pub const TC64H: Self = Self::new(64, 16);

    const fn new(window_rows: u32, warp_features: u32) -> Self {
        Self {
            window_rows,
            warp_features,
        }
    }

    /// The PTX entry, `None` for a combination without a kernel.
    pub fn entry(self) -> Option<&'static str> {
        KERNELS
            .iter()
            .zip(ENTRIES)
            .find_map(|(&k, e)| (k == self).then_some(e))
    }

    /// Short name: `TC16`, `TC32`, `TC32h`, `TC64h`.
    pub fn name(self) -> String {
        let half = if self.warp_features == 32 { "" } else { "h" };
        format!("TC{}{half}", self.window_rows)
    }
}

/// Every row-tile kernel, in the order a tuned preparation times them.
pub const KERNELS: [RowTileKernel; 4] = [
    RowTileKernel::TC16,
    RowTileKernel::TC32,
    RowTileKernel::TC32H,
    RowTileKernel::TC64H,
];

/// PTX entries of [`KERNELS`], same order.
const ENTRIES: [&str; 4] = [
    "tc16_spmm_tf32",
    "tc32_spmm_tf32",
    "tc32h_spmm_tf32",
    "tc64h_spmm_tf32",
];

const PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // rwo (windows + 1)
    ParamKind::Ptr, // bvo (blocks + 1)
    ParamKind::Ptr, // a2x (8 per block)
    ParamKind::Ptr, // masks (window_rows / 8 per block)
    ParamKind::Ptr, // values
    ParamKind::U32, // windows
    ParamKind::U32, // windows_per_tb
    ParamKind::Ptr, // B
    ParamKind::U32, // ldb
    ParamKind::Ptr, // C
    ParamKind::U32, // ldc
    ParamKind::U32, // M
    ParamKind::U32, // N
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::U32, // flags
];

const fn signature(name: &'static str) -> KernelSignature {
    KernelSignature {
        module: KernelModule::AccSpmm,
        name,
        params: PARAMS,
    }
}

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[
    signature(ENTRIES[0]),
    signature(ENTRIES[1]),
    signature(ENTRIES[2]),
    signature(ENTRIES[3]),
];

/// A row-tile TCF matrix resident on the GPU, ready for repeated products.
///
/// Invariant: the arrays come from a [`RowTileTcf`] whose window height is the kernel's, whose constructor
/// establishes its invariants — window and block prefixes run from 0 to the block and nonzero
/// counts, column ids are `< K` or [`SENTINEL`], every block's mask bits count its values — and
/// are never written after upload.
pub struct RowTileDevice {
    rows: usize,
    kernel: RowTileKernel,
    cols: usize,
    windows: usize,
    windows_per_tb: u32,
    rwo: CudaSlice<u32>,
    bvo: CudaSlice<u32>,
    a2x: CudaSlice<u32>,
    masks: CudaSlice<u64>,
    values: CudaSlice<f32>,
    main: CudaFunction,
}

impl std::fmt::Debug for RowTileDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowTileDevice")
            .field("rows", &self.rows)
            .field("kernel", &self.kernel)
            .field("cols", &self.cols)
            .field("windows", &self.windows)
            .field("windows_per_tb", &self.windows_per_tb)
            .finish()
    }
}

impl RowTileDevice {
    /// Uploads `m` (once; launch many times) for the row-tile kernel whose warps own
    /// `warp_features` features (32 or 16), with `windows_per_tb` windows per thread block (0 is
    /// treated as 1). A window height and width without a kernel (not in [`KERNELS`]) and sizes
    /// beyond the kernel's u32 indices are refused.
    pub fn upload(
        gpu: &Gpu,
        m: &RowTileTcf,
        warp_features: u32,
        windows_per_tb: u32,
    ) -> Result<Self, AccSpmmError> {
        let bad = |s: String| Err(AccSpmmError::InvalidFormat(s));
        let kernel = RowTileKernel::new(m.window_rows() as u32, warp_features);
        let Some(entry) = kernel.entry() else {
            return bad(format!(
                "no row-tile kernel for {}-row windows with {warp_features} features per warp",
                m.window_rows()
            ));
        };
        if m.rows() > u32::MAX as usize - 64 || m.cols() >= u32::MAX as usize {
            return bad(format!(
                "{}×{} is too large for u32 indices",
                m.rows(),
                m.cols()
            ));
        }
        if m.num_blocks() >= (u32::MAX / 8) as usize || m.nnz() >= u32::MAX as usize {
            return bad(format!(
                "{} blocks / {} values exceed u32 indices",
                m.num_blocks(),
                m.nnz()
            ));
        }
        // The kernel relies on these RowTileTcf invariants (restated next to the launch, debug
        // builds).
        debug_assert_eq!(
            m.row_window_offset().len(),
            m.rows().div_ceil(m.window_rows()) + 1
        );
        debug_assert!(
            m.block_cols()
                .iter()
                .all(|&c| c == SENTINEL || (c as usize) < m.cols())
        );
        let stream = gpu.stream();
        Ok(Self {
            rows: m.rows(),
            kernel,
            cols: m.cols(),
            windows: m.num_windows(),
            windows_per_tb: windows_per_tb.max(1),
            rwo: upload(stream, m.row_window_offset())?,
            bvo: upload(stream, m.block_value_offset())?,
            a2x: upload(stream, m.block_cols())?,
            masks: upload(stream, m.masks())?,
            values: upload(stream, m.values())?,
            main: gpu.function(KernelModule::AccSpmm, entry)?,
        })
    }

    /// The kernel it launches.
    pub fn kernel(&self) -> RowTileKernel {
        self.kernel
    }

    /// Windows per thread block.
    pub fn windows_per_tb(&self) -> u32 {
        self.windows_per_tb
    }

    /// Sets the windows per thread block (0 is treated as 1); the matrix stays uploaded.
    pub fn set_windows_per_tb(&mut self, k: u32) {
        self.windows_per_tb = k.max(1);
    }

    /// Rows of A (M).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns of A (K).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Thread blocks per feature tile.
    pub fn num_tbs(&self) -> usize {
        self.windows.div_ceil(self.windows_per_tb as usize)
    }

    /// Enqueues `C = α·A·B + β·C` on the GPU's stream (asynchronous); B is `K × n` row-major with
    /// leading dimension `ldb`, C is `M × n` with `ldc`; with β = 0, C is never read.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        gpu: &Gpu,
        alpha: f32,
        b: &CudaSlice<f32>,
        ldb: usize,
        beta: f32,
        c: &mut CudaSlice<f32>,
        ldc: usize,
        n: usize,
    ) -> Result<(), AccSpmmError> {
        check_dense("B", b.len(), self.cols, n, ldb)?;
        check_dense("C", c.len(), self.rows, n, ldc)?;
        let Some(shape) = launch_shape_for(n, self.num_tbs(), self.kernel.warp_features)? else {
            return Ok(());
        };
        let flags = launch_flags(ldb, ldc);
        let (windows, k) = (self.windows as u32, self.windows_per_tb);
        let (m, n32, ldb32, ldc32) = (self.rows as u32, n as u32, ldb as u32, ldc as u32);
        let mut l = gpu.stream().launch_builder(&self.main);
        l.arg(&self.rwo)
            .arg(&self.bvo)
            .arg(&self.a2x)
            .arg(&self.masks)
            .arg(&self.values)
            .arg(&windows)
            .arg(&k)
            .arg(b)
            .arg(&ldb32)
            .arg(&mut *c)
            .arg(&ldc32)
            .arg(&m)
            .arg(&n32)
            .arg(&alpha)
            .arg(&beta)
            .arg(&flags);
        // SAFETY: (1) argument types and order match the row-tile entry chosen on upload
        // (`RowTileKernel::entry`) in kernels-ptx/acc_spmm.cu (SIGNATURES, checked against
        // the PTX by a CPU test); flag bit 0 (float4 / float2 access) is set
        // only when ldb and ldc are multiples of 4 and device buffers are ≥ 256-byte aligned.
        // (2) Only C is written, borrowed mutably for this call; the matrix buffers are private and
        // never written after upload. (3) Every index is in bounds: the RowTileTcf invariants (held
        // by every RowTileTcf, see the struct docs) bound the window and block prefixes by the
        // array lengths, each block's value reads stay below block_value_offset[j + 1] (rank among
        // the block's mask bits, which count its values), the kernel reads window_rows / 8 masks
        // per block (the entry matches the window height), the launch shape gives each warp the
        // kernel's feature width, and column ids
        // are < K or the sentinel (never dereferenced); thread block x reads windows
        // [x·k, min((x+1)·k, windows)) of the windows + 1 window offsets; check_dense proved
        // (K−1)·ldb + n ≤ B.len() and (M−1)·ldc + n ≤ C.len(), and the kernel guards features ≥ n
        // and rows ≥ M.
        unsafe { l.launch(shape.config(0)) }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_has_its_entry_and_name() {
        let names: Vec<String> = KERNELS.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["TC16", "TC32", "TC32h", "TC64h"]);
        for (k, e) in KERNELS.iter().zip(ENTRIES) {
            assert_eq!(k.entry(), Some(e));
        }
        assert_eq!(RowTileKernel::new(16, 16).entry(), None);
        assert_eq!(RowTileKernel::new(64, 32).entry(), None);
        assert_eq!(SIGNATURES.len(), KERNELS.len());
    }
}
