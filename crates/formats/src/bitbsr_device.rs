//! The device encoding of bitBSR for the tensor-core SpMV kernels (`kernels-ptx/spmv.cu`), their
//! tile-balanced work list, and a CPU product that walks both exactly the way the kernels do.
//!
//! * [`DeviceBitBsr`]: one 16-byte record per 8×8 tile `{bitmap lo, bitmap hi, block column, value
//!   offset}`, the tile-row offsets, and the values either as f16 scaled per tile-row by a power of
//!   two ([`TileStorage::F16`]: the row's largest magnitude lands in [2¹⁴, 2¹⁵), so no value overflows
//!   f16 and none within 2⁻²⁴ of the row maximum is subnormal) or as f32 rounded to TF32
//!   ([`TileStorage::Tf32`], round to nearest, ties away, as `cvt.rna.tf32.f32`), or as plain f32
//!   ([`TileStorage::F32`], for the CUDA-core walk `spmv_core_f32`: full f32 products).
//! * [`spmv_work`]: warp items of two *halves* (the top and bottom of the MMA). A half holds either
//!   whole consecutive tile-rows with at most `chunk_tiles` tiles in all, or one chunk of a longer
//!   tile-row (a *split* half, which writes a partial slot summed by the fix-up pass: `spmv_fixup`
//!   after the MMA kernels, the row's last chunk in the walks, through [`SpmvWork::split_table`]).
//!   Every tile lies in exactly one half, every tile-row in some half, split rows' chunks in
//!   consecutive slots.
//! * [`DeviceBitBsr::spmv_cpu`]: y = α·A·X + β·y with the kernels' roundings (f16 X scaled per
//!   8-element segment, or TF32 X) and their order of accumulation (per tile, then per half, split
//!   rows summed over their slots in order).
//!
//! Never touches CUDA.

use crate::bitbsr::{BLOCK, BitBsr};
use crate::layout::FormatError;
use half::f16;
use serde::{Deserialize, Serialize};

/// How the tile values are stored on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TileStorage {
    /// f16 values scaled per tile-row (2 bytes per nonzero), multiplied on `m16n8k16` f16 MMAs.
    F16,
    /// f32 values rounded to TF32 (4 bytes per nonzero), multiplied on `m16n8k8` TF32 MMAs.
    Tf32,
    /// f32 values as they are (4 bytes per nonzero), multiplied on CUDA cores (`spmv_core_f32`,
    /// one right-hand side); the TF32 MMA kernels read them too (the MMA ignores the low bits).
    F32,
}

impl TileStorage {
    /// Bytes per stored value.
    pub fn value_bytes(self) -> usize {
        match self {
            TileStorage::F16 => 2,
            TileStorage::Tf32 | TileStorage::F32 => 4,
        }
    }
}

/// Tile values in the device encoding.
#[derive(Clone, Debug, PartialEq)]
pub enum TileValues {
    /// f16 bit patterns (value / `row_scale[tile-row]`) and the per-tile-row scales (powers of two).
    F16 {
        /// f16 bits, per tile in bit order.
        bits: Vec<u16>,
        /// Scale of each tile-row (1 for rows without a finite nonzero).
        row_scale: Vec<f32>,
    },
    /// f32 values rounded to TF32.
    Tf32(Vec<f32>),
    /// f32 values unrounded.
    F32(Vec<f32>),
}

/// bitBSR in the SpMV kernels' device encoding (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceBitBsr {
    rows: usize,
    cols: usize,
    tile_row_ptr: Vec<u32>,
    tiles: Vec<[u32; 4]>,
    values: TileValues,
}

/// Rounds `x` to TF32 (10-bit significand): to nearest, ties away from zero, like
/// `cvt.rna.tf32.f32`. NaN and infinity stay as they are.
pub fn round_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let b = x.to_bits();
    let r = b.wrapping_add(0x1000) & !0x1fff;
    let y = f32::from_bits(r);
    // Rounding past f32::MAX gives infinity, as the hardware conversion does.
    y
}

/// The power of two that puts `max_abs` in [2¹⁴, 2¹⁵) (1 for 0, NaN and infinity), clamped to the
/// normal f32 exponents. The f16 kernels' per-row and per-segment scale.
pub fn f16_scale(max_abs: f32) -> f32 {
    if !(max_abs > 0.0 && max_abs.is_finite()) {
        return 1.0;
    }
    let e = (((max_abs.to_bits() >> 23) & 0xff) as i32 - 127).max(-126);
    let sh = (e - 14).clamp(-126, 127);
    2f32.powi(sh)
}

/// Largest f16 rounding error a tile value may have, relative to the largest magnitude of its row:
/// 2⁻¹¹, what an f16 normal number guarantees. Every row of an f16 tile-row then keeps the f16
/// path's accuracy, whatever the other rows of its tile-row hold.
pub const F16_MAX_ROW_ERROR: f32 = 1.0 / 2048.0;

/// A tile-row whose rows one f16 scale cannot hold ([`f16_unfit_tile_row`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct F16Unfit {
    /// The tile-row (rows `8·tile_row ..`).
    pub tile_row: usize,
    /// Its largest finite magnitude (which sets the scale).
    pub max_abs: f32,
    /// The largest magnitude of the row that loses its accuracy.
    pub min_abs: f32,
}

/// The first tile-row of `b` in which some value, stored as f16 under the tile-row's one scale
/// ([`f16_scale`] of its largest magnitude, as [`DeviceBitBsr::encode`] stores it), is off by more
/// than [`F16_MAX_ROW_ERROR`] of the largest magnitude of its own row; `None` when f16 tiles hold
/// every row. That happens where an 8-row tile mixes rows far apart in magnitude (rows 1e12 below
/// the tile-row's largest are flushed to f16 subnormals or zero), but not for small values that are
/// exact in f16 (a constraint row of 1.0 beside rows of 1e9, as in bcsstk17) or that sit in a row
/// which also holds large ones. [`DeviceBitBsr::encode`] refuses [`TileStorage::F16`] for such a
/// matrix, and the facade falls back to TF32/f32 tiles.
pub fn f16_unfit_tile_row(b: &BitBsr) -> Option<F16Unfit> {
    let ptr = b.block_row_ptr();
    let vo = b.value_offset();
    // Each value's tile-local row: the blocks' set bits in bit order (bit = row·8 + column).
    let local_rows = |blk: usize| {
        let mut bits = b.bitmap()[blk];
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let r = bits.trailing_zeros() as usize / 8;
                bits &= bits - 1;
                r
            })
        })
    };
    (0..ptr.len().saturating_sub(1)).find_map(|r| {
        let blocks = ptr[r] as usize..ptr[r + 1] as usize;
        let vals = &b.values()[vo[blocks.start] as usize..vo[blocks.end] as usize];
        let mut row_max = [0f32; 8];
        let rows_of = || blocks.clone().flat_map(local_rows);
        for (l, v) in rows_of().zip(vals) {
            if v.is_finite() {
                row_max[l] = row_max[l].max(v.abs());
            }
        }
        let mx = row_max.iter().copied().fold(0f32, f32::max);
        let s = f16_scale(mx);
        let bad = rows_of().zip(vals).find(|&(l, &v)| {
            v.is_finite()
                && (f16::from_f32(v / s).to_f32() * s - v).abs() > F16_MAX_ROW_ERROR * row_max[l]
        });
        bad.map(|(l, _)| F16Unfit {
            tile_row: r,
            max_abs: mx,
            min_abs: row_max[l],
        })
    })
}

impl DeviceBitBsr {
    /// Encodes `b` for the device with the given value storage. [`TileStorage::F16`] is refused
    /// ([`FormatError::BadArgument`]) where a tile-row's range does not fit one f16 scale
    /// ([`f16_unfit_tile_row`]).
    pub fn encode(b: &BitBsr, storage: TileStorage) -> Result<Self, FormatError> {
        if storage == TileStorage::F16
            && let Some(u) = f16_unfit_tile_row(b)
        {
            return Err(FormatError::BadArgument(format!(
                "f16 tiles cannot hold tile-row {} (magnitudes {:e} to {:e}, beyond one f16 scale): use TF32 or f32 tiles",
                u.tile_row, u.min_abs, u.max_abs
            )));
        }
        let blocks = b.num_blocks();
        if b.nnz() >= u32::MAX as usize || blocks >= u32::MAX as usize / 2 {
            return Err(FormatError::TooLarge(format!(
                "{} tiles, {} nonzeros do not fit the device encoding's u32 offsets",
                blocks,
                b.nnz()
            )));
        }
        let vo = b.value_offset();
        let tiles: Vec<[u32; 4]> = (0..blocks)
            .map(|i| {
                let m = b.bitmap()[i];
                [m as u32, (m >> 32) as u32, b.block_col()[i], vo[i]]
            })
            .collect();
        let ptr = b.block_row_ptr().to_vec();
        let values = match storage {
            TileStorage::Tf32 => {
                TileValues::Tf32(b.values().iter().map(|&v| round_tf32(v)).collect())
            }
            TileStorage::F32 => TileValues::F32(b.values().to_vec()),
            TileStorage::F16 => {
                let brows = ptr.len() - 1;
                let mut row_scale = vec![1f32; brows];
                let mut bits = vec![0u16; b.nnz()];
                for r in 0..brows {
                    let (v0, v1) = (
                        vo[ptr[r] as usize] as usize,
                        vo[ptr[r + 1] as usize] as usize,
                    );
                    let vals = &b.values()[v0..v1];
                    let mx = vals
                        .iter()
                        .filter(|v| v.is_finite())
                        .fold(0f32, |m, v| m.max(v.abs()));
                    let s = f16_scale(mx);
                    row_scale[r] = s;
                    for (o, &v) in bits[v0..v1].iter_mut().zip(vals) {
                        *o = f16::from_f32(v / s).to_bits();
                    }
                }
                TileValues::F16 { bits, row_scale }
            }
        };
        Ok(Self {
            rows: b.rows(),
            cols: b.cols(),
            tile_row_ptr: ptr,
            tiles,
            values,
        })
    }

    /// Rows of the matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns of the matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Tile-rows (⌈rows / 8⌉).
    pub fn tile_rows(&self) -> usize {
        self.tile_row_ptr.len() - 1
    }
    /// First tile of each tile-row (tile-rows + 1 entries).
    pub fn tile_row_ptr(&self) -> &[u32] {
        &self.tile_row_ptr
    }
    /// `{bitmap lo, bitmap hi, block column, value offset}` per tile.
    pub fn tiles(&self) -> &[[u32; 4]] {
        &self.tiles
    }
    /// The values.
    pub fn values(&self) -> &TileValues {
        &self.values
    }
    /// The storage of the values.
    pub fn storage(&self) -> TileStorage {
        match self.values {
            TileValues::F16 { .. } => TileStorage::F16,
            TileValues::Tf32(_) => TileStorage::Tf32,
            TileValues::F32(_) => TileStorage::F32,
        }
    }
    /// Stored nonzeros.
    pub fn nnz(&self) -> usize {
        match &self.values {
            TileValues::F16 { bits, .. } => bits.len(),
            TileValues::Tf32(v) | TileValues::F32(v) => v.len(),
        }
    }
    /// Bytes the kernel reads for A once: tile records, tile-row offsets, values, row scales.
    pub fn bytes(&self) -> usize {
        16 * self.tiles.len()
            + 4 * self.tile_row_ptr.len()
            + match &self.values {
                TileValues::F16 { bits, row_scale } => 2 * bits.len() + 4 * row_scale.len(),
                TileValues::Tf32(v) | TileValues::F32(v) => 4 * v.len(),
            }
    }

    /// Value `q` (in bit order, global index) as the kernel multiplies it, row scale not applied.
    fn value(&self, q: usize) -> f32 {
        match &self.values {
            TileValues::F16 { bits, .. } => f16::from_bits(bits[q]).to_f32(),
            TileValues::Tf32(v) | TileValues::F32(v) => v[q],
        }
    }

    fn row_scale(&self, r: usize) -> f32 {
        match &self.values {
            TileValues::F16 { row_scale, .. } => row_scale[r],
            TileValues::Tf32(_) | TileValues::F32(_) => 1.0,
        }
    }

    /// X as the kernels read it: `(value, scale)` per element (K × n row-major); f16 storage scales
    /// each 8-row segment of each RHS (see `spmv_x16`), TF32 rounds, F32 reads X as it is.
    fn device_x(&self, x: &[f32], n: usize) -> (Vec<f32>, Vec<f32>) {
        let k = self.cols;
        match self.storage() {
            TileStorage::F32 => (x[..k * n].to_vec(), vec![1.0; k.div_ceil(BLOCK) * n]),
            TileStorage::Tf32 => (
                x[..k * n].iter().map(|&v| round_tf32(v)).collect(),
                vec![1.0; k.div_ceil(BLOCK) * n],
            ),
            TileStorage::F16 => {
                let segs = k.div_ceil(BLOCK);
                let mut xv = vec![0f32; k * n];
                let mut xs = vec![1f32; segs * n];
                for c in 0..segs {
                    for j in 0..n {
                        let rows = c * BLOCK..(c * BLOCK + BLOCK).min(k);
                        let mx = rows.clone().fold(0f32, |m, r| m.max(x[r * n + j].abs()));
                        let s = if mx.is_finite() { f16_scale(mx) } else { 1.0 };
                        xs[c * n + j] = s;
                        for r in rows {
                            xv[r * n + j] = f16::from_f32(x[r * n + j] / s).to_f32();
                        }
                    }
                }
                (xv, xs)
            }
        }
    }

    /// `y = α·A·X + β·y` walking `work` the way the kernels do (module docs). X is `cols × n`, y is
    /// `rows × n`, both row-major; β = 0 never reads y.
    ///
    /// # Errors
    /// If `n` is 0 or above 8, the operands are too short, or `work` does not belong to this matrix.
    pub fn spmv_cpu(
        &self,
        work: &SpmvWork,
        alpha: f32,
        x: &[f32],
        beta: f32,
        y: &mut [f32],
        n: usize,
    ) -> Result<(), FormatError> {
        if n == 0 || n > 8 || x.len() < self.cols * n || y.len() < self.rows * n {
            return Err(FormatError::BadArgument(format!(
                "spmv with n = {n} needs X of {}·n and y of {}·n elements",
                self.cols, self.rows
            )));
        }
        work.check(&self.tile_row_ptr)?;
        let (xv, xs) = self.device_x(x, n);
        let mut partial = vec![0f32; work.slots as usize * BLOCK * n];
        let mut acc = vec![0f32; BLOCK * n];
        let mut tile = vec![0f32; BLOCK * n];
        for half in work.items.iter().flatten() {
            let (r0, r1, t0, t1, slot) = half_fields(half);
            for r in r0..r1 {
                let (a, b) = (
                    (self.tile_row_ptr[r as usize]).max(t0),
                    (self.tile_row_ptr[r as usize + 1]).min(t1),
                );
                acc.fill(0.0);
                for t in a..b {
                    let [lo, hi, col, off] = self.tiles[t as usize];
                    let m = lo as u64 | (hi as u64) << 32;
                    tile.fill(0.0);
                    let mut q = off as usize;
                    for p in 0..64usize {
                        if m >> p & 1 == 0 {
                            continue;
                        }
                        let (g, c) = (p / BLOCK, col as usize * BLOCK + p % BLOCK);
                        let v = self.value(q);
                        q += 1;
                        for j in 0..n {
                            tile[g * n + j] += v * xv[c * n + j];
                        }
                    }
                    for g in 0..BLOCK {
                        for j in 0..n {
                            acc[g * n + j] += xs[col as usize * n + j] * tile[g * n + j];
                        }
                    }
                }
                let s = alpha * self.row_scale(r as usize);
                for g in 0..BLOCK {
                    let row = r as usize * BLOCK + g;
                    for j in 0..n {
                        let v = s * acc[g * n + j];
                        if let Some(sl) = slot {
                            partial[(sl as usize * BLOCK + g) * n + j] = v;
                        } else if row < self.rows {
                            let o = &mut y[row * n + j];
                            *o = if beta == 0.0 { v } else { beta.mul_add(*o, v) };
                        }
                    }
                }
            }
        }
        for &[r, s0, s1] in &work.fix {
            for g in 0..BLOCK {
                let row = r as usize * BLOCK + g;
                if row >= self.rows {
                    continue;
                }
                for j in 0..n {
                    let sum: f32 = (s0..s1)
                        .map(|s| partial[(s as usize * BLOCK + g) * n + j])
                        .fold(0.0, |a, b| a + b);
                    let o = &mut y[row * n + j];
                    *o = if beta == 0.0 {
                        sum
                    } else {
                        beta.mul_add(*o, sum)
                    };
                }
            }
        }
        Ok(())
    }
}

/// Flag in a half's second field: a split half (the field's low bits are its partial slot).
pub const SPLIT_BIT: u32 = 1 << 31;

/// `(row_begin, row_end, tile_begin, tile_end, slot)` of a half record.
pub fn half_fields(h: &[u32; 4]) -> (u32, u32, u32, u32, Option<u32>) {
    if h[1] & SPLIT_BIT != 0 {
        (h[0], h[0] + 1, h[2], h[3], Some(h[1] & !SPLIT_BIT))
    } else {
        (h[0], h[1], h[2], h[3], None)
    }
}

/// The SpMV kernels' work list (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpmvWork {
    /// Two halves per warp item: `{row_begin, row_end or SPLIT_BIT | slot, tile_begin, tile_end}`.
    pub items: Vec<[[u32; 4]; 2]>,
    /// Split tile-rows: `{tile-row, first slot, end slot}`.
    pub fix: Vec<[u32; 3]>,
    /// Number of partial slots (split halves).
    pub slots: u32,
    /// Tile budget per half it was built with.
    pub chunk_tiles: u32,
}

/// Most tile-rows one half packs (bounds the flushes of a run of empty or one-tile rows; the
/// kernels keep a half's row ends in one 32-lane register window and rely on it).
pub const MAX_ROWS_PER_HALF: u32 = 32;

/// Builds the work list over tile-row offsets `ptr` with at most `chunk_tiles` (≥ 1) tiles per half:
/// runs of whole tile-rows (at most [`MAX_ROWS_PER_HALF`]), and every tile-row longer than the
/// budget cut into ⌈len / budget⌉ chunks of nearly equal length, each its own split half. Halves are
/// paired in order into warp items (an odd count ends with an empty half).
pub fn spmv_work(ptr: &[u32], chunk_tiles: u32) -> SpmvWork {
    let chunk = chunk_tiles.max(1);
    let brows = ptr.len().saturating_sub(1);
    let len = |r: usize| ptr[r + 1] - ptr[r];
    let mut halves: Vec<[u32; 4]> = Vec::new();
    let mut fix = Vec::new();
    let mut slots = 0u32;
    let mut r = 0usize;
    while r < brows {
        let l = len(r);
        if l > chunk {
            let parts = l.div_ceil(chunk);
            let first = slots;
            for i in 0..parts {
                // Chunk i covers [ptr + i·l/parts, ptr + (i+1)·l/parts): lengths differ by ≤ 1.
                let a = ptr[r] + (i as u64 * l as u64 / parts as u64) as u32;
                let b = ptr[r] + ((i as u64 + 1) * l as u64 / parts as u64) as u32;
                halves.push([r as u32, SPLIT_BIT | slots, a, b]);
                slots += 1;
            }
            fix.push([r as u32, first, slots]);
            r += 1;
            continue;
        }
        let first = r;
        let mut total = 0;
        while r < brows && (r - first) < MAX_ROWS_PER_HALF as usize && total + len(r) <= chunk {
            total += len(r);
            r += 1;
        }
        halves.push([first as u32, r as u32, ptr[first], ptr[r]]);
    }
    if halves.len() % 2 == 1 {
        halves.push([0, 0, 0, 0]);
    }
    let items = halves.chunks_exact(2).map(|p| [p[0], p[1]]).collect();
    SpmvWork {
        items,
        fix,
        slots,
        chunk_tiles: chunk,
    }
}

impl SpmvWork {
    /// Checks that the work list covers the tile-rows of `ptr` as [`spmv_work`] promises: every
    /// tile in exactly one half, every tile-row in some half, whole halves end on row boundaries,
    /// split halves inside one row with distinct slots < `slots`, and `fix` lists each split row once
    /// with its consecutive slots. The kernels rely on this for in-bounds access.
    pub fn check(&self, ptr: &[u32]) -> Result<(), FormatError> {
        let bad = |w: String| {
            Err(FormatError::Invalid {
                format: "SpMV work list",
                what: w,
            })
        };
        let brows = ptr.len().saturating_sub(1);
        let tiles = ptr.last().copied().unwrap_or(0);
        let mut next_tile = 0u32;
        let mut next_row = 0u32;
        let mut next_slot = 0u32;
        let mut split_seen: Vec<(u32, u32, u32)> = Vec::new();
        for h in self.items.iter().flatten() {
            let (r0, r1, t0, t1, slot) = half_fields(h);
            if r0 == r1 && slot.is_none() {
                if t0 != t1 {
                    return bad(format!("empty half with tiles {h:?}"));
                }
                continue;
            }
            if r1 as usize > brows || r0 >= r1 || t0 > t1 || t1 > tiles {
                return bad(format!("half {h:?} out of range"));
            }
            if t0 != next_tile {
                return bad(format!("half {h:?} does not start at tile {next_tile}"));
            }
            match slot {
                None => {
                    if r0 != next_row || t0 != ptr[r0 as usize] || t1 != ptr[r1 as usize] {
                        return bad(format!("whole half {h:?} not on row boundaries"));
                    }
                    if r1 - r0 > MAX_ROWS_PER_HALF {
                        return bad(format!(
                            "whole half {h:?} spans more than {MAX_ROWS_PER_HALF} rows"
                        ));
                    }
                    next_row = r1;
                }
                Some(s) => {
                    if s != next_slot || s >= self.slots {
                        return bad(format!("split half {h:?}: slot out of order"));
                    }
                    next_slot += 1;
                    if t0 < ptr[r0 as usize] || t1 > ptr[r1 as usize] {
                        return bad(format!("split half {h:?} leaves its row"));
                    }
                    match split_seen.last_mut() {
                        Some(l) if l.0 == r0 => l.2 = s + 1,
                        _ => {
                            if r0 != next_row || t0 != ptr[r0 as usize] {
                                return bad(format!("split row {r0} does not start a chunk run"));
                            }
                            split_seen.push((r0, s, s + 1));
                        }
                    }
                    if t1 == ptr[r0 as usize + 1] {
                        next_row = r0 + 1;
                    }
                }
            }
            next_tile = t1;
        }
        if next_tile != tiles || next_row as usize != brows || next_slot != self.slots {
            return bad("work list does not cover every tile and tile-row".into());
        }
        let fix: Vec<(u32, u32, u32)> = self.fix.iter().map(|f| (f[0], f[1], f[2])).collect();
        if fix != split_seen {
            return bad("fix-up list differs from the split halves".into());
        }
        Ok(())
    }

    /// The walks' split-row table: for each partial slot `s`, `[2s] = ` the first and `[2s + 1] =`
    /// the end slot of its tile-row (`2 · slots` entries; the chunk that finishes a split row last
    /// sums the row's slots `first..end` and counts arrivals at `first`). Slots no split row
    /// lists stay 0 (none after [`SpmvWork::check`]).
    pub fn split_table(&self) -> Vec<u32> {
        let mut t = vec![0u32; 2 * self.slots as usize];
        for f in &self.fix {
            for s in f[1]..f[2].min(self.slots) {
                t[2 * s as usize] = f[1];
                t[2 * s as usize + 1] = f[2];
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;
    use crate::reference::spmm_f64;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn ptr_of(lens: &[u32]) -> Vec<u32> {
        std::iter::once(0)
            .chain(lens.iter().scan(0, |s, &l| {
                *s += l;
                Some(*s)
            }))
            .collect()
    }

    /// Every tile in exactly one half (counted independently of `check`), budgets respected.
    fn check_work(ptr: &[u32], chunk: u32) {
        let w = spmv_work(ptr, chunk);
        w.check(ptr)
            .unwrap_or_else(|e| panic!("{e}: {ptr:?} chunk {chunk}"));
        // The split table: each split half's slot points at its own row's slot run.
        let table = w.split_table();
        assert_eq!(table.len(), 2 * w.slots as usize);
        for h in w.items.iter().flatten() {
            if let (r0, _, _, _, Some(s)) = half_fields(h) {
                let (first, end) = (table[2 * s as usize], table[2 * s as usize + 1]);
                assert!(
                    first <= s && s < end && end <= w.slots,
                    "slot {s}: {first}..{end}"
                );
                let parts = w
                    .items
                    .iter()
                    .flatten()
                    .filter(|g| matches!(half_fields(g), (r, _, _, _, Some(_)) if r == r0));
                assert_eq!(parts.count() as u32, end - first, "row {r0}");
            }
        }
        let tiles = *ptr.last().unwrap() as usize;
        let mut seen = vec![0u32; tiles];
        let mut rows_seen = vec![0u32; ptr.len() - 1];
        for h in w.items.iter().flatten() {
            let (r0, r1, t0, t1, slot) = half_fields(h);
            assert!(t1 - t0 <= chunk.max(1), "{h:?}");
            if slot.is_none() {
                assert!(r1 - r0 <= MAX_ROWS_PER_HALF);
                for r in r0..r1 {
                    rows_seen[r as usize] += 1;
                }
            } else {
                rows_seen[r0 as usize] = 1;
            }
            for t in t0..t1 {
                seen[t as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{ptr:?} chunk {chunk}");
        assert!(rows_seen.iter().all(|&c| c == 1), "{ptr:?} chunk {chunk}");
    }

    #[test]
    fn work_covers_every_tile_once() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..300 {
            let brows = rng.random_range(0..80);
            let lens: Vec<u32> = (0..brows)
                .map(|_| match rng.random_range(0..10) {
                    0..=2 => 0,
                    3 => rng.random_range(50..2000),
                    _ => rng.random_range(1..6),
                })
                .collect();
            for chunk in [0, 1, 3, 16, 32, 128] {
                check_work(&ptr_of(&lens), chunk);
            }
        }
        check_work(&[0], 8);
        // One tile-row 1000× longer than the rest: many chunks of ≤ 32 tiles, consecutive slots.
        let mut lens = vec![1u32; 20];
        lens[7] = 1000;
        let w = spmv_work(&ptr_of(&lens), 32);
        assert_eq!(w.fix, [[7, 0, 32]]);
        assert_eq!(w.slots, 32);
    }

    #[test]
    fn check_rejects_broken_work() {
        let ptr = ptr_of(&[3, 0, 100, 2]);
        let mut w = spmv_work(&ptr, 16);
        w.check(&ptr).unwrap();
        w.items[0][0][3] += 1;
        assert!(w.check(&ptr).is_err());
        let mut w = spmv_work(&ptr, 16);
        w.fix.clear();
        assert!(w.check(&ptr).is_err());
    }

    fn random_csr(
        rng: &mut ChaCha8Rng,
        rows: usize,
        cols: usize,
        nnz: usize,
        big: bool,
    ) -> crate::Csr {
        let t: Vec<(u32, u32, f32)> = (0..nnz)
            .map(|_| {
                let v: f32 = rng.random_range(-1.0..1.0);
                (
                    rng.random_range(0..rows as u32),
                    rng.random_range(0..cols as u32),
                    if big { v * 3.0e10 } else { v },
                )
            })
            .collect();
        csr_from_triplets(rows, cols, &t).unwrap()
    }

    /// The CPU walk against f64: |y − y64| ≤ tol · (|α|·|A|·|X| + |β|·|y0|) element-wise.
    fn check_walk(a: &crate::Csr, storage: TileStorage, n: usize, chunk: u32, beta: f32, tol: f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(a.nnz() as u64 + n as u64);
        let b = BitBsr::from_csr(a).unwrap();
        let d = DeviceBitBsr::encode(&b, storage).unwrap();
        let w = spmv_work(d.tile_row_ptr(), chunk);
        let x: Vec<f32> = (0..a.cols() * n)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let y0: Vec<f32> = (0..a.rows() * n)
            .map(|_| {
                if beta == 0.0 {
                    f32::NAN
                } else {
                    rng.random_range(-1.0..1.0)
                }
            })
            .collect();
        let mut y = y0.clone();
        let alpha = 1.5f32;
        d.spmv_cpu(&w, alpha, &x, beta, &mut y, n).unwrap();
        let want = spmm_f64(a, &x, n, n, false);
        let scale = spmm_f64(a, &x, n, n, true);
        for i in 0..y.len() {
            let (w0, s0) = if beta == 0.0 {
                (0.0, 0.0)
            } else {
                (y0[i] as f64, y0[i].abs() as f64)
            };
            let want = alpha as f64 * want[i] + beta as f64 * w0;
            let bound = tol * (alpha as f64 * scale[i] + beta.abs() as f64 * s0) + 1e-30;
            assert!(
                (y[i] as f64 - want).abs() <= bound,
                "{storage:?} n {n} chunk {chunk}: y[{i}] = {} want {want} bound {bound}",
                y[i]
            );
        }
    }

    #[test]
    fn cpu_walk_matches_f64() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        // M, K not multiples of 8; rectangular; empty tile-rows (rows ≥ 40 of 61 are empty).
        let mut t: Vec<(u32, u32, f32)> = Vec::new();
        for _ in 0..900 {
            t.push((
                rng.random_range(0..40),
                rng.random_range(0..53),
                rng.random_range(-1.0..1.0),
            ));
        }
        // One tile-row 1000× longer than the rest.
        for c in 0..4000u32 {
            t.push((3, c * 7 % 9000 + 53, 0.5));
        }
        let long = csr_from_triplets(61, 9053, &t).unwrap();
        let square = random_csr(&mut rng, 203, 203, 4000, false);
        let wide = random_csr(&mut rng, 37, 1001, 2000, false);
        for a in [&long, &square, &wide] {
            for (storage, tol) in [
                (TileStorage::F16, 2f64.powi(-9)),
                (TileStorage::Tf32, 2f64.powi(-9)),
                (TileStorage::F32, 2f64.powi(-17)),
            ] {
                for n in [1, 3, 8] {
                    for chunk in [1, 5, 32] {
                        check_walk(a, storage, n, chunk, 0.0, tol);
                    }
                    check_walk(a, storage, n, 32, -0.75, tol);
                }
            }
        }
    }

    #[test]
    fn f16_scales_huge_and_tiny_rows() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let big = random_csr(&mut rng, 64, 64, 700, true);
        check_walk(&big, TileStorage::F16, 1, 32, 0.0, 2f64.powi(-9));
        let d = DeviceBitBsr::encode(&BitBsr::from_csr(&big).unwrap(), TileStorage::F16).unwrap();
        let TileValues::F16 { bits, row_scale } = d.values() else {
            panic!("f16 storage")
        };
        assert!(bits.iter().all(|&b| f16::from_bits(b).is_finite()));
        assert!(
            row_scale
                .iter()
                .all(|&s| s > 1.0 && s.log2().fract() == 0.0)
        );
        assert_eq!(f16_scale(0.0), 1.0);
        assert_eq!(f16_scale(f32::NAN), 1.0);
        assert_eq!(f16_scale(1.0), 2f32.powi(-14));
        assert_eq!(f16_scale(65504.0 * 4.0), 8.0);
    }

    /// The GPU test `spmv_f16_never_overflows` on the CPU walk: one magnitude class (3e10, 1e-9, 1)
    /// per tile-row, X with 1e6 spikes, within 2⁻⁹·|A|·|X|.
    #[test]
    fn f16_walk_meets_the_bound_per_tile_row_classes() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let t: Vec<(u32, u32, f32)> = (0..5000)
            .map(|i| {
                let r = rng.random_range(0..200u32);
                let v: f32 = rng.random_range(-1.0..1.0);
                let s = [3.0e10, 1.0e-9, 1.0][((r / 8) % 3) as usize];
                (r, (i * 37 % 300) as u32, v * s)
            })
            .collect();
        let a = csr_from_triplets(200, 300, &t).unwrap();
        let d = DeviceBitBsr::encode(&BitBsr::from_csr(&a).unwrap(), TileStorage::F16).unwrap();
        let w = spmv_work(d.tile_row_ptr(), 32);
        for n in [1, 8] {
            let x: Vec<f32> = (0..300 * n)
                .map(|i| rng.random_range(-1.0f32..1.0) * if i % 5 == 0 { 1.0e6 } else { 1.0 })
                .collect();
            let mut y = vec![f32::NAN; 200 * n];
            d.spmv_cpu(&w, 1.0, &x, 0.0, &mut y, n).unwrap();
            let want = spmm_f64(&a, &x, n, n, false);
            let scale = spmm_f64(&a, &x, n, n, true);
            for i in 0..y.len() {
                assert!(
                    (y[i] as f64 - want[i]).abs() <= 2f64.powi(-9) * scale[i],
                    "y[{i}]"
                );
            }
        }
    }

    /// One 8-row tile-row mixing magnitudes 1e12 apart: one f16 scale would flush the small rows
    /// to zero, so f16 tiles are refused and TF32 tiles hold every row to the bound.
    #[test]
    fn a_tile_row_beyond_one_f16_scale_is_refused_and_tf32_holds_it() {
        let mut t: Vec<(u32, u32, f32)> = Vec::new();
        for r in 0..24u32 {
            for c in 0..5u32 {
                // Rows 8..16: row 8 at 1e6, rows 9..16 at 1e-6 (same tile-row).
                let mag = match r {
                    8 => 1.0e6,
                    9..16 => 1.0e-6,
                    _ => 1.0,
                };
                t.push((r, (r * 3 + c * 7) % 40, mag * (1.0 + c as f32 / 8.0)));
            }
        }
        let a = csr_from_triplets(24, 40, &t).unwrap();
        let b = BitBsr::from_csr(&a).unwrap();
        let u = f16_unfit_tile_row(&b).expect("tile-row 1 does not fit");
        assert_eq!(u.tile_row, 1);
        assert!(u.max_abs >= 1.0e6 && u.min_abs <= 2.0e-6, "{u:?}");
        let e = DeviceBitBsr::encode(&b, TileStorage::F16).unwrap_err();
        assert!(matches!(e, FormatError::BadArgument(_)), "{e}");
        for n in [1, 4] {
            check_walk(&a, TileStorage::Tf32, n, 4, 0.0, 2f64.powi(-9));
        }
        // Within one scale's reach (2¹⁶ below the scale, about 2⁻³⁰ of the maximum) f16 still fits.
        let mut t2 = t.clone();
        for e in t2.iter_mut().filter(|e| (9..16).contains(&e.0)) {
            e.2 *= 1.0e4;
        }
        let a2 = csr_from_triplets(24, 40, &t2).unwrap();
        assert_eq!(f16_unfit_tile_row(&BitBsr::from_csr(&a2).unwrap()), None);
        check_walk(&a2, TileStorage::F16, 1, 4, 0.0, 2f64.powi(-9));
        // Magnitudes 1e12 apart inside each row (as in stiffness matrices such as bcsstk17): every
        // row's largest term sets its accuracy, so f16 tiles hold the tile-row within the bound.
        let mut t3 = t.clone();
        for e in t3.iter_mut().filter(|e| (8..16).contains(&e.0)) {
            e.2 = if e.2 > 0.0 && (e.1 % 2 == 0) {
                1.0e6
            } else {
                1.0e-6
            };
        }
        for r in 8..16u32 {
            t3.push((r, 39, 1.0e6));
        }
        let a3 = csr_from_triplets(24, 40, &t3).unwrap();
        assert_eq!(f16_unfit_tile_row(&BitBsr::from_csr(&a3).unwrap()), None);
        check_walk(&a3, TileStorage::F16, 1, 4, 0.0, 2f64.powi(-9));
    }

    #[test]
    fn tf32_rounding_is_rna() {
        assert_eq!(round_tf32(1.0), 1.0);
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: away from zero.
        assert_eq!(round_tf32(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
        assert_eq!(round_tf32(-(1.0 + 2f32.powi(-11))), -(1.0 + 2f32.powi(-10)));
        assert_eq!(round_tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert!(round_tf32(f32::NAN).is_nan());
        assert_eq!(round_tf32(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn walk_refuses_bad_operands() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let a = random_csr(&mut rng, 20, 20, 50, false);
        let d = DeviceBitBsr::encode(&BitBsr::from_csr(&a).unwrap(), TileStorage::F16).unwrap();
        let w = spmv_work(d.tile_row_ptr(), 4);
        let mut y = vec![0f32; 20];
        assert!(d.spmv_cpu(&w, 1.0, &[0.0; 19], 0.0, &mut y, 1).is_err());
        assert!(
            d.spmv_cpu(&w, 1.0, &[0.0; 20 * 9], 0.0, &mut vec![0.0; 180], 9)
                .is_err()
        );
        let other = spmv_work(&[0, 5], 4);
        assert!(d.spmv_cpu(&other, 1.0, &[0.0; 20], 0.0, &mut y, 1).is_err());
    }
}
