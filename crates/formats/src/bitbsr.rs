//! bitBSR (Spaden, ICPP'24 §4.2): 8×8 BSR over the original columns with a u64 bitmap per block.
//!
//! * `block_row_ptr` (len ⌈rows/8⌉+1): prefix of blocks per block row.
//! * `block_col` (len blocks): block column `c / 8`, strictly ascending inside a block row.
//! * `bitmap` (len blocks): bit `(r % 8)·8 + (c % 8)`, LSB = top-left, never 0.
//! * `value_offset` (len blocks+1): exclusive scan of popcounts.
//! * `values` (len nnz): per block in bit order.

use crate::Csr;
use crate::layout::{
    FormatError, Layout, check_dims, check_prefixes, for_each_bit, for_each_window_block, invalid,
    layout_from_inherent, rows_mask,
};
use crate::windowed::decode::csr_from_masks;
use crate::windowed::{ColumnMode, WindowSpec, build_windowed};

/// Block edge (rows and columns).
pub const BLOCK: usize = 8;

const NAME: &str = "bitBSR";

crate::layout::checked_layout! {
    /// A sparse matrix in bitBSR; invariants in the module docs, checked on construction and by
    /// [`BitBsr::validate`].
    pub struct BitBsr {
        rows: usize,
        cols: usize,
        block_row_ptr: Vec<u32>,
        block_col: Vec<u32>,
        bitmap: Vec<u64>,
        value_offset: Vec<u32>,
        values: Vec<f32>,
    }
}

impl BitBsr {
    /// Builds bitBSR from CSR (parallel over chunks of block rows). Explicit zeros are kept.
    #[tracing::instrument(name = "build", level = "info", skip_all, fields(layout = "bitbsr", nnz = csr.nnz()))]
    pub fn from_csr(csr: &Csr) -> Result<Self, FormatError> {
        let spec = WindowSpec {
            mode: ColumnMode::Aligned,
            masks: true,
            ..WindowSpec::compacted(BLOCK, BLOCK)
        };
        let p = build_windowed::<()>(csr, spec)?;
        let f = BitBsr {
            rows: csr.rows(),
            cols: csr.cols(),
            block_row_ptr: p.window_offset,
            block_col: p.block_keys,
            bitmap: p.masks,
            value_offset: p.block_offset,
            values: p.values,
        };
        debug_assert_eq!(f.validate(), Ok(()));
        Ok(f)
    }

    /// Converts back to CSR, bit-exact.
    pub fn to_csr(&self) -> Csr {
        csr_from_masks(
            (self.rows, self.cols),
            &self.block_row_ptr,
            &self.bitmap,
            &self.value_offset,
            &self.values,
            |b, s| self.block_col[b] * BLOCK as u32 + s as u32,
        )
    }

    /// Re-checks every invariant.
    pub fn validate(&self) -> Result<(), FormatError> {
        check_dims(NAME, self.rows, self.cols)?;
        let brows = self.rows.div_ceil(BLOCK);
        let blocks = self.bitmap.len();
        check_prefixes(
            NAME,
            &[
                ("block_row_ptr", &self.block_row_ptr, brows + 1, blocks),
                (
                    "value_offset",
                    &self.value_offset,
                    blocks + 1,
                    self.values.len(),
                ),
            ],
        )?;
        if self.block_col.len() != blocks {
            return Err(invalid(NAME, "block_col length ≠ blocks"));
        }
        for w in 0..brows {
            let vr = BLOCK.min(self.rows - w * BLOCK);
            let row_mask = rows_mask(vr);
            let mut prev: Option<u32> = None;
            for b in self.block_row_ptr[w] as usize..self.block_row_ptr[w + 1] as usize {
                let m = self.bitmap[b];
                let bc = self.block_col[b];
                if m == 0 || m.count_ones() != self.value_offset[b + 1] - self.value_offset[b] {
                    return Err(invalid(
                        NAME,
                        format!("block {b}: empty or popcount ≠ count"),
                    ));
                }
                if m & !row_mask != 0 {
                    return Err(invalid(
                        NAME,
                        format!("block {b}: bit in a row beyond the matrix"),
                    ));
                }
                if prev.is_some_and(|p| p >= bc) {
                    return Err(invalid(
                        NAME,
                        format!("block {b}: block columns not ascending"),
                    ));
                }
                // Highest set column inside the block must lie inside the matrix.
                let mut cm = 0u64;
                for r in 0..8 {
                    cm |= (m >> (8 * r)) & 0xff;
                }
                let max_c = bc as u64 * 8 + 63 - cm.leading_zeros() as u64;
                if max_c >= self.cols as u64 {
                    return Err(invalid(
                        NAME,
                        format!("block {b}: column beyond the matrix"),
                    ));
                }
                prev = Some(bc);
            }
        }
        Ok(())
    }

    crate::layout::shape_accessors!();
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// Number of 8×8 blocks.
    pub fn num_blocks(&self) -> usize {
        self.bitmap.len()
    }
    /// Prefix of blocks per block row.
    pub fn block_row_ptr(&self) -> &[u32] {
        &self.block_row_ptr
    }
    /// Block column (`c / 8`) of every block.
    pub fn block_col(&self) -> &[u32] {
        &self.block_col
    }
    /// Bitmap of every block, bit `(r % 8)·8 + (c % 8)`.
    pub fn bitmap(&self) -> &[u64] {
        &self.bitmap
    }
    /// Exclusive scan of popcounts (len blocks+1).
    pub fn value_offset(&self) -> &[u32] {
        &self.value_offset
    }
    /// Values in bit order per block.
    pub fn values(&self) -> &[f32] {
        &self.values
    }
}

impl Layout for BitBsr {
    layout_from_inherent!(NAME, ());

    /// Block row by block row, block by block, bits ascending (popcount decode). An SpMV is the
    /// product with `n = 1`.
    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, mut f: F) {
        for_each_window_block(&self.block_row_ptr, |w, b| {
            let off = self.value_offset[b] as usize;
            let c0 = self.block_col[b] as usize * BLOCK;
            for_each_bit(self.bitmap[b], |p, k| {
                f(w * BLOCK + p / 8, c0 + p % 8, self.values[off + k])
            });
        });
    }
}
