//! `Csr` is a checked type (issue 15 item 2): a matrix stored column-wise, an indptr that does not
//! start at 0, f64 values and usize indices all convert to the same CSR, or give a typed error.

use sprs::{CsMatI, TriMatI};
use tcsparse_formats::csr::{Csr, CsrError, csr_from_parts};
use tcsparse_formats::reference::spmm_f64;

/// A = [[1, 0, 2], [0, 3, 0]] stored column by column.
fn probe_csc() -> CsMatI<f32, u32> {
    CsMatI::new_csc((2, 3), vec![0, 1, 2, 3], vec![0, 1, 0], vec![1.0, 3.0, 2.0])
}

#[test]
fn csc_probe_multiplies_as_the_matrix_it_is() {
    let a = Csr::try_from(probe_csc()).unwrap();
    assert!(a.is_csr());
    assert_eq!(a.row_offsets(), &[0, 2, 3]);
    assert_eq!(a.indices(), &[0, 2, 1]);
    assert_eq!(a.data(), &[1.0, 2.0, 3.0]);
    let y = spmm_f64(&a, &[1.0, 10.0, 100.0], 1, 1, false);
    assert_eq!(y, vec![201.0, 30.0]);
}

#[test]
fn csc_with_f64_values_and_usize_indices_converts() {
    let m: CsMatI<f64, usize> =
        CsMatI::new_csc((2, 3), vec![0, 1, 2, 3], vec![0, 1, 0], vec![1.0, 3.0, 2.0]);
    let a = Csr::try_from(m).unwrap();
    assert_eq!(a, Csr::try_from(probe_csc()).unwrap());
}

/// The rows 1..3 of a 4×3 matrix, as `slice_outer(..).to_owned()` gives them: an indptr starting
/// at the first kept entry, not at 0.
fn sliced() -> CsMatI<f32, u32> {
    let full: CsMatI<f32, u32> = CsMatI::new(
        (4, 3),
        vec![0, 2, 3, 5, 6],
        vec![0, 2, 1, 0, 2, 1],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    let s = full.slice_outer(1..3).to_owned();
    assert_ne!(
        s.indptr().raw_storage()[0],
        0,
        "the probe must have an offset indptr"
    );
    s
}

#[test]
fn offset_indptr_is_normalised() {
    let a = Csr::try_from(sliced()).unwrap();
    assert_eq!(a.shape(), (2, 3));
    assert_eq!(a.row_offsets(), &[0, 1, 3]);
    assert_eq!(a.indices(), &[1, 0, 2]);
    assert_eq!(a.data(), &[3.0, 4.0, 5.0]);
    // Everything downstream indexes through row_offsets: the reference product, stats, layouts.
    assert_eq!(
        spmm_f64(&a, &[1.0, 10.0, 100.0], 1, 1, false),
        vec![30.0, 504.0]
    );
    let _ = tcsparse_formats::stats::MatrixStats::compute(&a);
    let b = tcsparse_formats::bittcf::BitTcf::from_csr(&a).unwrap();
    assert_eq!(b.to_csr(), a);
}

#[test]
fn offset_indptr_from_raw_parts_is_normalised() {
    let (ptr, ind, dat) = sliced().into_raw_storage();
    let a = csr_from_parts(2, 3, ptr, ind, dat).unwrap();
    assert_eq!(a.row_offsets(), &[0, 1, 3]);
    // A decreasing indptr stays an error after rebasing.
    let e = csr_from_parts(2, 3, vec![2, 1, 3], vec![0], vec![1.0]).unwrap_err();
    assert!(matches!(e, CsrError::Structure(_)), "{e:?}");
}

#[test]
fn csc_slices_convert_too() {
    let t = probe_csc();
    let s = t.slice_outer(1..3).to_owned(); // columns 1 and 2 of A: [[0, 2], [3, 0]]
    let a = Csr::try_from(s).unwrap();
    assert_eq!(a.shape(), (2, 2));
    assert_eq!(spmm_f64(&a, &[10.0, 100.0], 1, 1, false), vec![200.0, 30.0]);
}

#[test]
fn narrowing_refuses_what_does_not_fit() {
    let big: CsMatI<f64, usize> = CsMatI::new((1, 2), vec![0, 2], vec![0, 1], vec![1.0, 1e300]);
    assert_eq!(
        Csr::try_from(big).unwrap_err(),
        CsrError::ValueOutOfRange {
            position: 1,
            value: 1e300
        }
    );
    // NaN and ±inf are values f32 holds: they pass, and are counted.
    let odd: CsMatI<f64, usize> = CsMatI::new(
        (1, 2),
        vec![0, 2],
        vec![0, 1],
        vec![f64::NAN, f64::NEG_INFINITY],
    );
    let a = Csr::try_from(odd).unwrap();
    assert_eq!(a.non_finite(), 2);
    let wide: CsMatI<f32, usize> = CsMatI::new((1, 5_000_000_000), vec![0, 0], vec![], vec![]);
    assert!(matches!(
        Csr::try_from(wide).unwrap_err(),
        CsrError::TooLarge { what: "cols", .. }
    ));
}

#[test]
fn triplet_matrices_from_sprs_convert() {
    let mut t = TriMatI::<f64, i64>::new((3, 3));
    t.add_triplet(2, 0, 1.5);
    t.add_triplet(0, 1, -2.0);
    let a = Csr::try_from(t.to_csc::<i64>()).unwrap();
    assert_eq!(a.row_offsets(), &[0, 1, 1, 2]);
    assert_eq!(a.indices(), &[1, 0]);
    assert_eq!(a.data(), &[-2.0, 1.5]);
}
