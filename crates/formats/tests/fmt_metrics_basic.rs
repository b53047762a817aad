//! Cheap block statistics on hand-built matrices.
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::metrics::{block_count, mean_nnz_per_block};

#[test]
fn block_count_on_hand_built_matrix() {
    // Window 0 (rows 0..8): columns {0, 3, 9, 20, 21, 22, 23, 24, 30} -> 9 unique -> 2 blocks.
    // Window 1 (rows 8..10): column {5} -> 1 block.
    let mut t = vec![
        (0, 0, 1.0),
        (0, 3, 1.0),
        (7, 9, 1.0),
        (7, 3, 1.0),
        (9, 5, 2.0),
    ];
    for c in 20..25 {
        t.push((2, c, 1.0));
    }
    t.push((5, 30, 0.0));
    let a = csr_from_triplets(10, 31, &t).unwrap();
    assert_eq!(block_count(&a, 8, 8), 3);
    assert_eq!(mean_nnz_per_block(&a, 8, 8), 11.0 / 3.0);
    // One window of 16 rows: 10 unique -> 2 blocks of 8.
    assert_eq!(block_count(&a, 16, 8), 2);
    // Single-row windows: per row ceil(len / 8).
    assert_eq!(block_count(&a, 1, 8), 5);
    assert_eq!(block_count(&a, 0, 8), 0);
}

#[test]
fn empty_matrix_has_no_blocks() {
    let a = csr_from_triplets(0, 0, &[]).unwrap();
    assert_eq!(block_count(&a, 8, 8), 0);
    assert_eq!(mean_nnz_per_block(&a, 8, 8), 0.0);
    let b = csr_from_triplets(5, 0, &[]).unwrap();
    assert_eq!(block_count(&b, 8, 8), 0);
}

mod planner_counts {
    use proptest::prelude::*;
    use tcsparse_formats::bittcf::BitTcf;
    use tcsparse_formats::csr::csr_from_triplets;
    use tcsparse_formats::generate::{rmat, uniform_random};
    use tcsparse_formats::metrics::{block_count, planner_block_counts};

    fn check(a: &tcsparse_formats::Csr) {
        let c = planner_block_counts(a);
        let t = BitTcf::from_csr(a).unwrap();
        assert_eq!(c.row_window_offset, t.row_window_offset());
        assert_eq!(c.blocks_8x8(), t.num_blocks());
        assert_eq!(c.blocks_16x4, block_count(a, 16, 4));
        assert_eq!(c.blocks_16x8, block_count(a, 16, 8));
    }

    #[test]
    fn one_pass_equals_the_bittcf_build_and_the_block_counts() {
        check(&csr_from_triplets(0, 0, &[]).unwrap());
        check(&csr_from_triplets(5, 3, &[]).unwrap());
        check(&csr_from_triplets(9, 40, &[(8, 39, 1.0), (0, 39, 2.0)]).unwrap());
        check(&rmat(12, 8, (0.57, 0.19, 0.19, 0.05), 1).unwrap());
        // Row counts that are not multiples of 8 or 16.
        for rows in [1, 7, 8, 9, 15, 16, 17, 1001] {
            check(&uniform_random(rows, 300, 6.0, rows as u64).unwrap());
            // Declared columns far beyond the nonzeros: counted by sorting, not by stamps.
            check(&uniform_random(rows, 100_000, 3.0, rows as u64).unwrap());
        }
    }

    proptest! {
        #[test]
        fn one_pass_equals_the_bittcf_build_on_random_patterns(
            rows in 1usize..70,
            cols in 1usize..90,
            wide in proptest::bool::ANY,
            cells in proptest::collection::vec((0usize..70, 0usize..90), 0..400),
        ) {
            // `wide` spreads the columns over 90 000 (the sorting path), else stamps count.
            let scale = if wide { 1000 } else { 1 };
            let cols = cols * scale;
            let mut rc: Vec<(u32, u32)> = cells
                .into_iter()
                .map(|(r, c)| ((r % rows) as u32, ((c * scale) % cols) as u32))
                .collect();
            rc.sort_unstable();
            rc.dedup();
            let t: Vec<(u32, u32, f32)> = rc.into_iter().map(|(r, c)| (r, c, 1.0)).collect();
            check(&csr_from_triplets(rows, cols, &t).unwrap());
        }
    }
}

#[test]
fn the_empty_bittcf_is_the_build_of_the_empty_matrix() {
    use tcsparse_formats::bittcf::BitTcf;
    let e = BitTcf::empty();
    assert_eq!(e.validate(), Ok(()));
    assert_eq!(
        e,
        BitTcf::from_csr(&csr_from_triplets(0, 0, &[]).unwrap()).unwrap()
    );
    assert_eq!(e.num_blocks(), 0);
}
