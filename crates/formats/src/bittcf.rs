//! BitTCF (Acc-SpMM, PPoPP'25 §3.3): 8-row windows, 8×8 blocks over each window's compacted
//! columns, one u64 mask per block.
//!
//! Layout (see `docs/formats/bittcf.md`):
//! * `row_window_offset` (len windows+1): prefix of blocks per window; empty windows have no block.
//! * `sparse_a_to_b` (len 8·blocks): the window's sorted unique columns cut into groups of 8 slots,
//!   the last group padded with [`SENTINEL`] (whose B row counts as zero).
//! * `tc_local_bit` (len blocks): bit `local_row·8 + slot` set iff that entry is stored
//!   (LSB = row 0, slot 0).
//! * `block_value_offset` (len blocks+1): exclusive prefix of popcounts.
//! * `values` (len nnz): per block in bit order. Value of bit p:
//!   `values[off + popcount(mask & ((2 << p) − 1)) − 1]`, computed with `p = 63` safe
//!   (see [`bit_rank`]).

use crate::Csr;
use crate::layout::{
    Compacted, FormatError, Layout, for_each_bit, for_each_window_block, invalid,
    layout_from_inherent, mask_slots, rows_mask,
};
use crate::windowed::decode::csr_from_masks;
use crate::windowed::{WindowSpec, build_windowed};

/// Rows per window.
pub const WINDOW_ROWS: usize = 8;
/// Slots (compacted columns) per block.
pub const BLOCK_COLS: usize = 8;
/// Padding column id.
pub const SENTINEL: u32 = crate::layout::SENTINEL;

const NAME: &str = "BitTCF";

/// Number of set bits of `mask` at positions `0..=p` (p in 0..64): the 1-based rank of bit p.
#[inline]
pub fn bit_rank(mask: u64, p: u32) -> u32 {
    // (2 << p) − 1 overflows at p = 63; wrapping_shl gives 0 and 0 − 1 = all ones, as wanted.
    (mask & (2u64.wrapping_shl(p)).wrapping_sub(1)).count_ones()
}

crate::layout::checked_layout! {
    /// A sparse matrix in BitTCF. Fields are private; every invariant listed in the module docs is
    /// checked on construction and by [`BitTcf::validate`].
    pub struct BitTcf {
        rows: usize,
        cols: usize,
        row_window_offset: Vec<u32>,
        sparse_a_to_b: Vec<u32>,
        tc_local_bit: Vec<u64>,
        block_value_offset: Vec<u32>,
        values: Vec<f32>,
    }
}

impl BitTcf {
    /// Builds BitTCF from CSR (parallel over chunks of windows). Explicit zeros are kept.
    #[tracing::instrument(name = "build", level = "info", skip_all, fields(layout = "bittcf", nnz = csr.nnz()))]
    pub fn from_csr(csr: &Csr) -> Result<Self, FormatError> {
        let spec = WindowSpec {
            masks: true,
            ..WindowSpec::compacted(WINDOW_ROWS, BLOCK_COLS)
        };
        let p = build_windowed::<()>(csr, spec)?;
        let f = BitTcf {
            rows: csr.rows(),
            cols: csr.cols(),
            row_window_offset: p.window_offset,
            sparse_a_to_b: p.block_keys,
            tc_local_bit: p.masks,
            block_value_offset: p.block_offset,
            values: p.values,
        };
        debug_assert_eq!(f.validate(), Ok(()));
        Ok(f)
    }

    /// The layout of the 0 × 0 matrix (no window, no block).
    pub fn empty() -> Self {
        BitTcf {
            rows: 0,
            cols: 0,
            row_window_offset: vec![0],
            sparse_a_to_b: Vec::new(),
            tc_local_bit: Vec::new(),
            block_value_offset: vec![0],
            values: Vec::new(),
        }
    }

    /// Converts back to CSR, bit-exact (values and pattern, explicit zeros included).
    pub fn to_csr(&self) -> Csr {
        csr_from_masks(
            (self.rows, self.cols),
            &self.row_window_offset,
            &self.tc_local_bit,
            &self.block_value_offset,
            &self.values,
            |b, s| self.sparse_a_to_b[b * BLOCK_COLS + s],
        )
    }

    /// Re-checks every invariant (lengths, prefixes, popcounts, column order, sentinels, rows
    /// beyond the matrix empty).
    pub fn validate(&self) -> Result<(), FormatError> {
        let frame = Compacted {
            rows: self.rows,
            cols: self.cols,
            window_rows: WINDOW_ROWS,
            window_offset: &self.row_window_offset,
            value_offset: ("block_value_offset", &self.block_value_offset),
            nnz: self.values.len(),
            block_cols: ("sparse_a_to_b", &self.sparse_a_to_b),
        };
        frame.check(NAME, self.tc_local_bit.len(), |_, b, valid_rows| {
            let m = self.tc_local_bit[b];
            let n = self.block_value_offset[b + 1] - self.block_value_offset[b];
            if m.count_ones() != n {
                return Err(invalid(NAME, format!("block {b}: popcount ≠ value count")));
            }
            if m & !rows_mask(valid_rows) != 0 {
                return Err(invalid(
                    NAME,
                    format!("block {b}: bit in a row beyond the matrix"),
                ));
            }
            Ok(mask_slots(m))
        })
    }

    crate::layout::shape_accessors!();
    /// Stored entries (explicit zeros included).
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// ⌈rows / 8⌉.
    pub fn num_windows(&self) -> usize {
        self.rows.div_ceil(WINDOW_ROWS)
    }
    /// Number of 8×8 blocks.
    pub fn num_blocks(&self) -> usize {
        self.tc_local_bit.len()
    }
    /// Prefix of blocks per window (len windows+1).
    pub fn row_window_offset(&self) -> &[u32] {
        &self.row_window_offset
    }
    /// Exclusive prefix of nonzeros per block (len blocks+1).
    pub fn block_value_offset(&self) -> &[u32] {
        &self.block_value_offset
    }
    /// 8 column ids per block, [`SENTINEL`]-padded (len 8·blocks).
    pub fn sparse_a_to_b(&self) -> &[u32] {
        &self.sparse_a_to_b
    }
    /// One mask per block, bit `local_row·8 + slot`.
    pub fn tc_local_bit(&self) -> &[u64] {
        &self.tc_local_bit
    }
    /// Values per block in bit order (len nnz).
    pub fn values(&self) -> &[f32] {
        &self.values
    }
    /// The stored values (block bit order), for new values of the same pattern: the structure
    /// (masks, column ids, offsets) cannot change through it. See [`BitTcf::csr_positions`].
    pub fn values_mut(&mut self) -> &mut [f32] {
        &mut self.values
    }
    /// For each stored value of `BitTcf::from_csr(csr)` (block bit order), the position of its
    /// entry in `csr.data()`: new values of the same pattern refill the layout by
    /// `values_mut()[i] = new[positions[i]]`, O(nnz), without a build. Computed once by building
    /// the layout of a copy whose values are the positions' bit patterns (values are only moved,
    /// never computed on, and explicit zeros are kept, so every slot reads back its position).
    pub fn csr_positions(csr: &Csr) -> Result<Vec<u32>, FormatError> {
        // Tags p + 1 are finite, nonzero f32 bit patterns below the exponent of ∞.
        if csr.nnz() >= 0x7F80_0000 {
            return Err(FormatError::TooLarge(format!(
                "{} nonzeros: too many to map value positions",
                csr.nnz()
            )));
        }
        let mut tagged = csr.clone();
        for (p, v) in tagged.data_mut().iter_mut().enumerate() {
            *v = f32::from_bits(p as u32 + 1);
        }
        let layout = Self::from_csr(&tagged)?;
        layout
            .values
            .iter()
            .map(|v| match v.to_bits().checked_sub(1) {
                Some(p) if (p as usize) < csr.nnz() => Ok(p),
                _ => Err(crate::layout::invalid(
                    "BitTCF",
                    "a value slot without a CSR position",
                )),
            })
            .collect()
    }
}

impl Layout for BitTcf {
    layout_from_inherent!(NAME, ());

    /// Window by window, block by block, bits ascending (popcount decode); sentinel slots hold no
    /// bit.
    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, mut f: F) {
        for_each_window_block(&self.row_window_offset, |w, b| {
            let off = self.block_value_offset[b] as usize;
            let cols = &self.sparse_a_to_b[b * BLOCK_COLS..(b + 1) * BLOCK_COLS];
            for_each_bit(self.tc_local_bit[b], |p, k| {
                f(
                    w * WINDOW_ROWS + p / 8,
                    cols[p % 8] as usize,
                    self.values[off + k],
                )
            });
        });
    }
}
