//! Row-tile TCF: ME-TCF's compacted 8-column blocks over windows of `window_rows` rows (16 or 32
//! for the row-tile kernels; any multiple of 8 up to 64), with the sparse tile of every block kept
//! as one `u64` mask per 8 rows — the layout the TC16/TC32 tensor-core kernels decode by popcount.
//!
//! With 16-row windows the blocks, columns and value order are exactly ME-TCF's; 32-row windows let
//! one gather of 8 B rows serve 32 rows of A where the rows of a window share their columns.
//!
//! * `row_window_offset` (len windows+1): prefix of blocks per window.
//! * `block_value_offset` (len blocks+1): prefix of nonzeros per block.
//! * `block_cols` (len 8·blocks): the window's sorted unique columns cut into groups of 8; only the
//!   last block of a window is padded, with [`SENTINEL`] (never slot 0); every other slot holds a
//!   nonzero.
//! * `masks` (len `window_rows / 8`·blocks): mask `i` of a block covers local rows `8i..8i+8`, bit
//!   `(local_row % 8)·8 + slot`; no bit for a row past the matrix's last row.
//! * `values` (len nnz): per block in bit order (mask 0's bits ascending, then mask 1's, …), which
//!   is CSR order.

use crate::Csr;
use crate::layout::{
    Compacted, FormatError, Layout, check_block_cols, check_dims, check_prefix,
    for_each_window_block, invalid, layout_from_inherent, mask_slots, rows_mask,
};
use crate::windowed::decode::csr_from_blocks;
use crate::windowed::{WindowSpec, build_windowed};
use rayon::prelude::*;

/// Slots per block.
pub const BLOCK_COLS: usize = 8;
/// Padding column id.
pub const SENTINEL: u32 = crate::layout::SENTINEL;
/// Largest supported window height (8 masks per block).
pub const MAX_WINDOW_ROWS: usize = crate::windowed::decode::MAX_WINDOWED_ROWS;

const NAME: &str = "row-tile TCF";

/// A window height the layout supports: a multiple of 8 in 8..=[`MAX_WINDOW_ROWS`].
fn valid_height(window_rows: usize) -> bool {
    (8..=MAX_WINDOW_ROWS).contains(&window_rows) && window_rows.is_multiple_of(8)
}

/// A sparse matrix in row-tile TCF; invariants in the module docs, checked on construction and by
/// [`RowTileTcf::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct RowTileTcf {
    rows: usize,
    cols: usize,
    window_rows: usize,
    row_window_offset: Vec<u32>,
    block_value_offset: Vec<u32>,
    block_cols: Vec<u32>,
    masks: Vec<u64>,
    values: Vec<f32>,
}

impl RowTileTcf {
    /// Builds the layout from CSR with `window_rows`-row windows (a multiple of 8, at most
    /// [`MAX_WINDOW_ROWS`]; parallel over chunks of windows). Explicit zeros are kept.
    #[tracing::instrument(name = "build", level = "info", skip_all, fields(layout = "rowtile", window_rows, nnz = csr.nnz()))]
    pub fn from_csr(csr: &Csr, window_rows: usize) -> Result<Self, FormatError> {
        if !valid_height(window_rows) {
            return Err(FormatError::BadArgument(format!(
                "window_rows = {window_rows}: must be a multiple of 8 between 8 and {MAX_WINDOW_ROWS}"
            )));
        }
        let spec = WindowSpec::compacted(window_rows, BLOCK_COLS);
        let p = build_windowed::<u16>(csr, spec)?;
        let per_block = window_rows / 8;
        let mut masks = vec![0u64; per_block * (p.block_offset.len() - 1)];
        let (offsets, pos) = (&p.block_offset, &p.pos);
        masks
            .par_chunks_mut(per_block)
            .enumerate()
            .with_min_len(1024)
            .for_each(|(b, m)| {
                for &q in &pos[offsets[b] as usize..offsets[b + 1] as usize] {
                    m[usize::from(q) / 64] |= 1u64 << (q % 64);
                }
            });
        let f = RowTileTcf {
            rows: csr.rows(),
            cols: csr.cols(),
            window_rows,
            row_window_offset: p.window_offset,
            block_value_offset: p.block_offset,
            block_cols: p.block_keys,
            masks,
            values: p.values,
        };
        debug_assert_eq!(f.validate(), Ok(()));
        Ok(f)
    }

    /// Calls `f(local_row, slot, value)` for every nonzero of block `b` (`< num_blocks()`), in
    /// value (= CSR) order.
    pub fn for_each_in_block(&self, b: usize, mut f: impl FnMut(usize, usize, f32)) {
        let per_block = self.masks_per_block();
        let mut k = self.block_value_offset[b] as usize;
        for (i, &mask) in self.masks[b * per_block..(b + 1) * per_block]
            .iter()
            .enumerate()
        {
            let mut bits = mask;
            while bits != 0 {
                let p = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                f(8 * i + p / 8, p % 8, self.values[k]);
                k += 1;
            }
        }
    }

    /// Converts back to CSR, bit-exact.
    pub fn to_csr(&self) -> Csr {
        csr_from_blocks(
            (self.rows, self.cols),
            self.nnz(),
            self.window_rows,
            (&self.row_window_offset, &self.block_value_offset),
            |b, push| {
                self.for_each_in_block(b, |row, slot, v| {
                    push(row, self.block_cols[b * BLOCK_COLS + slot], v)
                });
            },
        )
    }

    /// Re-checks every invariant.
    pub fn validate(&self) -> Result<(), FormatError> {
        let wr = self.window_rows;
        if !valid_height(wr) {
            return Err(invalid(NAME, format!("window_rows = {wr}")));
        }
        let blocks = self.block_value_offset.len().saturating_sub(1);
        let per_block = self.masks_per_block();
        if self.masks.len() != blocks * per_block {
            return Err(invalid(
                NAME,
                "masks length is not window_rows / 8 · blocks",
            ));
        }
        let frame = Compacted {
            rows: self.rows,
            cols: self.cols,
            window_rows: wr,
            window_offset: &self.row_window_offset,
            value_offset: ("block_value_offset", &self.block_value_offset),
            nnz: self.values.len(),
            block_cols: ("block_cols", &self.block_cols),
        };
        frame.check(NAME, blocks, |_, b, valid_rows| {
            let masks = &self.masks[b * per_block..(b + 1) * per_block];
            let mut used = 0u8;
            let mut bits = 0usize;
            for (i, &m) in masks.iter().enumerate() {
                // Rows 8i + r with r ≥ valid_rows - 8i must be empty.
                if m & !rows_mask(valid_rows.saturating_sub(8 * i)) != 0 {
                    return Err(invalid(NAME, format!("block {b}: bit in a row past M")));
                }
                used |= mask_slots(m);
                bits += m.count_ones() as usize;
            }
            let count = (self.block_value_offset[b + 1] - self.block_value_offset[b]) as usize;
            if bits != count {
                return Err(invalid(
                    NAME,
                    format!("block {b}: {bits} mask bits but {count} values"),
                ));
            }
            Ok(used)
        })
    }

    crate::layout::shape_accessors!();
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// Rows per window.
    pub fn window_rows(&self) -> usize {
        self.window_rows
    }
    /// `u64` masks per block (`window_rows / 8`).
    pub fn masks_per_block(&self) -> usize {
        self.window_rows / 8
    }
    /// ⌈rows / window_rows⌉.
    pub fn num_windows(&self) -> usize {
        self.rows.div_ceil(self.window_rows)
    }
    /// Number of `window_rows × 8` blocks.
    pub fn num_blocks(&self) -> usize {
        self.block_value_offset.len() - 1
    }
    /// Prefix of blocks per window (len windows+1).
    pub fn row_window_offset(&self) -> &[u32] {
        &self.row_window_offset
    }
    /// Prefix of nonzeros per block (len blocks+1).
    pub fn block_value_offset(&self) -> &[u32] {
        &self.block_value_offset
    }
    /// 8 column ids per block, sentinel-padded.
    pub fn block_cols(&self) -> &[u32] {
        &self.block_cols
    }
    /// `window_rows / 8` masks per block (mask `i`: rows `8i..8i+8`, bit `(row % 8)·8 + slot`).
    pub fn masks(&self) -> &[u64] {
        &self.masks
    }
    /// Values in bit order per block (= CSR order).
    pub fn values(&self) -> &[f32] {
        &self.values
    }
    /// Bytes of all arrays.
    pub fn bytes(&self) -> usize {
        4 * (self.row_window_offset.len() + self.block_value_offset.len() + self.block_cols.len())
            + 8 * self.masks.len()
            + 4 * self.values.len()
    }
}

impl Layout for RowTileTcf {
    layout_from_inherent!(NAME, usize);

    /// Like the row-tile kernels: window by window, block by block, every set bit of the block's
    /// masks in value order.
    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, mut f: F) {
        for_each_window_block(&self.row_window_offset, |w, b| {
            self.for_each_in_block(b, |lr, slot, v| {
                let col = self.block_cols[b * BLOCK_COLS + slot] as usize;
                f(w * self.window_rows + lr, col, v);
            });
        });
    }
}

/// The skeleton of a [`RowTileTcf`] without masks or values: its shape, window height, window
/// block prefix and block columns. The plan cache stores it (a 32nd of a 32-row dense-tile layout)
/// so that a cache hit can fill the tiles on the GPU straight from the CSR.
///
/// Invariants (checked by [`RowTileStructure::new`]): a valid window height; `row_window_offset`
/// has ⌈rows / window_rows⌉ + 1 entries, starts at 0, never decreases and ends at the block count;
/// `block_cols` holds 8 ids per block; within a window the ids rise strictly and are `< cols`,
/// except [`SENTINEL`] padding at the end of the window's last block (never its slot 0).
#[derive(Clone, Debug, PartialEq)]
pub struct RowTileStructure {
    rows: usize,
    cols: usize,
    window_rows: usize,
    row_window_offset: Vec<u32>,
    block_cols: Vec<u32>,
}

impl RowTileStructure {
    /// Checks the invariants (in parallel over windows) and wraps the arrays.
    pub fn new(
        rows: usize,
        cols: usize,
        window_rows: usize,
        row_window_offset: Vec<u32>,
        block_cols: Vec<u32>,
    ) -> Result<Self, FormatError> {
        if !valid_height(window_rows) {
            return Err(invalid(NAME, format!("window_rows = {window_rows}")));
        }
        check_dims(NAME, rows, cols)?;
        if !block_cols.len().is_multiple_of(BLOCK_COLS) {
            return Err(invalid(NAME, "block_cols length is not 8·blocks"));
        }
        let blocks = block_cols.len() / BLOCK_COLS;
        let windows = rows.div_ceil(window_rows);
        check_prefix(
            NAME,
            "row_window_offset",
            &row_window_offset,
            windows + 1,
            blocks,
        )?;
        (0..windows)
            .into_par_iter()
            .with_min_len(256)
            .try_for_each(|w| {
                let (b0, b1) = (
                    row_window_offset[w] as usize,
                    row_window_offset[w + 1] as usize,
                );
                let mut prev: Option<u32> = None;
                for b in b0..b1 {
                    let ids = &block_cols[b * BLOCK_COLS..(b + 1) * BLOCK_COLS];
                    // Every slot but the padding holds a column.
                    let used = ids
                        .iter()
                        .enumerate()
                        .filter(|&(_, &c)| c != SENTINEL)
                        .fold(0u8, |m, (s, _)| m | 1 << s);
                    check_block_cols(NAME, b, ids, used, b + 1 == b1, cols, &mut prev)?;
                }
                Ok(())
            })?;
        Ok(Self {
            rows,
            cols,
            window_rows,
            row_window_offset,
            block_cols,
        })
    }

    crate::layout::shape_accessors!();
    /// Rows per window.
    pub fn window_rows(&self) -> usize {
        self.window_rows
    }
    /// Number of `window_rows × 8` blocks.
    pub fn num_blocks(&self) -> usize {
        self.block_cols.len() / BLOCK_COLS
    }
    /// Prefix of blocks per window (len windows+1).
    pub fn row_window_offset(&self) -> &[u32] {
        &self.row_window_offset
    }
    /// 8 column ids per block, sentinel-padded.
    pub fn block_cols(&self) -> &[u32] {
        &self.block_cols
    }
}

impl RowTileTcf {
    /// The layout's [`RowTileStructure`] (a copy of its window prefix and block columns).
    pub fn structure(&self) -> RowTileStructure {
        RowTileStructure {
            rows: self.rows,
            cols: self.cols,
            window_rows: self.window_rows,
            row_window_offset: self.row_window_offset.clone(),
            block_cols: self.block_cols.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;

    #[test]
    fn a_layouts_structure_passes_its_checks_and_broken_ones_do_not() {
        let t: Vec<(u32, u32, f32)> = (0..37u32)
            .flat_map(|r| {
                (0..30u32)
                    .filter(move |c| (r + 2 * c) % 5 < 2)
                    .map(move |c| (r, c, 1.0))
            })
            .collect();
        let a = csr_from_triplets(37, 30, &t).unwrap();
        for wr in [16, 32] {
            let m = RowTileTcf::from_csr(&a, wr).unwrap();
            let s = m.structure();
            let rebuilt = RowTileStructure::new(
                37,
                30,
                wr,
                s.row_window_offset().to_vec(),
                s.block_cols().to_vec(),
            );
            assert_eq!(rebuilt.as_ref(), Ok(&s));
            assert_eq!(s.num_blocks(), m.num_blocks());
            let rwo = s.row_window_offset().to_vec();
            let cols = s.block_cols().to_vec();
            let bad = |rwo: Vec<u32>, cols: Vec<u32>| RowTileStructure::new(37, 30, wr, rwo, cols);
            // Columns out of order, out of range, a sentinel in slot 0, a prefix off by one.
            let mut swapped = cols.clone();
            swapped.swap(0, 1);
            assert!(bad(rwo.clone(), swapped).is_err());
            let mut wide = cols.clone();
            wide[7] = 30;
            assert!(bad(rwo.clone(), wide).is_err());
            let mut lead = cols.clone();
            lead[0] = SENTINEL;
            assert!(bad(rwo.clone(), lead).is_err());
            let mut short = rwo.clone();
            *short.last_mut().unwrap() -= 1;
            assert!(bad(short, cols.clone()).is_err());
            assert!(bad(rwo.clone(), cols[..cols.len() - 1].to_vec()).is_err());
            assert!(RowTileStructure::new(37, 30, 24 + wr, rwo, cols).is_err());
        }
    }

    #[test]
    fn rejects_bad_window_heights() {
        let a = csr_from_triplets(4, 4, &[(0, 0, 1.0)]).unwrap();
        for wr in [0, 4, 12, 72] {
            assert!(matches!(
                RowTileTcf::from_csr(&a, wr),
                Err(FormatError::BadArgument(_))
            ));
        }
    }

    #[test]
    fn masks_split_rows_by_eight_and_keep_value_order() {
        // Window of 32 rows: (0, 3), (9, 3), (17, 40), (31, 3); one block, columns 3 and 40.
        let t = [(0, 3, 1.0), (9, 3, 2.0), (17, 40, 3.0), (31, 3, 4.0)];
        let a = csr_from_triplets(32, 41, &t).unwrap();
        let f = RowTileTcf::from_csr(&a, 32).unwrap();
        assert_eq!(f.num_blocks(), 1);
        assert_eq!(&f.block_cols()[..3], &[3, 40, SENTINEL]);
        // Row 9 = 8·1 + 1 → mask 1, bit 8; row 17 = 8·2 + 1, slot 1 → mask 2, bit 9;
        // row 31 = 8·3 + 7 → mask 3, bit 56.
        assert_eq!(f.masks(), &[1, 1 << 8, 1 << 9, 1 << 56][..]);
        assert_eq!(f.values(), &[1.0, 2.0, 3.0, 4.0]);
        let mut seen = Vec::new();
        f.for_each_in_block(0, |r, s, v| seen.push((r, s, v)));
        assert_eq!(
            seen,
            vec![(0, 0, 1.0), (9, 0, 2.0), (17, 1, 3.0), (31, 0, 4.0)]
        );
    }

    #[test]
    fn validate_catches_corruption() {
        // 20 rows (the second 16-row window is ragged), two blocks in window 0.
        let t: Vec<_> = (0..20u32)
            .flat_map(|r| {
                (0..12u32)
                    .filter(move |c| (r + c) % 3 == 0)
                    .map(move |c| (r, c, 1.0))
            })
            .collect();
        let a = csr_from_triplets(20, 12, &t).unwrap();
        let good = RowTileTcf::from_csr(&a, 16).unwrap();
        assert_eq!(good.validate(), Ok(()));
        type Corruption = Box<dyn Fn(&mut RowTileTcf)>;
        let broken: Vec<(&str, Corruption)> = vec![
            (
                "bit past M",
                Box::new(|f| *f.masks.last_mut().unwrap() |= 1 << 63),
            ),
            ("bit dropped", Box::new(|f| f.masks[0] &= f.masks[0] - 1)),
            (
                "sentinel in slot 0",
                Box::new(|f| f.block_cols[0] = SENTINEL),
            ),
            ("columns swapped", Box::new(|f| f.block_cols.swap(0, 1))),
            ("column ≥ K", Box::new(|f| f.block_cols[7] = 12)),
            (
                "short masks",
                Box::new(|f| f.masks.truncate(f.masks.len() - 1)),
            ),
            ("window_rows", Box::new(|f| f.window_rows = 12)),
            ("prefix", Box::new(|f| f.row_window_offset[1] += 5)),
        ];
        for (what, corrupt) in broken {
            let mut f = good.clone();
            corrupt(&mut f);
            assert!(f.validate().is_err(), "{what} not detected");
        }
    }
}
