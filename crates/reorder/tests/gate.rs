//! The reordering gate: skips matrices no row order can make dense enough (R-MAT, uniform random,
//! an already ordered matrix) and lets through a clustered matrix whose rows were shuffled.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::generate::{clustered_block_diagonal, rmat, uniform_random};
use tcsparse_formats::metrics::planner_block_counts;
use tcsparse_reorder::metrics::mean_nnz_tc;
use tcsparse_reorder::{Gate, Mode, Permutation, by_name};

fn shuffled(a: &Csr, seed: u64) -> Csr {
    let mut v: Vec<u32> = (0..a.rows() as u32).collect();
    v.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    Permutation::new(v).unwrap().apply_symmetric(a).unwrap()
}

#[test]
fn rmat_is_skipped() {
    let a = rmat(16, 11, (0.57, 0.19, 0.19, 0.05), 1).unwrap();
    let g = Gate::default().assess(&a);
    assert!(!g.worth_reordering, "{g:?}");
    // And indeed affinity does not reach the gate's density.
    let r = by_name("affinity", 0)
        .unwrap()
        .reorder(&a, Mode::Symmetric)
        .unwrap();
    assert!(r.report.mean_nnz_tc_after < Gate::default().min_density);
}

#[test]
fn uniform_is_skipped() {
    for (rows, per_row) in [(100_000, 3.0), (50_000, 16.0)] {
        let a = uniform_random(rows, rows, per_row, 2).unwrap();
        let g = Gate::default().assess(&a);
        assert!(!g.worth_reordering, "{g:?}");
        assert!(g.mean_nnz_tc_reachable < 9.0, "{g:?}");
    }
}

#[test]
fn shuffled_clustered_is_not_skipped_and_ordered_one_is() {
    let ordered = clustered_block_diagonal(65_536, 64, 0.3, 2.0, 4).unwrap();
    let g = Gate::default().assess(&ordered);
    assert!(!g.worth_reordering, "already ordered: {g:?}");
    let a = shuffled(&ordered, 5);
    let g = Gate::default().assess(&a);
    assert!(g.worth_reordering, "{g:?}");
    // The estimate is optimistic: affinity reaches at most about what it predicts.
    let r = by_name("affinity", 0)
        .unwrap()
        .reorder(&a, Mode::Symmetric)
        .unwrap();
    assert!(r.report.mean_nnz_tc_after >= Gate::default().min_density);
    assert!(
        r.report.mean_nnz_tc_after <= 1.2 * g.mean_nnz_tc_reachable,
        "{g:?} vs {:?}",
        r.report
    );
}

#[test]
fn huge_declared_columns_cost_nothing() {
    // 3 × 4,000,000,000 with four nonzeros: memory must follow the nonzeros.
    let a = csr_from_triplets(
        3,
        4_000_000_000,
        &[
            (0, 5, 1.0),
            (0, 3_999_999_999, 1.0),
            (2, 7, 1.0),
            (1, 5, 2.0),
        ],
    )
    .unwrap();
    let g = Gate::default().assess(&a);
    assert!(!g.worth_reordering);
    assert!((g.mean_nnz_tc_now - mean_nnz_tc(&a, 8, 8)).abs() < 1e-12);
    assert!(g.mean_nnz_tc_now > 0.0);
}

#[test]
fn deterministic_on_any_thread_count() {
    let a = shuffled(
        &clustered_block_diagonal(20_000, 64, 0.3, 2.0, 6).unwrap(),
        7,
    );
    let on = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
            .install(|| Gate::default().assess(&a))
    };
    let (x, y) = (on(1), on(4));
    assert_eq!(x.mean_nnz_tc_reachable, y.mean_nnz_tc_reachable);
    assert_eq!(x.worth_reordering, y.worth_reordering);
}

#[test]
fn a_known_density_gives_the_same_verdict_as_counting_it() {
    let ordered = clustered_block_diagonal(16_384, 64, 0.3, 2.0, 4).unwrap();
    for a in [
        rmat(14, 11, (0.57, 0.19, 0.19, 0.05), 3).unwrap(),
        shuffled(&ordered, 7),
        ordered,
    ] {
        let g = Gate::default().assess(&a);
        // What the facade passes: the density from the planner's counting pass, not the gate's
        // own 8×8 count.
        let blocks = planner_block_counts(&a).blocks_8x8();
        let density = a.nnz() as f64 / blocks.max(1) as f64;
        let h = Gate::default().assess_with_density(&a, density);
        assert_eq!(
            (
                g.worth_reordering,
                g.mean_nnz_tc_now,
                g.mean_nnz_tc_reachable
            ),
            (
                h.worth_reordering,
                h.mean_nnz_tc_now,
                h.mean_nnz_tc_reachable
            )
        );
        assert_eq!((g.reason, g.sampled_rows), (h.reason, h.sampled_rows));
    }
}
