//! Norm maps (cuSpAMM §3.2): Frobenius norms of `tile × tile` tiles of a dense row-major matrix,
//! and the SpAMM CPU product that skips tile products whose norm product is below τ.
//!
//! Convention (kept everywhere in tcsparse): the tile product A(i,k)·B(k,j) is computed **iff**
//! `normA(i,k) · normB(k,j) ≥ τ` (product of the f32 norms evaluated in f64). The released cuSpAMM
//! code uses ≥ in FP16 but > in FP32; we use ≥ in both. Norms are accumulated in f64 (cuSpAMM's
//! FP16 path squares in half precision and overflows above |a| = 256) and stored as f32.

use crate::layout::FormatError;
use serde::{Deserialize, Serialize};

/// Tile norms of a dense `rows × cols` row-major matrix; edge tiles are partial (no padding).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NormMap {
    rows: usize,
    cols: usize,
    tile: usize,
    norms: Vec<f32>,
}

impl NormMap {
    /// Computes the norm map of `a` (row-major, leading dimension `cols`).
    /// Errors if `tile == 0` or `a.len() < rows·cols`.
    pub fn from_dense(
        a: &[f32],
        rows: usize,
        cols: usize,
        tile: usize,
    ) -> Result<Self, FormatError> {
        if tile == 0 {
            return Err(FormatError::BadArgument("tile size 0".into()));
        }
        let len = rows
            .checked_mul(cols)
            .ok_or_else(|| FormatError::TooLarge("rows·cols".into()))?;
        if a.len() < len {
            return Err(FormatError::BadArgument(format!(
                "matrix has {} elements, need {len}",
                a.len()
            )));
        }
        let (tr, tc) = (rows.div_ceil(tile), cols.div_ceil(tile));
        let mut sq = vec![0f64; tr * tc];
        for r in 0..rows {
            let srow = &mut sq[(r / tile) * tc..(r / tile + 1) * tc];
            for (c, &v) in a[r * cols..r * cols + cols].iter().enumerate() {
                srow[c / tile] += (v as f64) * (v as f64);
            }
        }
        Ok(NormMap {
            rows,
            cols,
            tile,
            norms: sq.into_iter().map(|s| s.sqrt() as f32).collect(),
        })
    }

    /// Rows of the source matrix.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns of the source matrix.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Tile edge.
    pub fn tile(&self) -> usize {
        self.tile
    }
    /// ⌈rows / tile⌉.
    pub fn tile_rows(&self) -> usize {
        self.rows.div_ceil(self.tile)
    }
    /// ⌈cols / tile⌉.
    pub fn tile_cols(&self) -> usize {
        self.cols.div_ceil(self.tile)
    }
    /// Norms, row-major `tile_rows × tile_cols`.
    pub fn norms(&self) -> &[f32] {
        &self.norms
    }
    /// Norm of tile (i, j).
    pub fn get(&self, i: usize, j: usize) -> f32 {
        self.norms[i * self.tile_cols() + j]
    }
}

/// SpAMM CPU product C ≈ A·B with A `m × k` and B `k × n` row-major (leading dimensions k and n)
/// and their norm maps `na`, `nb` of tile size `tile`: the tile product (i, k, j) is computed when
/// the f32 product of its norms is ≥ τ (the GPU kernels' and `planner::spamm`'s rule). Returns C
/// (`m × n`, row-major, f32 accumulation) and the valid ratio: computed (i,k,j) tile products over
/// all of them (0 when there are none). Errors on mismatched shapes or norm maps.
#[allow(clippy::too_many_arguments)]
pub fn spamm_cpu(
    a: &[f32],
    na: &NormMap,
    b: &[f32],
    nb: &NormMap,
    m: usize,
    k: usize,
    n: usize,
    tile: usize,
    tau: f32,
) -> Result<(Vec<f32>, f64), FormatError> {
    if tile == 0 || na.tile != tile || nb.tile != tile {
        return Err(FormatError::BadArgument(
            "tile size 0 or norm maps of another tile size".into(),
        ));
    }
    if (na.rows, na.cols, nb.rows, nb.cols) != (m, k, k, n) {
        return Err(FormatError::BadArgument(
            "norm map shapes do not match m, k, n".into(),
        ));
    }
    if a.len() < m * k || b.len() < k * n {
        return Err(FormatError::BadArgument("operand too short".into()));
    }
    let (tm, tk, tn) = (m.div_ceil(tile), k.div_ceil(tile), n.div_ceil(tile));
    let mut c = vec![0f32; m * n];
    let mut valid = 0usize;
    for i in 0..tm {
        for j in 0..tn {
            for t in 0..tk {
                // The kernels' rule: valid when the f32 product of the norms is ≥ τ.
                if na.get(i, t) * nb.get(t, j) < tau {
                    continue;
                }
                valid += 1;
                for r in i * tile..((i + 1) * tile).min(m) {
                    for kk in t * tile..((t + 1) * tile).min(k) {
                        let av = a[r * k + kk];
                        let (c0, c1) = (j * tile, ((j + 1) * tile).min(n));
                        for (acc, &bv) in c[r * n + c0..r * n + c1]
                            .iter_mut()
                            .zip(&b[kk * n + c0..kk * n + c1])
                        {
                            *acc += av * bv;
                        }
                    }
                }
            }
        }
    }
    let total = tm * tk * tn;
    Ok((
        c,
        if total == 0 {
            0.0
        } else {
            valid as f64 / total as f64
        },
    ))
}
