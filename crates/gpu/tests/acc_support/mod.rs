//! Shared helpers of the Acc-SpMM tests: a test-local BitTCF builder (independent of the formats
//! crate's, so the kernel is checked against a second implementation of the layout), seeded test
//! matrices with the edge cases the peers got wrong, and the TF32 error bound.

#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_gpu::spmm::acc::{
    AccSpmmParts, FlatSchedule, SENTINEL, flatten_acc_schedule, flatten_schedule,
    unbalanced_schedule,
};
use tcsparse_planner::AccSchedule;

#[path = "../../../formats/tests/support/spmm_check.rs"]
mod spmm_check;
#[allow(unused_imports)] // not every test binary that includes this module uses every helper
pub use spmm_check::{Dense, check_result, tf32_scaled_error, visit_elements};

/// Owned BitTCF arrays built straight from the definition (PEER-FACTS.md).
pub struct OwnedBitTcf {
    pub rows: usize,
    pub cols: usize,
    pub rwo: Vec<u32>,
    pub bvo: Vec<u32>,
    pub a2b: Vec<u32>,
    pub bits: Vec<u64>,
    pub values: Vec<f32>,
}

impl OwnedBitTcf {
    pub fn from_csr(a: &Csr) -> Self {
        let (rows, cols) = (a.rows(), a.cols());
        let indptr = a.indptr();
        let indptr = indptr.raw_storage();
        let windows = rows.div_ceil(8);
        let mut out = OwnedBitTcf {
            rows,
            cols,
            rwo: vec![0],
            bvo: vec![0],
            a2b: Vec::new(),
            bits: Vec::new(),
            values: Vec::new(),
        };
        for w in 0..windows {
            let r0 = 8 * w;
            let r1 = (r0 + 8).min(rows);
            let mut ucols: Vec<u32> = (r0..r1)
                .flat_map(|r| {
                    a.indices()[indptr[r] as usize..indptr[r + 1] as usize]
                        .iter()
                        .copied()
                })
                .collect();
            ucols.sort_unstable();
            ucols.dedup();
            for group in ucols.chunks(8) {
                let mut slots = [SENTINEL; 8];
                slots[..group.len()].copy_from_slice(group);
                let mut dense = [[None::<f32>; 8]; 8];
                for r in r0..r1 {
                    for k in indptr[r] as usize..indptr[r + 1] as usize {
                        if let Some(s) = group.iter().position(|&c| c == a.indices()[k]) {
                            dense[r - r0][s] = Some(a.data()[k]);
                        }
                    }
                }
                let mut mask = 0u64;
                for (lr, row) in dense.iter().enumerate() {
                    for (s, v) in row.iter().enumerate() {
                        if let Some(v) = v {
                            mask |= 1u64 << (lr * 8 + s);
                            out.values.push(*v);
                        }
                    }
                }
                out.a2b.extend(slots);
                out.bits.push(mask);
                out.bvo.push(out.values.len() as u32);
            }
            out.rwo.push(out.bits.len() as u32);
        }
        out
    }

    pub fn parts(&self) -> AccSpmmParts<'_> {
        AccSpmmParts {
            rows: self.rows,
            cols: self.cols,
            row_window_offset: &self.rwo,
            block_value_offset: &self.bvo,
            sparse_a_to_b: &self.a2b,
            tc_local_bit: &self.bits,
            values: &self.values,
        }
    }
}

/// Random values in [-1, 1) that are not exactly representable in TF32 (so rounding is exercised).
pub fn value(rng: &mut ChaCha8Rng) -> f32 {
    rng.random_range(-1.0f32..1.0)
}

/// A seeded matrix with the edge cases: `rows`, `cols` need not be multiples of 8; rows in
/// `empty_rows` (given as a range of windows) get no entries, so whole windows are empty, the last
/// window included when `trailing_empty`; `hubs` rows get `hub_len` entries each (hub-dominated
/// windows); others get about `per_row` entries.
pub struct Gen {
    pub rows: usize,
    pub cols: usize,
    pub per_row: usize,
    pub hubs: usize,
    pub hub_len: usize,
    pub empty_windows: std::ops::Range<usize>,
    pub trailing_empty: bool,
    pub banded: bool,
    pub seed: u64,
}

impl Gen {
    pub fn new(rows: usize, cols: usize, per_row: usize, seed: u64) -> Self {
        Gen {
            rows,
            cols,
            per_row,
            hubs: 0,
            hub_len: 0,
            empty_windows: 0..0,
            trailing_empty: false,
            banded: false,
            seed,
        }
    }

    /// The same with `hubs` rows of `hub_len` entries each.
    pub fn with_hubs(self, hubs: usize, hub_len: usize) -> Self {
        Gen {
            hubs,
            hub_len,
            ..self
        }
    }

    pub fn build(&self) -> Csr {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut t = Vec::new();
        let windows = self.rows.div_ceil(8);
        for r in 0..self.rows {
            let w = r / 8;
            if self.empty_windows.contains(&w) || (self.trailing_empty && w + 1 == windows) {
                continue;
            }
            let len = if r % 97 < self.hubs {
                self.hub_len
            } else {
                rng.random_range(0..=2 * self.per_row)
            };
            for _ in 0..len {
                let c = if self.banded {
                    let lo = r.saturating_sub(6).min(self.cols.saturating_sub(1));
                    (lo + rng.random_range(0..12)).min(self.cols - 1)
                } else {
                    rng.random_range(0..self.cols)
                };
                t.push((r as u32, c as u32, value(&mut rng)));
            }
        }
        csr_from_triplets(self.rows, self.cols, &t).expect("valid triplets")
    }
}

/// A banded `n × n` matrix (12 nonzeros a row, seed `seed`) and a clustered one of `clustered`
/// rows (blocks of 64, seed `seed + 1`), whose windows share columns, then [`edge_matrices`].
pub fn banded_clustered_and_edges(
    n: usize,
    clustered: usize,
    seed: u64,
) -> Vec<(&'static str, Csr)> {
    let mut band = Gen::new(n, n, 12, seed);
    band.banded = true;
    let clustered = tcsparse_formats::generate::GeneratorSpec::Clustered {
        n: clustered,
        block_size: 64,
        intra_density: 0.3,
        inter_nnz_per_row: 1.0,
        seed: seed + 1,
    }
    .build()
    .unwrap();
    let mut mats = vec![("banded", band.build()), ("clustered", clustered)];
    mats.extend(edge_matrices());
    mats
}

/// The edge cases: ragged M and K with empty and trailing empty windows, hub rows, a banded
/// 256 × 256, an empty matrix and a single row.
pub fn edge_matrices() -> Vec<(&'static str, Csr)> {
    let mut g = Gen::new(205, 173, 5, 1);
    g.empty_windows = 3..5;
    g.trailing_empty = true;
    let h = Gen::new(301, 999, 3, 2).with_hubs(2, 600);
    let mut band = Gen::new(256, 256, 8, 3);
    band.banded = true;
    vec![
        ("ragged+empty-windows", g.build()),
        ("hubs", h.build()),
        ("banded", band.build()),
        ("empty", Gen::new(21, 9, 0, 4).build()),
        ("one-row", Gen::new(1, 50, 20, 5).build()),
    ]
}

/// Random dense matrix, `rows × ld` storage (padding columns filled with NaN: they must never be
/// read).
pub fn dense(rows: usize, n: usize, ld: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![f32::NAN; rows * ld];
    for r in 0..rows {
        for f in 0..n {
            v[r * ld + f] = value(&mut rng);
        }
    }
    v
}

/// B (`cols × ldb`) and C0 (`rows × ldc`) of a product of width `n`, with `pad` padding columns
/// in B and `2·pad` in C: B from seed `seed + n`, C0 from `seed + 1000 + n`; when β = 0 every
/// element of C0 is NaN (poisoned: every element must be written, never read). Returns
/// `(ldb, ldc, b, c0)`.
pub fn operands(
    a: &Csr,
    n: usize,
    pad: usize,
    beta: f32,
    seed: u64,
) -> (usize, usize, Vec<f32>, Vec<f32>) {
    let (ldb, ldc) = (n + pad, n + 2 * pad);
    let b = dense(a.cols(), n, ldb, seed + n as u64);
    let mut c0 = dense(a.rows(), n, ldc, seed + 1000 + n as u64);
    if beta == 0.0 {
        for r in 0..a.rows() {
            c0[r * ldc..r * ldc + n].fill(f32::NAN);
        }
    }
    (ldb, ldc, b, c0)
}

/// A schedule that cuts every window into pieces of at most `chunk` blocks, one thread block per
/// piece (every window with more than `chunk` blocks is split), with each empty window in its own
/// thread block: `(work, window_split)`.
pub fn chopped_schedule(rwo: &[u32], chunk: u32) -> (Vec<[u64; 4]>, Vec<u8>) {
    let windows = rwo.len() - 1;
    let mut work = Vec::new();
    let mut split = vec![0u8; windows];
    for w in 0..windows {
        let (b0, b1) = (rwo[w], rwo[w + 1]);
        if b0 == b1 {
            work.push([w as u64, w as u64 + 1, b0 as u64, b1 as u64]);
            continue;
        }
        if b1 - b0 > chunk {
            split[w] = 1;
        }
        let mut b = b0;
        while b < b1 {
            let e = (b + chunk).min(b1);
            work.push([w as u64, w as u64 + 1, b as u64, e as u64]);
            b = e;
        }
    }
    (work, split)
}

/// A schedule that packs several whole windows per thread block (`per_tb` windows each), nothing
/// split: exercises the multi-window walk with empty windows inside a range.
pub fn packed_schedule(rwo: &[u32], per_tb: usize) -> (Vec<[u64; 4]>, Vec<u8>) {
    let windows = rwo.len() - 1;
    let mut work = Vec::new();
    let mut w = 0;
    while w < windows {
        let e = (w + per_tb).min(windows);
        work.push([w as u64, e as u64, rwo[w] as u64, rwo[e] as u64]);
        w = e;
    }
    (work, vec![0; windows])
}

/// A schedule that streams consecutive blocks into thread blocks of `chunk` blocks regardless of
/// window boundaries (so thread blocks span several windows and windows are split at both ends),
/// empty windows joining the open thread block: `(work, window_split)`.
pub fn stream_schedule(rwo: &[u32], chunk: u64) -> (Vec<[u64; 4]>, Vec<u8>) {
    let windows = rwo.len() - 1;
    let mut work: Vec<[u64; 4]> = Vec::new();
    let mut cur: Option<[u64; 4]> = None;
    for w in 0..windows {
        let (b0, b1) = (rwo[w] as u64, rwo[w + 1] as u64);
        let w = w as u64;
        if b0 == b1 {
            match cur.as_mut() {
                Some(c) => c[1] = w + 1,
                None => cur = Some([w, w + 1, b0, b0]),
            }
            continue;
        }
        for b in b0..b1 {
            if let Some(c) = cur
                && c[3] - c[2] >= chunk
            {
                work.push(c);
                cur = None;
            }
            let c = cur.get_or_insert([w, w + 1, b, b]);
            c[1] = w + 1;
            c[3] = b + 1;
        }
    }
    work.extend(cur);
    let mut split = vec![0u8; windows];
    for (w, s) in split.iter_mut().enumerate() {
        let tbs = work
            .iter()
            .filter(|t| t[0] <= w as u64 && (w as u64) < t[1])
            .count();
        *s = u8::from(tbs > 1);
    }
    (work, split)
}

/// Piece sizes of the hand-made schedules of [`schedules`]: blocks per chopped piece, windows per
/// packed thread block, blocks per streamed thread block.
pub struct Cuts {
    pub chop: u32,
    pub pack: usize,
    pub stream: u64,
}

/// Every schedule shape the kernel must handle over the windows `rwo`: one thread block per
/// window, chopped, packed and streamed by `cuts`, and the planner's `balanced` one.
pub fn schedules(
    rwo: &[u32],
    cuts: Cuts,
    balanced: &AccSchedule,
) -> Vec<(&'static str, FlatSchedule)> {
    let mut out = vec![("unbalanced", unbalanced_schedule(rwo))];
    for (name, (work, split)) in [
        ("chopped", chopped_schedule(rwo, cuts.chop)),
        ("packed", packed_schedule(rwo, cuts.pack)),
        ("stream", stream_schedule(rwo, cuts.stream)),
    ] {
        out.push((name, flatten_schedule(rwo, work, &split).expect(name)));
    }
    out.push((
        "planner-balanced",
        flatten_acc_schedule(rwo, balanced).expect("planner schedule"),
    ));
    out
}

/// A 70 × 60 matrix with +∞ in row 3 and NaN in row 40 (column 7 of both), and its B of width `n`
/// (leading dimension `ldb`): row 7 positive (so that row 3 of the product is +∞ where nothing
/// else intervenes), NaN at feature 5 and +∞ at feature 9 of row 11 (where n allows).
pub fn non_finite_operands(n: usize, ldb: usize) -> (Csr, Vec<f32>) {
    let base = Gen::new(70, 60, 6, 9).build();
    let mut t: Vec<(u32, u32, f32)> = Vec::new();
    for (r, row) in base.outer_iterator().enumerate() {
        for (c, &v) in row.iter() {
            if !((r == 3 || r == 40) && c == 7) {
                t.push((r as u32, c as u32, v));
            }
        }
    }
    t.push((3, 7, f32::INFINITY));
    t.push((40, 7, f32::NAN));
    let a = csr_from_triplets(70, 60, &t).unwrap();
    let mut b = dense(60, n, ldb, 77);
    for v in b[7 * ldb..7 * ldb + n].iter_mut() {
        *v = v.abs() + 0.5;
    }
    if n > 9 {
        b[11 * ldb + 5] = f32::NAN;
        b[11 * ldb + 9] = f32::INFINITY;
    }
    (a, b)
}
