//! Seeded sparse and dense test-matrix generators.
//!
//! Every sparse generator is deterministic for its `seed` and independent of the number of threads:
//! work is cut into fixed chunks (of rows or of edges) and chunk `k` draws from the ChaCha8 stream
//! `k` of `ChaCha8Rng::seed_from_u64(seed)`, so chunks run in parallel with rayon. Nonzero values are
//! uniform in `[-1, 1)` (never all ones: kernels must be tested with real values). Every result is a
//! [`Csr`] with sorted, duplicate-free rows.
//!
//! [`GeneratorSpec`] names a generator and its parameters; it is serde-able and parses from strings
//! such as `rmat:scale=16,ef=11,seed=1` (see [`GeneratorSpec::from_str`](std::str::FromStr)).

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::csr::{Csr, csr_from_parts};
use crate::limits::Limits;

mod dense;
mod spec;

use dense::*;
pub use dense::{
    algebraic_decay_dense, exponential_decay_dense, try_algebraic_decay_dense,
    try_exponential_decay_dense,
};
pub use spec::GeneratorSpec;

/// Rows per independently seeded chunk of the row-wise generators.
const CHUNK_ROWS: usize = 1024;
/// Edges per independently seeded chunk of [`rmat`].
const CHUNK_EDGES: u64 = 1 << 16;
/// Stream offset for value draws that follow a structure pass (keeps the two apart).
const VALUE_STREAMS: u64 = 1 << 40;

/// Errors of the generators and of [`GeneratorSpec`] parsing.
#[derive(Debug, Error, PartialEq)]
pub enum GenError {
    /// A parameter is out of its documented range.
    #[error("invalid generator parameter `{name}`: {message}")]
    Invalid {
        /// Parameter name.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The matrix would not fit u32 indices (rows, columns or nonzeros above `u32::MAX`).
    #[error("generated matrix too large for u32 indices: {0}")]
    TooLarge(String),
    /// The matrix the parameters ask for would not fit the memory budget.
    #[error(transparent)]
    Budget(#[from] crate::limits::BudgetError),
    /// A spec string could not be parsed.
    #[error("bad generator spec `{spec}`: {message}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(name: &'static str, message: impl Into<String>) -> GenError {
    GenError::Invalid {
        name,
        message: message.into(),
    }
}

fn chunk_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

#[inline]
fn value(rng: &mut ChaCha8Rng) -> f32 {
    rng.random::<f32>() * 2.0 - 1.0
}

fn check_dim(name: &'static str, v: usize) -> Result<(), GenError> {
    if v as u64 > u32::MAX as u64 {
        return Err(GenError::TooLarge(format!("{name} = {v}")));
    }
    Ok(())
}

/// Checks an output of `rows` rows and about `nnz` nonzeros (an upper bound or the expectation)
/// against u32 indices and the memory budget before any work: the work of every generator is
/// bounded by what its output holds.
fn check_output(rows: usize, nnz: f64) -> Result<(), GenError> {
    check_dim("rows", rows)?;
    if nnz.is_nan() || nnz > u32::MAX as f64 {
        return Err(GenError::TooLarge(format!("about {nnz:.0} nonzeros")));
    }
    crate::csr::check_csr_budget(rows, nnz as u64, &crate::limits::Limits::global())?;
    Ok(())
}

/// One generated chunk of rows: row lengths, sorted columns, values.
struct RowChunk {
    lens: Vec<u32>,
    cols: Vec<u32>,
    vals: Vec<f32>,
}

/// Runs `row_fn(rng, row, &mut cols)` for every row (each call appends the sorted columns of that
/// row), chunk by chunk in parallel, fills values from the same stream and assembles the CSR.
fn build_rows(
    rows: usize,
    cols: usize,
    seed: u64,
    row_fn: impl Fn(&mut ChaCha8Rng, usize, &mut Vec<u32>) + Sync,
) -> Result<Csr, GenError> {
    check_dim("rows", rows)?;
    check_dim("cols", cols)?;
    let chunks: Vec<RowChunk> = (0..rows.div_ceil(CHUNK_ROWS))
        .into_par_iter()
        .map(|k| {
            let mut rng = chunk_rng(seed, k as u64);
            let (r0, r1) = (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(rows));
            let mut chunk = RowChunk {
                lens: Vec::with_capacity(r1 - r0),
                cols: Vec::new(),
                vals: Vec::new(),
            };
            for r in r0..r1 {
                let before = chunk.cols.len();
                row_fn(&mut rng, r, &mut chunk.cols);
                chunk.lens.push((chunk.cols.len() - before) as u32);
            }
            chunk.vals = (0..chunk.cols.len()).map(|_| value(&mut rng)).collect();
            chunk
        })
        .collect();
    assemble(rows, cols, chunks)
}

fn assemble(rows: usize, cols: usize, chunks: Vec<RowChunk>) -> Result<Csr, GenError> {
    let nnz: usize = chunks.iter().map(|c| c.cols.len()).sum();
    check_dim("nnz", nnz)?;
    let mut indptr = Vec::with_capacity(rows + 1);
    indptr.push(0u32);
    let mut acc = 0u32;
    for c in &chunks {
        for &l in &c.lens {
            acc += l;
            indptr.push(acc);
        }
    }
    let mut indices = Vec::with_capacity(nnz);
    let mut data = Vec::with_capacity(nnz);
    for c in chunks {
        indices.extend_from_slice(&c.cols);
        data.extend_from_slice(&c.vals);
    }
    csr_from_parts(rows, cols, indptr, indices, data).map_err(|e| GenError::TooLarge(e.to_string()))
}

/// Appends `k` distinct values of `0..n`, sorted, to `out` (all of `0..n` when `k >= n`).
fn sample_distinct(rng: &mut ChaCha8Rng, n: u32, k: usize, out: &mut Vec<u32>) {
    let start = out.len();
    if k as u64 >= n as u64 {
        out.extend(0..n);
        return;
    }
    if k == 0 {
        return;
    }
    if 2 * k as u64 > n as u64 {
        // Dense: partial Fisher–Yates over 0..n.
        let mut all: Vec<u32> = (0..n).collect();
        for i in 0..k {
            let j = rng.random_range(i as u32..n) as usize;
            all.swap(i, j);
        }
        all.truncate(k);
        all.sort_unstable();
        out.extend_from_slice(&all);
        return;
    }
    while out.len() - start < k {
        let missing = k - (out.len() - start);
        out.extend((0..missing).map(|_| rng.random_range(0..n)));
        out[start..].sort_unstable();
        let mut w = start;
        for i in start..out.len() {
            if i == start || out[i] != out[w - 1] {
                out[w] = out[i];
                w += 1;
            }
        }
        out.truncate(w);
    }
}

/// Appends the sorted columns `lo..hi` kept independently with probability `p` (geometric skips,
/// O(kept) work).
fn bernoulli_range(rng: &mut ChaCha8Rng, lo: u32, hi: u32, p: f64, out: &mut Vec<u32>) {
    if p >= 1.0 {
        out.extend(lo..hi);
        return;
    }
    // ln(1 − p) through ln_1p stays non-zero for tiny p (1 − 1e-20 rounds to 1, whose log is 0 and
    // would make every skip −inf: an endless loop). A p too small to ever keep an entry in this
    // range keeps none.
    let log_q = (-p).ln_1p();
    if log_q.is_nan() || log_q >= 0.0 {
        return;
    }
    let mut c = lo as f64 - 1.0;
    loop {
        let u = 1.0 - rng.random::<f64>(); // (0, 1]
        c += 1.0 + (u.ln() / log_q).floor();
        if c >= hi as f64 {
            break;
        }
        out.push(c as u32);
    }
}

/// Random sparse matrix: `round(rows · nnz_per_row_avg)` nonzeros with uniformly random positions,
/// no duplicates (row lengths are multinomial; a row is clipped at `cols`, the only case where the
/// total is lower; `nnz_per_row_avg` may be at most `16 · cols`). Values uniform in `[-1, 1)`.
pub fn uniform_random(
    rows: usize,
    cols: usize,
    nnz_per_row_avg: f64,
    seed: u64,
) -> Result<Csr, GenError> {
    if !(nnz_per_row_avg.is_finite() && nnz_per_row_avg >= 0.0) {
        return Err(invalid(
            "nnz_per_row_avg",
            format!("must be finite and >= 0, got {nnz_per_row_avg}"),
        ));
    }
    if cols == 0 && nnz_per_row_avg > 0.0 && rows > 0 {
        return Err(invalid(
            "cols",
            "a matrix with 0 columns has no room for nonzeros",
        ));
    }
    // Rows are clipped at `cols`, but every requested nonzero is drawn: bound that work by a
    // small multiple of what the output can hold (uniform:n=1,avg=1e9 would draw 10⁹ times to
    // fill one entry).
    if nnz_per_row_avg > 16.0 * cols as f64 {
        return Err(invalid(
            "nnz_per_row_avg",
            format!(
                "must be at most 16 × cols = {} (a row holds at most cols = {cols}), got {nnz_per_row_avg}",
                16u64.saturating_mul(cols as u64)
            ),
        ));
    }
    let target = |r: usize| (r as f64 * nnz_per_row_avg).round() as u64;
    check_dim("rows", rows)?;
    check_dim("cols", cols)?;
    check_output(rows, rows as f64 * nnz_per_row_avg.min(cols as f64))?;
    let chunks: Vec<RowChunk> = (0..rows.div_ceil(CHUNK_ROWS))
        .into_par_iter()
        .map(|k| {
            let mut rng = chunk_rng(seed, k as u64);
            let (r0, r1) = (k * CHUNK_ROWS, ((k + 1) * CHUNK_ROWS).min(rows));
            let total = target(r1) - target(r0);
            let mut lens = vec![0u32; r1 - r0];
            for _ in 0..total {
                lens[rng.random_range(0..r1 - r0)] += 1;
            }
            let mut out = Vec::with_capacity(total as usize);
            for l in lens.iter_mut() {
                let before = out.len();
                sample_distinct(&mut rng, cols as u32, *l as usize, &mut out);
                *l = (out.len() - before) as u32;
            }
            let vals = (0..out.len()).map(|_| value(&mut rng)).collect();
            RowChunk {
                lens,
                cols: out,
                vals,
            }
        })
        .collect();
    assemble(rows, cols, chunks)
}

/// Banded `n × n` matrix: the diagonal always, and each other entry with `|i − j| <= half_bandwidth`
/// independently with probability `fill` (in `(0, 1]`). Values uniform in `[-1, 1)`.
pub fn banded(n: usize, half_bandwidth: usize, fill: f64, seed: u64) -> Result<Csr, GenError> {
    if !(fill > 0.0 && fill <= 1.0) {
        return Err(invalid("fill", format!("must be in (0, 1], got {fill}")));
    }
    let band = half_bandwidth.min(n.saturating_sub(1)) as f64;
    check_output(n, n as f64 * (1.0 + 2.0 * band * fill))?;
    build_rows(n, n, seed, |rng, r, out| {
        let lo = r.saturating_sub(half_bandwidth) as u32;
        let hi = r.saturating_add(half_bandwidth).saturating_add(1).min(n) as u32;
        bernoulli_range(rng, lo, r as u32, fill, out);
        out.push(r as u32);
        bernoulli_range(rng, r as u32 + 1, hi, fill, out);
    })
}

/// Block-diagonal matrix with noise, the shape graph reorderings aim for: `n × n`, diagonal blocks
/// of `block_size` (the last may be smaller) each entry of which is kept with probability
/// `intra_density` (in `(0, 1]`; the diagonal always), plus on average `inter_nnz_per_row` entries per
/// row at uniformly random columns outside the row's block. Values uniform in `[-1, 1)`.
pub fn clustered_block_diagonal(
    n: usize,
    block_size: usize,
    intra_density: f64,
    inter_nnz_per_row: f64,
    seed: u64,
) -> Result<Csr, GenError> {
    if block_size == 0 {
        return Err(invalid("block_size", "must be at least 1"));
    }
    if !(intra_density > 0.0 && intra_density <= 1.0) {
        return Err(invalid(
            "intra_density",
            format!("must be in (0, 1], got {intra_density}"),
        ));
    }
    if !(inter_nnz_per_row.is_finite() && inter_nnz_per_row >= 0.0) {
        return Err(invalid(
            "inter_nnz_per_row",
            format!("must be finite and >= 0, got {inter_nnz_per_row}"),
        ));
    }
    if inter_nnz_per_row > n as f64 {
        return Err(invalid(
            "inter_nnz_per_row",
            format!("must be at most n = {n}, got {inter_nnz_per_row}"),
        ));
    }
    let block = block_size.min(n) as f64;
    check_output(
        n,
        n as f64 * (1.0 + block * intra_density + inter_nnz_per_row),
    )?;
    let whole = inter_nnz_per_row.floor() as usize;
    let frac = inter_nnz_per_row - inter_nnz_per_row.floor();
    build_rows(n, n, seed, |rng, r, out| {
        let b0 = r / block_size * block_size;
        let b1 = (b0 + block_size).min(n);
        let start = out.len();
        bernoulli_range(rng, b0 as u32, r as u32, intra_density, out);
        out.push(r as u32);
        bernoulli_range(rng, r as u32 + 1, b1 as u32, intra_density, out);
        let outside = (n - (b1 - b0)) as u32;
        let k = whole + usize::from(rng.random::<f64>() < frac);
        let mid = out.len();
        sample_distinct(rng, outside, k, out);
        for c in &mut out[mid..] {
            if *c >= b0 as u32 {
                *c += (b1 - b0) as u32;
            }
        }
        out[start..].sort_unstable();
    })
}

/// R-MAT power-law graph (Chakrabarti et al.; Graph500 uses `(0.57, 0.19, 0.19, 0.05)`):
/// `2^scale × 2^scale` with `edge_factor · 2^scale` edges drawn by recursive quadrant choice with
/// probabilities `(a, b, c, d)` (normalized), duplicates removed (so nnz is somewhat lower), self
/// loops kept, vertex labels not permuted (high degrees sit at low indices). Values uniform in
/// `[-1, 1)`.
pub fn rmat(
    scale: u32,
    edge_factor: u32,
    (a, b, c, d): (f64, f64, f64, f64),
    seed: u64,
) -> Result<Csr, GenError> {
    if scale > 31 {
        return Err(invalid(
            "scale",
            format!("must be at most 31 (u32 indices), got {scale}"),
        ));
    }
    let probs = [a, b, c, d];
    if probs.iter().any(|p| !(p.is_finite() && *p >= 0.0)) || probs.iter().sum::<f64>() <= 0.0 {
        return Err(invalid(
            "a,b,c,d",
            format!("must be finite, >= 0 and not all 0, got {probs:?}"),
        ));
    }
    let sum: f64 = probs.iter().sum();
    let (pa, pab, pabc) = (a / sum, (a + b) / sum, (a + b + c) / sum);
    let n = 1usize << scale;
    let edges = edge_factor as u64 * n as u64;
    if edges > u32::MAX as u64 {
        return Err(GenError::TooLarge(format!("edges = {edges}")));
    }
    check_output(n, edges as f64)?;
    let mut keys: Vec<u64> = (0..edges.div_ceil(CHUNK_EDGES))
        .into_par_iter()
        .flat_map_iter(|k| {
            let mut rng = chunk_rng(seed, k);
            let count = CHUNK_EDGES.min(edges - k * CHUNK_EDGES);
            (0..count).map(move |_| {
                let (mut r, mut c) = (0u64, 0u64);
                for _ in 0..scale {
                    let u = rng.random::<f64>();
                    let (dr, dc) = if u < pa {
                        (0, 0)
                    } else if u < pab {
                        (0, 1)
                    } else if u < pabc {
                        (1, 0)
                    } else {
                        (1, 1)
                    };
                    r = (r << 1) | dr;
                    c = (c << 1) | dc;
                }
                (r << 32) | c
            })
        })
        .collect();
    keys.par_sort_unstable();
    keys.dedup();
    let mut indptr = vec![0u32; n + 1];
    for &key in &keys {
        indptr[(key >> 32) as usize + 1] += 1;
    }
    for i in 0..n {
        indptr[i + 1] += indptr[i];
    }
    let indices: Vec<u32> = keys.par_iter().map(|&key| key as u32).collect();
    drop(keys);
    let mut data = vec![0f32; indices.len()];
    data.par_chunks_mut(CHUNK_EDGES as usize)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut rng = chunk_rng(seed, VALUE_STREAMS + k as u64);
            chunk.iter_mut().for_each(|v| *v = value(&mut rng));
        });
    csr_from_parts(n, n, indptr, indices, data).map_err(|e| GenError::TooLarge(e.to_string()))
}
