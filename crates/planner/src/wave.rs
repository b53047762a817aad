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
        let pieces = if ratio > 1.0 {
            (ratio.ceil() as u64).min(blocks as u64) as u32
        } else {
            1
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn papers_example_needs_no_split() {
        // 991 panels, 100 SMs × 1 block: 10 waves; panel 0 has 10 blocks, the rest 1.
        // mean = 1000 / 991, num_loads = 9.91, ratio = 0.991 ≤ 1 → no split.
        let mut counts = vec![1u32; 991];
        counts[0] = 10;
        let s = wave_split(&counts, 100, 1).unwrap();
        assert_eq!(s.num_waves, 10);
        assert_eq!(s.split_panels, 0);
        assert_eq!(s.panels.len(), 991);
        assert!(s.panels.iter().all(|v| !v.atomic));
    }

    #[test]
    fn one_wave_splits_heavy_panel() {
        // 100 panels on 100 slots (1 wave); panel 3 has 50 blocks, others 1: mean 1.49,
        // num_loads = 33.56, ratio 33.56 → 34 virtual panels of 1–2 blocks.
        let mut counts = vec![1u32; 100];
        counts[3] = 50;
        let s = wave_split(&counts, 100, 1).unwrap();
        assert_eq!(s.num_waves, 1);
        assert_eq!(s.split_panels, 1);
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
}
