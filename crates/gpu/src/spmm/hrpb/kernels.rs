//! The HRPB kernels: their entries and signatures ([`HrpbMma`], one per walk and MMA shape), the
//! constants of their tiling and which kernel a matrix of a given size takes, and how heavy panels
//! are split ([`HrpbSplit`]).

use super::*;

/// Entry of the m16n8k4 kernel (one MMA per brick and 8 features, as the paper).
pub const ENTRY_K4: &str = "hrpb_spmm_k4";
/// Entry of the m16n8k8 kernel (one MMA per pair of bricks and 8 features).
pub const ENTRY_K8: &str = "hrpb_spmm_k8";
/// Entry of the m16n8k8 kernel with steps of 4 bricks and coalesced, prefetched brick records.
pub const ENTRY_K8D4: &str = "hrpb_spmm_k8d4";
/// Entry of the m16n8k8 kernel whose warps walk consecutive work items on the same features.
pub const ENTRY_K8W: &str = "hrpb_spmm_k8w";
/// [`ENTRY_K8`] at 10 resident thread blocks per SM (48 registers) instead of 8.
pub const ENTRY_K8O: &str = "hrpb_spmm_k8o";
/// The lean walk (40 registers, 12 blocks per SM, B gathered a row per quarter warp), one work
/// item per thread block.
pub const ENTRY_K8SC: &str = "hrpb_spmm_k8sc";
/// The lean walk of [`ENTRY_K8SC`] with warp items (as [`ENTRY_K8W`]).
pub const ENTRY_K8WSC: &str = "hrpb_spmm_k8wsc";
/// The tight walk (no per-brick branch, lane constants held; 48 registers, 10 blocks per SM) with
/// coalesced B, one work item per thread block.
pub const ENTRY_K8T: &str = "hrpb_spmm_k8t";
/// [`ENTRY_K8T`] without the pre-scale launch: a split panel's first piece stores, the others
/// wait for its flag and add with atomics.
pub const ENTRY_K8TS: &str = "hrpb_spmm_k8ts";
/// The tight walk with warp items and B loaded as the MMA fragment (no B shuffles).
pub const ENTRY_K8WTD: &str = "hrpb_spmm_k8wtd";
/// Features per warp (TN).
pub const TN: usize = 32;
/// Most warps per thread block (4 × TN = 128 features, the paper's thread block).
pub const MAX_WARPS: usize = 4;
/// Rows per panel.
pub const PANEL_ROWS: u32 = 16;
/// Row panels per SM from which [`HrpbMma::for_rows`] takes the tight walk (k8ts) over k8w: 132
/// panels on the H200 (cora 170 and every larger shared dataset above; mbeacxc 31 and west0067 5
/// below).
pub const TIGHT_PANELS_PER_SM: usize = 1;

/// Row panels per SM for which [`HrpbMma::for_rows`] takes the tight walk with warp items and
/// k8w's B gather (k8wtd) instead: 2112 ≤ panels < 4224 on the H200 (PROTEINS_full 2717, c-62
/// 2609, xenon1 3038, copter2 3468; no other shared dataset). An empirical window, not a model:
/// there k8ts was up to 12 % slower than v5's k8wsc in the bench (xenon1 N ≥ 256; c-62 3–4 %,
/// copter2 ≤ 5 %, PROTEINS ±3 %) and k8wtd 1–9 % faster than k8wsc in the same process
/// (PROTEINS 2–3 % slower).
pub const WARP_ITEM_PANELS_PER_SM: std::ops::Range<usize> = 16..32;
pub(super) const PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // work   (u32, 4 per virtual panel)
    ParamKind::Ptr, // bricks (u32, 8 per brick)
    ParamKind::Ptr, // values (f32)
    ParamKind::Ptr, // B
    ParamKind::U32, // ldb
    ParamKind::Ptr, // C
    ParamKind::U32, // ldc
    ParamKind::U32, // m
    ParamKind::U32, // n
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
    ParamKind::U32, // flags
    ParamKind::Ptr, // sync   (u32 waiters, flags and counts of split panels, k8ts)
    ParamKind::U32, // slots  (split panels, k8ts: the layout of `sync`)
];

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test), one
/// per [`HrpbMma`] in [`HrpbMma::ALL`]'s order.
pub const SIGNATURES: &[KernelSignature] = &{
    let mut sigs = [HrpbMma::K4.signature(); HrpbMma::ALL.len()];
    let mut i = 0;
    while i < sigs.len() {
        sigs[i] = HrpbMma::ALL[i].signature();
        i += 1;
    }
    sigs
};

/// MMA shape of the HRPB kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HrpbMma {
    /// `mma.m16n8k4`, one per brick (the paper).
    K4,
    /// `mma.m16n8k8`, one per pair of consecutive bricks (half the MMA instructions).
    K8,
    /// `mma.m16n8k8` in steps of 4 bricks: the step's brick records come in one coalesced load,
    /// issued a step early, so a step waits on one round trip (values and B) instead of two
    /// (record, then values and B); 4 bricks' loads in flight per warp instead of 2.
    K8D4,
    /// [`HrpbMma::K8`] with warp items: warp w of thread block x runs work item 4x + w on 32
    /// features (grid.y = ⌈n/32⌉), so a thread block's 4 warps walk 4 consecutive panels on the
    /// same features (meant to share common B rows through L1; faster on meshes and hub graphs,
    /// slower on short panels, for reasons not yet profiled: docs/kernels/hrpb.md v3).
    K8W,
    /// [`HrpbMma::K8`] compiled for 10 resident thread blocks per SM (48 registers, 4 bytes of
    /// spill) instead of 8: the walk is latency-bound (ncu, docs/kernels/hrpb.md v4), so more
    /// warps in flight.
    K8O,
    /// The lean walk (v5): one step buffer of 2 bricks whose two records arrive a step early in
    /// one coalesced load and are handed out by shuffles, and B gathered a row per quarter warp
    /// (lane l loads row col[l / 8] at features 4 (l % 8): 4 L1 wavefronts per brick and warp
    /// instead of 16), each component moved to its MMA lane with a shuffle: 40 registers, no
    /// spills, 12 resident thread blocks per SM (k8o: 10). One work item per thread block.
    K8SC,
    /// [`HrpbMma::K8SC`]'s lean walk with [`HrpbMma::K8W`]'s warp items (40 registers, 12 blocks).
    K8WSC,
    /// The tight walk (v6): where a warp's 32 features lie below n and B takes float4 loads, the
    /// lean walk's loads without a branch per brick (records past the end read as an empty brick)
    /// and with the lane's constants held (48 registers, 10 blocks per SM); other warps take the
    /// lean walk. Coalesced B, one work item per thread block.
    K8T,
    /// [`HrpbMma::K8T`] without the pre-scale launch: the first piece of a split panel stores
    /// `α·acc + β·C` and publishes a flag, the other pieces wait for it after their walk and add
    /// with atomics (see [`HrpbMma::syncs_split_panels`]).
    K8TS,
    /// The tight walk with warp items and B loaded as the MMA fragment (k8w's gather: no B
    /// shuffles, 4× the L1 wavefronts of B).
    K8WTD,
}

impl HrpbMma {
    /// Every kernel (the facade's plan cache numbers them in this order: add new ones at the end).
    pub const ALL: [HrpbMma; 10] = [
        HrpbMma::K4,
        HrpbMma::K8,
        HrpbMma::K8D4,
        HrpbMma::K8W,
        HrpbMma::K8O,
        HrpbMma::K8SC,
        HrpbMma::K8WSC,
        HrpbMma::K8T,
        HrpbMma::K8TS,
        HrpbMma::K8WTD,
    ];

    /// The PTX entry's signature (every entry takes the same parameters).
    pub const fn signature(self) -> KernelSignature {
        KernelSignature {
            module: KernelModule::HrpbSpmm,
            name: self.entry(),
            params: PARAMS,
        }
    }

    pub(crate) const fn entry(self) -> &'static str {
        match self {
            HrpbMma::K4 => ENTRY_K4,
            HrpbMma::K8 => ENTRY_K8,
            HrpbMma::K8D4 => ENTRY_K8D4,
            HrpbMma::K8W => ENTRY_K8W,
            HrpbMma::K8O => ENTRY_K8O,
            HrpbMma::K8SC => ENTRY_K8SC,
            HrpbMma::K8WSC => ENTRY_K8WSC,
            HrpbMma::K8T => ENTRY_K8T,
            HrpbMma::K8TS => ENTRY_K8TS,
            HrpbMma::K8WTD => ENTRY_K8WTD,
        }
    }

    /// Short name for reports (`k4`, `k8`, `k8d4`, `k8w`, `k8o`, `k8sc`, `k8wsc`, `k8t`, `k8ts`,
    /// `k8wtd`).
    pub fn name(self) -> &'static str {
        match self {
            HrpbMma::K4 => "k4",
            HrpbMma::K8 => "k8",
            HrpbMma::K8D4 => "k8d4",
            HrpbMma::K8W => "k8w",
            HrpbMma::K8O => "k8o",
            HrpbMma::K8SC => "k8sc",
            HrpbMma::K8WSC => "k8wsc",
            HrpbMma::K8T => "k8t",
            HrpbMma::K8TS => "k8ts",
            HrpbMma::K8WTD => "k8wtd",
        }
    }

    /// Whether a thread block runs several work items (k8w: 4, one per warp) instead of one.
    pub fn warp_items(self) -> bool {
        self.items_per_block() > 1
    }

    /// The kernel for a matrix of `rows` rows on a GPU of `sm_count` SMs when nobody times the
    /// candidates: [`HrpbMma::K8W`] below [`TIGHT_PANELS_PER_SM`] row panels per SM,
    /// [`HrpbMma::K8WTD`] inside [`WARP_ITEM_PANELS_PER_SM`], [`HrpbMma::K8TS`] elsewhere.
    ///
    /// Why (H200, docs/kernels/hrpb.md v6, same-process times): the tight walk with one work
    /// item per thread block (k8t) was up to 16 % faster than the kernels this rule gave before
    /// (k8sc from 4 waves of whole panels, k8wsc from 4 panels per SM, k8w below; geomean ×1.043
    /// with k8w kept below one panel per SM); k8ts (k8t without the pre-scale launch) was 7–45 %
    /// faster than k8t on the small split matrices (cora, citeseer, rajat01, west0067) and 0–13 %
    /// slower on the large ones (BlogCatalog the most). With k8ts from one panel per SM the
    /// bench's `hrpb/reorder` rows gave `geomean (hrpb alone)` 1.41× (f20e728: 1.34× for the
    /// same rows). On mbeacxc (31 panels) the tight walks were 20–30 % slower than k8w at
    /// N ≥ 256, so k8w stays below one panel per SM.
    pub fn for_rows(rows: usize, sm_count: u32) -> HrpbMma {
        let panels = rows.div_ceil(PANEL_ROWS as usize);
        let sms = sm_count.max(1) as usize;
        let per_sm = panels / sms;
        if panels < TIGHT_PANELS_PER_SM * sms {
            HrpbMma::K8W
        } else if WARP_ITEM_PANELS_PER_SM.contains(&per_sm) {
            HrpbMma::K8WTD
        } else {
            HrpbMma::K8TS
        }
    }

    /// Whether split panels go through the in-kernel flag handshake instead of the pre-scale
    /// launch (k8ts): the first piece of a split panel (work flags bit 2) stores, the others (a
    /// later work item, so a thread block dispatched after it) wait for its flag, one per split
    /// panel and 32 features, set to 1 and reset to 0 by the panel's last waiter.
    pub fn syncs_split_panels(self) -> bool {
        self == HrpbMma::K8TS
    }

    /// Work items per thread block.
    pub fn items_per_block(self) -> u32 {
        match self {
            HrpbMma::K8W | HrpbMma::K8WSC | HrpbMma::K8WTD => MAX_WARPS as u32,
            _ => 1,
        }
    }

    /// (warps per thread block, grid.y, work units per thread block) at width `n`: a unit is what
    /// one work item runs on (a thread block, or a warp for [`HrpbMma::warp_items`]).
    pub(super) fn launch_shape(self, n: usize) -> (u32, u32, u32) {
        if self.warp_items() {
            let ipb = self.items_per_block();
            let features = TN * (MAX_WARPS / ipb as usize); // per item and thread block row
            let tiles = n.div_ceil(features).clamp(1, u32::MAX as usize) as u32;
            (MAX_WARPS as u32, tiles, ipb)
        } else {
            let (warps, tiles) = tiling(n);
            (warps, tiles, 1)
        }
    }
}

/// How row panels are cut into virtual panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HrpbSplit {
    /// Every panel whole (one thread block per panel and feature tile, no atomics).
    None,
    /// cuTeSpMM's wave-aware split (Eq. 6–7) from the device's SM count and the kernel's
    /// occupancy, every piece then limited to [`HrpbSpmm::wave_cap`] bricks (about two waves of
    /// pieces, at least 16 bricks; 4 when the panels do not give every SM a thread block).
    Wave,
    /// Eq. 6–7 alone (no brick cap), as if only `1/k` of the resident thread blocks existed (`k` ≥
    /// 1: fewer, coarser pieces; `WaveCoarse(1)` is the paper's split), for tuning and comparison.
    WaveCoarse(u32),
    /// Every panel cut into pieces of at most this many bricks (0 is treated as 1), whatever the
    /// waves: fills the device when there are fewer panels than resident thread blocks (Eq. 7
    /// never cuts panels of equal weight). See [`HrpbSpmm::fill_cap`].
    Cap(u32),
}
