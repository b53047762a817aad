//! Load imbalance across row windows: Acc-SpMM's IBD (Eq. 3) and a decision that also catches
//! hub-dominated matrices.
//!
//! The authors' rule ("balance when IBD > 8") looks only at the mean absolute deviation of blocks
//! per window. On a power-law matrix with a few hub windows the deviation averaged over millions
//! of light windows stays small, the rule keeps one TB per window, and the hub windows become the
//! critical path (1.6–3.4× slower on the H200, PEER-FACTS). [`decide_imbalance`] instead compares
//! the modeled makespan of the two schedules: with one TB per window it is at least
//! max(heaviest window's work, total work / concurrent TBs); with Eq. 4 packing no TB exceeds the
//! cap, so it is about max(one full TB's work, total / concurrent TBs). Balancing is chosen when
//! the heaviest window can be split (more blocks than the cap) and the ratio of the two (the
//! "gain") is at least [`MIN_GAIN`]; the margin pays for atomics and the extra B/C traffic of split
//! windows. N enters through the occupancy (how many TBs are resident at once) and the costs.

use crate::{DeviceSpec, Eq4Model, KernelResources, PlanError, check_row_window_offset};
use serde::{Deserialize, Serialize};

/// Acc-SpMM's IBD threshold: the paper balances when IBD exceeds 8.
pub const IBD_THRESHOLD: f64 = 8.0;

/// Modeled makespan ratio (one TB per window ÷ balanced) at or above which balancing is chosen.
pub const MIN_GAIN: f64 = 1.5;

/// Packing light windows pays off when there are at least this many windows per resident TB …
pub const LIGHT_WINDOWS_PER_TB: f64 = 16.0;

/// … and windows hold at most this many blocks on average. Then one TB per window spends most of
/// its life on fixed costs (scheduling, prologue, the 8-row write-back), and Eq. 4 packing
/// amortizes them. Measured on the H200 (BitTCF kernel, N = 128–512, balanced ÷ one TB per
/// window): REDDIT-BINARY (107k windows, 2.3 blocks each) 0.54–0.69×, NotreDame_www (41k windows)
/// 0.77–0.85×, mdual (32k windows) 0.86–0.97×; with few windows (PROTEINS_full 5.4k, copter2 6.9k)
/// packing leaves SMs idle and was up to 1.27× slower, so it is not chosen there.
pub const LIGHT_MEAN_BLOCKS: f64 = 6.0;

/// Acc-SpMM Eq. 3 over blocks per window: Σ_w |blocks_w − mean| / windows, in f64 over every
/// window (the authors' code used integer arithmetic and skipped the last window).
pub fn ibd(row_window_offset: &[u32]) -> Result<f64, PlanError> {
    let windows = check_row_window_offset(row_window_offset)?;
    if windows == 0 {
        return Ok(0.0);
    }
    let mean = row_window_offset[windows] as f64 / windows as f64;
    let dev: f64 = row_window_offset
        .windows(2)
        .map(|p| ((p[1] - p[0]) as f64 - mean).abs())
        .sum();
    Ok(dev / windows as f64)
}

/// The balancing decision for one matrix, N and device, with every number that went into it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImbalanceDecision {
    /// Use the Eq. 4 packed (balanced) schedule.
    pub balanced: bool,
    /// Why, in words with the numbers.
    pub reason: String,
    /// Acc-SpMM Eq. 3.
    pub ibd: f64,
    /// What the authors' rule (IBD > 8) would choose.
    pub ibd_says_balanced: bool,
    /// Row windows.
    pub windows: usize,
    /// TC blocks in all windows.
    pub total_blocks: u64,
    /// Mean blocks per window.
    pub mean_blocks: f64,
    /// Blocks of the heaviest window.
    pub max_blocks: u32,
    /// max_blocks / mean_blocks (0 when there is no block).
    pub max_over_mean: f64,
    /// Feature columns N.
    pub n: usize,
    /// Estimated resident TBs per SM for the BitTCF kernel at this N.
    pub resident_per_sm: u32,
    /// SMs × resident TBs per SM.
    pub concurrent_tbs: u64,
    /// Heaviest window's Eq. 4 work ÷ (total work / concurrent TBs): ≥ 1 means that window alone
    /// outlasts a perfectly spread load.
    pub critical_ratio: f64,
    /// Modeled makespan of one TB per window ÷ that of the balanced schedule.
    pub gain: f64,
}

/// Decides between one TB per window and Eq. 4 packing (see the module docs for the rule).
pub fn decide_imbalance(
    row_window_offset: &[u32],
    n: usize,
    device: &DeviceSpec,
    model: &Eq4Model,
) -> Result<ImbalanceDecision, PlanError> {
    let windows = check_row_window_offset(row_window_offset)?;
    model.validate()?;
    device.validate()?;
    let n = n.max(1);
    let ibd = ibd(row_window_offset)?;
    let total_blocks = row_window_offset[windows] as u64;
    let max_blocks = row_window_offset
        .windows(2)
        .map(|p| p[1] - p[0])
        .max()
        .unwrap_or(0);
    let mean_blocks = if windows == 0 {
        0.0
    } else {
        total_blocks as f64 / windows as f64
    };
    let max_over_mean = if mean_blocks > 0.0 {
        max_blocks as f64 / mean_blocks
    } else {
        0.0
    };
    let res = KernelResources::acc_spmm(n);
    let resident_per_sm = device.resident_blocks(&res);
    let concurrent_tbs = device.concurrent_blocks(&res);
    let total_work = model.tb_cost(n, total_blocks.min(u32::MAX as u64) as u32, 0)
        + windows as f64 * model.tb_cost(n, 0, 1);
    let per_slot = total_work / concurrent_tbs as f64;
    let heaviest = model.tb_cost(n, max_blocks, 1);
    let full_tb = model.tb_cost(n, model.max_blocks_per_tb.min(max_blocks), 1);
    let critical_ratio = if per_slot > 0.0 {
        heaviest / per_slot
    } else {
        0.0
    };
    let unbal = heaviest.max(per_slot);
    let bal = full_tb.max(per_slot);
    let gain = if bal > 0.0 { unbal / bal } else { 1.0 };
    let splittable = max_blocks > model.max_blocks_per_tb;
    let many_light = windows as f64 >= LIGHT_WINDOWS_PER_TB * concurrent_tbs as f64
        && mean_blocks <= LIGHT_MEAN_BLOCKS;
    let hub_bound = splittable && gain >= MIN_GAIN;
    let balanced = hub_bound || many_light;
    let ibd_says_balanced = ibd > IBD_THRESHOLD;
    let verdict = if many_light && !hub_bound {
        format!(
            "balanced: {windows} windows ({:.0} per resident TB) of {mean_blocks:.2} blocks on average; \
             one TB per window would spend most of its time on fixed per-TB costs, so Eq. 4 packs \
             light windows into TBs of ≤ {} blocks",
            windows as f64 / concurrent_tbs.max(1) as f64,
            model.max_blocks_per_tb
        )
    } else if balanced {
        format!(
            "balanced: the heaviest window ({max_blocks} blocks, {max_over_mean:.1}× the mean of {mean_blocks:.2}) \
             has {critical_ratio:.2}× the work one of the {concurrent_tbs} resident TBs ({} SMs × {resident_per_sm} at N = {n}) \
             gets from a perfect spread, so it would be the critical path; packing at ≤ {} blocks per TB shortens \
             the modeled makespan {gain:.2}×",
            device.sm_count, model.max_blocks_per_tb
        )
    } else if !splittable {
        format!(
            "one TB per window: no window has more blocks than the cap ({max_blocks} ≤ {}), so packing \
             cannot shorten the critical path",
            model.max_blocks_per_tb
        )
    } else {
        format!(
            "one TB per window: the heaviest window ({max_blocks} blocks, {max_over_mean:.1}× the mean of \
             {mean_blocks:.2}) has {critical_ratio:.2}× the per-TB share of {concurrent_tbs} resident TBs at N = {n}; \
             packing would gain only {gain:.2}× (< {MIN_GAIN}), not worth the atomics"
        )
    };
    let reason = format!(
        "{verdict} (IBD = {ibd:.2}, the authors' rule IBD > {IBD_THRESHOLD} says {})",
        if ibd_says_balanced {
            "balanced"
        } else {
            "unbalanced"
        }
    );
    Ok(ImbalanceDecision {
        balanced,
        reason,
        ibd,
        ibd_says_balanced,
        windows,
        total_blocks,
        mean_blocks,
        max_blocks,
        max_over_mean,
        n,
        resident_per_sm,
        concurrent_tbs,
        critical_ratio,
        gain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rwo_from_counts(counts: &[u32]) -> Vec<u32> {
        let mut v = vec![0];
        for &c in counts {
            v.push(v.last().unwrap() + c);
        }
        v
    }

    /// The decision on H200 with the authors' model for windows of `counts` blocks at width `n`.
    fn decide(counts: &[u32], n: usize) -> ImbalanceDecision {
        decide_imbalance(
            &rwo_from_counts(counts),
            n,
            &DeviceSpec::h200(),
            &Eq4Model::authors_code(),
        )
        .unwrap()
    }

    #[test]
    fn ibd_by_hand() {
        // Blocks 2, 4, 0, 6: mean 3, deviations 1 + 1 + 3 + 3 = 8, IBD = 2.
        assert_eq!(ibd(&rwo_from_counts(&[2, 4, 0, 6])).unwrap(), 2.0);
        assert_eq!(ibd(&[0]).unwrap(), 0.0);
        assert!(ibd(&[0, 3, 1]).is_err());
    }

    #[test]
    fn hub_dominated_matrix_is_balanced_although_ibd_says_no() {
        // 200k windows of 2 blocks plus 4 hub windows of 4000 blocks (a power-law graph after
        // blocking): IBD ≈ 0.16, far below 8, but each hub has 2–16× a TB's fair share (by N).
        let mut counts = vec![2u32; 200_000];
        for h in [10, 50_000, 100_000, 150_000] {
            counts[h] = 4000;
        }
        for n in [32, 128, 512] {
            let d = decide(&counts, n);
            assert!(!d.ibd_says_balanced, "IBD {} should miss it", d.ibd);
            assert!(d.balanced, "N = {n}: {}", d.reason);
            assert!(d.critical_ratio > 1.0 && d.gain >= MIN_GAIN);
        }
    }

    #[test]
    fn uniform_matrix_is_not_balanced() {
        let d = decide(&vec![20u32; 100_000], 128);
        assert!(!d.balanced, "{}", d.reason);
        assert_eq!(d.ibd, 0.0);
        assert_eq!(d.max_over_mean, 1.0);
        // Mild variation over many waves is absorbed (cuTeSpMM's observation): no balancing.
        let counts: Vec<u32> = (0..100_000u32).map(|i| 5 + (i * 7919) % 60).collect();
        let d = decide(&counts, 128);
        assert!(!d.balanced, "{}", d.reason);
    }

    #[test]
    fn many_light_windows_are_packed_but_few_are_not() {
        // REDDIT-BINARY-like: 107k windows of ~2.3 blocks, no window above the cap.
        let counts: Vec<u32> = (0..107_000u32)
            .map(|i| 1 + (i % 3) + (i % 7 == 0) as u32)
            .collect();
        let d = decide(&counts, 128);
        assert!(d.max_blocks <= 16 && d.balanced, "{}", d.reason);
        assert!(d.reason.contains("light windows"), "{}", d.reason);
        // PROTEINS_full-like: the same shape but 5.4k windows: packing would idle SMs.
        let d = decide(&counts[..5_400], 128);
        assert!(!d.balanced, "{}", d.reason);
    }

    #[test]
    fn few_heavy_windows_spread_over_the_gpu() {
        // 10 windows of 1000 blocks: uniform, but 10 TBs would leave 122 SMs idle.
        let d = decide(&[1000; 10], 128);
        assert!(d.balanced, "{}", d.reason);
    }
}
