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
use crate::layout::{FormatError, check_block_cols, check_prefix, invalid, mask_slots, rows_mask};
use crate::windowed::decode::csr_from_masks;
use crate::windowed::{ColumnMode, WindowSpec, build_windowed};
use serde::{Deserialize, Serialize};

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

/// A sparse matrix in BitTCF. Fields are private; every invariant listed in the module docs is
/// checked on construction and by [`BitTcf::validate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BitTcfShadow")]
pub struct BitTcf {
    rows: usize,
    cols: usize,
    row_window_offset: Vec<u32>,
    sparse_a_to_b: Vec<u32>,
    tc_local_bit: Vec<u64>,
    block_value_offset: Vec<u32>,
    values: Vec<f32>,
}

/// Unchecked mirror used only for deserialization; converted with validation.
#[derive(Deserialize)]
struct BitTcfShadow {
    rows: usize,
    cols: usize,
    row_window_offset: Vec<u32>,
    sparse_a_to_b: Vec<u32>,
    tc_local_bit: Vec<u64>,
    block_value_offset: Vec<u32>,
    values: Vec<f32>,
}

impl TryFrom<BitTcfShadow> for BitTcf {
    type Error = FormatError;
    fn try_from(s: BitTcfShadow) -> Result<Self, FormatError> {
        let f = BitTcf {
            rows: s.rows,
            cols: s.cols,
            row_window_offset: s.row_window_offset,
            sparse_a_to_b: s.sparse_a_to_b,
            tc_local_bit: s.tc_local_bit,
            block_value_offset: s.block_value_offset,
            values: s.values,
        };
        f.validate()?;
        Ok(f)
    }
}

impl BitTcf {
    /// Builds BitTCF from CSR (parallel over chunks of windows). Explicit zeros are kept.
    pub fn from_csr(csr: &Csr) -> Result<Self, FormatError> {
        let spec = WindowSpec {
            window_rows: WINDOW_ROWS,
            block_cols: BLOCK_COLS,
            mode: ColumnMode::Compacted,
            masks: true,
            block_window: false,
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
        if self.rows >= u32::MAX as usize || self.cols >= u32::MAX as usize {
            return Err(invalid(NAME, "dimensions exceed u32"));
        }
        let windows = self.num_windows();
        let blocks = self.tc_local_bit.len();
        check_prefix(
            NAME,
            "row_window_offset",
            &self.row_window_offset,
            windows + 1,
            blocks,
        )?;
        check_prefix(
            NAME,
            "block_value_offset",
            &self.block_value_offset,
            blocks + 1,
            self.values.len(),
        )?;
        if self.sparse_a_to_b.len() != blocks * BLOCK_COLS {
            return Err(invalid(NAME, "sparse_a_to_b length is not 8·blocks"));
        }
        for w in 0..windows {
            let valid_rows = WINDOW_ROWS.min(self.rows - w * WINDOW_ROWS);
            let row_mask = rows_mask(valid_rows);
            let (b0, b1) = (
                self.row_window_offset[w] as usize,
                self.row_window_offset[w + 1] as usize,
            );
            let mut prev: Option<u32> = None;
            for b in b0..b1 {
                let m = self.tc_local_bit[b];
                let n = self.block_value_offset[b + 1] - self.block_value_offset[b];
                if m.count_ones() != n {
                    return Err(invalid(NAME, format!("block {b}: popcount ≠ value count")));
                }
                if m & !row_mask != 0 {
                    return Err(invalid(
                        NAME,
                        format!("block {b}: bit in a row beyond the matrix"),
                    ));
                }
                check_block_cols(
                    NAME,
                    b,
                    &self.sparse_a_to_b[b * BLOCK_COLS..(b + 1) * BLOCK_COLS],
                    mask_slots(m),
                    b + 1 == b1,
                    self.cols,
                    &mut prev,
                )?;
            }
        }
        Ok(())
    }

    /// CPU product C = A·B walking the layout like the kernel (window by window, popcount
    /// decode). `b` is row-major `cols × n` with leading dimension `ldb ≥ n`; C is row-major
    /// `rows × n`. Sentinel slots read nothing.
    ///
    /// # Panics
    /// If `ldb < n` or `b` is too short (caller bug).
    pub fn spmm_cpu(&self, b: &[f32], n: usize, ldb: usize) -> Vec<f32> {
        check_dense(self.cols, b, n, ldb);
        let mut c = vec![0f32; self.rows * n];
        for w in 0..self.num_windows() {
            for blk in self.row_window_offset[w] as usize..self.row_window_offset[w + 1] as usize {
                let m = self.tc_local_bit[blk];
                let off = self.block_value_offset[blk] as usize;
                let cols = &self.sparse_a_to_b[blk * 8..blk * 8 + 8];
                for p in 0..64u32 {
                    if m >> p & 1 == 0 {
                        continue;
                    }
                    let v = self.values[off + bit_rank(m, p) as usize - 1];
                    let row = w * WINDOW_ROWS + p as usize / 8;
                    let col = cols[p as usize % 8] as usize;
                    add_scaled_row(&mut c, row, n, v, b, col, ldb);
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
    /// Bytes of all arrays (4-byte offsets and ids, 8-byte masks, 4-byte values).
    pub fn bytes(&self) -> usize {
        4 * (self.row_window_offset.len()
            + self.block_value_offset.len()
            + self.sparse_a_to_b.len())
            + 8 * self.tc_local_bit.len()
            + 4 * self.values.len()
    }
}

/// `C[row, ..n] += v · B[col, ..n]` (row-major C with `n` columns, B with leading dimension `ldb`):
/// the rank-1 step of every layout's CPU product.
pub(crate) fn add_scaled_row(
    c: &mut [f32],
    row: usize,
    n: usize,
    v: f32,
    b: &[f32],
    col: usize,
    ldb: usize,
) {
    let brow = &b[col * ldb..col * ldb + n];
    for (acc, &bv) in c[row * n..row * n + n].iter_mut().zip(brow) {
        *acc += v * bv;
    }
}

/// Panics unless `b` holds a `cols × n` row-major matrix with leading dimension `ldb`.
pub(crate) fn check_dense(cols: usize, b: &[f32], n: usize, ldb: usize) {
    assert!(ldb >= n, "ldb {ldb} < n {n}");
    assert!(
        crate::reference::dense_len(cols, n, ldb).is_some_and(|need| b.len() >= need),
        "B too short"
    );
}
