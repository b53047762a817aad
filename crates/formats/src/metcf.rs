//! ME-TCF (DTC-SpMM, ASPLOS'24, as described by Acc-SpMM and PEER-FACTS): 16-row windows, 16×8
//! blocks over each window's compacted columns, one u8 position per nonzero.
//!
//! * `row_window_offset` (len windows+1): prefix of blocks per window.
//! * `tc_offset` (len blocks+1): prefix of nonzeros per block.
//! * `sparse_a_to_x` (len 8·blocks): column ids, [`SENTINEL`]-padded (DTC-SpMM pads with column
//!   0, which lets a NaN in B's row 0 poison every padded block; we do not).
//! * `tc_local_id` (len nnz): `local_row·8 + slot` (0..128), strictly ascending inside a block
//!   (CSR order).
//! * `values` (len nnz), same order; `block_window` (len blocks): window of every block, for the
//!   balanced kernels.

use crate::Csr;
use crate::bittcf::{add_scaled_row, check_dense};
use crate::layout::{FormatError, check_block_cols, check_prefix, invalid};
use crate::windowed::decode::csr_from_windows;
use crate::windowed::{ColumnMode, WindowSpec, build_windowed};
use serde::{Deserialize, Serialize};

/// Rows per window.
pub const WINDOW_ROWS: usize = 16;
/// Slots per block.
pub const BLOCK_COLS: usize = 8;
/// Padding column id.
pub const SENTINEL: u32 = crate::layout::SENTINEL;

const NAME: &str = "ME-TCF";

/// A sparse matrix in ME-TCF; invariants in the module docs, checked on construction and by
/// [`MeTcf::validate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "MeTcfShadow")]
pub struct MeTcf {
    rows: usize,
    cols: usize,
    row_window_offset: Vec<u32>,
    tc_offset: Vec<u32>,
    sparse_a_to_x: Vec<u32>,
    tc_local_id: Vec<u8>,
    values: Vec<f32>,
    block_window: Vec<u32>,
}

#[derive(Deserialize)]
struct MeTcfShadow {
    rows: usize,
    cols: usize,
    row_window_offset: Vec<u32>,
    tc_offset: Vec<u32>,
    sparse_a_to_x: Vec<u32>,
    tc_local_id: Vec<u8>,
    values: Vec<f32>,
    block_window: Vec<u32>,
}

impl TryFrom<MeTcfShadow> for MeTcf {
    type Error = FormatError;
    fn try_from(s: MeTcfShadow) -> Result<Self, FormatError> {
        let f = MeTcf {
            rows: s.rows,
            cols: s.cols,
            row_window_offset: s.row_window_offset,
            tc_offset: s.tc_offset,
            sparse_a_to_x: s.sparse_a_to_x,
            tc_local_id: s.tc_local_id,
            values: s.values,
            block_window: s.block_window,
        };
        f.validate()?;
        Ok(f)
    }
}

impl MeTcf {
    /// Builds ME-TCF from CSR (parallel over chunks of windows). Explicit zeros are kept.
    pub fn from_csr(csr: &Csr) -> Result<Self, FormatError> {
        let spec = WindowSpec {
            window_rows: WINDOW_ROWS,
            block_cols: BLOCK_COLS,
            mode: ColumnMode::Compacted,
            masks: false,
            block_window: true,
        };
        let p = build_windowed::<u8>(csr, spec)?;
        let f = MeTcf {
            rows: csr.rows(),
            cols: csr.cols(),
            row_window_offset: p.window_offset,
            tc_offset: p.block_offset,
            sparse_a_to_x: p.block_keys,
            tc_local_id: p.pos,
            values: p.values,
            block_window: p.block_window,
        };
        debug_assert_eq!(f.validate(), Ok(()));
        Ok(f)
    }

    /// Converts back to CSR, bit-exact.
    pub fn to_csr(&self) -> Csr {
        let rwo = &self.row_window_offset;
        let win_nnz: Vec<usize> = rwo
            .iter()
            .map(|&b| self.tc_offset[b as usize] as usize)
            .collect();
        csr_from_windows(
            self.rows,
            self.cols,
            self.nnz(),
            WINDOW_ROWS,
            &win_nnz,
            |w, push| {
                for b in rwo[w] as usize..rwo[w + 1] as usize {
                    for k in self.tc_offset[b] as usize..self.tc_offset[b + 1] as usize {
                        let p = self.tc_local_id[k] as usize;
                        push(p / 8, self.sparse_a_to_x[b * 8 + p % 8], self.values[k]);
                    }
                }
            },
        )
    }

    /// Re-checks every invariant.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.rows >= u32::MAX as usize || self.cols >= u32::MAX as usize {
            return Err(invalid(NAME, "dimensions exceed u32"));
        }
        let windows = self.num_windows();
        let blocks = self.block_window.len();
        check_prefix(
            NAME,
            "row_window_offset",
            &self.row_window_offset,
            windows + 1,
            blocks,
        )?;
        check_prefix(
            NAME,
            "tc_offset",
            &self.tc_offset,
            blocks + 1,
            self.values.len(),
        )?;
        if self.tc_local_id.len() != self.values.len() {
            return Err(invalid(NAME, "tc_local_id length ≠ nnz"));
        }
        if self.sparse_a_to_x.len() != blocks * BLOCK_COLS {
            return Err(invalid(NAME, "sparse_a_to_x length is not 8·blocks"));
        }
        for w in 0..windows {
            let vr = WINDOW_ROWS.min(self.rows - w * WINDOW_ROWS);
            let (b0, b1) = (
                self.row_window_offset[w] as usize,
                self.row_window_offset[w + 1] as usize,
            );
            let mut prev: Option<u32> = None;
            for b in b0..b1 {
                if self.block_window[b] as usize != w {
                    return Err(invalid(NAME, format!("block {b}: wrong block_window")));
                }
                let ids =
                    &self.tc_local_id[self.tc_offset[b] as usize..self.tc_offset[b + 1] as usize];
                let mut used = 0u8;
                let mut last: Option<u8> = None;
                for &p in ids {
                    if p as usize >= vr * BLOCK_COLS || last.is_some_and(|l| l >= p) {
                        return Err(invalid(
                            NAME,
                            format!("block {b}: bad or unsorted local id {p}"),
                        ));
                    }
                    used |= 1 << (p % 8);
                    last = Some(p);
                }
                check_block_cols(
                    NAME,
                    b,
                    &self.sparse_a_to_x[b * BLOCK_COLS..(b + 1) * BLOCK_COLS],
                    used,
                    b + 1 == b1,
                    self.cols,
                    &mut prev,
                )?;
            }
        }
        Ok(())
    }

    /// CPU product C = A·B walking the layout like the DTC-SpMM kernel: per window, per block,
    /// scatter the block's nonzeros into a dense 16×8 tile, then multiply the tile by the 8 B rows
    /// it names (sentinel rows count as zero). Row-major B (`ldb ≥ n`) and C (`rows × n`).
    ///
    /// # Panics
    /// If `ldb < n` or `b` is too short.
    pub fn spmm_cpu(&self, b: &[f32], n: usize, ldb: usize) -> Vec<f32> {
        check_dense(self.cols, b, n, ldb);
        let mut c = vec![0f32; self.rows * n];
        for w in 0..self.num_windows() {
            for blk in self.row_window_offset[w] as usize..self.row_window_offset[w + 1] as usize {
                let mut tile = [0f32; WINDOW_ROWS * BLOCK_COLS];
                let mut present = [false; WINDOW_ROWS * BLOCK_COLS];
                for k in self.tc_offset[blk] as usize..self.tc_offset[blk + 1] as usize {
                    tile[self.tc_local_id[k] as usize] = self.values[k];
                    present[self.tc_local_id[k] as usize] = true;
                }
                let cols = &self.sparse_a_to_x[blk * 8..blk * 8 + 8];
                for (p, (&v, &here)) in tile.iter().zip(&present).enumerate() {
                    let col = cols[p % 8];
                    if !here || col == SENTINEL {
                        continue;
                    }
                    let row = w * WINDOW_ROWS + p / 8;
                    add_scaled_row(&mut c, row, n, v, b, col as usize, ldb);
                }
            }
        }
        c
    }

    /// Rows of the matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns of the matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// ⌈rows / 16⌉.
    pub fn num_windows(&self) -> usize {
        self.rows.div_ceil(WINDOW_ROWS)
    }
    /// Number of 16×8 blocks.
    pub fn num_blocks(&self) -> usize {
        self.block_window.len()
    }
    /// Prefix of blocks per window (len windows+1).
    pub fn row_window_offset(&self) -> &[u32] {
        &self.row_window_offset
    }
    /// Prefix of nonzeros per block (len blocks+1).
    pub fn tc_offset(&self) -> &[u32] {
        &self.tc_offset
    }
    /// 8 column ids per block, sentinel-padded.
    pub fn sparse_a_to_x(&self) -> &[u32] {
        &self.sparse_a_to_x
    }
    /// `local_row·8 + slot` per nonzero.
    pub fn tc_local_id(&self) -> &[u8] {
        &self.tc_local_id
    }
    /// Values in CSR order per block.
    pub fn values(&self) -> &[f32] {
        &self.values
    }
    /// Window of every block.
    pub fn block_window(&self) -> &[u32] {
        &self.block_window
    }
    /// Bytes of all arrays, `block_window` included.
    pub fn bytes(&self) -> usize {
        4 * (self.row_window_offset.len() + self.tc_offset.len() + self.sparse_a_to_x.len())
            + self.tc_local_id.len()
            + 4 * self.values.len()
            + 4 * self.block_window.len()
    }
}
