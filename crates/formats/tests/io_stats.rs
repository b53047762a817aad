//! Matrix statistics on hand-checked examples.

use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::stats::MatrixStats;

#[test]
fn hand_example() {
    // Row lengths 2, 0, 1, 5, 0 in a 5×8 matrix.
    let mut t = vec![(0, 0, 1.0), (0, 7, 2.0), (2, 2, 3.0)];
    t.extend((0..5).map(|c| (3, c * 2 - c / 4, 1.0)));
    let m = csr_from_triplets(5, 8, &t).unwrap();
    let s = MatrixStats::compute(&m);
    assert_eq!((s.rows, s.cols, s.nnz), (5, 8, 8));
    assert_eq!(s.avg_row_len, 1.6);
    assert_eq!((s.min_row_len, s.max_row_len, s.empty_rows), (0, 5, 2));
    assert_eq!(s.bandwidth, 7); // entry (0, 7)
    assert_eq!(s.density, 8.0 / 40.0);
    // Buckets: 0 → 2 rows, 1 → 1 row, 2-3 → 1 row, 4-7 → 1 row.
    assert_eq!(s.histogram, vec![2, 1, 1, 1]);
    insta::assert_snapshot!("io_stats_hand_example", s.to_string());
}

#[test]
fn bandwidth_counts_below_the_diagonal_too() {
    let m = csr_from_triplets(10, 3, &[(9, 0, 1.0), (1, 1, 1.0)]).unwrap();
    let s = MatrixStats::compute(&m);
    assert_eq!(s.bandwidth, 9);
    assert_eq!(s.histogram, vec![8, 2]);
}

#[test]
fn empty_shapes() {
    let s = MatrixStats::compute(&csr_from_triplets(0, 0, &[]).unwrap());
    assert_eq!(
        (s.rows, s.nnz, s.avg_row_len, s.density, s.min_row_len),
        (0, 0, 0.0, 0.0, 0)
    );
    assert!(s.histogram.is_empty());
    let s = MatrixStats::compute(&csr_from_triplets(4, 4, &[]).unwrap());
    assert_eq!((s.empty_rows, s.bandwidth, s.max_row_len), (4, 0, 0));
    assert_eq!(s.histogram, vec![4]);
}

#[test]
fn bucket_labels() {
    let labels: Vec<String> = (0..5).map(MatrixStats::bucket_label).collect();
    assert_eq!(labels, ["0", "1", "2-3", "4-7", "8-15"]);
}
