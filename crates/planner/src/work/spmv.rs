//! The bitBSR SpMV kernels' work list (`kernels-ptx/spmv.cu`): warp items of two *halves* (the
//! top and bottom of the MMA) over tile-rows ([`spmv_work`]). A half holds either whole
//! consecutive tile-rows with at most `chunk_tiles` tiles in all, or one chunk of a longer
//! tile-row (a *split* half, which writes a partial slot summed by the fix-up: `spmv_fixup` after
//! the MMA kernels, the row's last chunk in the walks, through [`SpmvWork::split_table`]). Every
//! tile lies in exactly one half, every tile-row in some half, split rows' chunks in consecutive
//! slots ([`SpmvWork::check`]).
//!
//! The kernels' CPU walk (`tcsparse_formats::bitbsr_device::DeviceBitBsr::spmv_cpu`) reads the
//! list through `tcsparse_formats::bitbsr_device::HalfWork`, which [`SpmvWork`] implements.

use crate::PlanError;
use tcsparse_formats::bitbsr_device::HalfWork;

/// Flag in a half's second field: a split half (the field's low bits are its partial slot).
pub const SPLIT_BIT: u32 = 1 << 31;

/// `(row_begin, row_end, tile_begin, tile_end, slot)` of a half record.
pub fn half_fields(h: &[u32; 4]) -> (u32, u32, u32, u32, Option<u32>) {
    if h[1] & SPLIT_BIT != 0 {
        (h[0], h[0] + 1, h[2], h[3], Some(h[1] & !SPLIT_BIT))
    } else {
        (h[0], h[1], h[2], h[3], None)
    }
}

/// The SpMV kernels' work list (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpmvWork {
    /// Two halves per warp item: `{row_begin, row_end or SPLIT_BIT | slot, tile_begin, tile_end}`.
    pub items: Vec<[[u32; 4]; 2]>,
    /// Split tile-rows: `{tile-row, first slot, end slot}`.
    pub fix: Vec<[u32; 3]>,
    /// Number of partial slots (split halves).
    pub slots: u32,
    /// Tile budget per half it was built with.
    pub chunk_tiles: u32,
}

/// Most tile-rows one half packs (bounds the flushes of a run of empty or one-tile rows; the
/// kernels keep a half's row ends in one 32-lane register window and rely on it).
pub const MAX_ROWS_PER_HALF: u32 = 32;

/// Builds the work list over tile-row offsets `ptr` with at most `chunk_tiles` (≥ 1) tiles per half:
/// runs of whole tile-rows (at most [`MAX_ROWS_PER_HALF`]), and every tile-row longer than the
/// budget cut into ⌈len / budget⌉ chunks of nearly equal length, each its own split half. Halves are
/// paired in order into warp items (an odd count ends with an empty half).
pub fn spmv_work(ptr: &[u32], chunk_tiles: u32) -> SpmvWork {
    let chunk = chunk_tiles.max(1);
    let brows = ptr.len().saturating_sub(1);
    let len = |r: usize| ptr[r + 1] - ptr[r];
    let mut halves: Vec<[u32; 4]> = Vec::new();
    let mut fix = Vec::new();
    let mut slots = 0u32;
    let mut r = 0usize;
    while r < brows {
        let l = len(r);
        if l > chunk {
            let parts = l.div_ceil(chunk);
            let first = slots;
            for i in 0..parts {
                // Chunk i covers [ptr + i·l/parts, ptr + (i+1)·l/parts): lengths differ by ≤ 1.
                let a = ptr[r] + (i as u64 * l as u64 / parts as u64) as u32;
                let b = ptr[r] + ((i as u64 + 1) * l as u64 / parts as u64) as u32;
                halves.push([r as u32, SPLIT_BIT | slots, a, b]);
                slots += 1;
            }
            fix.push([r as u32, first, slots]);
            r += 1;
            continue;
        }
        let first = r;
        let mut total = 0;
        while r < brows && (r - first) < MAX_ROWS_PER_HALF as usize && total + len(r) <= chunk {
            total += len(r);
            r += 1;
        }
        halves.push([first as u32, r as u32, ptr[first], ptr[r]]);
    }
    if halves.len() % 2 == 1 {
        halves.push([0, 0, 0, 0]);
    }
    let items = halves.chunks_exact(2).map(|p| [p[0], p[1]]).collect();
    SpmvWork {
        items,
        fix,
        slots,
        chunk_tiles: chunk,
    }
}

impl SpmvWork {
    /// Checks that the work list covers the tile-rows of `ptr` as [`spmv_work`] promises: every
    /// tile in exactly one half, every tile-row in some half, whole halves end on row boundaries,
    /// split halves inside one row with distinct slots < `slots`, and `fix` lists each split row once
    /// with its consecutive slots. The kernels rely on this for in-bounds access.
    pub fn check(&self, ptr: &[u32]) -> Result<(), PlanError> {
        let bad = |w: String| Err(PlanError::InvalidSchedule(format!("SpMV work list: {w}")));
        let brows = ptr.len().saturating_sub(1);
        let tiles = ptr.last().copied().unwrap_or(0);
        let mut next_tile = 0u32;
        let mut next_row = 0u32;
        let mut next_slot = 0u32;
        let mut split_seen: Vec<(u32, u32, u32)> = Vec::new();
        for h in self.items.iter().flatten() {
            let (r0, r1, t0, t1, slot) = half_fields(h);
            if r0 == r1 && slot.is_none() {
                if t0 != t1 {
                    return bad(format!("empty half with tiles {h:?}"));
                }
                continue;
            }
            if r1 as usize > brows || r0 >= r1 || t0 > t1 || t1 > tiles {
                return bad(format!("half {h:?} out of range"));
            }
            if t0 != next_tile {
                return bad(format!("half {h:?} does not start at tile {next_tile}"));
            }
            match slot {
                None => {
                    if r0 != next_row || t0 != ptr[r0 as usize] || t1 != ptr[r1 as usize] {
                        return bad(format!("whole half {h:?} not on row boundaries"));
                    }
                    if r1 - r0 > MAX_ROWS_PER_HALF {
                        return bad(format!(
                            "whole half {h:?} spans more than {MAX_ROWS_PER_HALF} rows"
                        ));
                    }
                    next_row = r1;
                }
                Some(s) => {
                    if s != next_slot || s >= self.slots {
                        return bad(format!("split half {h:?}: slot out of order"));
                    }
                    next_slot += 1;
                    if t0 < ptr[r0 as usize] || t1 > ptr[r1 as usize] {
                        return bad(format!("split half {h:?} leaves its row"));
                    }
                    match split_seen.last_mut() {
                        Some(l) if l.0 == r0 => l.2 = s + 1,
                        _ => {
                            if r0 != next_row || t0 != ptr[r0 as usize] {
                                return bad(format!("split row {r0} does not start a chunk run"));
                            }
                            split_seen.push((r0, s, s + 1));
                        }
                    }
                    if t1 == ptr[r0 as usize + 1] {
                        next_row = r0 + 1;
                    }
                }
            }
            next_tile = t1;
        }
        if next_tile != tiles || next_row as usize != brows || next_slot != self.slots {
            return bad("work list does not cover every tile and tile-row".into());
        }
        let fix: Vec<(u32, u32, u32)> = self.fix.iter().map(|f| (f[0], f[1], f[2])).collect();
        if fix != split_seen {
            return bad("fix-up list differs from the split halves".into());
        }
        Ok(())
    }

    /// The walks' split-row table: for each partial slot `s`, `[2s] = ` the first and `[2s + 1] =`
    /// the end slot of its tile-row (`2 · slots` entries; the chunk that finishes a split row last
    /// sums the row's slots `first..end` and counts arrivals at `first`). Slots no split row
    /// lists stay 0 (none after [`SpmvWork::check`]).
    pub fn split_table(&self) -> Vec<u32> {
        let mut t = vec![0u32; 2 * self.slots as usize];
        for f in &self.fix {
            for s in f[1]..f[2].min(self.slots) {
                t[2 * s as usize] = f[1];
                t[2 * s as usize + 1] = f[2];
            }
        }
        t
    }
}

impl HalfWork for SpmvWork {
    fn for_each_half(&self, f: &mut dyn FnMut(u32, u32, u32, u32, Option<u32>)) {
        for h in self.items.iter().flatten() {
            let (r0, r1, t0, t1, slot) = half_fields(h);
            f(r0, r1, t0, t1, slot);
        }
    }
    fn fix(&self) -> &[[u32; 3]] {
        &self.fix
    }
    fn slots(&self) -> u32 {
        self.slots
    }
    fn check_covers(&self, tile_row_ptr: &[u32]) -> Result<(), String> {
        self.check(tile_row_ptr).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn ptr_of(lens: &[u32]) -> Vec<u32> {
        std::iter::once(0)
            .chain(lens.iter().scan(0, |s, &l| {
                *s += l;
                Some(*s)
            }))
            .collect()
    }

    /// Every tile in exactly one half (counted independently of `check`), budgets respected.
    fn check_work(ptr: &[u32], chunk: u32) {
        let w = spmv_work(ptr, chunk);
        w.check(ptr)
            .unwrap_or_else(|e| panic!("{e}: {ptr:?} chunk {chunk}"));
        // The split table: each split half's slot points at its own row's slot run.
        let table = w.split_table();
        assert_eq!(table.len(), 2 * w.slots as usize);
        for h in w.items.iter().flatten() {
            if let (r0, _, _, _, Some(s)) = half_fields(h) {
                let (first, end) = (table[2 * s as usize], table[2 * s as usize + 1]);
                assert!(
                    first <= s && s < end && end <= w.slots,
                    "slot {s}: {first}..{end}"
                );
                let parts = w
                    .items
                    .iter()
                    .flatten()
                    .filter(|g| matches!(half_fields(g), (r, _, _, _, Some(_)) if r == r0));
                assert_eq!(parts.count() as u32, end - first, "row {r0}");
            }
        }
        let tiles = *ptr.last().unwrap() as usize;
        let mut seen = vec![0u32; tiles];
        let mut rows_seen = vec![0u32; ptr.len() - 1];
        for h in w.items.iter().flatten() {
            let (r0, r1, t0, t1, slot) = half_fields(h);
            assert!(t1 - t0 <= chunk.max(1), "{h:?}");
            if slot.is_none() {
                assert!(r1 - r0 <= MAX_ROWS_PER_HALF);
                for r in r0..r1 {
                    rows_seen[r as usize] += 1;
                }
            } else {
                rows_seen[r0 as usize] = 1;
            }
            for t in t0..t1 {
                seen[t as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "{ptr:?} chunk {chunk}");
        assert!(rows_seen.iter().all(|&c| c == 1), "{ptr:?} chunk {chunk}");
    }

    #[test]
    fn work_covers_every_tile_once() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..300 {
            let brows = rng.random_range(0..80);
            let lens: Vec<u32> = (0..brows)
                .map(|_| match rng.random_range(0..10) {
                    0..=2 => 0,
                    3 => rng.random_range(50..2000),
                    _ => rng.random_range(1..6),
                })
                .collect();
            for chunk in [0, 1, 3, 16, 32, 128] {
                check_work(&ptr_of(&lens), chunk);
            }
        }
        check_work(&[0], 8);
        // One tile-row 1000× longer than the rest: many chunks of ≤ 32 tiles, consecutive slots.
        let mut lens = vec![1u32; 20];
        lens[7] = 1000;
        let w = spmv_work(&ptr_of(&lens), 32);
        assert_eq!(w.fix, [[7, 0, 32]]);
        assert_eq!(w.slots, 32);
    }

    #[test]
    fn check_rejects_broken_work() {
        let ptr = ptr_of(&[3, 0, 100, 2]);
        let mut w = spmv_work(&ptr, 16);
        w.check(&ptr).unwrap();
        w.items[0][0][3] += 1;
        assert!(w.check(&ptr).is_err());
        let mut w = spmv_work(&ptr, 16);
        w.fix.clear();
        assert!(w.check(&ptr).is_err());
    }
}
