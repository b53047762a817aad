//! The contract every device layout keeps ([`Layout`]: built from CSR, converted back exactly,
//! validated, multiplied on the CPU the way its kernel walks it), and what the layouts share to
//! keep it: the [`FormatError`] of building, validating and decoding, the [`SENTINEL`] padding
//! column, the checks of the arrays every layout validates, the one CPU product over a layout's
//! entries, and the checked deserialization (`checked_layout!`: serde reads an unchecked shadow
//! and converts it through `validate`).
//!
//! Layouts: [`BitTcf`](crate::bittcf::BitTcf), [`MeTcf`](crate::metcf::MeTcf),
//! [`RowTileTcf`](crate::rowtile::RowTileTcf), [`Hrpb`](crate::hrpb::Hrpb),
//! [`BitBsr`](crate::bitbsr::BitBsr).

use crate::Csr;
use thiserror::Error;

/// A sparse layout a device kernel reads.
///
/// Every layout keeps these promises (property-tested over all of them in
/// `tests/fmt_layout_contract.rs`): `to_csr(from_csr_with(a, p)) == a` bit for bit (explicit
/// zeros, −0.0 and NaN included); `validate` accepts what `from_csr_with` builds and rejects arrays
/// a kernel could not read safely (deserialization runs it too); `spmm_cpu` is the f32 product
/// C = A·B that visits the entries in the order the layout's kernel accumulates them.
pub trait Layout: Sized {
    /// What a build needs besides the matrix: `()` for layouts of one shape, the window height
    /// for row-tile TCF.
    type Params: Copy + std::fmt::Debug;
    /// The layout's name, as its errors print it.
    const NAME: &'static str;

    /// Builds the layout from CSR (in parallel). Explicit zeros are kept.
    fn from_csr_with(csr: &Csr, params: Self::Params) -> Result<Self, FormatError>;
    /// Converts back to CSR, bit-exact.
    fn to_csr(&self) -> Csr;
    /// Re-checks every invariant of the arrays.
    fn validate(&self) -> Result<(), FormatError>;
    /// `(rows, cols)` of the matrix.
    fn shape(&self) -> (usize, usize);
    /// Stored entries (explicit zeros included).
    fn nnz(&self) -> usize;
    /// Calls `f(row, col, value)` for every stored entry, in the order the layout's kernel
    /// accumulates them (window by window, block by block, in the block's bit or value order).
    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, f: F);

    /// CPU product C = A·B walking the layout like its kernel ([`Layout::for_each_entry`]). `b`
    /// is row-major `cols × n` with leading dimension `ldb ≥ n`; C is row-major `rows × n`.
    ///
    /// # Errors
    /// [`FormatError::BadArgument`] if `ldb < n` or `b` is too short; [`FormatError::TooLarge`]
    /// if C's size overflows.
    fn spmm_cpu(&self, b: &[f32], n: usize, ldb: usize) -> Result<Vec<f32>, FormatError> {
        let (rows, cols) = self.shape();
        let mut c = dense_output(rows, cols, b, n, ldb)?;
        self.for_each_entry(|row, col, v| add_scaled_row(&mut c, row, n, v, b, col, ldb));
        Ok(c)
    }
}

/// `C[row, ..n] += v · B[col, ..n]` (row-major C with `n` columns, B with leading dimension `ldb`):
/// the rank-1 step of every layout's CPU product.
#[inline]
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

/// Checks that `b` holds a `cols × n` row-major operand with leading dimension `ldb ≥ n`, and
/// returns a zeroed `rows × n` output.
pub(crate) fn dense_output(
    rows: usize,
    cols: usize,
    b: &[f32],
    n: usize,
    ldb: usize,
) -> Result<Vec<f32>, FormatError> {
    if ldb < n {
        return Err(FormatError::BadArgument(format!("ldb {ldb} < n {n}")));
    }
    if crate::reference::dense_len(cols, n, ldb).is_none_or(|need| b.len() < need) {
        return Err(FormatError::BadArgument(format!(
            "dense operand of {} values is too short for {cols} × {n} with leading dimension {ldb}",
            b.len()
        )));
    }
    let len = rows
        .checked_mul(n)
        .ok_or_else(|| FormatError::TooLarge(format!("output of {rows} × {n}")))?;
    Ok(vec![0f32; len])
}

/// Bytes a layout field holds in arrays: a `Vec`'s length times its element size, none for a
/// scalar (dimensions, counts).
pub(crate) trait ArrayBytes {
    fn array_bytes(&self) -> usize;
}

impl<T> ArrayBytes for Vec<T> {
    fn array_bytes(&self) -> usize {
        std::mem::size_of_val(self.as_slice())
    }
}

impl ArrayBytes for usize {
    fn array_bytes(&self) -> usize {
        0
    }
}

/// Declares a layout struct (one per module) whose deserialization cannot produce an invalid
/// layout: serde reads an unchecked `Shadow` with the same fields and converts it through the
/// layout's `validate` (the `TryFrom` of sprs' shadow structs). Its `bytes()` sums the bytes of
/// every array field ([`ArrayBytes`]).
macro_rules! checked_layout {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "Shadow")]
        $vis struct $name {
            $($field: $ty),*
        }

        /// Unchecked mirror used only for deserialization; converted with validation.
        #[derive(serde::Deserialize)]
        struct Shadow {
            $($field: $ty),*
        }

        impl $name {
            /// Bytes of all arrays (each its length times its element size).
            pub fn bytes(&self) -> usize {
                use $crate::layout::ArrayBytes;
                0 $(+ self.$field.array_bytes())*
            }
        }

        impl TryFrom<Shadow> for $name {
            type Error = $crate::layout::FormatError;
            fn try_from(s: Shadow) -> Result<Self, Self::Error> {
                let f = $name { $($field: s.$field),* };
                f.validate()?;
                Ok(f)
            }
        }
    };
}
pub(crate) use checked_layout;

/// The [`Layout`] items every layout answers from its inherent ones: `Params` (`()`, or the one
/// argument its `from_csr` takes after the matrix), `NAME`, `from_csr_with`, `to_csr`,
/// `validate`, `nnz`, and `shape` from fields `rows` and `cols`.
macro_rules! layout_from_inherent {
    ($name:expr, ()) => {
        type Params = ();
        const NAME: &'static str = $name;
        fn from_csr_with(
            csr: &$crate::Csr,
            (): (),
        ) -> Result<Self, $crate::layout::FormatError> {
            Self::from_csr(csr)
        }
        $crate::layout::layout_from_inherent!(@common);
    };
    ($name:expr, $params:ty) => {
        type Params = $params;
        const NAME: &'static str = $name;
        fn from_csr_with(
            csr: &$crate::Csr,
            params: $params,
        ) -> Result<Self, $crate::layout::FormatError> {
            Self::from_csr(csr, params)
        }
        $crate::layout::layout_from_inherent!(@common);
    };
    (@common) => {
        fn to_csr(&self) -> $crate::Csr {
            Self::to_csr(self)
        }
        fn validate(&self) -> Result<(), $crate::layout::FormatError> {
            Self::validate(self)
        }
        fn shape(&self) -> (usize, usize) {
            (self.rows, self.cols)
        }
        fn nnz(&self) -> usize {
            Self::nnz(self)
        }
    };
}
pub(crate) use layout_from_inherent;

/// `rows()` and `cols()` of a layout with fields `rows` and `cols`.
macro_rules! shape_accessors {
    () => {
        /// Rows of the matrix.
        pub fn rows(&self) -> usize {
            self.rows
        }
        /// Columns of the matrix.
        pub fn cols(&self) -> usize {
            self.cols
        }
    };
}
pub(crate) use shape_accessors;

/// Calls `f(window, block)` for every block of every window, in order (`window_offset`: prefix of
/// blocks per window).
#[inline]
pub(crate) fn for_each_window_block(window_offset: &[u32], mut f: impl FnMut(usize, usize)) {
    for w in 0..window_offset.len().saturating_sub(1) {
        for b in window_offset[w] as usize..window_offset[w + 1] as usize {
            f(w, b);
        }
    }
}

/// Calls `f(p, k)` for every set bit `p` of `m`, ascending, `k` counting from 0 (the bit's value
/// index within a block stored in bit order).
#[inline]
pub(crate) fn for_each_bit(mut m: u64, mut f: impl FnMut(usize, usize)) {
    let mut k = 0;
    while m != 0 {
        f(m.trailing_zeros() as usize, k);
        m &= m - 1;
        k += 1;
    }
}

/// Padding column id in every layout that compacts columns (B row treated as zero).
pub const SENTINEL: u32 = u32::MAX;

/// Errors building, validating or decoding a tensor-core layout.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum FormatError {
    /// The matrix is too large for the layout's index types.
    #[error("matrix too large for this layout: {0}")]
    TooLarge(String),
    /// An invariant of the layout does not hold (corrupted or hand-built arrays).
    #[error("invalid {format}: {what}")]
    Invalid {
        /// Layout name.
        format: &'static str,
        /// The invariant that failed.
        what: String,
    },
    /// Bad argument (tile size 0, operand too short, ...).
    #[error("bad argument: {0}")]
    BadArgument(String),
    /// A row has more distinct columns than a window of the layout can stage (the window-staged
    /// CSR's slot cap): the layout does not fit this matrix.
    #[error("row {row} has {columns} distinct columns, more than the {cap} slots of a window")]
    RowOverCap {
        /// The row.
        row: usize,
        /// Its distinct columns.
        columns: usize,
        /// Slots of a window.
        cap: usize,
    },
}

pub(crate) fn invalid(format: &'static str, what: impl Into<String>) -> FormatError {
    FormatError::Invalid {
        format,
        what: what.into(),
    }
}

/// Rows and columns a layout indexes with u32.
pub(crate) fn check_dims(
    format: &'static str,
    rows: usize,
    cols: usize,
) -> Result<(), FormatError> {
    if rows >= u32::MAX as usize || cols >= u32::MAX as usize {
        return Err(invalid(format, "dimensions exceed u32"));
    }
    Ok(())
}

/// A matrix whose rows, columns and nonzeros a layout can index with u32.
pub(crate) fn check_u32(csr: &Csr) -> Result<(), FormatError> {
    for (what, v) in [
        ("rows", csr.rows()),
        ("cols", csr.cols()),
        ("nnz", csr.nnz()),
    ] {
        if v >= u32::MAX as usize {
            return Err(FormatError::TooLarge(format!("{what} = {v}")));
        }
    }
    Ok(())
}

/// The bits of an 8-row mask that belong to its first `rows` rows (all 64 from 8 rows on).
pub(crate) fn rows_mask(rows: usize) -> u64 {
    if rows >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * rows)) - 1
    }
}

/// The slots an 8-row mask uses (bit `s` set when some row has bit `8·row + s`).
pub(crate) fn mask_slots(m: u64) -> u8 {
    (0..8).fold(0u8, |u, r| u | (m >> (8 * r)) as u8)
}

/// Checks the 8 column ids of block `b` of a compacted layout: `cols[s] < ncols`, ascending
/// across the window's blocks (`prev`: the last id seen in this window, updated), [`SENTINEL`]
/// only in the window's last block (`last_block`), never in slot 0 and never on a used slot; every
/// other slot used (bit `s` of `used_slots`).
pub(crate) fn check_block_cols(
    format: &'static str,
    b: usize,
    cols: &[u32],
    used_slots: u8,
    last_block: bool,
    ncols: usize,
    prev: &mut Option<u32>,
) -> Result<(), FormatError> {
    for (s, &c) in cols.iter().enumerate() {
        let used = used_slots >> s & 1 == 1;
        if c == SENTINEL {
            if !last_block || used || s == 0 {
                return Err(invalid(format, format!("block {b}: misplaced sentinel")));
            }
            *prev = Some(SENTINEL);
            continue;
        }
        if c as usize >= ncols || prev.is_some_and(|p| p >= c) {
            return Err(invalid(
                format,
                format!("block {b}: column ids not ascending"),
            ));
        }
        if !used {
            return Err(invalid(
                format,
                format!("block {b}: slot {s} has no nonzero"),
            ));
        }
        *prev = Some(c);
    }
    Ok(())
}

/// Checks a prefix array: right length, starts at 0, non-decreasing, ends at `last`.
pub(crate) fn check_prefix(
    format: &'static str,
    name: &str,
    a: &[u32],
    len: usize,
    last: usize,
) -> Result<(), FormatError> {
    if a.len() != len {
        return Err(invalid(
            format,
            format!("{name} has length {} instead of {len}", a.len()),
        ));
    }
    if a.first() != Some(&0) {
        return Err(invalid(format, format!("{name} does not start at 0")));
    }
    if a.windows(2).any(|w| w[0] > w[1]) {
        return Err(invalid(format, format!("{name} decreases")));
    }
    if *a.last().unwrap_or(&0) as usize != last {
        return Err(invalid(
            format,
            format!("{name} ends at {:?} instead of {last}", a.last()),
        ));
    }
    Ok(())
}

/// [`check_prefix`] for each `(name, array, length, last)`.
pub(crate) fn check_prefixes(
    format: &'static str,
    prefixes: &[(&str, &[u32], usize, usize)],
) -> Result<(), FormatError> {
    for &(name, a, len, last) in prefixes {
        check_prefix(format, name, a, len, last)?;
    }
    Ok(())
}

/// The arrays every compacted windowed layout has (BitTCF, ME-TCF, row-tile TCF): windows of
/// `window_rows` rows, a window prefix of blocks, a value prefix of nonzeros, 8 column ids per
/// block.
pub(crate) struct Compacted<'a> {
    pub rows: usize,
    pub cols: usize,
    pub window_rows: usize,
    pub window_offset: &'a [u32],
    /// Name and array of the prefix of nonzeros per block (`blocks + 1` entries).
    pub value_offset: (&'static str, &'a [u32]),
    /// Stored entries (the value prefix's last entry).
    pub nnz: usize,
    /// Name and array of the 8 column ids per block.
    pub block_cols: (&'static str, &'a [u32]),
}

impl Compacted<'_> {
    /// Checks the frame of a layout of `blocks` blocks (dimensions within u32, both prefixes, 8
    /// column ids per block), then walks its blocks window by window: `block(w, b, valid_rows)`
    /// checks block `b` of window `w` (`valid_rows`: rows of the window inside the matrix) and
    /// returns the slots it uses, whose column ids [`check_block_cols`] then checks.
    pub(crate) fn check(
        &self,
        format: &'static str,
        blocks: usize,
        mut block: impl FnMut(usize, usize, usize) -> Result<u8, FormatError>,
    ) -> Result<(), FormatError> {
        const SLOTS: usize = 8;
        let (rows, wr, rwo) = (self.rows, self.window_rows, self.window_offset);
        check_dims(format, rows, self.cols)?;
        let (value_name, value_offset) = self.value_offset;
        check_prefix(
            format,
            "row_window_offset",
            rwo,
            rows.div_ceil(wr) + 1,
            blocks,
        )?;
        check_prefix(format, value_name, value_offset, blocks + 1, self.nnz)?;
        let (cols_name, block_cols) = self.block_cols;
        if block_cols.len() != blocks * SLOTS {
            return Err(invalid(
                format,
                format!("{cols_name} length is not 8·blocks"),
            ));
        }
        for w in 0..rows.div_ceil(wr) {
            let valid_rows = wr.min(rows - w * wr);
            let (b0, b1) = (rwo[w] as usize, rwo[w + 1] as usize);
            let mut prev: Option<u32> = None;
            for b in b0..b1 {
                let used = block(w, b, valid_rows)?;
                let ids = &block_cols[b * SLOTS..(b + 1) * SLOTS];
                check_block_cols(format, b, ids, used, b + 1 == b1, self.cols, &mut prev)?;
            }
        }
        Ok(())
    }
}
