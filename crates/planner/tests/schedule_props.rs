//! Property tests of the kernel contracts, checked by brute force (not by `validate` alone).

use proptest::prelude::*;
use tcsparse_planner::work::flat::{flatten_acc_schedule, flatten_schedule, unbalanced_schedule};
use tcsparse_planner::{AccSchedule, Eq4Model, wave_split};

fn rwo_of(counts: &[u32]) -> Vec<u32> {
    let mut v = vec![0u32];
    for &c in counts {
        v.push(v.last().unwrap() + c);
    }
    v
}

/// Blocks per window: mostly light, some empty, a few hubs.
fn counts() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(
        prop_oneof![4 => 0u32..4, 4 => 1u32..40, 1 => 40u32..300],
        0..120,
    )
}

fn model() -> impl Strategy<Value = Eq4Model> {
    (
        0.0f64..5.0,
        0.0f64..3.0,
        0.0f64..5.0,
        0.0f64..50.0,
        1.0f64..200.0,
        1u32..40,
    )
        .prop_map(|(load, mma, write, overhead, target, cap)| Eq4Model {
            load_cost: load,
            mma_cost: mma,
            write_cost: write,
            window_overhead: overhead,
            target_cost: target,
            max_blocks_per_tb: cap,
        })
}

/// Brute-force check of the kernel contract; returns the max blocks per TB.
fn check_contract(rwo: &[u32], s: &AccSchedule) -> Result<u32, TestCaseError> {
    let windows = rwo.len() - 1;
    let total = rwo[windows] as usize;
    let mut block_owner = vec![0u32; total];
    let mut in_range = vec![0u32; windows];
    let mut tbs_with_blocks = vec![std::collections::BTreeSet::new(); windows];
    let mut max_blocks = 0;
    for (i, t) in s.work().iter().enumerate() {
        prop_assert!(t.window_begin < t.window_end && t.window_end as usize <= windows);
        prop_assert!(t.block_begin <= t.block_end);
        max_blocks = max_blocks.max(t.block_end - t.block_begin);
        for w in t.window_begin..t.window_end {
            in_range[w as usize] += 1;
        }
        for b in t.block_begin..t.block_end {
            block_owner[b as usize] += 1;
            // The block's window must be inside the TB's window range.
            let w = rwo[1..].partition_point(|&o| o <= b);
            prop_assert!(
                (t.window_begin as usize..t.window_end as usize).contains(&w),
                "TB {i} block {b} window {w}"
            );
            tbs_with_blocks[w].insert(i);
        }
    }
    prop_assert!(
        block_owner.iter().all(|&c| c == 1),
        "every block exactly once"
    );
    prop_assert_eq!(s.window_split().len(), windows);
    for w in 0..windows {
        let split = tbs_with_blocks[w].len() > 1;
        prop_assert!(in_range[w] >= 1, "window {} uncovered", w);
        if !split {
            prop_assert_eq!(
                in_range[w],
                1,
                "window {} not split but in several ranges",
                w
            );
        }
        prop_assert_eq!(
            s.window_split()[w] == 1,
            split,
            "atomic flag of window {}",
            w
        );
    }
    prop_assert_eq!(
        s.num_split_windows(),
        s.window_split().iter().filter(|&&x| x == 1).count()
    );
    Ok(max_blocks)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn balanced_schedule_meets_the_contract(c in counts(), m in model(), n in prop::sample::select(vec![1usize, 8, 32, 128, 512])) {
        let rwo = rwo_of(&c);
        let s = AccSchedule::balanced(&rwo, &m, n);
        prop_assert!(s.is_balanced());
        let max_blocks = check_contract(&rwo, &s)?;
        prop_assert!(max_blocks <= m.max_blocks_per_tb, "cap {} exceeded: {}", m.max_blocks_per_tb, max_blocks);
        prop_assert!(s.validate(&rwo).is_ok(), "{:?}", s.validate(&rwo));
        // Windows heavier than the cap are necessarily split.
        for (w, &cnt) in c.iter().enumerate() {
            if cnt > m.max_blocks_per_tb {
                prop_assert_eq!(s.window_split()[w], 1);
            }
        }
    }

    #[test]
    fn authors_model_meets_the_contract(c in counts()) {
        let rwo = rwo_of(&c);
        let s = AccSchedule::balanced(&rwo, &Eq4Model::authors_code(), 128);
        prop_assert!(check_contract(&rwo, &s)? <= 16);
        let s = AccSchedule::balanced(&rwo, &Eq4Model::paper(&tcsparse_planner::DeviceSpec::h200()), 64);
        prop_assert!(check_contract(&rwo, &s)? <= 32);
    }

    #[test]
    fn unbalanced_schedule_meets_the_contract(c in counts()) {
        let rwo = rwo_of(&c);
        let s = AccSchedule::unbalanced(&rwo);
        check_contract(&rwo, &s)?;
        prop_assert_eq!(s.work().len(), c.len());
        prop_assert_eq!(s.num_split_windows(), 0);
        prop_assert!(s.validate(&rwo).is_ok());
    }

    #[test]
    fn packed_schedule_meets_the_contract(c in counts(), k in 0u32..40) {
        let rwo = rwo_of(&c);
        let s = AccSchedule::packed(&rwo, k);
        check_contract(&rwo, &s)?;
        prop_assert_eq!(s.work().len(), c.len().div_ceil(k.max(1) as usize));
        prop_assert_eq!(s.num_split_windows(), 0);
        prop_assert!(s.validate(&rwo).is_ok());
    }

    #[test]
    fn wave_split_covers_every_panel_block_once(c in counts(), slots in 1u64..3000, grid_y in 1u32..5) {
        let w = wave_split(&c, slots, grid_y).unwrap();
        let mut next = vec![0u32; c.len()];
        let mut pieces = vec![0u32; c.len()];
        for v in &w.panels {
            let p = v.panel as usize;
            prop_assert_eq!(v.block_begin, next[p]);
            prop_assert!(v.block_end >= v.block_begin);
            next[p] = v.block_end;
            pieces[p] += 1;
        }
        prop_assert_eq!(&next, &c);
        for v in &w.panels {
            prop_assert_eq!(v.atomic, pieces[v.panel as usize] > 1);
        }
        // Eq. 6–7: no virtual panel carries more than mean × waves blocks (rounded up), unless unsplit.
        let cap = (w.mean_blocks * w.num_waves as f64).ceil() as u32;
        for v in w.panels.iter().filter(|v| v.atomic) {
            prop_assert!(v.block_end - v.block_begin <= cap.max(1));
        }
    }

    /// Every schedule the planner builds flattens: the flat form keeps its work and split flags,
    /// lists exactly the split windows, and the one-block-per-window flat list is the flattened
    /// unbalanced schedule.
    #[test]
    fn planner_schedules_flatten_to_the_kernel_form(c in counts(), m in model(), k in 0u32..40) {
        let rwo = rwo_of(&c);
        for s in [AccSchedule::unbalanced(&rwo), AccSchedule::packed(&rwo, k), AccSchedule::balanced(&rwo, &m, 128)] {
            let flat = flatten_acc_schedule(&rwo, &s).unwrap();
            prop_assert_eq!(flat.num_tbs(), s.work().len());
            prop_assert_eq!(&flat.window_split[..], s.window_split());
            let split: Vec<u32> = (0..c.len() as u32).filter(|&w| s.window_split()[w as usize] == 1).collect();
            prop_assert_eq!(&flat.split_windows, &split);
        }
        prop_assert_eq!(unbalanced_schedule(&rwo), flatten_acc_schedule(&rwo, &AccSchedule::unbalanced(&rwo)).unwrap());
    }

    /// A flat list that drops, repeats or overreaches a block, leaves a window out, or covers an
    /// unsplit window twice is refused.
    #[test]
    fn broken_flat_lists_are_refused(c in counts(), pick in any::<prop::sample::Index>()) {
        let rwo = rwo_of(&c);
        let blocks = *rwo.last().unwrap() as u64;
        prop_assume!(blocks > 0);
        let flat = unbalanced_schedule(&rwo);
        let work: Vec<[u64; 4]> = flat.work.chunks_exact(4).map(|w| [w[0], w[1], w[2], w[3]].map(u64::from)).collect();
        // A thread block holding some blocks.
        let full: Vec<usize> = (0..work.len()).filter(|&i| work[i][2] < work[i][3]).collect();
        let i = full[pick.index(full.len())];
        let mut dropped = work.clone();
        dropped[i][3] -= 1;
        prop_assert!(flatten_schedule(&rwo, dropped, &flat.window_split).is_err());
        let mut over = work.clone();
        over[i][3] = blocks + 1;
        prop_assert!(flatten_schedule(&rwo, over, &flat.window_split).is_err());
        let mut twice = work.clone();
        twice.push(work[i]);
        prop_assert!(flatten_schedule(&rwo, twice, &flat.window_split).is_err());
        let mut missing = work.clone();
        missing.remove(i);
        prop_assert!(flatten_schedule(&rwo, missing, &flat.window_split).is_err());
        let mut again = work.clone();
        again.push([work[i][0], work[i][1], 0, 0]);
        prop_assert!(flatten_schedule(&rwo, again, &flat.window_split).is_err());
        prop_assert!(flatten_schedule(&rwo, work, &flat.window_split[1..]).is_err());
    }
}
