//! A cheap test before reordering: can a row order raise the block density enough to matter?
//!
//! Reordering costs hundreds of nanoseconds per nonzero; on R-MAT and uniform random matrices it is
//! computed and then thrown away because no order makes their 8×8 blocks dense enough for a
//! tensor-core kernel to beat the CSR kernels. [`Gate::assess`] estimates, in a few nanoseconds
//! per nonzero, the MeanNNZTC the best row order could reach and compares it with today's:
//!
//! 1. Current MeanNNZTC (8-row windows, 8 compacted columns), exact ([`crate::metrics`]).
//! 2. Reachable MeanNNZTC, estimated on a deterministic sample of rows (every `rows / sample`-th
//!    row): each sampled row `r` gets the `7` rows sharing the most columns with it (through at
//!    most [`Gate::max_neighbors`] of its columns and the first [`Gate::max_scan`] rows of each,
//!    the candidate set the affinity walk uses), and the window `{r} ∪ partners` is counted
//!    exactly (nonzeros over `ceil(distinct columns / 8)` blocks). Every sampled row gets its best
//!    partners, which no single order can give all rows at once, so the estimate is optimistic:
//!    a skip is a safe call, a "worth it" may still be thrown away after reordering.
//! 3. Skip when the estimate is below [`Gate::min_density`] (no tensor-core kernel wins at that
//!    density: R-MAT after affinity has ~8.7 nnz per block, and every tensor-core kernel ran at
//!    0.25–0.80× cuSPARSE on it while the CSR kernel ran at 1.30×), or below
//!    [`Gate::min_gain`] × the current density (the order is already about as good as it gets).
//!
//! Memory is proportional to the nonzeros, not to the declared dimensions.

use rayon::prelude::*;
use tcsparse_formats::Csr;

/// Thresholds and sample size of the gate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gate {
    /// Rows sampled for the estimate.
    pub sample_rows: usize,
    /// Estimated reachable MeanNNZTC (8×8) below which reordering cannot make a tensor-core kernel
    /// win.
    pub min_density: f64,
    /// Reordering must be able to raise MeanNNZTC by at least this factor.
    pub min_gain: f64,
    /// Columns of a sampled row through which partners are looked for.
    pub max_neighbors: usize,
    /// Rows examined per column.
    pub max_scan: usize,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            sample_rows: 1024,
            min_density: 12.0,
            min_gain: 1.15,
            max_neighbors: 32,
            max_scan: 32,
        }
    }
}

/// What the gate measured and decided.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GateReport {
    /// Whether a reordering is worth computing.
    pub worth_reordering: bool,
    /// MeanNNZTC (8×8) of the matrix as given.
    pub mean_nnz_tc_now: f64,
    /// Estimated MeanNNZTC (8×8) the best row order could reach (optimistic).
    pub mean_nnz_tc_reachable: f64,
    /// Rows sampled.
    pub sampled_rows: usize,
    /// Wall time of the assessment, seconds.
    pub seconds: f64,
    /// The decision in words, with the numbers.
    pub reason: String,
}

impl Gate {
    /// Assesses `a` (see the module docs). Deterministic; parallel over the sample.
    pub fn assess(&self, a: &Csr) -> GateReport {
        let t = std::time::Instant::now();
        let now = crate::metrics::mean_nnz_tc(a, 8, 8);
        self.assess_from(a, now, t)
    }

    /// [`Gate::assess`] with the current MeanNNZTC (8×8) already known (the caller counted the
    /// blocks for its planner anyway): one pass over the matrix less.
    #[tracing::instrument(name = "reorder_gate", level = "info", skip_all)]
    pub fn assess_with_density(&self, a: &Csr, mean_nnz_tc_now: f64) -> GateReport {
        self.assess_from(a, mean_nnz_tc_now, std::time::Instant::now())
    }

    fn assess_from(&self, a: &Csr, now: f64, t: std::time::Instant) -> GateReport {
        let (reachable, sampled) = self.reachable(a);
        let (worth, reason) = if a.nnz() == 0 {
            (false, "no nonzeros".to_string())
        } else if reachable < self.min_density {
            (
                false,
                format!(
                    "reordering skipped: reachable MeanNNZTC ≈ {reachable:.1} (now {now:.1}) is below \
                     {:.0} nnz per 8×8 block, where no tensor-core kernel beats the CSR kernels",
                    self.min_density
                ),
            )
        } else if reachable < self.min_gain * now {
            (
                false,
                format!(
                    "reordering skipped: reachable MeanNNZTC ≈ {reachable:.1} is within {:.0} % of \
                     the current {now:.1}",
                    (self.min_gain - 1.0) * 100.0
                ),
            )
        } else {
            (
                true,
                format!("reordering may pay: MeanNNZTC {now:.1} now, ≈ {reachable:.1} reachable"),
            )
        };
        GateReport {
            worth_reordering: worth,
            mean_nnz_tc_now: now,
            mean_nnz_tc_reachable: reachable,
            sampled_rows: sampled,
            seconds: t.elapsed().as_secs_f64(),
            reason,
        }
    }

    /// Estimated reachable MeanNNZTC and the number of sampled rows.
    fn reachable(&self, a: &Csr) -> (f64, usize) {
        let rows = a.rows();
        if rows == 0 || a.nnz() == 0 {
            return (0.0, 0);
        }
        let ip = a.row_offsets();
        let idx = a.indices();
        let row = |r: usize| &idx[ip[r] as usize..ip[r + 1] as usize];
        // (Debug-level marks of the phases: `RUST_LOG=tcsparse_reorder=debug`.)
        let t0 = std::time::Instant::now();
        let mark = |what: std::fmt::Arguments<'_>| {
            tracing::debug!("gate +{:.1} ms: {what}", t0.elapsed().as_secs_f64() * 1e3)
        };
        let s = self.sample_rows.clamp(1, rows);
        let sample: Vec<usize> = (0..s).map(|i| i * rows / s + rows / s / 2).collect();
        // The sampled rows' columns (at most max_neighbors each), sorted, distinct.
        let mut scols: Vec<u32> = sample
            .iter()
            .flat_map(|&r| row(r).iter().take(self.max_neighbors).copied())
            .collect();
        scols.par_sort_unstable();
        scols.dedup();
        let (lists, pairs) = candidate_lists(a, &scols, self.max_scan);
        mark(format_args!(
            "candidate lists of {} sampled columns from {} nonzeros: {} + {} pairs",
            scols.len(),
            a.nnz(),
            pairs[0],
            pairs[1]
        ));
        let slot = |c: u32| scols.binary_search(&c).ok();
        // Best window around every sampled row.
        let (nnz, blocks) = sample
            .par_iter()
            .map(|&r| {
                // Candidate rows with the number of the sampled row's columns they share (a sort
                // of plain row numbers, then runs: half the bytes of sorting (row, 1) pairs).
                let mut us: Vec<u32> = row(r)
                    .iter()
                    .take(self.max_neighbors)
                    .filter_map(|&c| slot(c))
                    .flat_map(|k| lists[k].iter().copied())
                    .filter(|&u| u as usize != r)
                    .collect();
                us.sort_unstable();
                let cnt: Vec<(u32, u32)> = us
                    .chunk_by(|x, y| x == y)
                    .map(|run| (run[0], run.len() as u32))
                    .collect();
                // Most similar first (Jaccard of the column sets, shared / union), then lower row:
                // a long row sharing a few columns is a poor partner for a short one.
                let lr = row(r).len() as f64;
                let mut scored: Vec<(f64, u32)> = cnt
                    .iter()
                    .map(|&(u, n)| {
                        let n = n as f64;
                        (-(n / (lr + row(u as usize).len() as f64 - n).max(1.0)), u)
                    })
                    .collect();
                let by = |x: &(f64, u32), y: &(f64, u32)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
                if scored.len() > 7 {
                    scored.select_nth_unstable_by(7, by);
                    scored.truncate(7);
                }
                let cnt: Vec<(u32, f64)> = scored.iter().map(|&(s, u)| (u, s)).collect();
                let mut cols: Vec<u32> = row(r).to_vec();
                for &(u, _) in cnt.iter().take(7) {
                    cols.extend_from_slice(row(u as usize));
                }
                let nnz = cols.len() as u64;
                // (Eight sorted rows end to end: the stable sort merges the runs it finds.)
                cols.sort();
                cols.dedup();
                (nnz, (cols.len() as u64).div_ceil(8))
            })
            .reduce(|| (0, 0), |x, y| (x.0 + y.0, x.1 + y.1));
        mark(format_args!("windows of the sampled rows"));
        let est = if blocks == 0 {
            0.0
        } else {
            nnz as f64 / blocks as f64
        };
        (est, s)
    }
}

/// The first `cap` rows (in row order) holding each of the columns `scols` (sorted, distinct),
/// and the (slot, row) pairs the two rounds collected. Same lists as one pass over the rows in
/// order, in two rounds: the first eighth of the row chunks fills the lists of frequent columns,
/// the rest scans only for the columns still open (R-MAT scale 20: 2.7 M pairs in one round,
/// nearly all from hub columns whose lists were full after the first chunks; 0.9 M in two).
fn candidate_lists(a: &Csr, scols: &[u32], cap: usize) -> (Vec<Vec<u32>>, [usize; 2]) {
    let rows = a.rows();
    let ip = a.row_offsets();
    let idx = a.indices();
    let row = |r: usize| &idx[ip[r] as usize..ip[r + 1] as usize];
    // Column -> slot in `scols`: a direct table, with a bitmap of the columns still wanted in
    // front of it (cols / 8 bytes, held in cache where the table is not), when the table is no
    // larger than the index array; else a binary search (memory stays proportional to the
    // nonzeros whatever the declared column count).
    let direct = a.cols() <= a.nnz() + 4096;
    let table: Option<Vec<u32>> = direct.then(|| {
        let mut t = vec![u32::MAX; a.cols()];
        for (k, &c) in scols.iter().enumerate() {
            t[c as usize] = k as u32;
        }
        t
    });
    let slot = |c: u32| -> Option<usize> {
        match &table {
            Some(t) => {
                let k = t[c as usize];
                (k != u32::MAX).then_some(k as usize)
            }
            None => scols.binary_search(&c).ok(),
        }
    };
    let bitmap = |open: &[bool]| -> Option<Vec<u64>> {
        direct.then(|| {
            let mut m = vec![0u64; a.cols().div_ceil(64)];
            for (&c, _) in scols.iter().zip(open).filter(|(_, o)| **o) {
                m[c as usize / 64] |= 1 << (c % 64);
            }
            m
        })
    };
    let chunk = rows.div_ceil(64).max(4096);
    let chunks = rows.div_ceil(chunk);
    // (slot, row) pairs of the chunks in `range`, in row order, at most `cap` per slot and chunk,
    // for the slots still `open`.
    let scan = |range: std::ops::Range<usize>, open: &[bool]| -> Vec<Vec<(u32, u32)>> {
        let bits = bitmap(open);
        range
            .into_par_iter()
            .map(|ci| {
                let mut seen = vec![0u32; scols.len()];
                let mut out = Vec::new();
                for r in ci * chunk..((ci + 1) * chunk).min(rows) {
                    for &c in row(r) {
                        if let Some(b) = &bits
                            && b[c as usize / 64] & (1 << (c % 64)) == 0
                        {
                            continue;
                        }
                        if let Some(k) = slot(c)
                            && open[k]
                            && (seen[k] as usize) < cap
                        {
                            seen[k] += 1;
                            out.push((k as u32, r as u32));
                        }
                    }
                }
                out
            })
            .collect()
    };
    // Appends `parts` (in chunk order) to the lists, each up to `cap` rows; in parallel over
    // ranges of slots, each range reading every part.
    let per = scols
        .len()
        .div_ceil(rayon::current_num_threads().max(1))
        .max(1024);
    let merge = |lists: &mut [Vec<u32>], parts: &[Vec<(u32, u32)>]| {
        lists.par_chunks_mut(per).enumerate().for_each(|(ci, ls)| {
            let k0 = ci * per;
            for p in parts {
                for &(k, r) in p {
                    if let Some(l) = (k as usize).checked_sub(k0).and_then(|i| ls.get_mut(i))
                        && l.len() < cap
                    {
                        l.push(r);
                    }
                }
            }
        });
    };
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); scols.len()];
    let first = chunks.div_ceil(8);
    let parts = scan(0..first, &vec![true; scols.len()]);
    merge(&mut lists, &parts);
    let open: Vec<bool> = lists.iter().map(|l| l.len() < cap).collect();
    let rest = scan(first..chunks, &open);
    merge(&mut lists, &rest);
    let count = |p: &[Vec<(u32, u32)>]| p.iter().map(Vec::len).sum::<usize>();
    (lists, [count(&parts), count(&rest)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One sequential pass over the rows in order: the lists [`candidate_lists`] must give.
    fn lists_in_one_pass(a: &Csr, scols: &[u32], cap: usize) -> Vec<Vec<u32>> {
        let ip = a.row_offsets();
        let mut lists = vec![Vec::new(); scols.len()];
        for r in 0..a.rows() {
            for &c in &a.indices()[ip[r] as usize..ip[r + 1] as usize] {
                if let Ok(k) = scols.binary_search(&c)
                    && lists[k].len() < cap
                {
                    lists[k].push(r as u32);
                }
            }
        }
        lists
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn two_rounds_give_the_lists_of_one_pass(
            rows in 1usize..40_000,
            hubs in 0usize..6,
            cap in 1usize..40,
            seed in any::<u64>(),
            wide in any::<bool>(),
        ) {
            // Random rows of 0–6 columns plus a few hub columns in most rows; `wide` declares
            // far more columns than nonzeros (the binary-search path).
            let cols = if wide { 1usize << 31 } else { 5_000 };
            let mut x = seed | 1;
            let mut next = |m: usize| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % m as u64) as u32
            };
            let mut t = Vec::new();
            for r in 0..rows as u32 {
                for _ in 0..next(7) {
                    t.push((r, next(cols), 1.0f32));
                }
                for h in 0..hubs as u32 {
                    if next(4) != 0 {
                        t.push((r, h * 7 + 1, 1.0));
                    }
                }
            }
            let a = tcsparse_formats::csr::csr_from_triplets(rows, cols, &t).unwrap();
            let ip = a.row_offsets();
            let mut scols: Vec<u32> = (0..hubs as u32).map(|h| h * 7 + 1).collect();
            for r in (0..rows).step_by(97) {
                scols.extend_from_slice(&a.indices()[ip[r] as usize..ip[r + 1] as usize]);
            }
            scols.sort_unstable();
            scols.dedup();
            let (lists, _) = candidate_lists(&a, &scols, cap);
            prop_assert_eq!(lists, lists_in_one_pass(&a, &scols, cap));
        }
    }
}
