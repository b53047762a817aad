//! One chunk of windows built on a per-worker scratch ([`KeySet`]): compacted windows
//! ([`run_chunk`]: the window's sorted unique columns cut into blocks) and aligned block rows
//! ([`run_chunk_aligned`]: bitBSR), with the key sorts they use.

use super::{ChunkOut, ColumnMode, POP8, PosOut};
use crate::layout::SENTINEL;

/// Per-thread scratch over the whole key space (column ids, or block-column ids for bitBSR).
/// Compacted mode: a two-level bitmap, so that the window's sorted unique keys come out without
/// sorting, and a dense rank table (no popcount per nonzero). Aligned mode: dense per-key slots
/// (see [`run_chunk_aligned`]). Only touched entries are cleared after a window.
pub(super) struct KeySet {
    /// Bit per key.
    l1: Vec<u64>,
    /// Bit per `l1` word.
    l0: Vec<u64>,
    /// The window's sorted unique keys.
    keys: Vec<u32>,
    /// Block id and local position of every nonzero of the window.
    blk: Vec<u32>,
    pos: Vec<u16>,
    /// Per-block cursors.
    cursor: Vec<u32>,
    /// Aligned mode only (else empty), indexed by key: mask (0 outside the current window) and
    /// count, then value cursor, of every key of the current window.
    slots: Vec<Slot>,
    /// Sort buffer.
    tmp: Vec<u32>,
    /// Sort buffer of [`sort_keys_rank16`].
    tmp16: Vec<i16>,
    /// Compacted mode only (else empty): rank of every key of the current window among the
    /// window's keys, indexed by key (stale outside the window's keys).
    rank: Vec<u32>,
}

/// Mask and count / value cursor of one block column (aligned mode), one cache line access.
#[derive(Clone, Copy, Default)]
struct Slot {
    mask: u64,
    n: u32,
}

impl KeySet {
    pub(super) fn new(key_space: usize, mode: ColumnMode) -> Self {
        let words = key_space.div_ceil(64).max(1);
        let dense = if mode == ColumnMode::Aligned {
            key_space
        } else {
            0
        };
        KeySet {
            l1: vec![0; words],
            l0: vec![0; words.div_ceil(64)],
            keys: Vec::new(),
            blk: Vec::new(),
            pos: Vec::new(),
            cursor: Vec::new(),
            slots: vec![Slot::default(); dense],
            tmp: Vec::new(),
            tmp16: Vec::new(),
            rank: vec![0; if dense == 0 { key_space } else { 0 }],
        }
    }
}

/// Inputs of one chunk of windows `w0..w1`.
pub(super) struct ChunkIn<'a> {
    pub(super) indptr: &'a [u32],
    pub(super) indices: &'a [u32],
    pub(super) data: &'a [f32],
    pub(super) rows: usize,
    pub(super) window_rows: usize,
    pub(super) block_cols: usize,
    pub(super) w0: usize,
    pub(super) w1: usize,
}

/// Builds one chunk of compacted windows: values and positions into `vals`/`poss` (the chunk's
/// CSR range), block-level arrays returned. `MASKS`: also build the u64 block masks.
pub(super) fn run_chunk<P: PosOut, const MASKS: bool>(
    inp: &ChunkIn<'_>,
    ks: &mut KeySet,
    vals: &mut [f32],
    poss: &mut [P],
) -> ChunkOut {
    let (indptr, indices, data, rows) = (inp.indptr, inp.indices, inp.data, inp.rows);
    let (window_rows, block_cols, w0, w1) = (inp.window_rows, inp.block_cols, inp.w0, inp.w1);
    let bc_shift = block_cols.trailing_zeros();
    let slot_mask = block_cols as u32 - 1;
    let mut ch = ChunkOut {
        window_blocks: Vec::with_capacity(w1 - w0),
        ..ChunkOut::default()
    };
    let base = indptr[(w0 * window_rows).min(rows)] as usize;
    for w in w0..w1 {
        let wr0 = w * window_rows;
        let wr1 = (wr0 + window_rows).min(rows);
        let (k0, k1) = (indptr[wr0] as usize, indptr[wr1] as usize);
        let n = k1 - k0;
        if n == 0 {
            ch.window_blocks.push(0);
            continue;
        }
        // Keys in order of first touch (test-and-set in the `l1` bitmap), sorted, then ranked.
        if ks.keys.len() < n {
            ks.keys.resize(n, 0);
        }
        let mut nk = 0usize;
        let (mut lo, mut hi) = (u32::MAX, 0u32);
        for r in wr0..wr1 {
            let row = &indices[indptr[r] as usize..indptr[r + 1] as usize];
            if let (Some(&f), Some(&l)) = (row.first(), row.last()) {
                lo = lo.min(f);
                hi = hi.max(l);
            }
            for &c in row {
                let wd = &mut ks.l1[c as usize >> 6];
                let bit = 1u64 << (c & 63);
                let fresh = *wd & bit == 0;
                *wd |= bit;
                ks.keys[nk] = c;
                nk += fresh as usize;
            }
        }
        let keys = &mut ks.keys[..nk];
        sort_keys(keys, &mut ks.tmp, lo, hi, true, &mut ks.l1, &mut ks.l0);
        for (i, &k) in keys.iter().enumerate() {
            ks.rank[k as usize] = i as u32;
        }
        let nb = nk.div_ceil(block_cols);
        ch.window_blocks.push(nb as u32);
        ch.block_keys.extend_from_slice(&ks.keys[..nk]);
        let pad = nb * block_cols - nk;
        ch.block_keys.extend(std::iter::repeat_n(SENTINEL, pad));
        // Pass 1: block and position of every nonzero; counts (and masks) per block.
        if ks.blk.len() < n {
            ks.blk.resize(n, 0);
            ks.pos.resize(n, 0);
        }
        ks.cursor.clear();
        ks.cursor.resize(nb + 1, 0);
        let mb = ch.masks.len();
        if MASKS {
            ch.masks.resize(mb + nb, 0);
        }
        let masks = &mut ch.masks[mb..];
        let (blk, pos) = (&mut ks.blk[..n], &mut ks.pos[..n]);
        let (ranks, cursor) = (&ks.rank, &mut ks.cursor);
        let mut j = 0usize;
        for r in wr0..wr1 {
            let lr = ((r - wr0) << bc_shift) as u32;
            for &c in &indices[indptr[r] as usize..indptr[r + 1] as usize] {
                let rank = ranks[c as usize];
                let (b, slot) = (rank >> bc_shift, rank & slot_mask);
                let p = lr | slot;
                blk[j] = b;
                pos[j] = p as u16;
                j += 1;
                cursor[b as usize + 1] += 1;
                if MASKS {
                    masks[b as usize] |= 1u64 << p;
                }
            }
        }
        for b in 0..nb {
            ch.block_nnz.push(cursor[b + 1]);
            cursor[b + 1] += cursor[b];
        }
        // Pass 2: scatter in row-major order inside every block.
        let off = k0 - base;
        let (vw, pw) = (&mut vals[off..off + n], &mut poss[off..off + n]);
        for ((&b, &p), &v) in blk.iter().zip(pos.iter()).zip(&data[k0..k1]) {
            let at = cursor[b as usize] as usize;
            cursor[b as usize] += 1;
            vw[at] = v;
            pw[at] = P::from_pos(p);
        }
    }
    ch
}

/// Distinct-key counts up to which [`sort_keys`] ranks by counting.
const RANK_SORT_MAX: usize = 48;

/// Distinct-key counts up to which [`sort_keys_rank16`] may be used.
const RANK16_MAX: usize = 64;

/// Sorts up to [`RANK16_MAX`] distinct keys, all in `lo..lo + 2^15`, by rank counting over i16
/// offsets (8 lanes per SSE2 compare): every key goes to the number of smaller keys, counted
/// branch-free over the offsets padded to groups of 8 with `i16::MAX`.
fn sort_keys_rank16(keys: &mut [u32], tmp: &mut Vec<i16>, lo: u32) {
    let n = keys.len();
    debug_assert!(n <= RANK16_MAX);
    let padded = n.next_multiple_of(8);
    tmp.clear();
    tmp.extend(keys.iter().map(|&k| (k - lo) as i16));
    tmp.resize(padded, i16::MAX);
    let mut out = [0u32; RANK16_MAX];
    for &k in keys.iter() {
        let kk = (k - lo) as i16;
        // One vector of 8 lane counters, summed once per key.
        let mut acc = [0i16; 8];
        for g in tmp.chunks_exact(8) {
            for (a, &x) in acc.iter_mut().zip(g) {
                *a += (x < kk) as i16;
            }
        }
        let r: i16 = acc.iter().sum();
        out[r as usize] = k;
    }
    keys.copy_from_slice(&out[..n]);
}

/// Sorts distinct keys (all in `lo..=hi`): already sorted stays; a range narrow for their number
/// goes through the two-level bitmap `l1`/`l0`; else up to [`RANK_SORT_MAX`] keys are placed at
/// their rank (number of smaller keys, counted branch-free); else a comparison sort. The bitmap
/// is all zero on return, and on entry too except that `in_l1` says the keys' `l1` bits are set.
fn sort_keys(
    keys: &mut [u32],
    tmp: &mut Vec<u32>,
    lo: u32,
    hi: u32,
    in_l1: bool,
    l1: &mut [u64],
    l0: &mut [u64],
) {
    // No keys: `lo > hi`.
    let (w0, w1) = (lo as usize >> 12, (hi.max(lo) as usize) >> 12);
    // Scan cost: `l0` words over the range, `l1` words touched (at most the span in words).
    let span = (hi.max(lo) as usize >> 6) - (lo as usize >> 6) + 1;
    let n = keys.len();
    let bitmap = n > 0 && (span <= n || (n > RANK_SORT_MAX && w1 - w0 < n / 4 + 8));
    if in_l1 && !bitmap {
        for &k in keys.iter() {
            l1[k as usize >> 6] = 0;
        }
    }
    if keys.is_sorted() {
        if in_l1 && bitmap {
            for &k in keys.iter() {
                l1[k as usize >> 6] = 0;
            }
        }
        return;
    }
    if !bitmap && keys.len() <= RANK_SORT_MAX {
        // Keys padded to whole groups of 8 with u32::MAX (never smaller than a key), so that the
        // count vectorises without a scalar tail; the ranks land in `out`.
        let n = keys.len();
        let padded = n.next_multiple_of(8);
        tmp.clear();
        tmp.extend_from_slice(keys);
        tmp.resize(2 * padded, u32::MAX);
        let (pad, out) = tmp.split_at_mut(padded);
        for &k in keys.iter() {
            let r: u32 = pad
                .chunks_exact(8)
                .map(|g| g.iter().map(|&x| (x < k) as u32).sum::<u32>())
                .sum();
            out[r as usize] = k;
        }
        keys.copy_from_slice(&out[..n]);
        return;
    }
    if !bitmap {
        keys.sort_unstable();
        return;
    }
    for &k in keys.iter() {
        let k = k as usize;
        if !in_l1 {
            l1[k >> 6] |= 1u64 << (k & 63);
        }
        l0[k >> 12] |= 1u64 << ((k >> 6) & 63);
    }
    let mut r = 0usize;
    for (wi, w) in (w0..).zip(&mut l0[w0..=w1]) {
        let mut m0 = std::mem::take(w);
        while m0 != 0 {
            let i = (wi << 6) | m0.trailing_zeros() as usize;
            m0 &= m0 - 1;
            let mut m1 = std::mem::take(&mut l1[i]);
            let base = (i << 6) as u32;
            while m1 != 0 {
                keys[r] = base | m1.trailing_zeros();
                r += 1;
                m1 &= m1 - 1;
            }
        }
    }
}

/// Block rows with at most this many nonzeros (< 128, byte-sized row ends) take the flat first
/// pass of [`run_chunk_aligned`].
const FLAT_ROW_MAX: usize = 64;
/// Block rows of more than [`FLAT_ROW_MAX`] nonzeros with at least this many nonzeros per block
/// on average take the block-driven second pass of [`run_chunk_aligned`].
const DENSE_BLOCK_NNZ: usize = 8;
/// One in every byte.
const ONES: u64 = 0x0101_0101_0101_0101;
/// High bit of every byte.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Builds one chunk of bitBSR block rows (aligned 8×8 blocks, masks): values into `vals` (the
/// chunk's CSR range), block-level arrays returned.
///
/// Pass 1 ORs every nonzero's bit into the dense per-key mask and lists the block columns in
/// order of first touch; the (few) keys are sorted; each key then gets its value cursor; pass 2
/// drops every value at its block's cursor. A block's values arrive in CSR order, which is its
/// bit order (`8·local_row + c % 8` ascending), so no rank is needed.
pub(super) fn run_chunk_aligned(inp: &ChunkIn<'_>, ks: &mut KeySet, vals: &mut [f32]) -> ChunkOut {
    let (indptr, indices, data, rows) = (inp.indptr, inp.indices, inp.data, inp.rows);
    let (w0, w1) = (inp.w0, inp.w1);
    debug_assert_eq!((inp.window_rows, inp.block_cols), (8, 8));
    let base = indptr[(w0 * 8).min(rows)] as usize;
    // At most one block per nonzero: no reallocation.
    let most = indptr[(w1 * 8).min(rows)] as usize - base;
    let mut ch = ChunkOut {
        window_blocks: Vec::with_capacity(w1 - w0),
        block_keys: Vec::with_capacity(most),
        block_nnz: Vec::with_capacity(most),
        masks: Vec::with_capacity(most),
    };
    for w in w0..w1 {
        let r0 = w * 8;
        let r1 = (r0 + 8).min(rows);
        let (k0, k1) = (indptr[r0] as usize, indptr[r1] as usize);
        let n = k1 - k0;
        if ks.keys.len() < n {
            ks.keys.resize(n, 0);
        }
        // Pass 1: masks and counts by key, keys in order of first touch.
        let mut nk = 0usize;
        let (mut lo, mut hi) = (u32::MAX, 0u32);
        let mut slot = |c: u32, sh: u32, nk: &mut usize| {
            let bc = c >> 3;
            let s = &mut ks.slots[bc as usize];
            let fresh = s.mask == 0;
            // Branch-free (the load often misses the cache): n restarts at 1 when fresh.
            s.n = (s.n & (fresh as u32).wrapping_sub(1)) + 1;
            s.mask |= 1u64 << (sh | (c & 7));
            ks.keys[*nk] = bc;
            *nk += fresh as usize;
        };
        if n <= FLAT_ROW_MAX {
            // Short rows: one loop over the whole block row (a loop per row mispredicts its exit
            // about once per row). Byte `i` of `ends`: end of local row `i` inside the block row
            // (`n` past the last row); block-column range from the rows' first and last nonzeros.
            let mut ends = n as u64 * ONES;
            for (i, r) in (r0..r1).enumerate() {
                let (a, b) = (indptr[r] as usize, indptr[r + 1] as usize);
                if a < b {
                    lo = lo.min(indices[a] >> 3);
                    hi = hi.max(indices[b - 1] >> 3);
                }
                let sh = 8 * i;
                ends = (ends & !(0xff << sh)) | (((b - k0) as u64) << sh);
            }
            // Local row of the `j`-th nonzero = number of row ends ≤ j, counted in SWAR over the
            // bytes of `ends` (all < 128): byte `i` of `(j·ONES | HIGH) − ends` keeps its high
            // bit iff `j ≥ end_i`.
            let mut jj = 0u64;
            for &c in &indices[k0..k1] {
                let flags = ((jj | HIGH) - ends) & HIGH;
                let lr = ((flags >> 7).wrapping_mul(ONES) >> 56) as u32;
                slot(c, lr << 3, &mut nk);
                jj += ONES;
            }
        } else {
            for r in r0..r1 {
                let sh = ((r - r0) * 8) as u32;
                let row = &indices[indptr[r] as usize..indptr[r + 1] as usize];
                if let (Some(&f), Some(&l)) = (row.first(), row.last()) {
                    lo = lo.min(f >> 3);
                    hi = hi.max(l >> 3);
                }
                for &c in row {
                    slot(c, sh, &mut nk);
                }
            }
        }
        let keys = &mut ks.keys[..nk];
        // Few keys over a narrow range (most block rows of graphs): i16 rank counting, faster
        // here than the bitmap scan or the u32 rank counting of `sort_keys`.
        if nk <= RANK16_MAX && hi.wrapping_sub(lo) < 1 << 15 {
            sort_keys_rank16(keys, &mut ks.tmp16, lo);
        } else {
            sort_keys(keys, &mut ks.tmp, lo, hi, false, &mut ks.l1, &mut ks.l0);
        }
        ch.window_blocks.push(nk as u32);
        let mut cur = (k0 - base) as u32;
        // Grown first, then written through iterators: no per-push length bookkeeping.
        let b0 = ch.block_keys.len();
        ch.block_keys.extend_from_slice(keys);
        ch.block_nnz.resize(b0 + nk, 0);
        ch.masks.resize(b0 + nk, 0);
        for ((&bc, cnt_out), m_out) in keys
            .iter()
            .zip(&mut ch.block_nnz[b0..])
            .zip(&mut ch.masks[b0..])
        {
            let s = &mut ks.slots[bc as usize];
            let cnt = s.n;
            *cnt_out = cnt;
            *m_out = s.mask;
            s.mask = 0;
            s.n = cur;
            cur += cnt;
        }
        if n > FLAT_ROW_MAX && n >= DENSE_BLOCK_NNZ * nk {
            // Dense blocks: pass 2 by blocks instead of by nonzeros. A block's values are, row
            // by row, the next `popcount(mask byte)` nonzeros of that row (blocks ascending,
            // rows sorted), so every (block, row) copies a run from the row's cursor: no
            // per-nonzero cursor in memory (whose increments chain when neighbours share a
            // block). The run is copied as 8 values, the surplus overwritten by the next runs
            // (exact copy where 8 would pass the end of the chunk or of `data`).
            let mut rc = [0usize; 8];
            for (lr, c) in rc.iter_mut().enumerate() {
                *c = indptr[(r0 + lr).min(r1)] as usize;
            }
            let mut o = k0 - base;
            for &m in &ch.masks[b0..b0 + nk] {
                for (lr, c) in rc.iter_mut().enumerate() {
                    let cnt = POP8[(m >> (8 * lr)) as usize & 0xff] as usize;
                    let s = *c;
                    if let (Some(dst), Some(src)) = (vals.get_mut(o..o + 8), data.get(s..s + 8)) {
                        dst.copy_from_slice(src);
                    } else {
                        vals[o..o + cnt].copy_from_slice(&data[s..s + cnt]);
                    }
                    *c = s + cnt;
                    o += cnt;
                }
            }
            continue;
        }
        // Pass 2: every value at its block's cursor (CSR order inside a block = bit order).
        for (&c, &v) in indices[k0..k1].iter().zip(&data[k0..k1]) {
            let s = &mut ks.slots[(c >> 3) as usize];
            vals[s.n as usize] = v;
            s.n += 1;
        }
    }
    ch
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;

    /// Every path of `sort_keys` (already sorted, rank counting, bitmap, comparison sort) gives
    /// the sorted keys and leaves the bitmap clear.
    #[test]
    fn sort_keys_paths_agree_with_sort() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let space = 1usize << 22;
        let (mut l1, mut l0) = (vec![0u64; space / 64], vec![0u64; space / 4096]);
        let mut tmp = Vec::new();
        for round in 0..400 {
            let n = [1, 2, 5, 30, 48, 49, 100, 700][round % 8];
            let width = [8usize, 300, 5000, space][(round / 8) % 4];
            let start = rng.random_range(0..=space - width);
            let mut keys: Vec<u32> = (0..n)
                .map(|_| (start + rng.random_range(0..width)) as u32)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            if round % 3 != 0 {
                // Shuffle (round % 3 == 0 keeps them sorted).
                for i in (1..keys.len()).rev() {
                    keys.swap(i, rng.random_range(0..=i));
                }
            }
            let mut want = keys.clone();
            want.sort_unstable();
            let (lo, hi) = (want[0], *want.last().unwrap());
            for in_l1 in [false, true] {
                let mut k = keys.clone();
                if in_l1 {
                    for &x in &k {
                        l1[x as usize >> 6] |= 1u64 << (x & 63);
                    }
                }
                sort_keys(&mut k, &mut tmp, lo, hi, in_l1, &mut l1, &mut l0);
                assert_eq!(k, want, "round {round} in_l1 {in_l1}");
                assert!(l1.iter().all(|&w| w == 0) && l0.iter().all(|&w| w == 0));
            }
        }
    }

    /// `sort_keys_rank16` sorts every key count up to its maximum over ranges up to 2^15 wide,
    /// including a key at the top of the range (equal to the i16 padding).
    #[test]
    fn sort_keys_rank16_agrees_with_sort() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut tmp = Vec::new();
        for round in 0..300 {
            let n = 1 + round % RANK16_MAX;
            let width = [64u32, 1000, 1 << 15][round % 3];
            let lo = rng.random_range(0..1u32 << 28);
            let mut keys: Vec<u32> = (0..n).map(|_| lo + rng.random_range(0..width)).collect();
            if round % 3 == 2 {
                keys[0] = lo + width - 1;
            }
            keys.sort_unstable();
            keys.dedup();
            let want = keys.clone();
            for i in (1..keys.len()).rev() {
                keys.swap(i, rng.random_range(0..=i));
            }
            sort_keys_rank16(&mut keys, &mut tmp, want[0]);
            assert_eq!(keys, want, "round {round}");
        }
    }

    /// bitBSR block rows through each key sort of `run_chunk_aligned` (i16 rank counting: few
    /// block columns over < 2^15; `sort_keys`: more than `RANK16_MAX` block columns, or a range
    /// ≥ 2^15) and through the block-driven second pass (dense blocks, also as the last block
    /// row, where the 8-value copies meet the end of the data) match the reference builder and
    /// round-trip.
    #[test]
    fn bitbsr_key_sort_paths_match_reference() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let (rows, cols) = (64usize, 1usize << 20);
        let mut t = Vec::new();
        let mut c0 = 0;
        for r in 0..rows {
            let (n, width) = match (r / 8) % 4 {
                0 => (3, 2_000),   // narrow, few blocks: rank16
                1 => (60, 50_000), // > 64 blocks per block row: sort_keys
                2 => (4, cols),    // range ≥ 2^15 block columns: sort_keys
                _ => (40, 64),     // dense blocks: block-driven second pass
            };
            // One column range per block row.
            if r % 8 == 0 {
                c0 = rng.random_range(0..=cols - width);
            }
            for _ in 0..n {
                t.push((
                    r as u32,
                    (c0 + rng.random_range(0..width)) as u32,
                    rng.random_range(-1.0f32..1.0),
                ));
            }
        }
        t.sort_by_key(|&(r, c, _)| (r, c));
        t.dedup_by_key(|&mut (r, c, _)| (r, c));
        check_bitbsr_against_reference(rows, cols, &t);
    }

    /// Block rows on both sides of `FLAT_ROW_MAX` nonzeros, with empty and irregular rows and
    /// a partial last block row, match the reference builder (flat and per-row first pass).
    #[test]
    fn bitbsr_flat_and_per_row_first_pass_match_reference() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
        let (rows, cols) = (8 * 300 + 5usize, 3_000usize);
        let mut t = Vec::new();
        for r in 0..rows {
            // Block rows of up to 8·16 = 128 nonzeros; some rows empty.
            let n = match (r / 8) % 3 {
                0 => rng.random_range(0..=3),
                1 => rng.random_range(0..=16),
                _ => 8,
            };
            for _ in 0..n {
                let c = rng.random_range(0..cols);
                // Distinct, exactly representable values: misplaced values are caught.
                t.push((r as u32, c as u32, (r * cols + c) as f32));
            }
        }
        t.sort_by_key(|&(r, c, _)| (r, c));
        t.dedup_by_key(|&mut (r, c, _)| (r, c));
        let per_block_row = |w: usize| t.iter().filter(|e| e.0 as usize / 8 == w).count();
        assert!((0..rows.div_ceil(8)).any(|w| per_block_row(w) == FLAT_ROW_MAX));
        assert!((0..rows.div_ceil(8)).any(|w| per_block_row(w) > FLAT_ROW_MAX));
        check_bitbsr_against_reference(rows, cols, &t);
    }

    /// bitBSR of sorted, deduplicated triplets equals blocks gathered in a BTreeMap over
    /// (block row, block column), values in row-major order inside each block; round-trips.
    fn check_bitbsr_against_reference(rows: usize, cols: usize, t: &[(u32, u32, f32)]) {
        let a = csr_from_triplets(rows, cols, t).unwrap();
        let b = crate::bitbsr::BitBsr::from_csr(&a).unwrap();
        assert_eq!(b.validate(), Ok(()));
        assert_eq!(b.to_csr(), a);
        let mut blocks = std::collections::BTreeMap::<(usize, u32), (u64, Vec<f32>)>::new();
        for &(r, c, v) in t {
            let e = blocks.entry((r as usize / 8, c / 8)).or_default();
            e.0 |= 1u64 << ((r % 8) * 8 + c % 8);
            e.1.push(v);
        }
        let mut ptr = vec![0u32; rows.div_ceil(8) + 1];
        for &(w, _) in blocks.keys() {
            ptr[w + 1] += 1;
        }
        for w in 0..rows.div_ceil(8) {
            ptr[w + 1] += ptr[w];
        }
        let cols_want: Vec<u32> = blocks.keys().map(|k| k.1).collect();
        let masks_want: Vec<u64> = blocks.values().map(|e| e.0).collect();
        let vals_want: Vec<f32> = blocks.values().flat_map(|e| e.1.clone()).collect();
        assert_eq!(b.block_row_ptr(), &ptr[..]);
        assert_eq!(b.block_col(), &cols_want[..]);
        assert_eq!(b.bitmap(), &masks_want[..]);
        assert_eq!(b.values(), &vals_want[..]);
    }
}
