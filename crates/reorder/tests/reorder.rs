//! Every method: valid permutations on awkward graphs, determinism, real density gains on a matrix
//! with hidden block structure, and the permutation conventions of an SpMM round trip.

use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::reference::spmm_f64;
use tcsparse_reorder::metrics::mean_nnz_tc;
use tcsparse_reorder::{METHODS, Mode, Permutation, apply, by_name};

fn assert_bijection(p: &Permutation, n: usize) {
    assert_eq!(p.len(), n);
    let mut v = p.as_slice().to_vec();
    v.sort_unstable();
    assert!(
        v.iter().enumerate().all(|(i, &x)| i as u32 == x),
        "not a bijection"
    );
}

/// Symmetric graph: `comms` communities of `size` vertices with intra-edge probability `p_in`,
/// `noise` random extra edges, then relabelled by a random permutation.
fn hidden_blocks(comms: usize, size: usize, p_in: f64, noise: usize, seed: u64) -> Csr {
    let n = comms * size;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut label: Vec<u32> = (0..n as u32).collect();
    label.shuffle(&mut rng);
    let mut t = Vec::new();
    let edge = |t: &mut Vec<(u32, u32, f32)>, i: usize, j: usize| {
        t.push((label[i], label[j], 1.0));
        t.push((label[j], label[i], 1.0));
    };
    for c in 0..comms {
        for i in 0..size {
            for j in i..size {
                if rng.random_bool(p_in) {
                    edge(&mut t, c * size + i, c * size + j);
                }
            }
        }
    }
    for _ in 0..noise {
        let (i, j) = (rng.random_range(0..n), rng.random_range(0..n));
        edge(&mut t, i, j);
    }
    csr_from_triplets(n, n, &t).unwrap()
}

fn random_graph() -> impl Strategy<Value = Csr> {
    // Square, with isolated vertices (n up to 120 with few edges), self loops and several components.
    (
        1usize..120,
        proptest::collection::vec((0u32..1000, 0u32..1000), 0..300),
        any::<bool>(),
    )
        .prop_map(|(n, edges, sym)| {
            let mut t = Vec::new();
            for (i, j) in edges {
                // Confine edges to two disconnected halves.
                let half = (n as u32).div_ceil(2);
                let (i, j) = (i % n as u32, j % n as u32);
                let j = if (i < half) == (j < half) { j } else { i };
                t.push((i, j, 1.0));
                if sym {
                    t.push((j, i, 1.0));
                }
            }
            csr_from_triplets(n, n, &t).unwrap()
        })
}

fn random_rect() -> impl Strategy<Value = Csr> {
    (
        1usize..80,
        1usize..150,
        proptest::collection::vec((0u32..1000, 0u32..1000), 0..300),
    )
        .prop_map(|(m, k, e)| {
            let t: Vec<_> = e
                .into_iter()
                .map(|(i, j)| (i % m as u32, j % k as u32, 1.0))
                .collect();
            csr_from_triplets(m, k, &t).unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_method_gives_a_bijection_on_square_graphs(a in random_graph()) {
        for name in METHODS {
            let m = by_name(name, 7).unwrap();
            for mode in [Mode::Symmetric, Mode::RowOnly] {
                let r = m.reorder(&a, mode).unwrap();
                assert_bijection(&r.perm, a.rows());
                let b = apply(&r.perm, &a, mode).unwrap();
                prop_assert_eq!(b.nnz(), a.nnz());
                prop_assert!(r.report.blocks_after > 0 || a.nnz() == 0);
            }
        }
    }

    #[test]
    fn every_method_gives_a_bijection_on_rectangular_rows(a in random_rect()) {
        for name in METHODS {
            let m = by_name(name, 7).unwrap();
            let r = m.reorder(&a, Mode::RowOnly).unwrap();
            assert_bijection(&r.perm, a.rows());
            if a.rows() != a.cols() {
                prop_assert!(m.reorder(&a, Mode::Symmetric).is_err());
            }
        }
    }

    #[test]
    fn permutation_algebra(n in 0usize..50, seed in any::<u64>()) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut v: Vec<u32> = (0..n as u32).collect();
        v.shuffle(&mut rng);
        let p = Permutation::new(v.clone()).unwrap();
        v.shuffle(&mut rng);
        let q = Permutation::new(v).unwrap();
        prop_assert!(p.compose(&p.inverse()).unwrap().is_identity());
        prop_assert!(p.inverse().compose(&p).unwrap().is_identity());
        // Reordering by p then by q equals reordering once by p.compose(q).
        let x: Vec<f32> = (0..n * 3).map(|i| i as f32).collect();
        let twice = q.apply_dense_rows(&p.apply_dense_rows(&x, n, 3).unwrap(), n, 3).unwrap();
        prop_assert_eq!(twice, p.compose(&q).unwrap().apply_dense_rows(&x, n, 3).unwrap());
    }
}

#[test]
fn deterministic_for_a_seed() {
    let a = hidden_blocks(40, 16, 0.4, 400, 3);
    for name in METHODS {
        let x = by_name(name, 11)
            .unwrap()
            .permutation(&a, Mode::Symmetric)
            .unwrap();
        let y = by_name(name, 11)
            .unwrap()
            .permutation(&a, Mode::Symmetric)
            .unwrap();
        assert_eq!(x, y, "{name} is not deterministic");
    }
    // LSH depends on its seed (and only on it).
    let x = by_name("lsh", 1)
        .unwrap()
        .permutation(&a, Mode::RowOnly)
        .unwrap();
    let y = by_name("lsh", 2)
        .unwrap()
        .permutation(&a, Mode::RowOnly)
        .unwrap();
    assert_ne!(x, y);
}

#[test]
fn hidden_block_structure_is_recovered() {
    let a = hidden_blocks(128, 16, 0.5, 500, 5);
    let before = mean_nnz_tc(&a, 8, 8);
    for (name, factor) in [("affinity", 2.5), ("rabbit", 2.2), ("lsh", 2.0)] {
        for mode in [Mode::Symmetric, Mode::RowOnly] {
            let r = by_name(name, 1).unwrap().reorder(&a, mode).unwrap();
            let after = mean_nnz_tc(&apply(&r.perm, &a, mode).unwrap(), 8, 8);
            assert!((after - r.report.mean_nnz_tc_after).abs() < 1e-9);
            assert!(
                after >= factor * before,
                "{name} {mode:?}: MeanNNZTC {before:.2} -> {after:.2}, wanted ×{factor}"
            );
        }
    }
}

#[test]
fn rectangular_row_mode_improves() {
    // 512 rows in 32 hidden groups, each group using its own 24 of 768 columns, rows shuffled.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut rows: Vec<u32> = (0..512).collect();
    rows.shuffle(&mut rng);
    let mut t = Vec::new();
    for (i, &r) in rows.iter().enumerate() {
        let g = (i / 16) as u32;
        for c in 0..24 {
            if rng.random_bool(0.5) {
                t.push((r, g * 24 + c, 1.0));
            }
        }
    }
    let a = csr_from_triplets(512, 768, &t).unwrap();
    let before = mean_nnz_tc(&a, 8, 8);
    for name in ["affinity", "rabbit", "lsh"] {
        let r = by_name(name, 1)
            .unwrap()
            .reorder(&a, Mode::RowOnly)
            .unwrap();
        assert!(
            r.report.mean_nnz_tc_after >= 2.0 * before,
            "{name}: {before:.2} -> {:?}",
            r.report
        );
    }
}

#[test]
fn spmm_round_trip_in_both_modes() {
    let a = hidden_blocks(8, 16, 0.3, 50, 8);
    let (n, nb) = (a.rows(), 5);
    let b: Vec<f32> = (0..n * nb)
        .map(|i| ((i * 7919) % 13) as f32 - 6.0)
        .collect();
    let want = spmm_f64(&a, &b, nb, nb, false);
    let p = by_name("affinity", 0)
        .unwrap()
        .permutation(&a, Mode::Symmetric)
        .unwrap();
    // Pᵀ applied to the product of a permuted A with `b` gives A·B again.
    let unpermuted_product_is_ab = |pa: &Csr, b: &[f32]| {
        let c: Vec<f32> = spmm_f64(pa, b, nb, nb, false)
            .iter()
            .map(|&x| x as f32)
            .collect();
        let c = p.unapply_dense_rows(&c, n, nb).unwrap();
        c.iter()
            .zip(&want)
            .all(|(&x, &y)| (x as f64 - y).abs() < 1e-9)
    };
    // Symmetric: C = Pᵀ (P A Pᵀ)(P B).
    let bp = p.apply_dense_rows(&b, n, nb).unwrap();
    assert!(unpermuted_product_is_ab(
        &p.apply_symmetric(&a).unwrap(),
        &bp
    ));
    // Row-only: C = Pᵀ (P A) B.
    assert!(unpermuted_product_is_ab(&p.apply_rows(&a).unwrap(), &b));
    // And apply_cols: A Pᵀ (P B) = A B.
    let ac = p.apply_cols(&a).unwrap();
    let cc = spmm_f64(&ac, &bp, nb, nb, false);
    assert!(cc.iter().zip(&want).all(|(&x, &y)| (x - y).abs() < 1e-9));
}

#[test]
fn errors_are_typed() {
    let a = csr_from_triplets(3, 4, &[(0, 1, 1.0)]).unwrap();
    assert!(by_name("nope", 0).is_err());
    assert!(
        by_name("rabbit", 0)
            .unwrap()
            .reorder(&a, Mode::Symmetric)
            .is_err()
    );
    let p = Permutation::identity(2);
    assert!(p.apply_rows(&a).is_err());
    assert!(p.apply_dense_rows(&[0.0; 3], 2, 2).is_err());
}

/// `method`'s permutation computed on a pool of `threads` rayon threads.
fn perm_on_threads(name: &str, a: &Csr, mode: Mode, threads: usize) -> Permutation {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(|| by_name(name, 5).unwrap().permutation(a, mode).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn same_permutation_on_any_thread_count(a in random_graph(), r in random_rect()) {
        for name in METHODS {
            let one = perm_on_threads(name, &a, Mode::Symmetric, 1);
            assert_bijection(&one, a.rows());
            for t in [2, 3, 8] {
                prop_assert_eq!(&one, &perm_on_threads(name, &a, Mode::Symmetric, t), "{} at {} threads", name, t);
            }
            let one = perm_on_threads(name, &r, Mode::RowOnly, 1);
            assert_bijection(&one, r.rows());
            prop_assert_eq!(&one, &perm_on_threads(name, &r, Mode::RowOnly, 4), "{} rectangular", name);
        }
    }
}

#[test]
fn same_permutation_on_any_thread_count_across_many_batches() {
    // 12,800 vertices: several aggregation batches, hundreds of communities walked in parallel.
    let a = hidden_blocks(800, 16, 0.4, 6000, 21);
    for name in ["affinity", "rabbit"] {
        let one = perm_on_threads(name, &a, Mode::Symmetric, 1);
        assert_bijection(&one, a.rows());
        for t in [2, 5, 16] {
            assert_eq!(
                one,
                perm_on_threads(name, &a, Mode::Symmetric, t),
                "{name} at {t} threads"
            );
        }
        let rows = perm_on_threads(name, &a, Mode::RowOnly, 1);
        assert_eq!(rows, perm_on_threads(name, &a, Mode::RowOnly, 7));
    }
}
