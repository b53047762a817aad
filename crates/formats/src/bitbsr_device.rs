//! The device encoding of bitBSR for the tensor-core SpMV kernels (`kernels-ptx/spmv.cu`), their
//! tile-balanced work list, and a CPU product that walks both exactly the way the kernels do.
//!
//! * [`DeviceBitBsr`]: one 16-byte record per 8×8 tile `{bitmap lo, bitmap hi, block column, value
//!   offset}`, the tile-row offsets, and the values either as f16 scaled per tile-row by a power of
//!   two ([`TileStorage::F16`]: the row's largest magnitude lands in [2¹⁴, 2¹⁵), so no value overflows
//!   f16 and none within 2⁻²⁴ of the row maximum is subnormal) or as f32 rounded to TF32
//!   ([`TileStorage::Tf32`], round to nearest, ties away, as `cvt.rna.tf32.f32`), or as plain f32
//!   ([`TileStorage::F32`], for the CUDA-core walk `spmv_core_f32`: full f32 products).
//! * [`HalfWork`]: the kernels' work list as the CPU walk reads it: warp items of two *halves* (the
//!   top and bottom of the MMA), each whole tile-rows or one chunk of a split tile-row written to a
//!   partial slot that a fix-up sums. The list is built and checked by the planner
//!   (`tcsparse_planner::work::spmv`, which sits above this crate and implements the trait).
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
    pub fn spmv_cpu<W: HalfWork + ?Sized>(
        &self,
        work: &W,
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
        work.check_covers(&self.tile_row_ptr)
            .map_err(|what| FormatError::Invalid {
                format: "SpMV work list",
                what,
            })?;
        let (xv, xs) = self.device_x(x, n);
        let mut partial = vec![0f32; work.slots() as usize * BLOCK * n];
        let mut acc = vec![0f32; BLOCK * n];
        let mut tile = vec![0f32; BLOCK * n];
        work.for_each_half(&mut |r0, r1, t0, t1, slot| {
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
        });
        for &[r, s0, s1] in work.fix() {
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

/// The SpMV kernels' work list as [`DeviceBitBsr::spmv_cpu`] walks it (module docs), implemented by
/// the planner's `SpmvWork`.
pub trait HalfWork {
    /// Calls `f(row_begin, row_end, tile_begin, tile_end, slot)` for every half in order: tile-rows
    /// `row_begin..row_end`, tiles `tile_begin..tile_end`, and the partial slot of a split half
    /// (`None` for whole tile-rows; an empty half has `row_begin == row_end`).
    fn for_each_half(&self, f: &mut dyn FnMut(u32, u32, u32, u32, Option<u32>));
    /// Split tile-rows: `{tile-row, first slot, end slot}`.
    fn fix(&self) -> &[[u32; 3]];
    /// Number of partial slots.
    fn slots(&self) -> u32;
    /// Checks that the list covers the tile-rows of `tile_row_ptr` as the kernels need (every tile
    /// in exactly one half, split rows' chunks in consecutive slots); the reason otherwise.
    fn check_covers(&self, tile_row_ptr: &[u32]) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
