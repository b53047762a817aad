//! 16-row tensor-core SpMM on ME-TCF (`tc16_spmm_tf32` in `kernels-ptx/acc_spmm.cu`):
//! `C = α·A·B + β·C` with A in ME-TCF (16-row windows, 16×8 blocks over compacted columns), B and C
//! dense row-major f32 on the device.
//!
//! The sparse 16×8 tile is the MMA's A-operand and 8 gathered B rows its B-operand, so one gather
//! of 8 B rows serves 16 rows of A (Acc-SpMM's BitTCF kernel: 8 rows). The tile is decoded from two
//! `u64` masks per block ([`tile_masks`], derived here from ME-TCF's local ids) by popcount, like
//! BitTCF's. Thread block x owns `windows_per_tb` consecutive windows; nothing is split, so every
//! row is written with plain stores and no pre-scale or atomics are needed.

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use tcsparse_formats::metcf::{MeTcf, SENTINEL};

use crate::acc_spmm::{AccSpmmError, check_dense, launch_flags, launch_shape, upload};
use crate::{Gpu, KernelModule, KernelSignature, ParamKind};

/// Kernel entry name.
pub const ENTRY: &str = "tc16_spmm_tf32";

/// The `.entry` signature this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &[KernelSignature {
    module: KernelModule::AccSpmm,
    name: ENTRY,
    params: &[
        ParamKind::Ptr, // rwo (windows + 1)
        ParamKind::Ptr, // tco (blocks + 1)
        ParamKind::Ptr, // a2x (8 per block)
        ParamKind::Ptr, // masks (2 per block)
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
    ],
}];

/// Two masks per block from ME-TCF's local ids (`row·8 + slot`, 0..128): `[2j]` holds rows 0–7,
/// `[2j + 1]` rows 8–15, bit `(row % 8)·8 + slot`. Ascending local ids (an ME-TCF invariant) make
/// the value order the bit order, low mask first.
pub fn tile_masks(tc_offset: &[u32], tc_local_id: &[u8]) -> Vec<u64> {
    let blocks = tc_offset.len().saturating_sub(1);
    let mut masks = vec![0u64; 2 * blocks];
    for (j, pair) in masks.chunks_exact_mut(2).enumerate() {
        let (a, b) = (tc_offset[j] as usize, tc_offset[j + 1] as usize);
        for &id in &tc_local_id[a..b] {
            let id = u32::from(id) & 127;
            pair[(id >> 6) as usize] |= 1u64 << (id & 63);
        }
    }
    masks
}

/// An ME-TCF matrix resident on the GPU, ready for repeated products.
///
/// Invariant: the arrays come from a [`MeTcf`], whose every constructor (building from CSR,
/// deserializing) establishes its invariants — window and block prefixes run from 0 to the block
/// and nonzero counts, column ids are `< K` or [`SENTINEL`], local ids ascend inside each block —
/// and are never written after upload.
pub struct Tc16Device {
    rows: usize,
    cols: usize,
    windows: usize,
    windows_per_tb: u32,
    rwo: CudaSlice<u32>,
    tco: CudaSlice<u32>,
    a2x: CudaSlice<u32>,
    masks: CudaSlice<u64>,
    values: CudaSlice<f32>,
    main: CudaFunction,
}

impl std::fmt::Debug for Tc16Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tc16Device")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("windows", &self.windows)
            .field("windows_per_tb", &self.windows_per_tb)
            .finish()
    }
}

impl Tc16Device {
    /// Uploads `m` (once; launch many times) with `windows_per_tb` windows per thread block (0 is
    /// treated as 1). Sizes beyond the kernel's u32 indices are refused.
    pub fn upload(gpu: &Gpu, m: &MeTcf, windows_per_tb: u32) -> Result<Self, AccSpmmError> {
        let bad = |s: String| Err(AccSpmmError::InvalidFormat(s));
        if m.rows() > u32::MAX as usize - 16 || m.cols() >= u32::MAX as usize {
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
        // The kernel relies on these MeTcf invariants (restated next to the launch, debug builds).
        debug_assert_eq!(m.row_window_offset().len(), m.rows().div_ceil(16) + 1);
        debug_assert!(
            m.sparse_a_to_x()
                .iter()
                .all(|&c| c == SENTINEL || (c as usize) < m.cols())
        );
        let masks = tile_masks(m.tc_offset(), m.tc_local_id());
        let stream = gpu.stream();
        Ok(Self {
            rows: m.rows(),
            cols: m.cols(),
            windows: m.num_windows(),
            windows_per_tb: windows_per_tb.max(1),
            rwo: upload(stream, m.row_window_offset())?,
            tco: upload(stream, m.tc_offset())?,
            a2x: upload(stream, m.sparse_a_to_x())?,
            masks: upload(stream, &masks)?,
            values: upload(stream, m.values())?,
            main: gpu.function(KernelModule::AccSpmm, ENTRY)?,
        })
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
            .arg(&self.tco)
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
        // SAFETY: (1) argument types and order match `tc16_spmm_tf32` in kernels-ptx/acc_spmm.cu
        // (SIGNATURES, checked against the PTX by a CPU test); flag bit 0 (float4 access) is set
        // only when ldb and ldc are multiples of 4 and device buffers are ≥ 256-byte aligned.
        // (2) Only C is written, borrowed mutably for this call; the matrix buffers are private and
        // never written after upload. (3) Every index is in bounds: the MeTcf invariants (held by
        // every MeTcf, see the struct docs) bound the window and block prefixes by the array lengths, each block's
        // value reads stay below tc_offset[j + 1] (rank among the block's local ids), and column ids
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
    fn tile_masks_split_rows_at_eight_and_keep_value_order() {
        // Block 0: (row 0, slot 0), (row 7, slot 7), (row 8, slot 0), (row 15, slot 3);
        // block 1 empty; block 2: (row 3, slot 5).
        let tco = [0u32, 4, 4, 5];
        let ids = [0u8, 63, 64, 123, 29];
        let m = tile_masks(&tco, &ids);
        assert_eq!(m, vec![1 | (1 << 63), 1 | (1 << 59), 0, 0, 1 << 29, 0]);
        // Popcounts equal the block sizes (what the kernel's value ranks rely on).
        for j in 0..3 {
            let bits = m[2 * j].count_ones() + m[2 * j + 1].count_ones();
            assert_eq!(bits, tco[j + 1] - tco[j]);
        }
    }

    #[test]
    fn tile_masks_of_a_built_metcf_round_trip_the_matrix() {
        let a = tcsparse_formats::csr::csr_from_triplets(
            37,
            29,
            &(0..37u32)
                .flat_map(|r| {
                    (0..29u32)
                        .filter(move |c| (r * 7 + c * 3) % 5 == 0)
                        .map(move |c| (r, c, 1.0 + r as f32))
                })
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let m = MeTcf::from_csr(&a).unwrap();
        let masks = tile_masks(m.tc_offset(), m.tc_local_id());
        // Rebuild every (row, column) from the masks and compare with the CSR.
        let mut got = Vec::new();
        for w in 0..m.num_windows() {
            let rwo = m.row_window_offset();
            for j in rwo[w] as usize..rwo[w + 1] as usize {
                for half in 0..2 {
                    let mut bits = masks[2 * j + half];
                    while bits != 0 {
                        let p = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let row = 16 * w + 8 * half + p / 8;
                        let col = m.sparse_a_to_x()[8 * j + p % 8];
                        got.push((row, col as usize));
                    }
                }
            }
        }
        got.sort_unstable();
        let indptr = a.indptr();
        let indptr = indptr.raw_storage();
        let mut want = Vec::new();
        for r in 0..a.rows() {
            for &c in &a.indices()[indptr[r] as usize..indptr[r + 1] as usize] {
                want.push((r, c as usize));
            }
        }
        assert_eq!(got, want);
    }
}
