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

/// What [`build_windowed`] builds. `window_rows · block_cols ≤ 65536`, `block_cols` a power of 2.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowSpec {
    pub window_rows: usize,
    pub block_cols: usize,
    pub mode: ColumnMode,
    /// Also build one u64 mask per block (bit = position); needs `window_rows·block_cols ≤ 64`.
    pub masks: bool,
    /// Also build the window of every block.
    pub block_window: bool,
}

/// Element type of the per-nonzero local positions (`()` when a layout does not keep them).
pub(crate) trait PosOut: Copy + Default + Send + Sync {
    fn from_pos(p: u16) -> Self;
}
impl PosOut for () {
    #[inline(always)]
    fn from_pos(_: u16) -> Self {}
}
impl PosOut for u8 {
    #[inline(always)]
    fn from_pos(p: u16) -> Self {
        p as u8
    }
}
impl PosOut for u16 {
    #[inline(always)]
    fn from_pos(p: u16) -> Self {
        p
    }
}

/// The arrays every windowed layout is derived from. Inside a block, nonzeros are in row-major
/// order (`pos = local_row·block_cols + slot` ascending), which is CSR order.
#[derive(Debug, Default)]
pub(crate) struct WindowedParts<P> {
    /// Blocks per window, prefix: len windows + 1.
    pub window_offset: Vec<u32>,
    /// Compacted: `block_cols` column ids per block (sentinel-padded). Aligned: one block-column
    /// id per block.
    pub block_keys: Vec<u32>,
    /// Nonzeros per block, prefix: len blocks + 1.
    pub block_offset: Vec<u32>,
    /// One mask per block (bit = local position) when asked for, else empty.
    pub masks: Vec<u64>,
    /// Window of every block when asked for, else empty.
    pub block_window: Vec<u32>,
    /// Local position of every nonzero.
    pub pos: Vec<P>,
    /// Values, same order as `pos`.
    pub values: Vec<f32>,
}

/// Block-level arrays of one chunk of windows (nonzero-level arrays are written in place).
#[derive(Default)]
struct ChunkOut {
    window_blocks: Vec<u32>,
    block_keys: Vec<u32>,
    block_nnz: Vec<u32>,
    masks: Vec<u64>,
}

/// Target nonzeros per rayon task (several tasks per thread for balance).
const CHUNK_NNZ: usize = 1 << 15;

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

/// Per-thread scratch over the whole key space (column ids, or block-column ids for bitBSR).
/// Compacted mode: a two-level bitmap, so that the window's sorted unique keys come out without
/// sorting, and a dense rank table (no popcount per nonzero). Aligned mode: dense per-key slots
/// (see [`run_chunk_aligned`]). Only touched entries are cleared after a window.
struct KeySet {
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
    fn new(key_space: usize, mode: ColumnMode) -> Self {
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

/// Splits `v` into consecutive mutable pieces of the given lengths.
fn split_lens<T>(mut v: &mut [T], lens: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut out = Vec::new();
    for n in lens {
        let (a, b) = std::mem::take(&mut v).split_at_mut(n);
        out.push(a);
        v = b;
    }
    out
}

/// Inputs of one chunk of windows `w0..w1`.
struct ChunkIn<'a> {
    indptr: &'a [u32],
    indices: &'a [u32],
    data: &'a [f32],
    rows: usize,
    window_rows: usize,
    block_cols: usize,
    w0: usize,
    w1: usize,
}

/// Builds one chunk of compacted windows: values and positions into `vals`/`poss` (the chunk's
/// CSR range), block-level arrays returned. `MASKS`: also build the u64 block masks.
fn run_chunk<P: PosOut, const MASKS: bool>(
    inp: &ChunkIn<'_>,
    ks: &mut KeySet,
    vals: &mut [f32],
    poss: &mut [P],
) -> ChunkOut {
    let ChunkIn {
        indptr,
        indices,
        data,
        rows,
        window_rows,
        block_cols,
        w0,
        w1,
    } = *inp;
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
fn run_chunk_aligned(inp: &ChunkIn<'_>, ks: &mut KeySet, vals: &mut [f32]) -> ChunkOut {
    let ChunkIn {
        indptr,
        indices,
        data,
        rows,
        window_rows,
        block_cols,
        w0,
        w1,
    } = *inp;
    debug_assert_eq!((window_rows, block_cols), (8, 8));
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

/// Builds the windowed parts: windows are cut into chunks of about [`CHUNK_NNZ`] nonzeros,
/// every chunk writes its values and positions in place (a window's nonzeros keep their CSR
/// range) and its block-level arrays locally; these are then joined in parallel.
pub(crate) fn build_windowed<P: PosOut>(
    csr: &Csr,
    spec: WindowSpec,
) -> Result<WindowedParts<P>, FormatError> {
    build_windowed_keys(csr, spec, None)
}

/// [`build_windowed`], with the dense renumbering of the keys forced on or off (`None`: when the
/// key space dwarfs the nonzeros).
fn build_windowed_keys<P: PosOut>(
    csr: &Csr,
    spec: WindowSpec,
    renumber: Option<bool>,
) -> Result<WindowedParts<P>, FormatError> {
    check_u32(csr)?;
    let WindowSpec {
        window_rows,
        block_cols,
        mode,
        ..
    } = spec;
    debug_assert!(window_rows * block_cols <= 1 << 16 && block_cols.is_power_of_two());
    debug_assert!(!spec.masks || window_rows * block_cols <= 64);
    let rows = csr.rows();
    let nnz = csr.nnz();
    let windows = rows.div_ceil(window_rows);
    let indptr = csr.indptr();
    let indptr = indptr.raw_storage();
    let (indices, data) = (csr.indices(), csr.data());
    let key_space = match mode {
        ColumnMode::Compacted => csr.cols(),
        ColumnMode::Aligned => csr.cols().div_ceil(block_cols),
    };
    // The per-worker scratch is indexed by key (4–16 bytes per key). Where the declared key space
    // is much larger than the data (a 1 × 4e9 matrix with one nonzero), the keys present are
    // renumbered densely first (order kept), and mapped back at the end: memory follows nnz.
    let sparse_keys = renumber
        .unwrap_or(key_space > SPARSE_KEYS_FACTOR * nnz + SPARSE_KEYS_MIN)
        .then(|| SparseKeys::new(indices, mode, block_cols));
    let (indices, key_space) = match &sparse_keys {
        Some(sk) => (&sk.indices[..], sk.keys.len()),
        None => (indices, key_space),
    };
    let win_start = |w: usize| indptr[(w * window_rows).min(rows)] as usize;

    let chunk_ranges = chunk_windows(windows, nnz, win_start);

    let mut values = vec![0f32; nnz];
    let mut pos = vec![P::default(); nnz];
    let lens = || {
        chunk_ranges
            .iter()
            .map(|&(w0, w1)| win_start(w1) - win_start(w0))
    };
    let val_pieces = split_lens(&mut values, lens());
    let pos_pieces = split_lens(&mut pos, lens());

    let run = |ks: &mut KeySet, (w0, w1): (usize, usize), vals: &mut [f32], poss: &mut [P]| {
        let inp = ChunkIn {
            indptr,
            indices,
            data,
            rows,
            window_rows,
            block_cols,
            w0,
            w1,
        };
        match (mode, spec.masks) {
            (ColumnMode::Aligned, _) => run_chunk_aligned(&inp, ks, vals),
            (ColumnMode::Compacted, true) => run_chunk::<P, true>(&inp, ks, vals, poss),
            (ColumnMode::Compacted, false) => run_chunk::<P, false>(&inp, ks, vals, poss),
        }
    };
    let pool = std::sync::Mutex::new(Vec::new());
    // One chunk (small matrix): stay on this thread, waking the pool costs more than the work.
    let serial = chunk_ranges.len() == 1;
    let chunks: Vec<ChunkOut> = if serial {
        let mut ks = KeySet::new(key_space, mode);
        chunk_ranges
            .iter()
            .zip(val_pieces)
            .zip(pos_pieces)
            .map(|((&r, v), q)| run(&mut ks, r, v, q))
            .collect()
    } else {
        chunk_ranges
            .par_iter()
            .zip(val_pieces)
            .zip(pos_pieces)
            .map(|((&r, v), q)| {
                // One scratch per worker at a time, reused across chunks (fresh ones are zeroed
                // over the whole key space).
                let popped = pool.lock().ok().and_then(|mut p| p.pop());
                let mut ks = popped.unwrap_or_else(|| KeySet::new(key_space, mode));
                let out = run(&mut ks, r, v, q);
                if let Ok(mut p) = pool.lock() {
                    p.push(ks);
                }
                out
            })
            .collect()
    };

    // Join the block-level arrays: every array is one serial concatenation (written once, no
    // zeroing pass), the arrays side by side on the pool.
    let total_blocks: usize = chunks.iter().map(|c| c.block_nnz.len()).sum();
    if total_blocks >= u32::MAX as usize {
        return Err(FormatError::TooLarge(format!("blocks = {total_blocks}")));
    }
    let window_offset = || concat_prefix(&chunks, |c| &c.window_blocks);
    let block_offset = || concat_prefix(&chunks, |c| &c.block_nnz);
    let block_keys = || concat(&chunks, |c| &c.block_keys);
    let masks = || concat(&chunks, |c| &c.masks);
    let block_window = || {
        let mut v = Vec::with_capacity(if spec.block_window { total_blocks } else { 0 });
        if spec.block_window {
            for (ch, &(w0, _)) in chunks.iter().zip(&chunk_ranges) {
                for (i, &n) in ch.window_blocks.iter().enumerate() {
                    v.extend(std::iter::repeat_n((w0 + i) as u32, n as usize));
                }
            }
        }
        v
    };
    let block_keys = || {
        let mut k = block_keys();
        if let Some(sk) = &sparse_keys {
            sk.restore(&mut k);
        }
        k
    };
    let ((window_offset, block_offset), (block_keys, (masks, block_window))) = if serial {
        (
            (window_offset(), block_offset()),
            (block_keys(), (masks(), block_window())),
        )
    } else {
        rayon::join(
            || rayon::join(window_offset, block_offset),
            || rayon::join(block_keys, || rayon::join(masks, block_window)),
        )
    };
    Ok(WindowedParts {
        window_offset,
        block_keys,
        block_offset,
        masks,
        block_window,
        pos,
        values,
    })
}

/// Dense renumbering kicks in when the key space exceeds this many keys per nonzero...
const SPARSE_KEYS_FACTOR: usize = 4;
/// ... plus this many (small matrices keep the direct path).
const SPARSE_KEYS_MIN: usize = 1 << 20;

/// The keys present in a matrix whose declared key space dwarfs its nonzeros, renumbered densely
/// in ascending order (so sorted rows stay sorted and every layout decision is unchanged).
struct SparseKeys {
    /// Column ids rewritten: compacted mode `rank(c)`; aligned mode `rank(c >> s) << s | c & mask`
    /// (`s = log2 block_cols`), so the slot inside a block is kept.
    indices: Vec<u32>,
    /// New key → original key (a column id, or a block-column id in aligned mode), ascending.
    keys: Vec<u32>,
}

impl SparseKeys {
    fn new(indices: &[u32], mode: ColumnMode, block_cols: usize) -> Self {
        let shift = block_cols.trailing_zeros();
        let key_of = |c: u32| match mode {
            ColumnMode::Compacted => c,
            ColumnMode::Aligned => c >> shift,
        };
        let mut keys: Vec<u32> = indices.par_iter().map(|&c| key_of(c)).collect();
        keys.par_sort_unstable();
        keys.dedup();
        keys.shrink_to_fit();
        let rank = |k: u32| keys.partition_point(|&x| x < k) as u32;
        let indices = indices
            .par_iter()
            .map(|&c| match mode {
                ColumnMode::Compacted => rank(c),
                ColumnMode::Aligned => rank(c >> shift) << shift | (c & ((1 << shift) - 1)),
            })
            .collect();
        SparseKeys { indices, keys }
    }

    /// Maps renumbered block keys back to the original ids ([`SENTINEL`] stays).
    fn restore(&self, block_keys: &mut [u32]) {
        block_keys.par_iter_mut().for_each(|k| {
            if *k != SENTINEL {
                *k = self.keys[*k as usize];
            }
        });
    }
}

/// The chunks' `part` arrays concatenated (one allocation of the exact size), every chunk's
/// piece copied by its own task: the fresh pages are faulted in by the copying threads, not by
/// one (bitBSR of a scattered matrix has about one block per nonzero: 16 bytes of block arrays
/// per nonzero to join).
fn concat<T: Copy + Default + Send + Sync>(
    chunks: &[ChunkOut],
    part: impl Fn(&ChunkOut) -> &[T] + Sync,
) -> Vec<T> {
    let mut v = vec![T::default(); chunks.iter().map(|c| part(c).len()).sum()];
    split_lens(&mut v, chunks.iter().map(|c| part(c).len()))
        .into_par_iter()
        .zip(chunks)
        .for_each(|(dst, ch)| dst.copy_from_slice(part(ch)));
    v
}

/// Running sums, from 0, of the chunks' `counts` arrays taken in order (one allocation of the
/// exact size: every count plus the leading 0), each chunk's part summed from its base (the sum
/// of the chunks before it) by its own task.
fn concat_prefix(chunks: &[ChunkOut], counts: impl Fn(&ChunkOut) -> &[u32] + Sync) -> Vec<u32> {
    let totals: Vec<u32> = chunks
        .par_iter()
        .map(|c| counts(c).iter().fold(0u32, |s, &n| s.wrapping_add(n)))
        .collect();
    let bases = totals.iter().scan(0u32, |s, &t| {
        let base = *s;
        *s = s.wrapping_add(t);
        Some(base)
    });
    let mut v = vec![0u32; 1 + chunks.iter().map(|c| counts(c).len()).sum::<usize>()];
    let pieces: Vec<(&mut [u32], u32)> =
        split_lens(&mut v[1..], chunks.iter().map(|c| counts(c).len()))
            .into_iter()
            .zip(bases)
            .collect();
    pieces
        .into_par_iter()
        .zip(chunks)
        .for_each(|((dst, mut sum), ch)| {
            for (d, &n) in dst.iter_mut().zip(counts(ch)) {
                sum = sum.wrapping_add(n);
                *d = sum;
            }
        });
    v
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

/// Cuts `windows` windows (nonzeros before window `w`: `win_start(w)`, `nnz` in all) into ranges
/// of about [`CHUNK_NNZ`] nonzeros plus a little per window.
fn chunk_windows(
    windows: usize,
    nnz: usize,
    win_start: impl Fn(usize) -> usize,
) -> Vec<(usize, usize)> {
    let weight = nnz + windows * 4;
    let n_chunks = (weight / CHUNK_NNZ).clamp(1, windows.max(1));
    let mut bounds = vec![0usize];
    for i in 1..n_chunks {
        let target = weight * i / n_chunks;
        // First window whose start weight reaches the target.
        let (mut a, mut b) = (*bounds.last().unwrap_or(&0), windows);
        while a < b {
            let m = (a + b) / 2;
            if win_start(m) + m * 4 < target {
                a = m + 1;
            } else {
                b = m;
            }
        }
        if a > *bounds.last().unwrap_or(&0) && a < windows {
            bounds.push(a);
        }
    }
    bounds.push(windows);
    bounds.windows(2).map(|b| (b[0], b[1])).collect()
}

/// Nonzeros of every byte value (no `popcnt` on the baseline target).
const POP8: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (i as u32).count_ones() as u8;
        i += 1;
    }
    t
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;

    fn parts_eq<P: PosOut + PartialEq + std::fmt::Debug>(
        a: &WindowedParts<P>,
        b: &WindowedParts<P>,
    ) {
        assert_eq!(a.window_offset, b.window_offset);
        assert_eq!(a.block_keys, b.block_keys);
        assert_eq!(a.block_offset, b.block_offset);
        assert_eq!(a.masks, b.masks);
        assert_eq!(a.block_window, b.block_window);
        assert_eq!(a.pos, b.pos);
        assert_eq!(a.values, b.values);
    }

    /// Renumbering the keys present (the path taken when the declared columns dwarf the data)
    /// builds exactly what the direct per-key scratch builds, in every mode and window shape.
    #[test]
    fn renumbered_keys_build_the_same_parts() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for (rows, cols, nnz) in [
            (40, 3_000_000, 300),
            (300, 70_000, 5000),
            (9, 64, 40),
            (1, 1, 1),
        ] {
            let t: Vec<(u32, u32, f32)> = (0..nnz)
                .map(|i| {
                    // Clustered column ids, so that blocks share columns and block columns.
                    let base = rng.random_range(0..cols as u32 / 16 + 1) * 16;
                    let c = (base + rng.random_range(0..16)).min(cols as u32 - 1);
                    (rng.random_range(0..rows as u32), c, i as f32 + 0.5)
                })
                .collect();
            let a = csr_from_triplets(rows, cols, &t).unwrap();
            for (wr, bc, mode, masks) in [
                (8, 8, ColumnMode::Compacted, true),
                (16, 8, ColumnMode::Compacted, false),
                (32, 8, ColumnMode::Compacted, false),
                (8, 8, ColumnMode::Aligned, true),
                (16, 16, ColumnMode::Compacted, false),
            ] {
                let spec = WindowSpec {
                    window_rows: wr,
                    block_cols: bc,
                    mode,
                    masks,
                    block_window: true,
                };
                let direct = build_windowed_keys::<u16>(&a, spec, Some(false)).unwrap();
                let renum = build_windowed_keys::<u16>(&a, spec, Some(true)).unwrap();
                parts_eq(&direct, &renum);
            }
        }
    }

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

    /// Matrices of many chunks (the parallel path and the join) in every layout, including long
    /// rows over a narrow and a wide column range.
    #[test]
    fn multi_chunk_matrices_round_trip_in_every_layout() {
        for (rows, cols, per_row) in [(40_000usize, 40_000usize, 5.0), (3_000, 2_000_000, 60.0)] {
            let a = crate::generate::uniform_random(rows, cols, per_row, 9).unwrap();
            assert!(a.nnz() > 4 * CHUNK_NNZ);
            let b = crate::bitbsr::BitBsr::from_csr(&a).unwrap();
            assert_eq!(b.validate(), Ok(()));
            assert_eq!(b.to_csr(), a);
            let t = crate::bittcf::BitTcf::from_csr(&a).unwrap();
            assert_eq!(t.validate(), Ok(()));
            assert_eq!(t.to_csr(), a);
            let m = crate::metcf::MeTcf::from_csr(&a).unwrap();
            assert_eq!(m.validate(), Ok(()));
            assert_eq!(m.to_csr(), a);
            let h = crate::hrpb::Hrpb::from_csr(&a).unwrap();
            assert_eq!(h.validate(), Ok(()));
            assert_eq!(h.to_csr(), a);
        }
    }

    /// Scattered windows over a wide matrix take the sort fallback; mixed with dense windows.
    #[test]
    fn wide_matrix_round_trips_in_every_layout() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (rows, cols) = (300usize, 5_000_000usize);
        let mut t = Vec::new();
        for r in 0..rows {
            let n = if r % 37 == 0 { 200 } else { r % 5 };
            for _ in 0..n {
                let c = if r % 2 == 0 {
                    rng.random_range(0..cols)
                } else {
                    rng.random_range(1000..1400)
                };
                t.push((r as u32, c as u32, rng.random_range(-1.0f32..1.0)));
            }
        }
        t.sort_by_key(|&(r, c, _)| (r, c));
        t.dedup_by_key(|&mut (r, c, _)| (r, c));
        let a = csr_from_triplets(rows, cols, &t).unwrap();
        assert_eq!(crate::bittcf::BitTcf::from_csr(&a).unwrap().to_csr(), a);
        assert_eq!(crate::metcf::MeTcf::from_csr(&a).unwrap().to_csr(), a);
        assert_eq!(crate::hrpb::Hrpb::from_csr(&a).unwrap().to_csr(), a);
        assert_eq!(crate::bitbsr::BitBsr::from_csr(&a).unwrap().to_csr(), a);
        for f in [
            crate::bittcf::BitTcf::from_csr(&a).unwrap().validate(),
            crate::bitbsr::BitBsr::from_csr(&a).unwrap().validate(),
            crate::metcf::MeTcf::from_csr(&a).unwrap().validate(),
            crate::hrpb::Hrpb::from_csr(&a).unwrap().validate(),
        ] {
            assert_eq!(f, Ok(()));
        }
    }

    #[test]
    fn tcf_bytes_formula() {
        let a = csr_from_triplets(17, 5, &[(0, 0, 1.0), (16, 4, 2.0)]).unwrap();
        assert_eq!(tcf_bytes(&a), 4 * 18 + 16 * 2 + 4 * 2);
    }
}
