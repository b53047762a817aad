//! What every tensor-core layout shares: the [`FormatError`] of building, validating and decoding,
//! the [`SENTINEL`] padding column, and the checks of the arrays every layout validates.

use crate::Csr;
use thiserror::Error;

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
}

pub(crate) fn invalid(format: &'static str, what: impl Into<String>) -> FormatError {
    FormatError::Invalid {
        format,
        what: what.into(),
    }
}

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
