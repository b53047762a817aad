//! Acc-SpMM (PPoPP'25 §3.5) thread-block schedules for the BitTCF kernel: one thread block (TB) per
//! row window, or Eq. 4 packing of consecutive TC blocks into TBs of nearly equal modeled time.
//!
//! Contract with the kernel: TB `b` processes windows `[window_begin, window_end)` and within them
//! only the global BitTCF blocks `[block_begin, block_end)` (`row_window_offset[w]..[w+1]` are window
//! `w`'s blocks). Every block is covered by exactly one TB. Every window, including windows with no
//! block, lies in the window range of at least one TB; a window with no block or one that is not
//! split lies in exactly one TB's range, and that TB writes its C rows with plain stores (empty
//! windows as β·C or zeros). A window whose blocks span more than one TB has `window_split[w] = 1`:
//! the kernel pre-scales its rows by β and accumulates with atomicAdd.

use crate::{PlanError, check_row_window_offset};
use serde::{Deserialize, Serialize};

/// Work of one thread block (see the module docs for the contract).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TbWork {
    /// First row window in this TB's range.
    pub window_begin: u32,
    /// One past the last row window in this TB's range.
    pub window_end: u32,
    /// First global TC block this TB multiplies.
    pub block_begin: u32,
    /// One past the last global TC block this TB multiplies.
    pub block_end: u32,
}

/// Acc-SpMM Eq. 4 cost model of one TB: `T = LoadDenseTime + MMATime + WBTime`.
///
/// Costs are in arbitrary but common units *per feature column* (Eq. 4 is linear in FeatureDim),
/// plus a fixed cost per window segment that does not scale with N. A TB is filled with consecutive
/// blocks until the next block would push its cost past `target_cost · n + window_overhead` or its
/// block count past `max_blocks_per_tb`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Eq4Model {
    /// Loading one block's 8 dense B rows, per feature column.
    pub load_cost: f64,
    /// One 8×8 TC block's MMA work, per feature column.
    pub mma_cost: f64,
    /// Writing back one 8-row C segment (one window's rows in one TB), per feature column.
    pub write_cost: f64,
    /// Fixed cost per window segment in a TB (pointer setup, barrier), independent of N.
    pub window_overhead: f64,
    /// Target TB cost per feature column.
    pub target_cost: f64,
    /// Hard cap on TC blocks per TB (≥ 1).
    pub max_blocks_per_tb: u32,
}

impl Eq4Model {
    /// The authors' released code: unit costs load 3 / MMA 1 / write 2 and target 66, i.e. at most
    /// 16 blocks per TB (16 · (3 + 1) + 2 = 66).
    pub fn authors_code() -> Self {
        Self {
            load_cost: 3.0,
            mma_cost: 1.0,
            write_cost: 2.0,
            window_overhead: 0.0,
            target_cost: 66.0,
            max_blocks_per_tb: 16,
        }
    }

    /// The paper's Eq. 4 on `device`, in nanoseconds per feature column at full-device rates:
    /// load = K · 4 B / bandwidth, MMA = M · (2K − 1) / TF32 rate, write-back = K · 4 B / bandwidth
    /// (M = K = 8), with the paper's cap of 32 blocks per TB and a target of 32 blocks + 1 write-back.
    pub fn paper(device: &crate::DeviceSpec) -> Self {
        let bytes_per_ns = device.mem_bandwidth_gbs.max(f64::MIN_POSITIVE);
        let flops_per_ns = (device.tf32_tflops * 1e3).max(f64::MIN_POSITIVE);
        let load = 8.0 * 4.0 / bytes_per_ns;
        let mma = 8.0 * 15.0 / flops_per_ns;
        let write = 8.0 * 4.0 / bytes_per_ns;
        Self {
            load_cost: load,
            mma_cost: mma,
            write_cost: write,
            window_overhead: 0.0,
            target_cost: 32.0 * (load + mma) + write,
            max_blocks_per_tb: 32,
        }
    }

    /// A model that counts TC blocks only, for kernels whose blocks all cost about the same (the
    /// row-tile kernels): a TB takes at most `max_blocks` blocks (0 is treated as 1), and each
    /// window segment costs half a block, so light windows share a TB and a run of empty windows
    /// is not free. A window with more than `max_blocks` blocks is split.
    pub fn block_cap(max_blocks: u32) -> Self {
        let cap = max_blocks.max(1);
        Self {
            load_cost: 1.0,
            mma_cost: 0.0,
            write_cost: 0.5,
            window_overhead: 0.0,
            target_cost: f64::from(cap) + 0.5,
            max_blocks_per_tb: cap,
        }
    }

    /// Checks costs are finite and non-negative, the target positive and the cap ≥ 1.
    pub fn validate(&self) -> Result<(), PlanError> {
        let costs = [
            self.load_cost,
            self.mma_cost,
            self.write_cost,
            self.window_overhead,
        ];
        if costs.iter().any(|c| !c.is_finite() || *c < 0.0)
            || !self.target_cost.is_finite()
            || self.target_cost <= 0.0
            || self.max_blocks_per_tb == 0
        {
            return Err(PlanError::InvalidInput(format!("bad Eq4Model {self:?}")));
        }
        Ok(())
    }

    /// Modeled cost of one TB at width `n` with `blocks` TC blocks over `segments` window segments.
    pub fn tb_cost(&self, n: usize, blocks: u32, segments: u32) -> f64 {
        let n = n as f64;
        blocks as f64 * (self.load_cost + self.mma_cost) * n
            + segments as f64 * (self.write_cost * n + self.window_overhead)
    }
}

/// A thread-block schedule for the BitTCF kernel. Private fields; built by
/// [`AccSchedule::unbalanced`] or [`AccSchedule::balanced`], checked by [`AccSchedule::validate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AccScheduleRepr")]
pub struct AccSchedule {
    work: Vec<TbWork>,
    window_split: Vec<u8>,
    balanced: bool,
}

#[derive(Deserialize)]
struct AccScheduleRepr {
    work: Vec<TbWork>,
    window_split: Vec<u8>,
    balanced: bool,
}

impl TryFrom<AccScheduleRepr> for AccSchedule {
    type Error = PlanError;
    fn try_from(r: AccScheduleRepr) -> Result<Self, PlanError> {
        let windows = r.window_split.len() as u64;
        if r.window_split.iter().any(|&s| s > 1) {
            return Err(PlanError::InvalidSchedule(
                "window_split entries must be 0 or 1".into(),
            ));
        }
        for (i, t) in r.work.iter().enumerate() {
            if t.window_begin >= t.window_end
                || t.window_end as u64 > windows
                || t.block_begin > t.block_end
            {
                return Err(PlanError::InvalidSchedule(format!(
                    "TB {i} has bad ranges {t:?}"
                )));
            }
        }
        Ok(Self {
            work: r.work,
            window_split: r.window_split,
            balanced: r.balanced,
        })
    }
}

impl AccSchedule {
    /// One TB per row window (including empty windows), each writing its rows with plain stores.
    /// An invalid `row_window_offset` (empty, not starting at 0, decreasing) gives an empty schedule,
    /// which [`AccSchedule::validate`] then rejects.
    pub fn unbalanced(row_window_offset: &[u32]) -> AccSchedule {
        let Ok(windows) = check_row_window_offset(row_window_offset) else {
            return Self {
                work: Vec::new(),
                window_split: Vec::new(),
                balanced: false,
            };
        };
        let work = (0..windows)
            .map(|w| TbWork {
                window_begin: w as u32,
                window_end: w as u32 + 1,
                block_begin: row_window_offset[w],
                block_end: row_window_offset[w + 1],
            })
            .collect();
        Self {
            work,
            window_split: vec![0; windows],
            balanced: false,
        }
    }

    /// `windows_per_tb` consecutive windows per TB (the last TB takes the rest), nothing split: every
    /// window is written with plain stores by the one TB that walks it. Consecutive windows of a
    /// banded or clustered matrix gather mostly the same B rows, so walking them in one TB turns
    /// the L2 gathers of all but the first into L1 hits. `windows_per_tb = 1` is
    /// [`AccSchedule::unbalanced`]; 0 is treated as 1. An invalid `row_window_offset` gives an
    /// empty schedule (rejected by `validate`).
    pub fn packed(row_window_offset: &[u32], windows_per_tb: u32) -> AccSchedule {
        let Ok(windows) = check_row_window_offset(row_window_offset) else {
            return Self::unbalanced(row_window_offset);
        };
        let k = windows_per_tb.max(1) as usize;
        let work = (0..windows)
            .step_by(k)
            .map(|w| {
                let end = (w + k).min(windows);
                TbWork {
                    window_begin: w as u32,
                    window_end: end as u32,
                    block_begin: row_window_offset[w],
                    block_end: row_window_offset[end],
                }
            })
            .collect();
        Self {
            work,
            window_split: vec![0; windows],
            balanced: false,
        }
    }

    /// Eq. 4 packing: consecutive blocks (in window order) fill a TB until the next block would
    /// exceed the model's target cost at width `n` or its block cap; windows with no block cost one
    /// write-back in the TB that is open when they are reached. A TB always takes at least one
    /// block, so a target below one block's cost still makes progress. Light windows end up packed
    /// several per TB; heavy windows are cut into several TBs and flagged in `window_split`.
    /// An invalid `row_window_offset` or model gives an empty schedule (rejected by `validate`).
    pub fn balanced(row_window_offset: &[u32], model: &Eq4Model, n: usize) -> AccSchedule {
        let empty = Self {
            work: Vec::new(),
            window_split: Vec::new(),
            balanced: true,
        };
        let Ok(windows) = check_row_window_offset(row_window_offset) else {
            return empty;
        };
        if model.validate().is_err() {
            return empty;
        }
        let n = n.max(1);
        let block_cost = (model.load_cost + model.mma_cost) * n as f64;
        let seg_cost = model.write_cost * n as f64 + model.window_overhead;
        let target = model.target_cost * n as f64 + model.window_overhead;
        let cap = model.max_blocks_per_tb;

        struct Open {
            tb: TbWork,
            cost: f64,
            blocks: u32,
            segments: u32,
        }
        let mut work: Vec<TbWork> = Vec::new();
        let mut cur: Option<Open> = None;
        let open = |w: usize, b: u32| Open {
            tb: TbWork {
                window_begin: w as u32,
                window_end: w as u32,
                block_begin: b,
                block_end: b,
            },
            cost: 0.0,
            blocks: 0,
            segments: 0,
        };
        for w in 0..windows {
            let (b0, b1) = (row_window_offset[w], row_window_offset[w + 1]);
            if b0 == b1 {
                let fits = cur.as_ref().is_some_and(|c| c.cost + seg_cost <= target);
                if !fits {
                    work.extend(cur.take().map(|c| c.tb));
                    cur = Some(open(w, b0));
                }
                if let Some(c) = cur.as_mut() {
                    c.cost += seg_cost;
                    c.segments += 1;
                    c.tb.window_end = w as u32 + 1;
                }
                continue;
            }
            let mut b = b0;
            while b < b1 {
                let c = cur.get_or_insert_with(|| open(w, b));
                let new_seg = c.tb.window_end as usize <= w;
                let first = block_cost + if new_seg { seg_cost } else { 0.0 };
                let fresh = c.blocks == 0 && c.segments == 0;
                if !fresh && (c.blocks >= cap || c.cost + first > target) {
                    work.extend(cur.take().map(|c| c.tb));
                    continue;
                }
                // Blocks that fit: the first one (always, in a fresh TB), then as many as the
                // remaining budget and the cap allow.
                let budget = target - c.cost - first;
                let more = if block_cost > 0.0 {
                    (budget / block_cost).floor().max(0.0)
                } else {
                    f64::MAX
                };
                let room = (cap - c.blocks) as u64;
                let k = (1 + more.min(u32::MAX as f64) as u64)
                    .min(room)
                    .min((b1 - b) as u64)
                    .max(1) as u32;
                if new_seg {
                    c.segments += 1;
                    c.cost += seg_cost;
                }
                c.blocks += k;
                c.cost += k as f64 * block_cost;
                c.tb.block_end = b + k;
                c.tb.window_end = w as u32 + 1;
                b += k;
            }
        }
        work.extend(cur.take().map(|c| c.tb));
        let window_split = split_flags(row_window_offset, &work);
        Self {
            work,
            window_split,
            balanced: true,
        }
    }

    /// One entry per thread block.
    pub fn work(&self) -> &[TbWork] {
        &self.work
    }

    /// Per window: 1 if its blocks are spread over more than one TB (atomic accumulation), else 0.
    pub fn window_split(&self) -> &[u8] {
        &self.window_split
    }

    /// Number of windows with `window_split[w] == 1`.
    pub fn num_split_windows(&self) -> usize {
        self.window_split.iter().filter(|&&s| s != 0).count()
    }

    /// Whether this schedule came from Eq. 4 packing (the kernel's balanced mode).
    pub fn is_balanced(&self) -> bool {
        self.balanced
    }

    /// Most TC blocks any TB multiplies (0 for an empty schedule).
    pub fn max_blocks_per_tb(&self) -> u32 {
        self.work
            .iter()
            .map(|t| t.block_end - t.block_begin)
            .max()
            .unwrap_or(0)
    }

    /// Checks the full kernel contract (module docs) against `row_window_offset`.
    pub fn validate(&self, row_window_offset: &[u32]) -> Result<(), PlanError> {
        let windows = check_row_window_offset(row_window_offset)?;
        let bad = |m: String| Err(PlanError::InvalidSchedule(m));
        if self.window_split.len() != windows {
            return bad(format!(
                "window_split has {} entries for {windows} windows",
                self.window_split.len()
            ));
        }
        let total = row_window_offset[windows];
        // Ranges and blocks-within-windows.
        for (i, t) in self.work.iter().enumerate() {
            let (wb, we) = (t.window_begin as usize, t.window_end as usize);
            if wb >= we || we > windows || t.block_begin > t.block_end {
                return bad(format!("TB {i}: bad ranges {t:?}"));
            }
            if t.block_begin < row_window_offset[wb] || t.block_end > row_window_offset[we] {
                return bad(format!(
                    "TB {i}: blocks {}..{} outside its windows {wb}..{we}",
                    t.block_begin, t.block_end
                ));
            }
        }
        // Every block exactly once: non-empty block ranges tile 0..total.
        let mut ranges: Vec<(u32, u32)> = self
            .work
            .iter()
            .filter(|t| t.block_end > t.block_begin)
            .map(|t| (t.block_begin, t.block_end))
            .collect();
        ranges.sort_unstable();
        let mut next = 0u32;
        for (b, e) in ranges {
            if b != next {
                return bad(format!(
                    "blocks {} not covered exactly once (next range starts at {b})",
                    next.min(b)
                ));
            }
            next = e;
        }
        if next != total {
            return bad(format!("blocks {next}..{total} not covered"));
        }
        // Per window: TBs whose range includes it, and TBs holding some of its blocks.
        let mut in_range = vec![0i64; windows + 1];
        let mut with_blocks = vec![0i64; windows + 1];
        for t in &self.work {
            in_range[t.window_begin as usize] += 1;
            in_range[t.window_end as usize] -= 1;
            if t.block_end > t.block_begin {
                let first = row_window_offset[1..].partition_point(|&o| o <= t.block_begin);
                let last = row_window_offset[1..].partition_point(|&o| o < t.block_end);
                with_blocks[first] += 1;
                with_blocks[last + 1] -= 1;
            }
        }
        let (mut r, mut h) = (0i64, 0i64);
        for w in 0..windows {
            r += in_range[w];
            h += with_blocks[w];
            let empty = row_window_offset[w] == row_window_offset[w + 1];
            let split = h > 1;
            if r < 1 {
                return bad(format!("window {w} is in no TB's range"));
            }
            if (empty || !split) && r != 1 {
                return bad(format!("window {w} (not split) is in {r} TB ranges"));
            }
            if (self.window_split[w] != 0) != split {
                return bad(format!(
                    "window {w}: window_split = {} but its blocks span {h} TBs",
                    self.window_split[w]
                ));
            }
        }
        Ok(())
    }
}

/// window_split from a list of TBs: 1 where a window's blocks lie in more than one TB.
fn split_flags(rwo: &[u32], work: &[TbWork]) -> Vec<u8> {
    let windows = rwo.len() - 1;
    let mut count = vec![0u32; windows];
    for t in work.iter().filter(|t| t.block_end > t.block_begin) {
        for (w, c) in count
            .iter_mut()
            .enumerate()
            .take(t.window_end as usize)
            .skip(t.window_begin as usize)
        {
            if rwo[w] < t.block_end && t.block_begin < rwo[w + 1] {
                *c += 1;
            }
        }
    }
    count.into_iter().map(|c| u8::from(c > 1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_cap_splits_heavy_windows_and_packs_light_ones() {
        // Window 1 has 20 blocks; windows 2..6 have one block each; window 6 is empty.
        let rwo = [0u32, 2, 22, 23, 24, 25, 26, 26];
        for cap in [1u32, 3, 8, 32] {
            let s = AccSchedule::balanced(&rwo, &Eq4Model::block_cap(cap), 128);
            s.validate(&rwo).unwrap();
            assert!(s.max_blocks_per_tb() <= cap, "cap {cap}");
            assert_eq!(s.window_split()[1] != 0, cap < 20, "cap {cap}");
            // Every TB is full except where a window boundary or the cost of segments stops it.
            let tbs = s.work().len();
            assert!(
                tbs >= 26usize.div_ceil(cap as usize),
                "cap {cap}: {tbs} TBs"
            );
        }
        // At cap 8 the heavy window takes ⌈20 / 8⌉ = 3 TBs and the light windows share TBs.
        let s = AccSchedule::balanced(&rwo, &Eq4Model::block_cap(8), 128);
        let heavy = s
            .work()
            .iter()
            .filter(|t| t.window_begin <= 1 && 1 < t.window_end && t.block_end > 2)
            .count();
        assert_eq!(heavy, 3);
        assert!(s.work().len() < 7, "{:?}", s.work());
        assert_eq!(Eq4Model::block_cap(0).max_blocks_per_tb, 1);
    }

    #[test]
    fn packed_groups_consecutive_windows_without_splits() {
        // 7 windows, window 2 and the last one empty.
        let rwo = [0u32, 3, 5, 5, 9, 10, 12, 12];
        for k in [0u32, 1, 2, 3, 7, 100] {
            let s = AccSchedule::packed(&rwo, k);
            s.validate(&rwo).unwrap();
            assert_eq!(s.num_split_windows(), 0);
            let per = k.max(1) as usize;
            assert_eq!(s.work().len(), 7usize.div_ceil(per), "k = {k}");
            for (i, t) in s.work().iter().enumerate() {
                assert_eq!(t.window_begin as usize, i * per);
                assert_eq!(t.window_end as usize, ((i + 1) * per).min(7));
                assert_eq!(t.block_begin, rwo[t.window_begin as usize]);
                assert_eq!(t.block_end, rwo[t.window_end as usize]);
            }
        }
        assert_eq!(AccSchedule::packed(&rwo, 1), AccSchedule::unbalanced(&rwo));
        assert!(AccSchedule::packed(&[1, 2], 4).validate(&[1, 2]).is_err());
    }

    fn tb(wb: u32, we: u32, bb: u32, be: u32) -> TbWork {
        TbWork {
            window_begin: wb,
            window_end: we,
            block_begin: bb,
            block_end: be,
        }
    }

    #[test]
    fn unbalanced_one_tb_per_window_including_empty() {
        let rwo = [0, 2, 2, 5];
        let s = AccSchedule::unbalanced(&rwo);
        assert_eq!(s.work(), &[tb(0, 1, 0, 2), tb(1, 2, 2, 2), tb(2, 3, 2, 5)]);
        assert_eq!(s.window_split(), &[0, 0, 0]);
        assert!(!s.is_balanced());
        s.validate(&rwo).unwrap();
    }

    #[test]
    fn authors_model_packs_light_and_splits_heavy() {
        // Windows: 3, 0, 2, 40, 1 blocks. Authors' model: ≤ 16 blocks, cost ≤ 66 per column.
        let rwo = [0, 3, 3, 5, 45, 46];
        let s = AccSchedule::balanced(&rwo, &Eq4Model::authors_code(), 128);
        s.validate(&rwo).unwrap();
        // TB 0: windows 0..4: 3 + 0 + 2 blocks and then window 3's first blocks; 4 write-backs
        // (one per window, the empty one included) leave room for 14 blocks: 14·4 + 4·2 = 64 ≤ 66.
        assert_eq!(s.work()[0], tb(0, 4, 0, 14));
        assert_eq!(s.work()[1], tb(3, 4, 14, 30));
        // TB 2 takes the last 15 blocks of window 3 (cost 2 + 60 = 62); window 4's first block
        // would cost 6 more (> 66), so it opens TB 3.
        assert_eq!(s.work()[2], tb(3, 4, 30, 45));
        assert_eq!(s.work()[3], tb(4, 5, 45, 46));
        assert_eq!(s.work().len(), 4);
        assert_eq!(s.window_split(), &[0, 0, 0, 1, 0]);
        assert_eq!(s.num_split_windows(), 1);
        assert!(s.max_blocks_per_tb() <= 16);
    }

    #[test]
    fn validate_catches_violations() {
        let rwo = [0, 2, 4];
        let ok = AccSchedule {
            work: vec![tb(0, 1, 0, 2), tb(1, 2, 2, 4)],
            window_split: vec![0, 0],
            balanced: false,
        };
        ok.validate(&rwo).unwrap();
        let balanced = |work, window_split| AccSchedule {
            work,
            window_split,
            balanced: true,
        };
        let cases = [
            // block 1 twice
            balanced(vec![tb(0, 1, 0, 2), tb(0, 2, 1, 4)], vec![1, 0]),
            // block 3 missing
            balanced(vec![tb(0, 1, 0, 2), tb(1, 2, 2, 3)], vec![0, 0]),
            // split not flagged
            balanced(vec![tb(0, 1, 0, 1), tb(0, 2, 1, 4)], vec![0, 0]),
            // flagged but not split
            balanced(vec![tb(0, 1, 0, 2), tb(1, 2, 2, 4)], vec![1, 0]),
            // window 1 in two ranges without being split
            balanced(vec![tb(0, 2, 0, 2), tb(1, 2, 2, 4)], vec![0, 0]),
            // window_split of the wrong length
            balanced(vec![tb(0, 1, 0, 2), tb(1, 2, 2, 4)], vec![0]),
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(c.validate(&rwo).is_err(), "case {i} should fail");
        }
        // A window left out of every range.
        let rwo2 = [0, 2, 2];
        let s = balanced(vec![tb(0, 1, 0, 2)], vec![0, 0]);
        assert!(s.validate(&rwo2).is_err());
    }

    #[test]
    fn bad_inputs_give_empty_schedules_not_panics() {
        assert!(AccSchedule::unbalanced(&[]).work().is_empty());
        assert!(AccSchedule::unbalanced(&[1, 2]).validate(&[1, 2]).is_err());
        let mut m = Eq4Model::authors_code();
        m.max_blocks_per_tb = 0;
        assert!(AccSchedule::balanced(&[0, 3, 2], &m, 32).work().is_empty());
        assert!(
            AccSchedule::balanced(&[0, 3], &m, 32)
                .validate(&[0, 3])
                .is_err()
        );
    }

    #[test]
    fn serde_round_trip_and_rejects_garbage() {
        let rwo = [0, 3, 3, 5, 45, 46];
        let s = AccSchedule::balanced(&rwo, &Eq4Model::authors_code(), 64);
        let json = serde_json::to_string(&s).unwrap();
        let back: AccSchedule = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        let bad = r#"{"work":[{"window_begin":0,"window_end":9,"block_begin":0,"block_end":1}],"window_split":[0],"balanced":true}"#;
        assert!(serde_json::from_str::<AccSchedule>(bad).is_err());
    }
}
