//! The split of C's rows over GPUs (or ranks), in one place: [`split_rows`] cuts a list of row
//! loads into contiguous ranges minimising the largest range's load; each operation only says
//! what a row costs ([`nonzero_rows`] for SpMM, [`spamm_block_rows`] for SpAMM).

use tcsparse_formats::Csr;

use crate::PlanError;
use crate::spamm::NormMaps;

/// Splits rows with loads `row_loads` into `parts` contiguous ranges `[begin, end)` covering
/// `0..row_loads.len()` in order (some may be empty) and minimising the largest sum of a range:
/// a binary search on the capacity with a greedy fill, which is optimal for contiguous splits.
pub fn split_rows(row_loads: &[u64], parts: usize) -> Result<Vec<(usize, usize)>, PlanError> {
    if parts == 0 {
        return Err(PlanError::InvalidInput("need at least one part".into()));
    }
    let rows = row_loads.len();
    let parts_needed = |cap: u64| -> usize {
        let (mut n, mut acc) = (1usize, 0u64);
        for &l in row_loads {
            if acc.saturating_add(l) > cap {
                n += 1;
                acc = 0;
            }
            acc = acc.saturating_add(l);
        }
        n
    };
    let (mut lo, mut hi) = (
        row_loads.iter().copied().max().unwrap_or(0),
        row_loads.iter().fold(0u64, |s, &l| s.saturating_add(l)),
    );
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if parts_needed(mid) <= parts {
            hi = mid
        } else {
            lo = mid + 1
        }
    }
    let mut out = Vec::with_capacity(parts);
    let (mut begin, mut acc) = (0usize, 0u64);
    for (r, &l) in row_loads.iter().enumerate() {
        // Close the current range when it is full and parts remain.
        if acc.saturating_add(l) > lo && out.len() + 1 < parts {
            out.push((begin, r));
            begin = r;
            acc = 0;
        }
        acc = acc.saturating_add(l);
    }
    out.push((begin, rows));
    while out.len() < parts {
        out.push((rows, rows));
    }
    Ok(out)
}

/// SpMM's rows of `a` split into `parts` blocks of balanced weight (nonzeros + 1 per row, so
/// empty rows still count their C stores).
pub fn nonzero_rows(a: &Csr, parts: usize) -> Result<Vec<(usize, usize)>, PlanError> {
    let loads: Vec<u64> = a
        .row_offsets()
        .windows(2)
        .map(|w| u64::from(w[1] - w[0]) + 1)
        .collect();
    split_rows(&loads, parts)
}

/// SpAMM's C rows (`m` of them) split into `parts` ranges of whole C blocks (`block_tiles`
/// tiles of `tile` rows each) balancing the valid tile products at τ (each tile row also costs
/// its `tiles_n` C stores), from the tile norm maps of A and B.
pub fn spamm_block_rows(
    maps: &NormMaps<'_>,
    tau: f32,
    m: usize,
    block_tiles: usize,
    tile: usize,
    parts: usize,
) -> Result<Vec<(usize, usize)>, PlanError> {
    let tn = maps.tiles().2;
    if block_tiles == 0 || tile == 0 {
        return Err(PlanError::InvalidInput("empty C block".into()));
    }
    let per_row = maps.valid_per_row(tau);
    let loads: Vec<u64> = per_row
        .chunks(block_tiles)
        .map(|c| c.iter().sum::<u64>() + (c.len() * tn) as u64)
        .collect();
    let edge = block_tiles * tile;
    Ok(split_rows(&loads, parts)?
        .into_iter()
        .map(|(b, e)| ((b * edge).min(m), (e * edge).min(m)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The largest range load of the best contiguous split, by brute force over every cut.
    fn best_max(loads: &[u64], parts: usize) -> u64 {
        fn go(loads: &[u64], parts: usize) -> u64 {
            if parts == 1 {
                return loads.iter().sum();
            }
            (0..=loads.len())
                .map(|c| {
                    loads[..c]
                        .iter()
                        .sum::<u64>()
                        .max(go(&loads[c..], parts - 1))
                })
                .min()
                .unwrap_or(0)
        }
        go(loads, parts)
    }

    proptest! {
        #[test]
        fn the_split_covers_every_row_in_order_and_is_optimal(
            loads in proptest::collection::vec(0u64..20, 0..9),
            parts in 1usize..4,
        ) {
            let split = split_rows(&loads, parts).unwrap();
            prop_assert_eq!(split.len(), parts);
            prop_assert_eq!(split[0].0, 0);
            prop_assert_eq!(split[parts - 1].1, loads.len());
            prop_assert!(split.windows(2).all(|w| w[0].1 == w[1].0));
            prop_assert!(split.iter().all(|&(b, e)| b <= e));
            let max = split.iter().map(|&(b, e)| loads[b..e].iter().sum::<u64>()).max().unwrap();
            prop_assert_eq!(max, best_max(&loads, parts));
        }
    }

    #[test]
    fn more_parts_than_rows_leave_trailing_empty_ranges() {
        assert_eq!(
            split_rows(&[1, 1], 3).unwrap(),
            vec![(0, 1), (1, 2), (2, 2)]
        );
        assert!(split_rows(&[1], 0).is_err());
    }

    #[test]
    fn nonzero_rows_balance_nonzeros_plus_one_per_row() {
        let t: Vec<(u32, u32, f32)> = (0..40u32)
            .map(|c| (0, c, 1.0))
            .chain((1..5).map(|r| (r, 0, 1.0)))
            .collect();
        let a = tcsparse_formats::csr::csr_from_triplets(5, 40, &t).unwrap();
        // Row 0 weighs 41, the others 2 each: the hub row alone, the rest together.
        assert_eq!(nonzero_rows(&a, 2).unwrap(), vec![(0, 1), (1, 5)]);
    }

    #[test]
    fn spamm_ranges_are_whole_blocks_clipped_to_m() {
        // 4 × 2 × 3 tiles of 32, C blocks of 2 tiles, m = 100 (the last tile row is partial).
        let na = vec![1.0f32; 8];
        let nb = vec![1.0f32; 6];
        let maps = NormMaps::new(&na, &nb, (4, 2, 3)).unwrap();
        let r = spamm_block_rows(&maps, 0.0, 100, 2, 32, 2).unwrap();
        assert_eq!(r, vec![(0, 64), (64, 100)]);
        assert!(spamm_block_rows(&maps, 0.0, 100, 0, 32, 2).is_err());
    }
}
