//! The parallel window builder every tensor-core layout is derived from: rows cut into windows,
//! each window's nonzeros grouped into blocks over its compacted (or aligned) columns
//! ([`build_windowed`] → [`WindowedParts`]), and the way back to CSR ([`decode`]).
//!
//! Windows are cut into chunks of about [`CHUNK_NNZ`] nonzeros; one chunk is built by
//! [`chunk`] on a per-worker scratch, the chunks' block arrays are then joined in parallel.

pub(crate) mod chunk;
pub(crate) mod decode;

use crate::Csr;
use crate::layout::{FormatError, SENTINEL, check_u32};
use chunk::{ChunkIn, KeySet, run_chunk, run_chunk_aligned};
use rayon::prelude::*;

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

impl WindowSpec {
    /// Blocks over each window's compacted columns, without masks or block windows.
    pub(crate) fn compacted(window_rows: usize, block_cols: usize) -> Self {
        WindowSpec {
            window_rows,
            block_cols,
            mode: ColumnMode::Compacted,
            masks: false,
            block_window: false,
        }
    }
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

/// Nonzeros of every byte value (no `popcnt` on the baseline target).
pub(crate) const POP8: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (i as u32).count_ones() as u8;
        i += 1;
    }
    t
};

/// Target nonzeros per rayon task (several tasks per thread for balance).
const CHUNK_NNZ: usize = 1 << 15;

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
    let indptr = csr.row_offsets();
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

    /// Matrices of many chunks (the parallel path and the join) in every layout, including long
    /// rows over a narrow and a wide column range.
    #[test]
    fn multi_chunk_matrices_round_trip_in_every_layout() {
        for (rows, cols, per_row) in [(40_000usize, 40_000usize, 5.0), (3_000, 2_000_000, 60.0)] {
            let a = crate::generate::uniform_random(rows, cols, per_row, 9).unwrap();
            assert!(a.nnz() > 4 * CHUNK_NNZ);
            round_trips_in_every_layout(&a);
        }
    }

    /// Every layout of one shape built from `a` validates and converts back to `a`.
    fn round_trips_in_every_layout(a: &Csr) {
        fn check<L: crate::layout::Layout<Params = ()>>(a: &Csr) {
            let l = L::from_csr_with(a, ()).unwrap();
            assert_eq!(l.validate(), Ok(()), "{}", L::NAME);
            assert_eq!(l.to_csr(), *a, "{}", L::NAME);
        }
        check::<crate::bitbsr::BitBsr>(a);
        check::<crate::bittcf::BitTcf>(a);
        check::<crate::metcf::MeTcf>(a);
        check::<crate::hrpb::Hrpb>(a);
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
        round_trips_in_every_layout(&a);
    }
}
