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
