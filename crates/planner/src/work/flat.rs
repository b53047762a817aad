//! The flat form of a thread-block work list over row windows, as the windowed SpMM kernels
//! (Acc-SpMM, row-tile) read it: 4 u32 per thread block, one split flag per window, the split
//! windows listed for the β pre-scale. [`flatten_schedule`] validates any such list against the
//! layout's window prefix; [`unbalanced_schedule`] is the one-block-per-window list.

use crate::PlanError;
use crate::work::acc::AccSchedule;

/// A validated schedule in the kernel's layout: 4 u32 per thread block (window_begin, window_end,
/// block_begin, block_end), one split flag per window, and the list of split windows (for the β
/// pre-scale kernel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlatSchedule {
    /// `[window_begin, window_end, block_begin, block_end]` per thread block, flattened.
    pub work: Vec<u32>,
    /// 1 where a window is spread over several thread blocks (atomicAdd after β pre-scale).
    pub window_split: Vec<u8>,
    /// The windows with `window_split == 1`, ascending.
    pub split_windows: Vec<u32>,
}

impl FlatSchedule {
    /// Number of thread blocks.
    pub fn num_tbs(&self) -> usize {
        self.work.len() / 4
    }
}

/// Validates a schedule given as `(window_begin, window_end, block_begin, block_end)` per thread
/// block plus per-window split flags, against the BitTCF `row_window_offset`, and flattens it.
///
/// Checks: every range inside the matrix; a thread block's blocks lie inside its windows
/// (`rwo[wb] ≤ bb ≤ be ≤ rwo[we]`); the block ranges tile `[0, blocks)` exactly once; every window is
/// in at least one thread block's range and an unsplit window in exactly one (so its rows are written
/// once, non-atomically, and nothing is left unwritten).
pub fn flatten_schedule(
    row_window_offset: &[u32],
    work: impl IntoIterator<Item = [u64; 4]>,
    window_split: &[u8],
) -> Result<FlatSchedule, PlanError> {
    let bad = |s: String| Err(PlanError::InvalidSchedule(s));
    let windows = row_window_offset.len().saturating_sub(1);
    let blocks = row_window_offset.last().copied().unwrap_or(0) as u64;
    if window_split.len() != windows {
        return bad(format!(
            "{} split flags for {windows} windows",
            window_split.len()
        ));
    }
    let mut flat = Vec::new();
    let mut cover = vec![0i64; windows + 1];
    let mut ranges = Vec::new();
    for (tb, [wb, we, bb, be]) in work.into_iter().enumerate() {
        if wb > we || we > windows as u64 || bb > be || be > blocks {
            return bad(format!(
                "thread block {tb}: ranges {wb}..{we} / {bb}..{be} out of bounds"
            ));
        }
        if wb < we {
            let (lo, hi) = (
                row_window_offset[wb as usize] as u64,
                row_window_offset[we as usize] as u64,
            );
            if bb < lo || be > hi {
                return bad(format!(
                    "thread block {tb}: blocks {bb}..{be} outside its windows' blocks {lo}..{hi}"
                ));
            }
            cover[wb as usize] += 1;
            cover[we as usize] -= 1;
        } else if bb < be {
            return bad(format!("thread block {tb} has blocks but no windows"));
        }
        if bb < be {
            ranges.push((bb, be, tb));
        }
        flat.extend([wb as u32, we as u32, bb as u32, be as u32]);
    }
    ranges.sort_unstable();
    let mut next = 0u64;
    for &(bb, be, tb) in &ranges {
        if bb != next {
            return bad(format!(
                "blocks {next}..{bb} {} (at thread block {tb})",
                if bb > next {
                    "are in no thread block"
                } else {
                    "are in two thread blocks"
                }
            ));
        }
        next = be;
    }
    if next != blocks {
        return bad(format!("blocks {next}..{blocks} are in no thread block"));
    }
    let mut count = 0i64;
    let mut split_windows = Vec::new();
    for w in 0..windows {
        count += cover[w];
        let split = window_split[w];
        if split > 1 {
            return bad(format!("window {w}: split flag {split} is not 0 or 1"));
        }
        if count == 0 {
            return bad(format!(
                "window {w} is in no thread block's range (rows left unwritten)"
            ));
        }
        if split == 0 && count != 1 {
            return bad(format!(
                "window {w} is not flagged split but {count} thread blocks cover it"
            ));
        }
        if split == 1 {
            split_windows.push(w as u32);
        }
    }
    Ok(FlatSchedule {
        work: flat,
        window_split: window_split.to_vec(),
        split_windows,
    })
}

/// [`flatten_schedule`] for a planner [`AccSchedule`].
pub fn flatten_acc_schedule(
    row_window_offset: &[u32],
    schedule: &AccSchedule,
) -> Result<FlatSchedule, PlanError> {
    flatten_schedule(
        row_window_offset,
        schedule.work().iter().map(|w| {
            [
                w.window_begin as u64,
                w.window_end as u64,
                w.block_begin as u64,
                w.block_end as u64,
            ]
        }),
        schedule.window_split(),
    )
}

/// The unbalanced schedule (one thread block per window, nothing split), built locally so that the
/// kernel can run without a planner schedule.
pub fn unbalanced_schedule(row_window_offset: &[u32]) -> FlatSchedule {
    let windows = row_window_offset.len().saturating_sub(1);
    let mut work = Vec::with_capacity(4 * windows);
    for w in 0..windows {
        work.extend([
            w as u32,
            w as u32 + 1,
            row_window_offset[w],
            row_window_offset[w + 1],
        ]);
    }
    FlatSchedule {
        work,
        window_split: vec![0; windows],
        split_windows: Vec::new(),
    }
}
