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
use crate::layout::{
    Compacted, FormatError, Layout, for_each_window_block, invalid, layout_from_inherent,
};
use crate::windowed::decode::csr_from_blocks;
use crate::windowed::{WindowSpec, build_windowed};

/// Rows per window.
pub const WINDOW_ROWS: usize = 16;
/// Slots per block.
pub const BLOCK_COLS: usize = 8;
/// Padding column id.
pub const SENTINEL: u32 = crate::layout::SENTINEL;

const NAME: &str = "ME-TCF";

crate::layout::checked_layout! {
    /// A sparse matrix in ME-TCF; invariants in the module docs, checked on construction and by
    /// [`MeTcf::validate`].
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
}

impl MeTcf {
    /// Builds ME-TCF from CSR (parallel over chunks of windows). Explicit zeros are kept.
    #[tracing::instrument(name = "build", level = "info", skip_all, fields(layout = "metcf", nnz = csr.nnz()))]
    pub fn from_csr(csr: &Csr) -> Result<Self, FormatError> {
        let spec = WindowSpec {
            block_window: true,
            ..WindowSpec::compacted(WINDOW_ROWS, BLOCK_COLS)
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
        csr_from_blocks(
            (self.rows, self.cols),
            self.nnz(),
            WINDOW_ROWS,
            (&self.row_window_offset, &self.tc_offset),
            |b, push| {
                for k in self.tc_offset[b] as usize..self.tc_offset[b + 1] as usize {
                    let p = self.tc_local_id[k] as usize;
                    push(p / 8, self.sparse_a_to_x[b * 8 + p % 8], self.values[k]);
                }
            },
        )
    }

    /// Re-checks every invariant.
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.tc_local_id.len() != self.values.len() {
            return Err(invalid(NAME, "tc_local_id length ≠ nnz"));
        }
        let frame = Compacted {
            rows: self.rows,
            cols: self.cols,
            window_rows: WINDOW_ROWS,
            window_offset: &self.row_window_offset,
            value_offset: ("tc_offset", &self.tc_offset),
            nnz: self.values.len(),
            block_cols: ("sparse_a_to_x", &self.sparse_a_to_x),
        };
        frame.check(NAME, self.block_window.len(), |w, b, vr| {
            if self.block_window[b] as usize != w {
                return Err(invalid(NAME, format!("block {b}: wrong block_window")));
            }
            let ids = &self.tc_local_id[self.tc_offset[b] as usize..self.tc_offset[b + 1] as usize];
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
            Ok(used)
        })
    }

    crate::layout::shape_accessors!();
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
}

impl Layout for MeTcf {
    layout_from_inherent!(NAME, ());

    /// Like the DTC-SpMM kernel: window by window, block by block, the block's nonzeros by local
    /// id (`local_row·8 + slot` ascending, the order of its dense 16×8 tile).
    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, mut f: F) {
        for_each_window_block(&self.row_window_offset, |w, b| {
            let cols = &self.sparse_a_to_x[b * BLOCK_COLS..(b + 1) * BLOCK_COLS];
            for k in self.tc_offset[b] as usize..self.tc_offset[b + 1] as usize {
                let p = self.tc_local_id[k] as usize;
                f(
                    w * WINDOW_ROWS + p / 8,
                    cols[p % 8] as usize,
                    self.values[k],
                );
            }
        });
    }
}
