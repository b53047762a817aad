//! Which kernel entry runs a bitBSR SpMV call: the launch constants, the entries of the MMA
//! kernels and of every CUDA-core walk (per storage, per layout, per number of right-hand sides),
//! the layouts the tunings time, and the signature tables of all of them.

use tcsparse_formats::bitbsr_device::TileStorage;

use crate::signature::concat;
use crate::{KernelModule, KernelSignature, ParamKind};

/// Warps per thread block (`SPMV_WARPS`).
pub const WARPS_PER_BLOCK: u32 = 8;
/// Most right-hand sides of one call.
pub const MAX_RHS: usize = 8;
/// Default tile budget per half ([`tcsparse_planner::work::spmv::spmv_work`]).
pub const DEFAULT_CHUNK_TILES: u32 = 32;
/// `spmv_x16` entry.
pub const ENTRY_X16: &str = "spmv_x16";
/// `spmv_fixup` entry.
pub const ENTRY_FIXUP: &str = "spmv_fixup";

pub(super) const MAIN_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // tiles (uint4)
    ParamKind::Ptr, // values (u16 or f32)
    ParamKind::Ptr, // row_scale (f32)
    ParamKind::Ptr, // ptr (u32)
    ParamKind::Ptr, // work (uint4 pairs)
    ParamKind::U32, // items
    ParamKind::Ptr, // x (f16 pairs or f32)
    ParamKind::Ptr, // xs (f32)
    ParamKind::Ptr, // y
    ParamKind::Ptr, // partial
    ParamKind::U32, // rows
    ParamKind::U32, // cols
    ParamKind::U32, // n
    ParamKind::F32, // alpha
    ParamKind::F32, // beta
];

/// The walks' parameters (`core*`, `bits*`, `seg*`, `tc*`): [`MAIN_PARAMS`], then the split-row
/// table (`uint2` per partial slot: the slot's tile-row's first and end slot) and the per-row
/// arrival counts with which the chunk that finishes a split tile-row last sums its slots and
/// writes y itself (no `spmv_fixup` node).
pub(super) const WALK_PARAMS: [ParamKind; 17] = concat(
    MAIN_PARAMS,
    &[
        ParamKind::Ptr, // split (uint2 per slot)
        ParamKind::Ptr, // count (u32 per slot)
    ],
);

/// The main kernels: (storage, RHS variant) → entry. F32 storage runs the TF32 MMAs (which read
/// the top 19 bits of each value).
pub const KERNELS: [(TileStorage, bool, &str); 6] = [
    (TileStorage::F16, false, "spmv_f16_r1"),
    (TileStorage::F16, true, "spmv_f16_r8"),
    (TileStorage::Tf32, false, "spmv_tf32_r1"),
    (TileStorage::Tf32, true, "spmv_tf32_r8"),
    (TileStorage::F32, false, "spmv_tf32_r1"),
    (TileStorage::F32, true, "spmv_tf32_r8"),
];

/// The entries `[f16, f32][n - 1]` of a walk compiled once per n = 1..=8 (`MAX_RHS`):
/// `rhs_entries!("spmv_bits")` names `spmv_bits1_f16` … `spmv_bits8_f32`.
macro_rules! rhs_entries {
    ($p:literal) => {
        [
            [
                concat!($p, "1_f16"),
                concat!($p, "2_f16"),
                concat!($p, "3_f16"),
                concat!($p, "4_f16"),
                concat!($p, "5_f16"),
                concat!($p, "6_f16"),
                concat!($p, "7_f16"),
                concat!($p, "8_f16"),
            ],
            [
                concat!($p, "1_f32"),
                concat!($p, "2_f32"),
                concat!($p, "3_f32"),
                concat!($p, "4_f32"),
                concat!($p, "5_f32"),
                concat!($p, "6_f32"),
                concat!($p, "7_f32"),
                concat!($p, "8_f32"),
            ],
        ]
    };
}

/// The set-bit walk for n = 1..=8 right-hand sides (`[f16, f32][n - 1]`).
pub(super) const BITS_ENTRIES: [[&str; MAX_RHS]; 2] = rhs_entries!("spmv_bits");

/// The set-bit walk with the x segment staged in shared memory, n = 1..=8 (`[f16, f32][n - 1]`).
pub(super) const SEG_ENTRIES: [[&str; MAX_RHS]; 2] = rhs_entries!("spmv_seg");

/// The set-bit walk in `corew2`'s layout (one half per warp, 8 consecutive tiles per step), n =
/// 1..=8 (`[f16, f32][n - 1]`).
pub(super) const BITSW_ENTRIES: [[&str; MAX_RHS]; 2] = rhs_entries!("spmv_bitsw");

/// `bitsw` with each step's used x rows and first two values per row byte loaded before its set-bit
/// loop (x rows staged in shared memory), n = 1..=8 (`[f16, f32][n - 1]`).
pub(super) const SEGW_ENTRIES: [[&str; MAX_RHS]; 2] = rhs_entries!("spmv_segw");

/// `bitsw` with one half per thread block (one contiguous tile range per warp, rows shared by
/// warps added in the block), n = 1..=8 (`[f16, f32][n - 1]`).
pub(super) const BLOCKBW_ENTRIES: [[&str; MAX_RHS]; 2] = rhs_entries!("spmv_blockbw");

/// The tensor-core walk for n = 1..=8 right-hand sides (`[f16, f32][n - 1]`; TF32 MMAs, so on f32
/// values a TF32 product: [`TC_LAYOUTS`]).
pub(super) const TC_ENTRIES: [[&str; MAX_RHS]; 2] = rhs_entries!("spmv_tc");

/// The entries of the layouts serving every n, in [`MULTI_LAYOUTS`] order.
pub(super) const MULTI_ENTRIES: [[[&str; MAX_RHS]; 2]; MULTI_LAYOUTS.len()] = [
    BITS_ENTRIES,
    SEG_ENTRIES,
    BITSW_ENTRIES,
    SEGW_ENTRIES,
    BLOCKBW_ENTRIES,
    TC_ENTRIES,
];

/// The entries of a layout serving every n ([`MULTI_LAYOUTS`]), index n − 1.
pub(super) fn multi_entries(
    layout: &str,
    storage: TileStorage,
) -> Option<&'static [&'static str; MAX_RHS]> {
    let i = usize::from(storage != TileStorage::F16);
    let at = MULTI_LAYOUTS.iter().position(|&l| l == layout)?;
    Some(&MULTI_ENTRIES[at][i])
}

/// The one-RHS walks, `[layout][f16, f32]` for the layouts `core`, `corew1`, `corew2`, `lane`,
/// `staged`, `staged16`, `blocklane`, `blockw` (same parameters as the main kernels; `xs` and `n`
/// unused). TF32 storage runs the f32 walk.
pub(super) const CORE_ENTRIES: [(&str, [&str; 2]); 8] = [
    ("core", ["spmv_core_f16", "spmv_core_f32"]),
    ("corew1", ["spmv_corew1_f16", "spmv_corew1_f32"]),
    ("corew2", ["spmv_corew2_f16", "spmv_corew2_f32"]),
    ("lane", ["spmv_lane_f16", "spmv_lane_f32"]),
    ("staged", ["spmv_staged_f16", "spmv_staged_f32"]),
    ("staged16", ["spmv_staged16_f16", "spmv_staged16_f32"]),
    ("blocklane", ["spmv_blocklane_f16", "spmv_blocklane_f32"]),
    ("blockw", ["spmv_blockw_f16", "spmv_blockw_f32"]),
];

/// The one-RHS entry of CUDA-core `layout` ([`CORE_LAYOUTS`]) for `storage`; `None` for an unknown
/// layout.
pub(super) fn core_entry(storage: TileStorage, layout: &str) -> Option<&'static str> {
    let i = usize::from(storage != TileStorage::F16);
    if let Some(e) = multi_entries(layout, storage) {
        return Some(e[0]);
    }
    CORE_ENTRIES.iter().find(|c| c.0 == layout).map(|c| c.1[i])
}

/// The CUDA-core walk's layouts: entry prefix and halves per thread block. `core`: one half per
/// group of 8 lanes (4 per warp); `corew1` / `corew2`: one half per warp, its 4 groups on 4 / 8
/// consecutive tiles of a tile-row per step; `bits`: as `core`, but each lane visits only the set
/// bits of its row byte, for 1 to 8 right-hand sides; `seg`: `bits` with each tile's used x rows
/// staged once in shared memory; `bitsw`: `bits` in `corew2`'s layout (one half per warp, group q
/// on tiles t + q and t + 4 + q); `segw`: `bitsw` with each step's used x rows staged in shared
/// memory and its first values loaded before the set-bit loop; `blockbw`: `bitsw` with one half
/// per thread block, one contiguous tile range per warp ([`MULTI_LAYOUTS`]); `tc`: one warp
/// per item (two halves) on TF32 MMAs, each tile's x segment loaded once ([`TC_LAYOUTS`]);
/// `lane`: one half per warp, one tile per lane (its set bits summed per row in shared memory, the
/// rows added across the warp at the tile-row's end), for sparse tiles; `staged`: `corew1`'s
/// layout with each stage's tile records, values and x segments (up to 32 tiles) copied to shared
/// memory by `cp.async` while the previous stage is multiplied; `staged16`: `staged` with stages
/// of up to 16 tiles and 1984 value bytes that end at a tile-row end where one is near (rows of
/// ~13 dense tiles: one row per stage); `blocklane`: `lane` with one half per thread block (8
/// warps, one tile per thread per step, the rows added across the block with one barrier per row),
/// so rows of a few hundred sparse tiles are summed without split slots; `blockw`: `corew2` with
/// one half per thread block, its tiles cut into one contiguous range per warp and each row's
/// warp sums added in the block (rows of up to the budget summed without split slots). None wins
/// everywhere (H200: `core` on banded rows of
/// ~10 tiles, `corew*` on shorter or denser ones), so the facade's tuning times each.
pub const CORE_LAYOUTS: [(&str, u32); 14] = [
    ("core", 4 * WARPS_PER_BLOCK),
    ("corew1", WARPS_PER_BLOCK),
    ("corew2", WARPS_PER_BLOCK),
    ("lane", WARPS_PER_BLOCK),
    ("staged", WARPS_PER_BLOCK),
    ("staged16", WARPS_PER_BLOCK),
    ("blocklane", 1),
    ("blockw", 1),
    ("bits", 4 * WARPS_PER_BLOCK),
    ("seg", 4 * WARPS_PER_BLOCK),
    ("bitsw", WARPS_PER_BLOCK),
    ("segw", WARPS_PER_BLOCK),
    ("blockbw", 1),
    ("tc", 2 * WARPS_PER_BLOCK),
];
/// The CUDA-core layouts that also serve calls with more than one right-hand side (the set-bit
/// walks: A read once for all n ≤ 8 right-hand sides); the others run n = 1 only.
pub const MULTI_LAYOUTS: [&str; 6] = ["bits", "seg", "bitsw", "segw", "blockbw", "tc"];
/// The layouts of [`CORE_LAYOUTS`] that multiply on tensor cores (TF32 MMAs: A and X rounded to
/// 11 significant bits, on f32 values too), so a TF32 product, not an f32 one: callers offer them
/// only where the MMA kernels are allowed (never for f32 products).
pub const TC_LAYOUTS: [&str; 1] = ["tc"];
/// Layouts of [`CORE_LAYOUTS`] that the tunings (the facade's preparation and the bench's walk
/// columns) no longer time: `seg` was never the fastest walk at n = 1 or n = 8 on any of the 20
/// bench matrices, walk storage f16 or f32 (H200, 2026-11-25, 6fa2014, v9: `bitsw` / `bits` / `segw`
/// took its place), and its 4 chunk budgets were 4 of the 24 timed candidates of an 8-RHS
/// preparation. It stays a layout ([`super::BitBsrSpmv::set_core_layout`]), checked by the GPU tests.
pub const UNTUNED_LAYOUTS: [&str; 1] = ["seg"];
/// Layouts whose tunings also time the wave-fitted tile budget ([`super::BitBsrSpmv::tuning_chunks`]):
/// the staged walks keep a pipeline of copies per warp, so long halves that fill whole waves of
/// resident warps can pay (H200, 26948dc: kept on xenon1, c-62; not on fem-like, where the
/// walk is issue-bound and budget 128 stays faster).
pub const WAVE_FITTED_LAYOUTS: [&str; 2] = ["staged", "staged16"];
/// The smallest fixed tile budget the tunings time for [`WAVE_FITTED_LAYOUTS`]: at 4 and 8 tiles
/// per half a warp's pipeline holds one short stage, and neither budget was kept for a staged
/// walk in any column of the H200 bench (26948dc, run 6: kept at 128 and at wave-fitted budgets
/// of 9–51), so they are not timed (4 fewer candidates per walk storage).
pub const WAVE_FITTED_MIN_CHUNK: u32 = 32;
/// Layouts of [`CORE_LAYOUTS`] with one half per thread block: (layout, the tile budgets their
/// tunings time instead of the base ones, the mean tiles per non-empty tile-row below which they
/// are not timed). `blocklane` shares each row among 256 threads: budgets of 256–1024 tiles give
/// each one to four tiles per row, and on rows shorter than 128 tiles most threads idle and each
/// row costs a barrier (H200, b28cbfc: 1.5–24× slower than the best other walk on every bench
/// matrix but BlogCatalog, ~280 tiles per tile-row, where it won at budget 256). `blockw` gives each of
/// 8 warps a contiguous range: budgets of 32–256 tiles are 4–32 tiles per warp (`blockbw`, its
/// set-bit walk for 1–8 right-hand sides, likewise).
pub const BLOCK_LAYOUTS: [(&str, &[u32], f64); 3] = [
    ("blocklane", &[256, 512, 1024], 128.0),
    ("blockw", &[32, 64, 128, 256], 0.0),
    ("blockbw", &[32, 64, 128, 256], 0.0),
];

/// Mean tiles per non-empty tile-row of tile-row offsets `ptr` (0 without any).
pub(super) fn mean_tiles_per_row(ptr: &[u32]) -> f64 {
    let nonempty = ptr.windows(2).filter(|w| w[1] > w[0]).count();
    let tiles = ptr
        .last()
        .copied()
        .unwrap_or(0)
        .saturating_sub(ptr.first().copied().unwrap_or(0));
    if nonempty == 0 {
        0.0
    } else {
        f64::from(tiles) / nonempty as f64
    }
}
/// The CUDA-core walks a tuning times for `n` right-hand sides: every layout at n = 1, the
/// set-bit walks ([`MULTI_LAYOUTS`]) for more; never the tensor-core walks ([`TC_LAYOUTS`]: a
/// TF32 product, timed with the MMA kernels where those are allowed) nor [`UNTUNED_LAYOUTS`].
/// The facade's preparation and the bench's walk columns time these.
pub fn tuned_walk_layouts(n: usize) -> Vec<&'static str> {
    let all: Vec<&'static str> = if n == 1 {
        CORE_LAYOUTS.iter().map(|l| l.0).collect()
    } else {
        MULTI_LAYOUTS.to_vec()
    };
    all.into_iter()
        .filter(|l| !TC_LAYOUTS.contains(l) && !UNTUNED_LAYOUTS.contains(l))
        .collect()
}
/// The budgets of `base` from [`WAVE_FITTED_MIN_CHUNK`] on, then `wave` unless among them.
pub(super) fn wave_fitted_chunks(base: &[u32], wave: u32) -> Vec<u32> {
    let mut chunks: Vec<u32> = base
        .iter()
        .copied()
        .filter(|&c| c >= WAVE_FITTED_MIN_CHUNK)
        .collect();
    if !chunks.contains(&wave) {
        chunks.push(wave);
    }
    chunks
}
/// The multi-RHS layout used without tuning.
pub const MULTI_LAYOUT: &str = "bits";
/// The CUDA-core layout F32 storage starts on.
pub const DEFAULT_CORE_LAYOUT: &str = "core";

/// The `.entry` signatures this module launches (checked against the PTX by a CPU test).
pub const SIGNATURES: &[KernelSignature] = &concat::<
    _,
    { OTHER_SIGNATURES.len() + WALK_SIGNATURES.len() },
>(&OTHER_SIGNATURES, &WALK_SIGNATURES);

/// The main (MMA, per tile-row) kernels, the x conversion and the split-row fix-up.
pub(super) const OTHER_SIGNATURES: [KernelSignature; 6] = [
    KernelSignature {
        module: KernelModule::Spmv,
        name: "spmv_f16_r1",
        params: MAIN_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spmv,
        name: "spmv_f16_r8",
        params: MAIN_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spmv,
        name: "spmv_tf32_r1",
        params: MAIN_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spmv,
        name: "spmv_tf32_r8",
        params: MAIN_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spmv,
        name: ENTRY_X16,
        params: X16_PARAMS,
    },
    KernelSignature {
        module: KernelModule::Spmv,
        name: ENTRY_FIXUP,
        params: FIXUP_PARAMS,
    },
];

/// `spmv_x16`'s parameters.
pub(super) const X16_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // x
    ParamKind::U32, // k
    ParamKind::U32, // n
    ParamKind::Ptr, // x16
    ParamKind::Ptr, // xs
];

/// `spmv_fixup`'s parameters.
pub(super) const FIXUP_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr, // fix
    ParamKind::U32, // num_fix
    ParamKind::Ptr, // partial
    ParamKind::Ptr, // y
    ParamKind::U32, // rows
    ParamKind::U32, // n
    ParamKind::F32, // beta
];

/// Every walk's signature ([`WALK_PARAMS`]): the one-RHS walks ([`CORE_ENTRIES`]), then the
/// set-bit ([`BITS_ENTRIES`], [`SEG_ENTRIES`], [`BITSW_ENTRIES`], [`SEGW_ENTRIES`],
/// [`BLOCKBW_ENTRIES`]) and MMA ([`TC_ENTRIES`]) walks, f16 before f32; the walks for n ≥ 2 in
/// their own modules ([`KernelModule::spmv_for_rhs`]).
pub(super) const WALK_SIGNATURES: [KernelSignature; 2 * CORE_ENTRIES.len() + 12 * MAX_RHS] = {
    let mut s = [KernelSignature {
        module: KernelModule::Spmv,
        name: "",
        params: &WALK_PARAMS,
    }; 2 * CORE_ENTRIES.len() + 12 * MAX_RHS];
    let mut i = 0;
    let mut k = 0;
    while k < CORE_ENTRIES.len() {
        s[i].name = CORE_ENTRIES[k].1[0];
        s[i + 1].name = CORE_ENTRIES[k].1[1];
        i += 2;
        k += 1;
    }
    let tables = MULTI_ENTRIES;
    let mut t = 0;
    while t < tables.len() {
        let mut storage = 0;
        while storage < 2 {
            let mut rhs = 0;
            while rhs < MAX_RHS {
                s[i].name = tables[t][storage][rhs];
                s[i].module = KernelModule::spmv_for_rhs(rhs + 1);
                i += 1;
                rhs += 1;
            }
            storage += 1;
        }
        t += 1;
    }
    assert!(i == s.len());
    s
};
