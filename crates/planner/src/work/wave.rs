//! cuTeSpMM (§5) wave-aware splitting of heavy row panels into virtual panels.
//!
//! With `P` = SMs × resident thread blocks per SM and `T` thread blocks in the grid, the kernel runs
//! in `waves = ⌈T / P⌉` waves. Eq. 6: `num_loads = blocks_of_panel / mean blocks per panel`;
//! Eq. 7: `partition_ratio = num_loads / waves`. A panel with ratio > 1 is cut along K into
//! `⌈ratio⌉` virtual panels of nearly equal block counts that accumulate into C atomically; a panel
//! with ratio ≤ 1 is left whole (a heavy panel is harmless when the waves are long enough to hide
//! it). Empty panels stay as virtual panels with no blocks so their C rows are still written (the
//! released code never wrote them). The released code read the SM count from a hard-coded table
//! with no entry for 132 SMs; here it comes from the [`DeviceSpec`] and the occupancy estimate
//! [`KernelResources::cute_spmm`].

use super::spmv::{MAX_ROWS_PER_HALF, spmv_work};
use crate::{DeviceSpec, KernelResources, PlanError};
use serde::{Deserialize, Serialize};

/// One thread block's share of a row panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualPanel {
    /// Row panel index.
    pub panel: u32,
    /// First block (index within the panel's blocks, 0-based).
    pub block_begin: u32,
    /// One past the last block within the panel.
    pub block_end: u32,
    /// Accumulate into C with atomics (the panel is split over several virtual panels).
    pub atomic: bool,
}

/// The split of all row panels, with the numbers of Eq. 6–7.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WaveSplit {
    /// Virtual panels in panel order; each panel's blocks are covered exactly once.
    pub panels: Vec<VirtualPanel>,
    /// Thread blocks resident on the device at once (SMs × per SM).
    pub concurrent_tbs: u64,
    /// Waves of the unsplit grid: ⌈panels × grid_y / concurrent_tbs⌉ (≥ 1).
    pub num_waves: u64,
    /// Mean blocks per row panel (AVG_BLK_ROW_PANEL).
    pub mean_blocks: f64,
    /// Row panels cut into more than one virtual panel.
    pub split_panels: usize,
}

/// Splits row panels given their block counts, the number of concurrently resident thread blocks
/// and the grid's second dimension (`⌈N / 128⌉` column tiles per panel for cuTeSpMM).
pub fn wave_split(
    panel_blocks: &[u32],
    concurrent_tbs: u64,
    grid_y: u32,
) -> Result<WaveSplit, PlanError> {
    wave_split_capped(panel_blocks, concurrent_tbs, grid_y, u32::MAX)
}

/// Smallest piece [`fill_cap`] allows when the panels give every SM a thread block: a piece of
/// `c` bricks gathers `c · 4` B rows but writes its whole 16-row C tile with atomics (plus the β
/// pre-scale), so below 16 bricks the C traffic exceeds a quarter of the B gathers (measured on
/// the H200: caps of 4–9 bricks lost 10–60 % against Eq. 7 alone on bcsstk17, rajat01, cora and
/// citeseer, caps ≥ 17 never lost more than noise).
pub const FILL_MIN_PIECE: u32 = 16;
/// Smallest piece when the panels × feature tiles do not give every SM one thread block
/// (mbeacxc: 31 panels for 132 SMs): filling the SMs matters more than the atomics (cap 4:
/// 0.040 → 0.011 ms at N = 128 on the H200).
pub const FILL_MIN_PIECE_FEW_PANELS: u32 = 4;

/// Most blocks (bricks) per virtual panel so that the pieces make about two waves of the
/// resident thread blocks: `⌈blocks · grid_y / (2 · concurrent_tbs)⌉`, at least
/// [`FILL_MIN_PIECE`] (or [`FILL_MIN_PIECE_FEW_PANELS`] when `panels · grid_y < sms`). Eq. 7
/// alone never cuts panels of equal weight, and cuts a heavy panel only by its ratio to the mean;
/// this cap bounds every thread block's walk (the row-tile kernels' wave-aware cap).
pub fn fill_cap(total_blocks: u64, panels: u64, grid_y: u32, concurrent_tbs: u64, sms: u32) -> u32 {
    let floor = if panels.saturating_mul(u64::from(grid_y)) < u64::from(sms) {
        FILL_MIN_PIECE_FEW_PANELS
    } else {
        FILL_MIN_PIECE
    };
    total_blocks
        .saturating_mul(u64::from(grid_y))
        .div_ceil(2 * concurrent_tbs.max(1))
        .clamp(u64::from(floor), u64::from(u32::MAX)) as u32
}

/// [`wave_split`] with every virtual panel further limited to at most `cap` blocks (0 is treated
/// as 1; `u32::MAX`: Eq. 7 alone): a panel is cut into `max(⌈ratio⌉, ⌈blocks / cap⌉)` pieces.
pub fn wave_split_capped(
    panel_blocks: &[u32],
    concurrent_tbs: u64,
    grid_y: u32,
    cap: u32,
) -> Result<WaveSplit, PlanError> {
    let cap = cap.max(1);
    if concurrent_tbs == 0 || grid_y == 0 {
        return Err(PlanError::InvalidInput(
            "concurrent_tbs and grid_y must be ≥ 1".into(),
        ));
    }
    let total: u64 = panel_blocks.iter().map(|&b| b as u64).sum();
    let tbs = panel_blocks.len() as u64 * grid_y as u64;
    let num_waves = tbs.div_ceil(concurrent_tbs).max(1);
    let mean_blocks = if panel_blocks.is_empty() {
        0.0
    } else {
        total as f64 / panel_blocks.len() as f64
    };
    let mut panels = Vec::with_capacity(panel_blocks.len());
    let mut split_panels = 0;
    for (p, &blocks) in panel_blocks.iter().enumerate() {
        let num_loads = if mean_blocks > 0.0 {
            blocks as f64 / mean_blocks
        } else {
            0.0
        };
        let ratio = num_loads / num_waves as f64;
        let eq7 = if ratio > 1.0 {
            (ratio.ceil() as u64).min(blocks as u64) as u32
        } else {
            1
        };
        let pieces = eq7.max(blocks.div_ceil(cap)).max(1);
        if pieces > 1 {
            split_panels += 1;
        }
        for i in 0..pieces {
            let begin = (blocks as u64 * i as u64 / pieces as u64) as u32;
            let end = (blocks as u64 * (i as u64 + 1) / pieces as u64) as u32;
            panels.push(VirtualPanel {
                panel: p as u32,
                block_begin: begin,
                block_end: end,
                atomic: pieces > 1,
            });
        }
    }
    Ok(WaveSplit {
        panels,
        concurrent_tbs,
        num_waves,
        mean_blocks,
        split_panels,
    })
}

impl WaveSplit {
    /// [`wave_split`] for the cuTeSpMM kernel on `device` at width `n` (128 columns per TB).
    pub fn for_device(
        panel_blocks: &[u32],
        device: &DeviceSpec,
        n: usize,
    ) -> Result<Self, PlanError> {
        device.validate()?;
        let grid_y = n.div_ceil(128).max(1).min(u32::MAX as usize) as u32;
        wave_split(
            panel_blocks,
            device.concurrent_blocks(&KernelResources::cute_spmm()),
            grid_y,
        )
    }
}

/// Tile budget per half for an SpMV walk with `resident_halves` halves resident on the device at
/// once (SMs × thread blocks per SM × halves per block): the smallest budget whose work list
/// ([`spmv_work`] over tile-row offsets `ptr`) has at most one wave of halves — or, when tile-rows
/// (at most [`MAX_ROWS_PER_HALF`] per half) keep the count above one wave at any budget, at most
/// the fewest whole waves. The last wave is then as full as a budget can make it (the wave-aware
/// splitting of cuTeSpMM, §5, applied to the SpMV work list); ≥ 1. The search assumes the half
/// count does not grow with the budget; where it does, the result still meets the bound.
pub fn spmv_wave_chunk(ptr: &[u32], resident_halves: u64) -> u32 {
    let slots = resident_halves.max(1);
    let longest = ptr.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    // From this budget on, every run of MAX_ROWS_PER_HALF rows fits: the fewest halves.
    let top = longest
        .saturating_mul(MAX_ROWS_PER_HALF)
        .min(ptr.last().copied().unwrap_or(0))
        .max(1);
    let halves = |c: u32| 2 * spmv_work(ptr, c).items.len() as u64;
    let target = halves(top).div_ceil(slots) * slots;
    // The count falls as the budget grows: the smallest budget within the target.
    let (mut lo, mut hi) = (1u32, top);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if halves(mid) <= target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `panels` panels of one block each but panel `heavy`, which has `blocks`.
    fn one_heavy_panel(panels: usize, heavy: usize, blocks: u32) -> Vec<u32> {
        let mut counts = vec![1u32; panels];
        counts[heavy] = blocks;
        counts
    }

    #[test]
    fn papers_example_needs_no_split() {
        // 991 panels, 100 SMs × 1 block: 10 waves; panel 0 has 10 blocks, the rest 1.
        // mean = 1000 / 991, num_loads = 9.91, ratio = 0.991 ≤ 1 → no split.
        let counts = one_heavy_panel(991, 0, 10);
        let s = wave_split(&counts, 100, 1).unwrap();
        assert_eq!((s.num_waves, s.split_panels), (10, 0));
        assert_eq!(s.panels.len(), 991);
        assert!(s.panels.iter().all(|v| !v.atomic));
    }

    #[test]
    fn one_wave_splits_heavy_panel() {
        // 100 panels on 100 slots (1 wave); panel 3 has 50 blocks, others 1: mean 1.49,
        // num_loads = 33.56, ratio 33.56 → 34 virtual panels of 1–2 blocks.
        let counts = one_heavy_panel(100, 3, 50);
        let s = wave_split(&counts, 100, 1).unwrap();
        assert_eq!((s.num_waves, s.split_panels), (1, 1));
        let p3: Vec<_> = s.panels.iter().filter(|v| v.panel == 3).collect();
        assert_eq!(p3.len(), 34);
        assert!(
            p3.iter()
                .all(|v| v.atomic && (1..=2).contains(&(v.block_end - v.block_begin)))
        );
        assert_eq!(p3.first().unwrap().block_begin, 0);
        assert_eq!(p3.last().unwrap().block_end, 50);
        assert!(p3.windows(2).all(|w| w[0].block_end == w[1].block_begin));
        // Two waves (grid_y = 2 doubles the grid): ratio halves → 17 pieces.
        let s2 = wave_split(&counts, 100, 2).unwrap();
        assert_eq!(s2.num_waves, 2);
        assert_eq!(s2.panels.iter().filter(|v| v.panel == 3).count(), 17);
    }

    #[test]
    fn h200_waves_from_occupancy() {
        // cuTe estimate on the H200: 5 resident × 132 SMs = 660 concurrent TBs.
        let counts = vec![3u32; 1320];
        let s = WaveSplit::for_device(&counts, &DeviceSpec::h200(), 256).unwrap();
        assert_eq!(s.concurrent_tbs, 660);
        assert_eq!(s.num_waves, 4); // 1320 panels × 2 column tiles / 660
        assert_eq!(s.split_panels, 0);
    }

    #[test]
    fn capped_split_bounds_every_piece_and_keeps_eq7_cuts() {
        // 31 equal panels of 95 blocks (mbeacxc) on 1056 slots: Eq. 7 cuts nothing.
        let counts = vec![95u32; 31];
        assert_eq!(wave_split(&counts, 1056, 1).unwrap().split_panels, 0);
        // Fewer panels than SMs: the floor is 4, the fill term ⌈2945 / 2112⌉ = 2.
        let cap = fill_cap(95 * 31, 31, 1, 1056, 132);
        assert_eq!(cap, FILL_MIN_PIECE_FEW_PANELS);
        let s = wave_split_capped(&counts, 1056, 1, cap).unwrap();
        assert_eq!(s.split_panels, 31);
        assert_eq!(s.panels.len(), 31 * 24);
        assert!(s.panels.iter().all(|v| v.block_end - v.block_begin <= 4));
        // Enough panels: floor 16, or the two-wave share when larger.
        assert_eq!(fill_cap(3000, 200, 1, 1056, 132), FILL_MIN_PIECE);
        assert_eq!(fill_cap(228_116, 16_161, 1, 1056, 132), 109);
        assert_eq!(fill_cap(228_116, 16_161, 4, 1056, 132), 433);
        // The cap never undoes an Eq. 7 cut: one heavy panel on one wave.
        let counts = one_heavy_panel(100, 3, 50);
        let s = wave_split_capped(&counts, 100, 1, 40).unwrap();
        assert_eq!(s.panels.iter().filter(|v| v.panel == 3).count(), 34);
        // Every block covered once, in order.
        for cap in [0, 1, 3, 7, u32::MAX] {
            let s = wave_split_capped(&[0, 12, 5, 1], 2, 1, cap).unwrap();
            for p in 0..4u32 {
                let v: Vec<_> = s.panels.iter().filter(|v| v.panel == p).collect();
                assert_eq!(v.first().unwrap().block_begin, 0);
                assert_eq!(v.last().unwrap().block_end, [0, 12, 5, 1][p as usize]);
                assert!(v.windows(2).all(|w| w[0].block_end == w[1].block_begin));
                assert!(v.iter().all(|x| x.atomic == (v.len() > 1)));
            }
        }
        assert_eq!(wave_split_capped(&[], 4, 1, 4).unwrap().panels.len(), 0);
    }

    #[test]
    fn empty_panels_are_kept_and_bad_input_is_an_error() {
        let s = wave_split(&[0, 0, 4], 1, 1).unwrap();
        assert_eq!(s.panels.len(), 3);
        assert_eq!(
            s.panels[0],
            VirtualPanel {
                panel: 0,
                block_begin: 0,
                block_end: 0,
                atomic: false
            }
        );
        assert!(wave_split(&[1], 0, 1).is_err());
        assert!(wave_split(&[], 4, 1).unwrap().panels.is_empty());
    }

    #[test]
    fn spmv_wave_chunk_fills_whole_waves() {
        // 1000 tile-rows of 10 tiles on 100 resident halves: budget 100 packs 10 rows per half,
        // exactly one wave; 99 would need 112 halves.
        let ptr: Vec<u32> = (0..=1000u32).map(|r| 10 * r).collect();
        assert_eq!(spmv_wave_chunk(&ptr, 100), 100);
        // 32 rows per half at most: 1000 rows need 32 halves (+ padding to pairs) at any budget,
        // so 10 slots give 4 waves (≤ 40 halves): 25 rows of 10 tiles per half.
        let c = spmv_wave_chunk(&ptr, 10);
        assert_eq!(c, 250);
        assert!(2 * spmv_work(&ptr, c).items.len() <= 40);
        assert!(2 * spmv_work(&ptr, c - 1).items.len() > 40);
        // Empty matrix and no resident halves: budget 1.
        assert_eq!(spmv_wave_chunk(&[0], 0), 1);
    }

    proptest::proptest! {
        #[test]
        fn spmv_wave_chunk_is_within_the_fewest_whole_waves(
            lens in proptest::collection::vec(0u32..300, 1..400),
            slots in 1u64..200,
        ) {
            let mut ptr = vec![0u32];
            for l in lens {
                ptr.push(ptr.last().unwrap() + l);
            }
            let c = spmv_wave_chunk(&ptr, slots);
            let halves = |c: u32| 2 * spmv_work(&ptr, c).items.len() as u64;
            let fewest = halves(u32::MAX);
            proptest::prop_assert!(c >= 1);
            proptest::prop_assert!(halves(c) <= fewest.div_ceil(slots) * slots);
        }
    }
}
