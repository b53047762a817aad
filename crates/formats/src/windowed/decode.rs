//! The way back from a windowed layout to CSR, in parallel over chunks of windows: layouts with
//! one u64 mask per 8-row block ([`csr_from_masks`]), layouts that decode block by block
//! ([`csr_from_blocks`]) and layouts that decode window by window ([`csr_from_windows`]).

use super::{POP8, chunk_windows, split_lens};
use crate::Csr;
use rayon::prelude::*;

/// One chunk of [`csr_from_masks`]: window range and its pieces of indptr, indices, data.
type MaskChunk<'a> = (
    ((&'a (usize, usize), &'a mut [u32]), &'a mut [u32]),
    &'a mut [f32],
);

/// CSR of a layout with 8-row windows and one u64 mask per block (bit `8·local_row + slot`,
/// values per block in bit order): BitTCF and bitBSR. `window_offset` (len windows+1) and
/// `value_offset` (len blocks+1) are the layout's prefixes, `col(b, slot)` the column of a slot.
///
/// One parallel pass over chunks of windows, writing straight into the CSR arrays: a window's
/// row lengths come from the masks' row bytes, then every block's bits are walked in order (rows
/// ascending, slots ascending) with one cursor per row; blocks are in ascending column order, so
/// every row comes out sorted.
pub(crate) fn csr_from_masks(
    (rows, cols): (usize, usize),
    window_offset: &[u32],
    masks: &[u64],
    value_offset: &[u32],
    values: &[f32],
    col: impl Fn(usize, usize) -> u32 + Sync,
) -> Csr {
    const WR: usize = 8;
    let windows = rows.div_ceil(WR);
    let nnz = values.len();
    let win_start = |w: usize| value_offset[window_offset[w] as usize] as usize;
    let ranges = chunk_windows(windows, nnz, win_start);
    let mut indptr = vec![0u32; rows + 1];
    let mut indices = vec![0u32; nnz];
    let mut data = vec![0f32; nnz];
    let row_end = |w: usize| (w * WR).min(rows);
    let ip = split_lens(
        &mut indptr[1..],
        ranges.iter().map(|&(w0, w1)| row_end(w1) - row_end(w0)),
    );
    let nnz_lens = || ranges.iter().map(|&(w0, w1)| win_start(w1) - win_start(w0));
    let ix = split_lens(&mut indices, nnz_lens());
    let dv = split_lens(&mut data, nnz_lens());
    let run = |(((&(w0, w1), ip), ix), dv): MaskChunk<'_>| {
        let base = win_start(w0);
        for w in w0..w1 {
            let (b0, b1) = (window_offset[w] as usize, window_offset[w + 1] as usize);
            let mut len = [0usize; WR];
            for &m in &masks[b0..b1] {
                for (lr, l) in len.iter_mut().enumerate() {
                    *l += POP8[(m >> (8 * lr)) as usize & 0xff] as usize;
                }
            }
            // Cursors (chunk-local) and row ends.
            let mut cur = [0usize; WR];
            let mut at = win_start(w) - base;
            let r0 = w * WR - w0 * WR;
            for lr in 0..WR.min(rows - w * WR) {
                cur[lr] = at;
                at += len[lr];
                ip[r0 + lr] = (base + at) as u32;
            }
            for b in b0..b1 {
                let mut m = masks[b];
                let mut v = value_offset[b] as usize;
                while m != 0 {
                    let p = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let c = &mut cur[p >> 3];
                    ix[*c] = col(b, p & 7);
                    dv[*c] = values[v];
                    *c += 1;
                    v += 1;
                }
            }
        }
    };
    if ranges.len() == 1 {
        ranges.iter().zip(ip).zip(ix).zip(dv).for_each(run);
    } else {
        ranges.par_iter().zip(ip).zip(ix).zip(dv).for_each(run);
    }
    Csr::new((rows, cols), indptr, indices, data)
}

/// Tallest window [`csr_from_windows`] assembles.
pub(crate) const MAX_WINDOWED_ROWS: usize = 64;

/// Assembles a CSR from per-window decoded entries (`window_rows ≤ 64`). `emit(w, push)` must call `push(local_row,
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
    assert!(
        window_rows <= MAX_WINDOWED_ROWS,
        "window_rows = {window_rows}"
    );
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
            let mut start = [0usize; MAX_WINDOWED_ROWS];
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

/// CSR of a layout whose windows hold consecutive blocks: `window_offset` (len windows+1) is the
/// first block of every window, `value_offset` (len blocks+1) the first value of every block.
/// `emit(b, push)` must call `push(local_row, col, value)` for every nonzero of block `b`, each
/// row's entries in ascending column order across the blocks of a window ([`csr_from_windows`]).
pub(crate) fn csr_from_blocks<F>(
    (rows, cols): (usize, usize),
    nnz: usize,
    window_rows: usize,
    (window_offset, value_offset): (&[u32], &[u32]),
    emit: F,
) -> Csr
where
    F: Fn(usize, &mut dyn FnMut(usize, u32, f32)) + Sync,
{
    let win_nnz: Vec<usize> = window_offset
        .iter()
        .map(|&b| value_offset[b as usize] as usize)
        .collect();
    csr_from_windows(rows, cols, nnz, window_rows, &win_nnz, |w, push| {
        for b in window_offset[w] as usize..window_offset[w + 1] as usize {
            emit(b, push);
        }
    })
}
