//! Row-tile tensor-core SpMM (`tc16_spmm_tf32` / `tc32_spmm_tf32` in `kernels-ptx/acc_spmm.cu`):
//! `C = α·A·B + β·C` with A in row-tile TCF (16- or 32-row windows, 8-column blocks over compacted
//! columns, one `u64` tile mask per 8 rows), B and C dense row-major f32 on the device.
//!
//! Each 16×8 row tile of a block is an MMA A-operand and the block's 8 gathered B rows its
//! B-operand, so one gather of 8 B rows serves 16 (TC16) or 32 (TC32) rows of A (Acc-SpMM's BitTCF
//! kernel: 8). The tile is decoded from the masks by popcount, like BitTCF's. Thread block x owns
//! `windows_per_tb` consecutive windows; nothing is split, so every row is written with plain
//! stores and no pre-scale or atomics are needed.

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use tcsparse_formats::rowtile::{RowTileTcf, SENTINEL};

use crate::acc_spmm::{AccSpmmError, check_dense, launch_flags, launch_shape, upload};
use crate::{Gpu, KernelModule, KernelSignature, ParamKind};

/// Kernel entry for 16-row windows.
pub const ENTRY_16: &str = "tc16_spmm_tf32";
/// Kernel entry for 32-row windows.
pub const ENTRY_32: &str = "tc32_spmm_tf32";

/// Window heights with a kernel.
pub const WINDOW_ROWS: [usize; 2] = [16, 32];

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

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[
    KernelSignature {
        module: KernelModule::AccSpmm,
        name: ENTRY_16,
        params: PARAMS,
    },
    KernelSignature {
        module: KernelModule::AccSpmm,
        name: ENTRY_32,
        params: PARAMS,
    },
];

/// A row-tile TCF matrix resident on the GPU, ready for repeated products.
///
/// Invariant: the arrays come from a [`RowTileTcf`] with 16- or 32-row windows, whose constructor
/// establishes its invariants — window and block prefixes run from 0 to the block and nonzero
/// counts, column ids are `< K` or [`SENTINEL`], every block's mask bits count its values — and
/// are never written after upload.
pub struct RowTileDevice {
    rows: usize,
    window_rows: usize,
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
            .field("window_rows", &self.window_rows)
            .field("cols", &self.cols)
            .field("windows", &self.windows)
            .field("windows_per_tb", &self.windows_per_tb)
            .finish()
    }
}

impl RowTileDevice {
    /// Uploads `m` (once; launch many times) with `windows_per_tb` windows per thread block (0 is
    /// treated as 1). Window heights without a kernel (not in [`WINDOW_ROWS`]) and sizes beyond
    /// the kernel's u32 indices are refused.
    pub fn upload(gpu: &Gpu, m: &RowTileTcf, windows_per_tb: u32) -> Result<Self, AccSpmmError> {
        let bad = |s: String| Err(AccSpmmError::InvalidFormat(s));
        let entry = match m.window_rows() {
            16 => ENTRY_16,
            32 => ENTRY_32,
            h => return bad(format!("no row-tile kernel for {h}-row windows (16 or 32)")),
        };
        if m.rows() > u32::MAX as usize - 32 || m.cols() >= u32::MAX as usize {
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
            window_rows: m.window_rows(),
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

    /// Rows per window (16 or 32).
    pub fn window_rows(&self) -> usize {
        self.window_rows
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
        let Some(shape) = launch_shape(n, self.num_tbs())? else {
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
        // SAFETY: (1) argument types and order match `tc16_spmm_tf32` / `tc32_spmm_tf32` (chosen
        // by window height on upload) in kernels-ptx/acc_spmm.cu (SIGNATURES, checked against
        // the PTX by a CPU test); flag bit 0 (float4 access) is set
        // only when ldb and ldc are multiples of 4 and device buffers are ≥ 256-byte aligned.
        // (2) Only C is written, borrowed mutably for this call; the matrix buffers are private and
        // never written after upload. (3) Every index is in bounds: the RowTileTcf invariants (held
        // by every RowTileTcf, see the struct docs) bound the window and block prefixes by the
        // array lengths, each block's value reads stay below block_value_offset[j + 1] (rank among
        // the block's mask bits, which count its values), the kernel reads window_rows / 8 masks
        // per block (the entry matches the window height), and column ids
        // are < K or the sentinel (never dereferenced); thread block x reads windows
        // [x·k, min((x+1)·k, windows)) of the windows + 1 window offsets; check_dense proved
        // (K−1)·ldb + n ≤ B.len() and (M−1)·ldc + n ≤ C.len(), and the kernel guards features ≥ n
        // and rows ≥ M.
        unsafe { l.launch(shape.config(0)) }?;
        Ok(())
    }
}
