//! Warp items of a CSR matrix balanced by nonzeros ([`csr_work`]), the work list of the CUDA-core
//! CSR SpMM kernel (`kernels-ptx/csr_spmm.cu`): runs of whole rows within a nonzero budget, or one
//! chunk of a row longer than it (a split row, accumulated with atomics after a β pre-scale).

use rayon::prelude::*;

/// Most rows one warp item packs (bounds the stores of a run of empty or short rows).
pub const MAX_ROWS_PER_ITEM: u32 = 32;

/// Warp items of a CSR matrix (see [`csr_work`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsrWork {
    /// `{row_begin, row_end, nnz_begin, nnz_end}` per item, items in row order.
    pub items: Vec<[u32; 4]>,
    /// Rows longer than the budget, held in several items (pre-scaled by β, added with atomics).
    pub split_rows: Vec<u32>,
}

/// Rows per independent segment of [`csr_work`] (no item spans two segments; the segments are
/// counted and packed in parallel).
const WORK_SEGMENT_ROWS: usize = 1 << 12;

/// Splits the rows of a CSR matrix (row offsets `indptr`) into warp items of at most `chunk_nnz`
/// nonzeros (0 is treated as 1): runs of consecutive whole rows, at most [`MAX_ROWS_PER_ITEM`] of
/// them, or, for a row longer than `chunk_nnz`, one item per chunk of it (the row is then listed
/// in `split_rows`). Every row lies in some item and every nonzero in exactly one, in order. Runs
/// never cross a multiple of 2^12 rows, so segments of that many rows are walked in parallel,
/// twice: once to count their items, once to write them in place into the one list (the same
/// list on any thread count; R-MAT scale 20: ~3 ms a walk on one thread).
pub fn csr_work(indptr: &[u32], chunk_nnz: u32) -> CsrWork {
    csr_work_in_segments(indptr, chunk_nnz, WORK_SEGMENT_ROWS)
}

/// [`csr_work`] with runs cut at multiples of `segment_rows` (≥ 1) rows.
fn csr_work_in_segments(indptr: &[u32], chunk_nnz: u32, segment_rows: usize) -> CsrWork {
    let m = indptr.len().saturating_sub(1);
    let seg = segment_rows.max(1);
    let range = |s: usize| (s * seg, m.min(s * seg + seg));
    let segments = m.div_ceil(seg);
    // Pass 1: each segment's item and split-row counts.
    let counts: Vec<(usize, usize)> = (0..segments)
        .into_par_iter()
        .map(|s| {
            let (mut items, mut split) = (0, 0);
            walk_rows(indptr, chunk_nnz, range(s), |_| items += 1, |_| split += 1);
            (items, split)
        })
        .collect();
    // Pass 2: every segment writes its own part of the two lists (fresh pages, faulted in by
    // the writers in parallel instead of by one concatenating thread).
    let mut work = CsrWork {
        items: vec![[0; 4]; counts.iter().map(|c| c.0).sum()],
        split_rows: vec![0; counts.iter().map(|c| c.1).sum()],
    };
    let items = split_by_lens(&mut work.items, counts.iter().map(|c| c.0));
    let split = split_by_lens(&mut work.split_rows, counts.iter().map(|c| c.1));
    items
        .into_par_iter()
        .zip(split)
        .enumerate()
        .for_each(|(s, (items, split))| {
            let (mut it, mut sp) = (items.iter_mut(), split.iter_mut());
            walk_rows(
                indptr,
                chunk_nnz,
                range(s),
                |item| {
                    if let Some(slot) = it.next() {
                        *slot = item;
                    }
                },
                |row| {
                    if let Some(slot) = sp.next() {
                        *slot = row;
                    }
                },
            );
            // (Both walks are the same function of the same rows: every slot is written.)
            debug_assert!(it.next().is_none() && sp.next().is_none());
        });
    work
}

/// `v` cut into consecutive pieces of the given lengths (which sum to `v.len()`).
fn split_by_lens<T>(mut v: &mut [T], lens: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut out = Vec::new();
    for n in lens {
        let rest = std::mem::take(&mut v);
        let (head, tail) = rest.split_at_mut(n.min(rest.len()));
        out.push(head);
        v = tail;
    }
    out
}

/// [`csr_work`]'s walk over rows `[begin, end)`: `item` gets each warp item, in order, and
/// `split` each row longer than the budget.
fn walk_rows(
    indptr: &[u32],
    chunk_nnz: u32,
    (begin, end): (usize, usize),
    mut item: impl FnMut([u32; 4]),
    mut split: impl FnMut(u32),
) {
    let chunk = chunk_nnz.max(1);
    let len = |r: usize| indptr[r + 1] - indptr[r];
    let mut row = begin;
    while row < end {
        if len(row) > chunk {
            let (start, stop) = (indptr[row], indptr[row + 1]);
            let mut p = start;
            while p < stop {
                let q = stop.min(p.saturating_add(chunk));
                item([row as u32, row as u32 + 1, p, q]);
                p = q;
            }
            split(row as u32);
            row += 1;
            continue;
        }
        let first = row;
        let mut total = 0;
        while row < end && row - first < MAX_ROWS_PER_ITEM as usize && total + len(row) <= chunk {
            total += len(row);
            row += 1;
        }
        item([first as u32, row as u32, indptr[first], indptr[row]]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every nonzero in exactly one item, in order; every row in some item; item budgets and row
    /// counts respected; split rows exactly the rows longer than the budget.
    fn check_work(indptr: &[u32], chunk: u32) {
        for segment in [1, 3, 64, WORK_SEGMENT_ROWS] {
            check_work_in_segments(indptr, chunk, segment);
        }
    }

    fn check_work_in_segments(indptr: &[u32], chunk: u32, segment: usize) {
        let w = csr_work_in_segments(indptr, chunk, segment);
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| csr_work_in_segments(indptr, chunk, segment));
        assert_eq!(w, one_thread, "the same list on any thread count");
        let m = indptr.len() - 1;
        let (mut next_row, mut next_nnz) = (0u32, 0u32);
        for &[rb, re, nb, ne] in &w.items {
            assert!(rb < re && re as usize <= m, "{:?}", [rb, re, nb, ne]);
            assert!(nb <= ne && ne - nb <= chunk.max(1));
            assert!(re - rb <= MAX_ROWS_PER_ITEM);
            assert_eq!(
                rb as usize / segment,
                (re as usize - 1) / segment,
                "crosses a segment"
            );
            // Chunks of one split row repeat the row; otherwise rows follow on.
            assert!(rb == next_row || (rb + 1 == next_row && re == next_row));
            assert_eq!(nb, next_nnz);
            assert!(nb >= indptr[rb as usize] && ne <= indptr[re as usize]);
            if re - rb > 1 || nb == indptr[rb as usize] && ne == indptr[re as usize] {
                assert_eq!((nb, ne), (indptr[rb as usize], indptr[re as usize]));
            }
            next_row = re;
            next_nnz = ne;
        }
        assert_eq!(next_row as usize, m);
        assert_eq!(next_nnz, indptr[m]);
        let long: Vec<u32> = (0..m as u32)
            .filter(|&r| indptr[r as usize + 1] - indptr[r as usize] > chunk.max(1))
            .collect();
        assert_eq!(w.split_rows, long);
    }

    fn indptr_of(lens: &[u32]) -> Vec<u32> {
        std::iter::once(0)
            .chain(lens.iter().scan(0, |s, &l| {
                *s += l;
                Some(*s)
            }))
            .collect()
    }

    #[test]
    fn work_items_cover_every_row_and_nonzero_once() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |k: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % k) as u32
        };
        for case in 0..200 {
            let m = rand(300) as usize;
            // Mostly short rows, some empty, a few hubs.
            let lens: Vec<u32> = (0..m)
                .map(|_| match rand(20) {
                    0..=5 => 0,
                    6 => 200 + rand(3000),
                    _ => rand(12),
                })
                .collect();
            for chunk in [0, 1, 7, 64, 256] {
                check_work(&indptr_of(&lens), chunk);
            }
            if case == 0 {
                check_work(&[0], 16);
            }
        }
    }

    #[test]
    fn work_packs_short_rows_and_splits_long_ones() {
        // Rows of 3, 0, 0, 10, 2 nonzeros with a budget of 4: [0, 3) packs 3 + 0 + 0, row 3 is
        // split into 4 + 4 + 2, row 4 stands alone.
        let w = csr_work(&indptr_of(&[3, 0, 0, 10, 2]), 4);
        assert_eq!(
            w.items,
            [
                [0, 3, 0, 3],
                [3, 4, 3, 7],
                [3, 4, 7, 11],
                [3, 4, 11, 13],
                [4, 5, 13, 15]
            ]
        );
        assert_eq!(w.split_rows, [3]);
        // At most MAX_ROWS_PER_ITEM empty rows per item.
        let w = csr_work(&indptr_of(&[0; 70]), 4);
        assert_eq!(w.items.len(), 3);
        assert!(w.split_rows.is_empty());
    }
}
