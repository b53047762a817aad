//! HRPB (cuTeSpMM §3.2) with TM = 16, TK = 16 and 16×4 bricks (brick_m = TM, so every block has
//! one brick row and at most 4 bricks, one per brick column).
//!
//! * `blocked_row_ptr` (len ⌈rows/16⌉+1): prefix of blocks per 16-row panel.
//! * `active_cols` (len 16·blocks): the panel's sorted unique columns cut into groups of 16,
//!   the last group padded with [`SENTINEL`].
//! * `size_ptr` (len blocks+1): start of every block record in `packed_blocks`, in u32 words;
//!   always even so that the u64 patterns are 8-byte aligned.
//! * `packed_blocks` (u32 words), one record per block, no padding to 512 bytes (the paper's
//!   code pads every record to 512 bytes, which makes HRPB ~4× CSR on sparse graphs):
//!   - words 0..5: `col_ptr[5]`, prefix of bricks per brick column (steps of 0 or 1);
//!   - word 5: nonzeros of the block;
//!   - then 2 words per brick: the u64 pattern, low word first. Bit = row·4 + col (LSB first), so
//!     the low 32 bits are rows 0–7, the A register of `mma.m16n8k4` for those rows;
//!   - then the values as f32 bits, bricks in CSC order, each brick in bit order;
//!   - then one zero word if needed to keep the record length even.
//!
//!   The paper's per-brick `rows` array is omitted: with TM = brick_m every brick is in brick row 0.

use crate::Csr;
use crate::layout::{
    FormatError, Layout, add_scaled_row, check_dims, check_prefix, check_prefixes, dense_output,
    for_each_window_block, invalid, layout_from_inherent,
};
use crate::windowed::decode::csr_from_windows;
use crate::windowed::{WindowSpec, build_windowed};
use rayon::prelude::*;

/// Rows per panel (TM = brick_m).
pub const TM: usize = 16;
/// Compacted columns per block.
pub const TK: usize = 16;
/// Columns per brick.
pub const BRICK_K: usize = 4;
/// Bricks per block.
pub const BRICKS_PER_BLOCK: usize = TK / BRICK_K;
/// Header words of a block record (`col_ptr[5]` and the nonzero count).
pub const HEADER_WORDS: usize = BRICKS_PER_BLOCK + 2;
/// Padding column id.
pub const SENTINEL: u32 = crate::layout::SENTINEL;

const NAME: &str = "HRPB";

crate::layout::checked_layout! {
    /// A sparse matrix in HRPB; invariants in the module docs, checked on construction and by
    /// [`Hrpb::validate`].
    pub struct Hrpb {
        rows: usize,
        cols: usize,
        nnz: usize,
        blocked_row_ptr: Vec<u32>,
        active_cols: Vec<u32>,
        size_ptr: Vec<u32>,
        packed_blocks: Vec<u32>,
    }
}

/// Read-only view of one block record.
#[derive(Clone, Copy, Debug)]
pub struct HrpbBlock<'a> {
    /// Prefix of bricks per brick column (len 5).
    pub col_ptr: &'a [u32],
    /// Pattern words, 2 per brick (low, high).
    pub pattern_words: &'a [u32],
    /// Values as f32 bits, bricks in CSC order, each in bit order.
    pub value_bits: &'a [u32],
    /// The block's 16 active columns (sentinel-padded).
    pub active_cols: &'a [u32],
}

impl HrpbBlock<'_> {
    /// Pattern of the i-th stored brick.
    pub fn pattern(&self, i: usize) -> u64 {
        self.pattern_words[2 * i] as u64 | (self.pattern_words[2 * i + 1] as u64) << 32
    }
    /// Number of stored bricks.
    pub fn num_bricks(&self) -> usize {
        self.pattern_words.len() / 2
    }
}

impl Hrpb {
    /// Builds HRPB from CSR (parallel over chunks of panels, then over chunks of blocks for the
    /// packing). Explicit zeros are kept.
    #[tracing::instrument(name = "build", level = "info", skip_all, fields(layout = "hrpb", nnz = csr.nnz()))]
    pub fn from_csr(csr: &Csr) -> Result<Self, FormatError> {
        let spec = WindowSpec::compacted(TM, TK);
        let p = build_windowed::<u16>(csr, spec)?;
        let blocks = p.block_offset.len() - 1;
        let block_pos = |b: usize| {
            let (k0, k1) = (p.block_offset[b] as usize, p.block_offset[b + 1] as usize);
            (k0, &p.pos[k0..k1])
        };
        // Pass 1: record length of every block (header, 2 words per present brick, values,
        // padding to an even length).
        let serial = blocks <= 4096;
        let rec_of = |b: usize| {
            let (_, pos) = block_pos(b);
            let mut present = 0u32;
            for &q in pos {
                present |= 1 << ((q as usize % TK) / BRICK_K);
            }
            let len = HEADER_WORDS + 2 * present.count_ones() as usize + pos.len();
            (len + len % 2) as u32
        };
        let rec_len: Vec<u32> = if serial {
            (0..blocks).map(rec_of).collect()
        } else {
            (0..blocks)
                .into_par_iter()
                .with_min_len(1024)
                .map(rec_of)
                .collect()
        };
        let mut size_ptr = Vec::with_capacity(blocks + 1);
        let mut acc = 0usize;
        size_ptr.push(0u32);
        for &l in &rec_len {
            acc += l as usize;
            if acc >= u32::MAX as usize {
                return Err(FormatError::TooLarge(format!("packed words ≥ {acc}")));
            }
            size_ptr.push(acc as u32);
        }
        // Pass 2: fill the records, chunks of blocks in parallel.
        let mut packed = vec![0u32; acc];
        const CB: usize = 2048;
        let starts: Vec<usize> = (0..blocks.div_ceil(CB)).map(|i| i * CB).collect();
        let mut pieces = Vec::with_capacity(starts.len());
        {
            let mut rest = &mut packed[..];
            for &b0 in &starts {
                let b1 = (b0 + CB).min(blocks);
                let n = (size_ptr[b1] - size_ptr[b0]) as usize;
                let (a, r) = std::mem::take(&mut rest).split_at_mut(n);
                pieces.push(a);
                rest = r;
            }
        }
        let fill = |(b0, out): (usize, &mut [u32])| {
            let b1 = (b0 + CB).min(blocks);
            let base = size_ptr[b0] as usize;
            for b in b0..b1 {
                let rec = &mut out[size_ptr[b] as usize - base..size_ptr[b + 1] as usize - base];
                let (k0, pos) = block_pos(b);
                let mut patterns = [0u64; BRICKS_PER_BLOCK];
                let mut counts = [0usize; BRICKS_PER_BLOCK];
                for &q in pos {
                    let (lr, slot) = (q as usize / TK, q as usize % TK);
                    patterns[slot / BRICK_K] |= 1u64 << (lr * BRICK_K + slot % BRICK_K);
                    counts[slot / BRICK_K] += 1;
                }
                let mut nb = 0u32;
                rec[0] = 0;
                for (j, &pat) in patterns.iter().enumerate() {
                    if pat != 0 {
                        rec[HEADER_WORDS + 2 * nb as usize] = pat as u32;
                        rec[HEADER_WORDS + 2 * nb as usize + 1] = (pat >> 32) as u32;
                        nb += 1;
                    }
                    rec[j + 1] = nb;
                }
                rec[BRICKS_PER_BLOCK + 1] = pos.len() as u32;
                // Values: bricks in order, each brick's entries keep their row-major order.
                let vstart = HEADER_WORDS + 2 * nb as usize;
                let mut cur = [0usize; BRICKS_PER_BLOCK];
                let mut a = vstart;
                for j in 0..BRICKS_PER_BLOCK {
                    cur[j] = a;
                    a += counts[j];
                }
                for (&q, &v) in pos.iter().zip(&p.values[k0..k0 + pos.len()]) {
                    let j = (q as usize % TK) / BRICK_K;
                    rec[cur[j]] = v.to_bits();
                    cur[j] += 1;
                }
            }
        };
        if serial {
            starts.into_iter().zip(pieces).for_each(fill);
        } else {
            starts.into_par_iter().zip(pieces).for_each(fill);
        }
        let f = Hrpb {
            rows: csr.rows(),
            cols: csr.cols(),
            nnz: csr.nnz(),
            blocked_row_ptr: p.window_offset,
            active_cols: p.block_keys,
            size_ptr,
            packed_blocks: packed,
        };
        debug_assert_eq!(f.validate(), Ok(()));
        Ok(f)
    }

    /// View of block `b` (caller guarantees `b < num_blocks()`; the layout is valid).
    pub fn block(&self, b: usize) -> HrpbBlock<'_> {
        let rec = &self.packed_blocks[self.size_ptr[b] as usize..self.size_ptr[b + 1] as usize];
        let nb = rec[BRICKS_PER_BLOCK] as usize;
        let nnz = rec[BRICKS_PER_BLOCK + 1] as usize;
        let pw = HEADER_WORDS + 2 * nb;
        HrpbBlock {
            col_ptr: &rec[..BRICKS_PER_BLOCK + 1],
            pattern_words: &rec[HEADER_WORDS..pw],
            value_bits: &rec[pw..pw + nnz],
            active_cols: &self.active_cols[b * TK..b * TK + TK],
        }
    }

    /// Calls `f(local_row, column, value)` for every nonzero of block `b`, bricks in CSC order.
    fn for_each_in_block(&self, b: usize, mut f: impl FnMut(usize, u32, f32)) {
        let blk = self.block(b);
        let mut k = 0usize;
        for j in 0..BRICKS_PER_BLOCK {
            if blk.col_ptr[j + 1] == blk.col_ptr[j] {
                continue;
            }
            let mut m = blk.pattern(blk.col_ptr[j] as usize);
            while m != 0 {
                let p = m.trailing_zeros() as usize;
                let col = blk.active_cols[j * BRICK_K + p % BRICK_K];
                f(p / BRICK_K, col, f32::from_bits(blk.value_bits[k]));
                k += 1;
                m &= m - 1;
            }
        }
    }

    /// Converts back to CSR, bit-exact.
    pub fn to_csr(&self) -> Csr {
        let brp = &self.blocked_row_ptr;
        let mut win_nnz = vec![0usize; brp.len()];
        for w in 0..brp.len().saturating_sub(1) {
            let n: usize = (brp[w] as usize..brp[w + 1] as usize)
                .map(|b| {
                    self.packed_blocks[self.size_ptr[b] as usize + BRICKS_PER_BLOCK + 1] as usize
                })
                .sum();
            win_nnz[w + 1] = win_nnz[w] + n;
        }
        csr_from_windows(self.rows, self.cols, self.nnz, TM, &win_nnz, |w, push| {
            for b in brp[w] as usize..brp[w + 1] as usize {
                self.for_each_in_block(b, &mut *push);
            }
        })
    }

    /// Re-checks every invariant.
    pub fn validate(&self) -> Result<(), FormatError> {
        check_dims(NAME, self.rows, self.cols)?;
        let panels = self.rows.div_ceil(TM);
        let blocks = self.size_ptr.len().saturating_sub(1);
        check_prefixes(
            NAME,
            &[
                ("blocked_row_ptr", &self.blocked_row_ptr, panels + 1, blocks),
                (
                    "size_ptr",
                    &self.size_ptr,
                    blocks + 1,
                    self.packed_blocks.len(),
                ),
            ],
        )?;
        if self.active_cols.len() != blocks * TK {
            return Err(invalid(NAME, "active_cols length is not 16·blocks"));
        }
        let mut total = 0usize;
        for w in 0..panels {
            let vr = TM.min(self.rows - w * TM);
            let row_mask: u64 = if vr == TM {
                u64::MAX
            } else {
                (1u64 << (BRICK_K * vr)) - 1
            };
            let (b0, b1) = (
                self.blocked_row_ptr[w] as usize,
                self.blocked_row_ptr[w + 1] as usize,
            );
            let mut prev: Option<u32> = None;
            for b in b0..b1 {
                let bad = |what: &str| invalid(NAME, format!("block {b}: {what}"));
                let (s0, s1) = (self.size_ptr[b] as usize, self.size_ptr[b + 1] as usize);
                if s0 % 2 != 0 || s1 - s0 < HEADER_WORDS {
                    return Err(bad("misaligned or short record"));
                }
                let rec = &self.packed_blocks[s0..s1];
                if rec[0] != 0
                    || (0..BRICKS_PER_BLOCK)
                        .any(|j| !(0..=1).contains(&(rec[j + 1].wrapping_sub(rec[j]))))
                {
                    return Err(bad("bad col_ptr"));
                }
                let nb = rec[BRICKS_PER_BLOCK] as usize;
                let nnz = rec[BRICKS_PER_BLOCK + 1] as usize;
                let len = HEADER_WORDS + 2 * nb + nnz;
                if rec.len() != len + len % 2 || (len % 2 == 1 && rec[len] != 0) {
                    return Err(bad("record length does not match its header"));
                }
                let blk = self.block(b);
                let mut pop = 0usize;
                for j in 0..BRICKS_PER_BLOCK {
                    let cols = &blk.active_cols[j * BRICK_K..j * BRICK_K + BRICK_K];
                    let present = blk.col_ptr[j + 1] > blk.col_ptr[j];
                    let m = if present {
                        blk.pattern(blk.col_ptr[j] as usize)
                    } else {
                        0
                    };
                    if present && m == 0 {
                        return Err(bad("empty brick"));
                    }
                    if m & !row_mask != 0 {
                        return Err(bad("bit in a row beyond the matrix"));
                    }
                    pop += m.count_ones() as usize;
                    for (s, &c) in cols.iter().enumerate() {
                        let col_bits = m & (0x1111_1111_1111_1111u64 << s);
                        if c == SENTINEL {
                            if b + 1 != b1 || col_bits != 0 || (j == 0 && s == 0) {
                                return Err(bad("misplaced sentinel"));
                            }
                            prev = Some(SENTINEL);
                            continue;
                        }
                        if c as usize >= self.cols || prev.is_some_and(|p| p >= c) {
                            return Err(bad("active columns not ascending"));
                        }
                        if col_bits == 0 {
                            return Err(bad("active column without nonzero"));
                        }
                        prev = Some(c);
                    }
                }
                if pop != nnz {
                    return Err(bad("popcounts ≠ nonzero count"));
                }
                total += nnz;
            }
        }
        if total != self.nnz {
            return Err(invalid(NAME, "block nonzeros do not add up to nnz"));
        }
        Ok(())
    }

    crate::layout::shape_accessors!();
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.nnz
    }
    /// Number of 16×16 blocks.
    pub fn num_blocks(&self) -> usize {
        self.size_ptr.len() - 1
    }
    /// Number of stored 16×4 bricks.
    pub fn num_bricks(&self) -> usize {
        (0..self.num_blocks())
            .map(|b| self.block(b).num_bricks())
            .sum()
    }
    /// Prefix of blocks per panel (len panels+1).
    pub fn blocked_row_ptr(&self) -> &[u32] {
        &self.blocked_row_ptr
    }
    /// 16 active column ids per block, sentinel-padded.
    pub fn active_cols(&self) -> &[u32] {
        &self.active_cols
    }
    /// Start of every block record in `packed_blocks`, in u32 words (len blocks+1).
    pub fn size_ptr(&self) -> &[u32] {
        &self.size_ptr
    }
    /// All block records (see the module docs).
    pub fn packed_blocks(&self) -> &[u32] {
        &self.packed_blocks
    }
}

impl Layout for Hrpb {
    layout_from_inherent!(NAME, ());

    /// Like the kernel: panel by panel, block by block, bricks in CSC order, each brick's bits
    /// ascending (popcount decode).
    fn for_each_entry<F: FnMut(usize, usize, f32)>(&self, mut f: F) {
        for_each_window_block(&self.blocked_row_ptr, |w, b| {
            self.for_each_in_block(b, |lr, col, v| f(w * TM + lr, col as usize, v));
        });
    }
}

/// Words per brick in [`HrpbDevice::bricks`].
pub const DEVICE_BRICK_WORDS: usize = 8;

/// HRPB re-encoded for the GPU kernel (`kernels-ptx/hrpb_spmm.cu`): one fixed-size record per stored
/// brick instead of variable-length block records, so that a warp reaches brick `i`'s pattern,
/// values and columns with two independent loads (no `size_ptr` → `col_ptr` → pattern chain).
///
/// * `panel_bricks` (len panels+1): prefix of stored bricks per 16-row panel.
/// * `block_bricks` (len blocks+1): prefix of stored bricks per block (blocks in the order of
///   [`Hrpb`]; used to cut panels at block boundaries).
/// * `bricks` ([`DEVICE_BRICK_WORDS`] u32 per brick): pattern low word, pattern high word, offset
///   of the brick's first value in `values`, 0, then the brick's 4 column ids (sentinel-padded in
///   the last brick of a panel). A warp loads words 0–3 as one 16-byte load and lane `t` word 4+t.
/// * `values` (len nnz): f32 values, bricks in order, each brick in bit order (row-major inside the
///   brick): the value of bit `p` of brick `i` is `values[off + popcount(pattern & ((1 << p) − 1))]`.
///
/// Size: 32 B per brick + 4 B per nonzero + 4 B per panel and block; at α = 0.1 (6.4 nonzeros per
/// brick) 9 B per nonzero against CSR's 8 B (the released code's 512-byte block records are ~4× CSR).
#[derive(Clone, Debug, PartialEq)]
pub struct HrpbDevice {
    /// Rows of the matrix.
    pub rows: usize,
    /// Columns of the matrix.
    pub cols: usize,
    /// Prefix of stored bricks per panel.
    pub panel_bricks: Vec<u32>,
    /// Prefix of stored bricks per block.
    pub block_bricks: Vec<u32>,
    /// 8 words per brick (see the type docs).
    pub bricks: Vec<u32>,
    /// Values, bricks in order, each in bit order.
    pub values: Vec<f32>,
}

impl Hrpb {
    /// The device encoding ([`HrpbDevice`]). Bricks keep the layout's order (panels, then blocks,
    /// then brick columns); the values are the block records' values in the same order.
    pub fn device_layout(&self) -> HrpbDevice {
        let blocks = self.num_blocks();
        let mut block_bricks = Vec::with_capacity(blocks + 1);
        block_bricks.push(0u32);
        let mut bricks = Vec::new();
        let mut values = Vec::with_capacity(self.nnz);
        for b in 0..blocks {
            let blk = self.block(b);
            let mut off = 0usize;
            for j in 0..BRICKS_PER_BLOCK {
                if blk.col_ptr[j + 1] == blk.col_ptr[j] {
                    continue;
                }
                let m = blk.pattern(blk.col_ptr[j] as usize);
                let pc = m.count_ones() as usize;
                bricks.extend_from_slice(&[m as u32, (m >> 32) as u32, values.len() as u32, 0]);
                bricks.extend_from_slice(&blk.active_cols[j * BRICK_K..(j + 1) * BRICK_K]);
                values.extend(
                    blk.value_bits[off..off + pc]
                        .iter()
                        .map(|&v| f32::from_bits(v)),
                );
                off += pc;
            }
            block_bricks.push((bricks.len() / DEVICE_BRICK_WORDS) as u32);
        }
        let panel_bricks = self
            .blocked_row_ptr
            .iter()
            .map(|&b| block_bricks[b as usize])
            .collect();
        HrpbDevice {
            rows: self.rows,
            cols: self.cols,
            panel_bricks,
            block_bricks,
            bricks,
            values,
        }
    }
}

impl HrpbDevice {
    /// Number of stored bricks.
    pub fn num_bricks(&self) -> usize {
        self.bricks.len() / DEVICE_BRICK_WORDS
    }

    /// Number of 16-row panels.
    pub fn num_panels(&self) -> usize {
        self.panel_bricks.len().saturating_sub(1)
    }

    /// Pattern of brick `i`.
    pub fn pattern(&self, i: usize) -> u64 {
        let w = &self.bricks[i * DEVICE_BRICK_WORDS..];
        w[0] as u64 | (w[1] as u64) << 32
    }

    /// Bytes of all arrays.
    pub fn bytes(&self) -> usize {
        4 * (self.panel_bricks.len()
            + self.block_bricks.len()
            + self.bricks.len()
            + self.values.len())
    }

    /// Checks everything the kernel's reads rely on: both prefixes start at 0, end at the brick
    /// count and never decrease; the panel prefix has ⌈rows/16⌉+1 entries; every brick's values lie
    /// inside `values` and follow the previous brick's; no bit in a row past the matrix or in a
    /// sentinel column; every column id is `< cols` or [`SENTINEL`].
    pub fn validate(&self) -> Result<(), FormatError> {
        const DEV: &str = "HRPB device layout";
        let nb = self.num_bricks();
        if !self.bricks.len().is_multiple_of(DEVICE_BRICK_WORDS) {
            return Err(invalid(DEV, "brick words not a multiple of 8"));
        }
        if self.rows >= u32::MAX as usize
            || self.cols >= u32::MAX as usize
            || self.values.len() >= u32::MAX as usize
        {
            return Err(invalid(DEV, "dimensions exceed u32"));
        }
        let blocks = self.block_bricks.len().saturating_sub(1);
        check_prefix(
            DEV,
            "panel_bricks",
            &self.panel_bricks,
            self.rows.div_ceil(TM) + 1,
            nb,
        )?;
        check_prefix(DEV, "block_bricks", &self.block_bricks, blocks + 1, nb)?;
        let mut next = 0usize;
        for w in 0..self.num_panels() {
            let vr = TM.min(self.rows - w * TM);
            let row_mask: u64 = if vr == TM {
                u64::MAX
            } else {
                (1u64 << (BRICK_K * vr)) - 1
            };
            for i in self.panel_bricks[w] as usize..self.panel_bricks[w + 1] as usize {
                let bad = |what: &str| invalid(DEV, format!("brick {i}: {what}"));
                let r = &self.bricks[i * DEVICE_BRICK_WORDS..(i + 1) * DEVICE_BRICK_WORDS];
                let m = self.pattern(i);
                if m & !row_mask != 0 {
                    return Err(bad("bit in a row beyond the matrix"));
                }
                if r[2] as usize != next || r[3] != 0 {
                    return Err(bad("value offset does not follow the previous brick"));
                }
                next += m.count_ones() as usize;
                if next > self.values.len() {
                    return Err(bad("values past the end"));
                }
                for (s, &c) in r[4..].iter().enumerate() {
                    let col_bits = m & (0x1111_1111_1111_1111u64 << s);
                    if c == SENTINEL && col_bits != 0 {
                        return Err(bad("bit in a sentinel column"));
                    }
                    if c != SENTINEL && c as usize >= self.cols {
                        return Err(bad("column ≥ cols"));
                    }
                }
            }
        }
        if next != self.values.len() {
            return Err(invalid(DEV, "values not all covered by bricks"));
        }
        Ok(())
    }

    /// CPU product C = A·B walking the device layout like the kernel (brick by brick, lane by lane
    /// through the popcount index). Row-major B (`ldb ≥ n`) and C (`rows × n`).
    ///
    /// # Errors
    /// If `ldb < n` or `b` is too short.
    pub fn spmm_cpu(&self, b: &[f32], n: usize, ldb: usize) -> Result<Vec<f32>, FormatError> {
        let mut c = dense_output(self.rows, self.cols, b, n, ldb)?;
        for w in 0..self.num_panels() {
            for i in self.panel_bricks[w] as usize..self.panel_bricks[w + 1] as usize {
                let r = &self.bricks[i * DEVICE_BRICK_WORDS..(i + 1) * DEVICE_BRICK_WORDS];
                let (lo, hi, off) = (r[0], r[1], r[2] as usize);
                for lane in 0..32u32 {
                    let below = (1u32 << lane) - 1;
                    let (g, t) = (lane as usize / 4, lane as usize % 4);
                    if lo >> lane & 1 == 1 {
                        let v = self.values[off + (lo & below).count_ones() as usize];
                        add_scaled_row(&mut c, w * TM + g, n, v, b, r[4 + t] as usize, ldb);
                    }
                    if hi >> lane & 1 == 1 {
                        let k = off + lo.count_ones() as usize + (hi & below).count_ones() as usize;
                        let v = self.values[k];
                        add_scaled_row(&mut c, w * TM + g + 8, n, v, b, r[4 + t] as usize, ldb);
                    }
                }
            }
        }
        Ok(c)
    }
}
