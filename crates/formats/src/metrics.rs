//! Per-layout metrics: bytes, blocks, MeanNNZTC, cuTeSpMM's α and synergy class, Spaden's block
//! classes and compression ratios (see [`report`]); and cheap block statistics ([`block_count`],
//! [`mean_nnz_per_block`]) that do not build a layout, for the reordering search.

use crate::Csr;
use crate::bitbsr::BitBsr;
use crate::bittcf::BitTcf;
use crate::hrpb::Hrpb;
use crate::layout::FormatError;
use crate::metcf::MeTcf;
use crate::tcf::tcf_bytes;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Number of nonempty blocks when every window of `window_rows` rows has its sorted unique columns
/// cut into groups of `block_cols` (the BitTCF / ME-TCF / HRPB blocking over compacted columns):
/// Σ over windows of ⌈unique columns / block_cols⌉. 0 when either argument is 0.
pub fn block_count(csr: &Csr, window_rows: usize, block_cols: usize) -> usize {
    if window_rows == 0 || block_cols == 0 {
        return 0;
    }
    let rows = csr.rows();
    let indptr = csr.indptr();
    let indptr = indptr.raw_storage();
    let indices = csr.indices();
    let windows = rows.div_ceil(window_rows);
    (0..windows)
        .into_par_iter()
        .with_min_len(256)
        .map_init(Vec::new, |keys: &mut Vec<u32>, w| {
            let r0 = w * window_rows;
            let r1 = (r0 + window_rows).min(rows);
            let (k0, k1) = (indptr[r0] as usize, indptr[r1] as usize);
            let unique = if r1 - r0 == 1 {
                k1 - k0
            } else {
                keys.clear();
                keys.extend_from_slice(&indices[k0..k1]);
                keys.sort_unstable();
                keys.dedup();
                keys.len()
            };
            unique.div_ceil(block_cols)
        })
        .sum()
}

/// The block counts a planner needs, from one pass over the matrix instead of a BitTCF build
/// and two [`block_count`] passes: see [`planner_block_counts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannerBlockCounts {
    /// BitTCF's `row_window_offset` (8-row windows, 8 compacted columns per block): prefix of
    /// blocks per window, `⌈rows / 8⌉ + 1` entries.
    pub row_window_offset: Vec<u32>,
    /// [`block_count`]`(csr, 16, 4)` (HRPB bricks, cuTeSpMM's α).
    pub blocks_16x4: usize,
    /// [`block_count`]`(csr, 16, 8)` (ME-TCF blocks).
    pub blocks_16x8: usize,
}

impl PlannerBlockCounts {
    /// Nonempty 8×8 blocks (BitTCF's block count).
    pub fn blocks_8x8(&self) -> usize {
        self.row_window_offset.last().copied().unwrap_or(0) as usize
    }
}

/// One parallel pass over 16-row windows: each 8-row half's unique columns give its BitTCF block
/// count, their union the 16-row window's (16×4 and 16×8 blocks). Equal to
/// `BitTcf::from_csr(csr)?.row_window_offset()`, `block_count(csr, 16, 4)` and
/// `block_count(csr, 16, 8)` (property-tested), at a fraction of the cost of one of those passes.
///
/// Columns are counted with a stamp per column (no sort) when the declared columns are at most
/// 4 × nnz + 4096 (the stamps then cost no more memory than the matrix), else by sorting each
/// window's columns. The windows are cut into pieces of about equal nonzeros, one stamp array per
/// piece.
pub fn planner_block_counts(csr: &Csr) -> PlannerBlockCounts {
    let rows = csr.rows();
    let indptr = csr.indptr();
    let indptr = indptr.raw_storage();
    let indices = csr.indices();
    let windows8 = rows.div_ceil(8);
    let windows16 = rows.div_ceil(16);
    let row_cols = |a: usize, b: usize| &indices[indptr[a] as usize..indptr[b] as usize];
    // Per 16-row window: (unique columns of the first half, of the second, of both).
    let per: Vec<(u32, u32, usize)> = if csr.cols() <= 4 * csr.nnz() + 4096 {
        // Pieces of contiguous windows with about nnz / pieces nonzeros each.
        let pieces = (4 * rayon::current_num_threads()).clamp(1, windows16.max(1));
        let per_piece = csr.nnz().div_ceil(pieces).max(1);
        let mut cuts = vec![0usize];
        for w in 0..windows16 {
            let end = indptr[((w + 1) * 16).min(rows)] as usize;
            if end >= cuts.len() * per_piece && w + 1 < windows16 {
                cuts.push(w + 1);
            }
        }
        cuts.push(windows16);
        // One stamp array per rayon job, not per piece (64 pieces × 4 MB of zeroed pages on
        // R-MAT scale 20 at 16 threads), and at most one job per thread (each job's array is
        // fresh memory, paid in page faults: on the H200 host a new process's pass took 47 ms
        // before, 31 ms after, a warm process's 6–11 ms): stamps of other windows, earlier or
        // later, never equal the current window's.
        let per_job = (cuts.len() - 1).div_ceil(rayon::current_num_threads().max(1));
        let parts: Vec<Vec<(u32, u32, usize)>> = cuts
            .par_windows(2)
            .with_min_len(per_job.max(1))
            .map_init(
                || vec![0u32; csr.cols()],
                |stamp, c| {
                    // stamp[col] = 3w + 1: seen in window w's first half only; 3w + 2: in its
                    // second half only; 3w + 3: in both.
                    (c[0]..c[1])
                        .map(|w| {
                            let base = 3 * w as u32;
                            let r0 = w * 16;
                            let rm = (r0 + 8).min(rows);
                            let r1 = (r0 + 16).min(rows);
                            let (mut u0, mut u1, mut extra) = (0u32, 0u32, 0usize);
                            for &col in row_cols(r0, rm) {
                                let s = &mut stamp[col as usize];
                                if *s != base + 1 {
                                    *s = base + 1;
                                    u0 += 1;
                                }
                            }
                            for &col in row_cols(rm, r1) {
                                let s = &mut stamp[col as usize];
                                if *s == base + 1 {
                                    *s = base + 3;
                                    u1 += 1;
                                } else if *s != base + 2 && *s != base + 3 {
                                    *s = base + 2;
                                    u1 += 1;
                                    extra += 1;
                                }
                            }
                            (u0, u1, u0 as usize + extra)
                        })
                        .collect()
                },
            )
            .collect();
        parts.concat()
    } else {
        // Small pieces: the first windows of a power-law matrix hold most of its nonzeros.
        (0..windows16)
            .into_par_iter()
            .with_min_len(16)
            .map_init(
                || (Vec::new(), Vec::new()),
                |(x, y): &mut (Vec<u32>, Vec<u32>), w| {
                    let r0 = w * 16;
                    let rm = (r0 + 8).min(rows);
                    let r1 = (r0 + 16).min(rows);
                    let unique = |keys: &mut Vec<u32>, a: usize, b: usize| {
                        keys.clear();
                        keys.extend_from_slice(row_cols(a, b));
                        if b - a > 1 {
                            keys.sort_unstable();
                            keys.dedup();
                        }
                    };
                    unique(x, r0, rm);
                    unique(y, rm, r1);
                    // |x ∪ y| by a merge of the two sorted, distinct lists.
                    let (mut i, mut j, mut common) = (0, 0, 0);
                    while i < x.len() && j < y.len() {
                        match x[i].cmp(&y[j]) {
                            std::cmp::Ordering::Less => i += 1,
                            std::cmp::Ordering::Greater => j += 1,
                            std::cmp::Ordering::Equal => {
                                common += 1;
                                i += 1;
                                j += 1;
                            }
                        }
                    }
                    (x.len() as u32, y.len() as u32, x.len() + y.len() - common)
                },
            )
            .collect()
    };
    let mut row_window_offset = Vec::with_capacity(windows8 + 1);
    row_window_offset.push(0u32);
    let (mut total, mut blocks_16x4, mut blocks_16x8) = (0u32, 0usize, 0usize);
    for (w, &(u0, u1, both)) in per.iter().enumerate() {
        total += u0.div_ceil(8);
        row_window_offset.push(total);
        if 2 * w + 1 < windows8 {
            total += u1.div_ceil(8);
            row_window_offset.push(total);
        }
        blocks_16x4 += both.div_ceil(4);
        blocks_16x8 += both.div_ceil(8);
    }
    PlannerBlockCounts {
        row_window_offset,
        blocks_16x4,
        blocks_16x8,
    }
}

/// MeanNNZTC (Acc-SpMM): nonzeros per nonempty block of the same blocking as [`block_count`]
/// (0 when there is no block).
pub fn mean_nnz_per_block(csr: &Csr, window_rows: usize, block_cols: usize) -> f64 {
    let blocks = block_count(csr, window_rows, block_cols);
    if blocks == 0 {
        0.0
    } else {
        csr.nnz() as f64 / blocks as f64
    }
}

/// cuTeSpMM's TCU-synergy class of a matrix, from α (Table 1 of the paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Synergy {
    /// α < 12.5 %.
    Low,
    /// 12.5 % ≤ α < 25 %.
    Medium,
    /// α ≥ 25 %.
    High,
}

impl Synergy {
    /// Class of a brick density α (fraction, 0..=1).
    pub fn from_alpha(alpha: f64) -> Self {
        if alpha < 0.125 {
            Synergy::Low
        } else if alpha < 0.25 {
            Synergy::Medium
        } else {
            Synergy::High
        }
    }
}

/// Spaden's classes of nonempty 8×8 blocks (§5.4): sparse nnz ≤ 32, medium 33..=48, dense > 48.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockClasses {
    /// Blocks with at most 32 nonzeros.
    pub sparse: usize,
    /// Blocks with 33 to 48 nonzeros.
    pub medium: usize,
    /// Blocks with more than 48 nonzeros.
    pub dense: usize,
}

impl BlockClasses {
    /// Classes of the blocks of a bitBSR layout.
    pub fn of(bsr: &BitBsr) -> Self {
        let mut c = BlockClasses::default();
        for m in bsr.bitmap() {
            match m.count_ones() {
                0..=32 => c.sparse += 1,
                33..=48 => c.medium += 1,
                _ => c.dense += 1,
            }
        }
        c
    }
}

/// One row of a [`FormatReport`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatRow {
    /// Layout name (`CSR`, `TCF`, `BitTCF`, `ME-TCF`, `HRPB`, `bitBSR`).
    pub format: String,
    /// Bytes of all arrays as we store them (values included).
    pub bytes: usize,
    /// Bytes by the paper's own formula, where it gives one (BitTCF: (⌈M/8⌉ + 11·blocks + 2)·4,
    /// which leaves the values out).
    pub paper_bytes: Option<usize>,
    /// Block shape `rows×cols` (empty for CSR).
    pub block_shape: String,
    /// Nonempty blocks (0 for CSR).
    pub blocks: usize,
    /// Nonzeros per nonempty block (MeanNNZTC for BitTCF; per 16×8 block for ME-TCF and TCF;
    /// per 16×16 block for HRPB).
    pub mean_nnz_per_block: f64,
    /// CSR bytes / these bytes.
    pub compression_vs_csr: f64,
    /// TCF bytes / these bytes (Acc-SpMM Fig. 12 reports this ratio).
    pub compression_vs_tcf: f64,
}

/// Metrics of every layout for one matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FormatReport {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored entries.
    pub nnz: usize,
    /// One row per layout, CSR first.
    pub formats: Vec<FormatRow>,
    /// HRPB stored bricks.
    pub hrpb_bricks: usize,
    /// cuTeSpMM α: nnz / (bricks · 64), the mean density of the 16×4 bricks (0 with no brick).
    pub alpha: f64,
    /// Synergy class of α.
    pub synergy: Synergy,
    /// Spaden block classes of the bitBSR blocks.
    pub spaden_classes: BlockClasses,
}

/// CSR bytes with u32 offsets and indices and f32 values.
pub fn csr_bytes(csr: &Csr) -> usize {
    4 * (csr.rows() + 1) + 8 * csr.nnz()
}

/// Builds every layout of `csr` and reports its metrics.
pub fn report(csr: &Csr) -> Result<FormatReport, FormatError> {
    let csr_b = csr_bytes(csr);
    let tcf_b = tcf_bytes(csr);
    let ratio = |num: usize, den: usize| {
        if den == 0 {
            0.0
        } else {
            num as f64 / den as f64
        }
    };
    let mean = |blocks: usize| ratio(csr.nnz(), blocks);
    let row =
        |format: &str, bytes: usize, paper: Option<usize>, shape: &str, blocks: usize| FormatRow {
            format: format.to_string(),
            bytes,
            paper_bytes: paper,
            block_shape: shape.to_string(),
            blocks,
            mean_nnz_per_block: mean(blocks),
            compression_vs_csr: ratio(csr_b, bytes),
            compression_vs_tcf: ratio(tcf_b, bytes),
        };
    let bittcf = BitTcf::from_csr(csr)?;
    let metcf = MeTcf::from_csr(csr)?;
    let hrpb = Hrpb::from_csr(csr)?;
    let bsr = BitBsr::from_csr(csr)?;
    let tcf_blocks = block_count(csr, crate::tcf::TCF_WINDOW_ROWS, 8);
    let bt_paper = (csr.rows().div_ceil(8) + 11 * bittcf.num_blocks() + 2) * 4;
    let formats = vec![
        row("CSR", csr_b, None, "", 0),
        row("TCF", tcf_b, None, "16x8", tcf_blocks),
        row(
            "BitTCF",
            bittcf.bytes(),
            Some(bt_paper),
            "8x8",
            bittcf.num_blocks(),
        ),
        row("ME-TCF", metcf.bytes(), None, "16x8", metcf.num_blocks()),
        row("HRPB", hrpb.bytes(), None, "16x16", hrpb.num_blocks()),
        row("bitBSR", bsr.bytes(), None, "8x8 aligned", bsr.num_blocks()),
    ];
    let bricks = hrpb.num_bricks();
    let alpha = ratio(csr.nnz(), bricks * 64);
    Ok(FormatReport {
        rows: csr.rows(),
        cols: csr.cols(),
        nnz: csr.nnz(),
        formats,
        hrpb_bricks: bricks,
        alpha,
        synergy: Synergy::from_alpha(alpha),
        spaden_classes: BlockClasses::of(&bsr),
    })
}
