//! Machinery shared by the windowed tensor-core layouts ([`FormatError`], the parallel window
//! builder) and TC-GNN's TCF, kept only as far as the Acc-SpMM Fig. 12 compression ratios need it
//! ([`tcf_bytes`]).
//!
//! TCF (TC-GNN, ATC'23) stores CSR plus, per nonzero, its row (`edgeToRow`) and its compacted column
//! inside its 16-row window (`edgeToColumn`), plus the number of 16×8 blocks per window
//! (`blockPartition`). All entries are 4 bytes, so
//! `bytes = 4·(M+1) + 4·nnz·4 + 4·⌈M/16⌉` (nodePointer, edgeList, values, edgeToColumn, edgeToRow,
//! blockPartition).

use crate::Csr;
use rayon::prelude::*;
use thiserror::Error;

/// Padding column id in every layout that compacts columns (B row treated as zero).
pub const SENTINEL: u32 = u32::MAX;

/// Rows per TC-GNN window.
pub const TCF_WINDOW_ROWS: usize = 16;

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

/// Bytes TC-GNN's TCF needs for `csr` (see the module docs for the formula).
pub fn tcf_bytes(csr: &Csr) -> usize {
    let windows = csr.rows().div_ceil(TCF_WINDOW_ROWS);
    4 * (csr.rows() + 1) + 16 * csr.nnz() + 4 * windows
}

/// How a windowed layout maps a column to (block, slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ColumnMode {
    /// The window's sorted unique columns are cut into groups of `block_cols` slots
    /// (BitTCF, ME-TCF, HRPB); padding slots hold [`SENTINEL`].
    Compacted,
    /// Blocks are aligned on the original columns: block column `c / block_cols`,
    /// slot `c % block_cols` (bitBSR).
    Aligned,
}

/// The arrays every windowed layout is derived from. Inside a block, nonzeros are in row-major
/// order (`pos = local_row·block_cols + slot` ascending), which is CSR order.
#[derive(Debug, Default)]
pub(crate) struct WindowedParts {
    /// Blocks per window, prefix: len windows + 1.
    pub window_offset: Vec<u32>,
    /// Compacted: `block_cols` column ids per block (sentinel-padded). Aligned: one block-column
    /// id per block.
    pub block_keys: Vec<u32>,
    /// Nonzeros per block, prefix: len blocks + 1.
    pub block_offset: Vec<u32>,
    /// Local position of every nonzero.
    pub pos: Vec<u16>,
    /// Values, same order as `pos`.
    pub values: Vec<f32>,
}

/// Local arrays of one chunk of windows, before concatenation.
#[derive(Default)]
struct Chunk {
    window_blocks: Vec<u32>,
    block_keys: Vec<u32>,
    block_nnz: Vec<u32>,
    pos: Vec<u16>,
    values: Vec<f32>,
}

/// Windows per rayon task.
const CHUNK_WINDOWS: usize = 512;

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

/// Builds the windowed parts in parallel over chunks of windows.
pub(crate) fn build_windowed(
    csr: &Csr,
    window_rows: usize,
    block_cols: usize,
    mode: ColumnMode,
) -> Result<WindowedParts, FormatError> {
    check_u32(csr)?;
    debug_assert!(window_rows * block_cols <= 1 << 16);
    let rows = csr.rows();
    let windows = rows.div_ceil(window_rows);
    let indptr = csr.indptr();
    let indptr = indptr.raw_storage();
    let (indices, data) = (csr.indices(), csr.data());
    let n_chunks = windows.div_ceil(CHUNK_WINDOWS);
    let chunks: Vec<Chunk> = (0..n_chunks)
        .into_par_iter()
        .map(|ci| {
            let w0 = ci * CHUNK_WINDOWS;
            let w1 = (w0 + CHUNK_WINDOWS).min(windows);
            let r0 = w0 * window_rows;
            let r1 = (w1 * window_rows).min(rows);
            let nnz = (indptr[r1] - indptr[r0]) as usize;
            let mut ch = Chunk {
                window_blocks: Vec::with_capacity(w1 - w0),
                pos: vec![0; nnz],
                values: vec![0.0; nnz],
                ..Chunk::default()
            };
            let mut keys: Vec<u32> = Vec::new();
            let mut blk: Vec<u32> = Vec::new();
            let mut cursor: Vec<u32> = Vec::new();
            let mut out_base = 0usize;
            for w in w0..w1 {
                let wr0 = w * window_rows;
                let wr1 = (wr0 + window_rows).min(rows);
                let (k0, k1) = (indptr[wr0] as usize, indptr[wr1] as usize);
                keys.clear();
                match mode {
                    ColumnMode::Compacted => keys.extend_from_slice(&indices[k0..k1]),
                    ColumnMode::Aligned => {
                        for r in wr0..wr1 {
                            let mut last = u32::MAX;
                            for &c in &indices[indptr[r] as usize..indptr[r + 1] as usize] {
                                let key = c / block_cols as u32;
                                if key != last {
                                    keys.push(key);
                                    last = key;
                                }
                            }
                        }
                    }
                }
                if wr1 - wr0 > 1 {
                    keys.sort_unstable();
                    keys.dedup();
                }
                let nb = match mode {
                    ColumnMode::Compacted => keys.len().div_ceil(block_cols),
                    ColumnMode::Aligned => keys.len(),
                };
                ch.window_blocks.push(nb as u32);
                match mode {
                    ColumnMode::Compacted => {
                        ch.block_keys.extend_from_slice(&keys);
                        let pad = nb * block_cols - keys.len();
                        ch.block_keys.extend(std::iter::repeat_n(SENTINEL, pad));
                    }
                    ColumnMode::Aligned => ch.block_keys.extend_from_slice(&keys),
                }
                // Pass 1: block of every nonzero, counts per block.
                blk.clear();
                cursor.clear();
                cursor.resize(nb + 1, 0);
                for r in wr0..wr1 {
                    let (a, b) = (indptr[r] as usize, indptr[r + 1] as usize);
                    let mut lo = 0usize;
                    for &c in &indices[a..b] {
                        let key = match mode {
                            ColumnMode::Compacted => c,
                            ColumnMode::Aligned => c / block_cols as u32,
                        };
                        // Columns of a row ascend, so search only to the right of the last hit.
                        lo += keys[lo..].partition_point(|&u| u < key);
                        let (bi, slot) = match mode {
                            ColumnMode::Compacted => (lo / block_cols, lo % block_cols),
                            ColumnMode::Aligned => (lo, c as usize % block_cols),
                        };
                        let lr = r - wr0;
                        blk.push(((bi as u32) << 16) | (lr * block_cols + slot) as u32);
                        cursor[bi + 1] += 1;
                    }
                }
                for b in 0..nb {
                    ch.block_nnz.push(cursor[b + 1]);
                    cursor[b + 1] += cursor[b];
                }
                // Pass 2: scatter in row-major order inside every block.
                for (i, &e) in blk.iter().enumerate() {
                    let bi = (e >> 16) as usize;
                    let at = out_base + cursor[bi] as usize;
                    cursor[bi] += 1;
                    ch.pos[at] = (e & 0xffff) as u16;
                    ch.values[at] = data[k0 + i];
                }
                out_base += k1 - k0;
            }
            ch
        })
        .collect();
    let total_blocks: usize = chunks.iter().map(|c| c.block_nnz.len()).sum();
    if total_blocks >= u32::MAX as usize {
        return Err(FormatError::TooLarge(format!("blocks = {total_blocks}")));
    }
    let key_len: usize = chunks.iter().map(|c| c.block_keys.len()).sum();
    let mut parts = WindowedParts {
        window_offset: Vec::with_capacity(windows + 1),
        block_keys: Vec::with_capacity(key_len),
        block_offset: Vec::with_capacity(total_blocks + 1),
        pos: Vec::with_capacity(csr.nnz()),
        values: Vec::with_capacity(csr.nnz()),
    };
    parts.window_offset.push(0);
    parts.block_offset.push(0);
    let (mut nb, mut nz) = (0u32, 0u32);
    for ch in chunks {
        for &b in &ch.window_blocks {
            nb += b;
            parts.window_offset.push(nb);
        }
        for &n in &ch.block_nnz {
            nz += n;
            parts.block_offset.push(nz);
        }
        parts.block_keys.extend_from_slice(&ch.block_keys);
        parts.pos.extend_from_slice(&ch.pos);
        parts.values.extend_from_slice(&ch.values);
    }
    Ok(parts)
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

/// Assembles a CSR from per-window decoded entries. `emit(w, push)` must call `push(local_row,
/// col, value)` for every nonzero of window `w`, each row's entries in ascending column order.
pub(crate) fn csr_from_windows<F>(
    rows: usize,
    cols: usize,
    nnz: usize,
    window_rows: usize,
    window_nnz_offset: &[usize],
    emit: F,
) -> Csr
where
    F: Fn(usize, &mut dyn FnMut(usize, u32, f32)) + Sync,
{
    let windows = rows.div_ceil(window_rows);
    let mut indices = vec![0u32; nnz];
    let mut data = vec![0f32; nnz];
    let mut row_len = vec![0u32; rows];
    // Split outputs into disjoint per-window slices.
    let mut idx_slices = Vec::with_capacity(windows);
    let mut val_slices = Vec::with_capacity(windows);
    let mut len_slices = Vec::with_capacity(windows);
    {
        let (mut ri, mut rv, mut rl) = (&mut indices[..], &mut data[..], &mut row_len[..]);
        for w in 0..windows {
            let n = window_nnz_offset[w + 1] - window_nnz_offset[w];
            let (a, b) = std::mem::take(&mut ri).split_at_mut(n);
            let (c, d) = std::mem::take(&mut rv).split_at_mut(n);
            let nr = window_rows.min(rows - w * window_rows);
            let (e, f) = std::mem::take(&mut rl).split_at_mut(nr);
            idx_slices.push(a);
            val_slices.push(c);
            len_slices.push(e);
            ri = b;
            rv = d;
            rl = f;
        }
    }
    idx_slices
        .into_par_iter()
        .zip(val_slices)
        .zip(len_slices)
        .enumerate()
        .with_min_len(64)
        .for_each(|(w, ((idx, val), lens))| {
            let mut tmp: Vec<(usize, u32, f32)> = Vec::with_capacity(idx.len());
            emit(w, &mut |lr, c, v| tmp.push((lr, c, v)));
            for &(lr, _, _) in &tmp {
                lens[lr] += 1;
            }
            let mut start = [0usize; 17];
            let mut acc = 0usize;
            for (lr, &l) in lens.iter().enumerate() {
                start[lr] = acc;
                acc += l as usize;
            }
            for (lr, c, v) in tmp {
                idx[start[lr]] = c;
                val[start[lr]] = v;
                start[lr] += 1;
            }
        });
    let mut indptr = Vec::with_capacity(rows + 1);
    indptr.push(0u32);
    let mut acc = 0u32;
    for l in row_len {
        acc += l;
        indptr.push(acc);
    }
    Csr::new((rows, cols), indptr, indices, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;

    #[test]
    fn tcf_bytes_formula() {
        let a = csr_from_triplets(17, 5, &[(0, 0, 1.0), (16, 4, 2.0)]).unwrap();
        assert_eq!(tcf_bytes(&a), 4 * 18 + 16 * 2 + 4 * 2);
    }
}
