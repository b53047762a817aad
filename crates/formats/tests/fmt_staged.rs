//! Window-staged CSR: round trips, the window invariants, the cap, the refused row, the CPU
//! product against the f64 reference, a snapshot of a small encoding, and every shared real
//! matrix at the staged kernel's two default cuts.

mod common;

use proptest::prelude::*;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::layout::{FormatError, Layout};
use tcsparse_formats::reference::{max_scaled_error, spmm_f64};
use tcsparse_formats::staged::{MAX_SLOT_CAP, StagedCsr, StagedSpec};

/// Pattern and values identical bit for bit.
fn assert_same(a: &Csr, b: &Csr) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.indptr().raw_storage(), b.indptr().raw_storage());
    assert_eq!(a.indices(), b.indices());
    let bits = |m: &Csr| m.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(a), bits(b));
}

fn value() -> BoxedStrategy<f32> {
    prop_oneof![Just(0.0f32), Just(-0.0f32), -4.0f32..4.0, Just(f32::NAN)].boxed()
}

/// Random matrices up to 60×60 (0 included), explicit zeros, NaN values.
fn matrix() -> impl Strategy<Value = Csr> {
    matrix_of(value())
}

fn matrix_of(value: impl Strategy<Value = f32> + Clone + 'static) -> impl Strategy<Value = Csr> {
    (0usize..61, 0usize..61)
        .prop_flat_map(move |(r, c)| {
            let n = if r == 0 || c == 0 { 0 } else { r * c / 3 + 1 };
            (
                Just(r),
                Just(c),
                proptest::collection::vec(
                    (0..r.max(1) as u32, 0..c.max(1) as u32, value.clone()),
                    0..=n,
                ),
            )
        })
        .prop_map(|(r, c, mut t)| {
            if r == 0 || c == 0 {
                t.clear();
            }
            csr_from_triplets(r, c, &t).unwrap()
        })
}

/// Every invariant a kernel relies on, checked from the outside (not through `validate`).
fn check_windows(a: &Csr, s: &StagedCsr, spec: StagedSpec) {
    let wr = s.window_rows();
    assert_eq!(wr.first(), Some(&0));
    assert_eq!(*wr.last().unwrap() as usize, a.rows());
    assert!(
        wr.windows(2).all(|w| w[0] < w[1]),
        "windows cover rows in order"
    );
    let uo = s.unique_offsets();
    assert_eq!(uo.len(), wr.len());
    assert_eq!(s.indptr(), a.row_offsets());
    for w in 0..s.windows() {
        let rows = (wr[w + 1] - wr[w]) as usize;
        assert!(rows >= 1 && rows <= spec.max_window_rows as usize);
        let u = &s.unique_cols()[uo[w] as usize..uo[w + 1] as usize];
        assert!(u.len() <= spec.slot_cap as usize, "cap honoured");
        assert!(u.windows(2).all(|p| p[0] < p[1]), "sorted, duplicate-free");
        // The list is exactly the union of the window's columns.
        let (ps, pe) = (
            a.row_offsets()[wr[w] as usize] as usize,
            a.row_offsets()[wr[w + 1] as usize] as usize,
        );
        let mut union: Vec<u32> = a.indices()[ps..pe].to_vec();
        union.sort_unstable();
        union.dedup();
        assert_eq!(u, union.as_slice());
        for p in ps..pe {
            let k = s.slots()[p] as usize;
            assert!(k < u.len(), "slot below the window's unique count");
            assert_eq!(u[k], a.indices()[p]);
        }
        // Greedy: the next row would not have fitted (too many rows or columns).
        if w + 1 < s.windows() {
            let next = wr[w + 1] as usize;
            let (ns, ne) = (
                a.row_offsets()[next] as usize,
                a.row_offsets()[next + 1] as usize,
            );
            let mut grown = union.clone();
            grown.extend_from_slice(&a.indices()[ns..ne]);
            grown.sort_unstable();
            grown.dedup();
            assert!(
                rows == spec.max_window_rows as usize || grown.len() > spec.slot_cap as usize,
                "window {w} closed early"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trips_and_keeps_the_window_invariants(
        a in matrix(),
        max_window_rows in 1u32..12,
        extra_cap in 0u32..40,
    ) {
        let spec = StagedSpec { max_window_rows, slot_cap: (a.longest_row() as u32).max(1) + extra_cap };
        let s = StagedCsr::build(&a, &spec).unwrap();
        s.validate().unwrap();
        check_windows(&a, &s, spec);
        assert_same(&s.to_csr(), &a);
        prop_assert_eq!(s.staged_rows(), s.unique_cols().len());
        prop_assert!(s.max_window_unique() <= spec.slot_cap as usize);
    }

    #[test]
    fn cpu_product_matches_the_f64_reference(
        a in matrix_of(-4.0f32..4.0),
        n in 1usize..9,
        rows in 1u32..6,
    ) {
        let spec = StagedSpec { max_window_rows: rows, slot_cap: (a.longest_row() as u32).max(1) + 3 };
        let s = StagedCsr::build(&a, &spec).unwrap();
        let b: Vec<f32> = (0..a.cols() * n).map(|i| ((i * 7 % 13) as f32) - 6.0).collect();
        let got = s.spmm_cpu(&b, n, n).unwrap();
        let want = spmm_f64(&a, &b, n, n, false);
        let scale = spmm_f64(&a, &b, n, n, true);
        // f32 sums of at most 60 products: within 60 units of 2^-24 of |A|·|B|.
        let err = max_scaled_error(&got, &want, &scale);
        prop_assert!(err <= 60.0 * f64::from(f32::EPSILON) / 2.0, "{err}");
    }

    #[test]
    fn a_row_over_the_cap_is_refused(a in matrix()) {
        let longest = a.longest_row() as u32;
        prop_assume!(longest >= 2);
        let spec = StagedSpec { max_window_rows: 8, slot_cap: longest - 1 };
        match StagedCsr::build(&a, &spec) {
            Err(FormatError::RowOverCap { columns, cap, row }) => {
                prop_assert_eq!(columns as u32, longest);
                prop_assert_eq!(cap as u32, longest - 1);
                let o = a.row_offsets();
                prop_assert_eq!(o[row + 1] - o[row], longest);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }
}

#[test]
fn a_row_at_the_cap_is_staged_alone() {
    // Row 1 has exactly `cap` columns: a window of its own, between rows 0 and 2.
    let cap = 6u32;
    let mut t: Vec<(u32, u32, f32)> = (0..cap).map(|c| (1, c * 2, 1.0 + c as f32)).collect();
    t.push((0, 1, 2.0));
    t.push((2, 3, 3.0));
    let a = csr_from_triplets(3, 16, &t).unwrap();
    let spec = StagedSpec {
        max_window_rows: 4,
        slot_cap: cap,
    };
    let s = StagedCsr::build(&a, &spec).unwrap();
    assert_eq!(s.window_rows(), &[0, 1, 2, 3]);
    assert_eq!(s.max_window_unique(), cap as usize);
    assert_same(&s.to_csr(), &a);
}

#[test]
fn empty_matrices_and_empty_rows() {
    let spec = StagedSpec {
        max_window_rows: 4,
        slot_cap: 8,
    };
    let none = csr_from_triplets(0, 5, &[]).unwrap();
    let s = StagedCsr::build(&none, &spec).unwrap();
    assert_eq!((s.windows(), s.window_rows()), (0, &[0u32][..]));
    s.validate().unwrap();
    let blank = csr_from_triplets(10, 5, &[]).unwrap();
    let s = StagedCsr::build(&blank, &spec).unwrap();
    assert_eq!(s.window_rows(), &[0, 4, 8, 10]);
    assert_eq!(s.staged_rows(), 0);
    assert_same(&s.to_csr(), &blank);
}

#[test]
fn specs_out_of_range_are_refused() {
    let a = csr_from_triplets(2, 2, &[(0, 0, 1.0)]).unwrap();
    for spec in [
        StagedSpec {
            max_window_rows: 0,
            slot_cap: 8,
        },
        StagedSpec {
            max_window_rows: 4,
            slot_cap: 0,
        },
        StagedSpec {
            max_window_rows: 4,
            slot_cap: MAX_SLOT_CAP + 1,
        },
    ] {
        assert!(matches!(
            StagedCsr::build(&a, &spec),
            Err(FormatError::BadArgument(_))
        ));
    }
}

#[test]
fn few_nonzeros_in_a_huge_column_range() {
    // 2^31 columns, 3 nonzeros: the stamps cover the columns that occur, not the range.
    let cols = 1usize << 31;
    let a = csr_from_triplets(
        3,
        cols,
        &[(0, 5, 1.0), (1, (cols - 1) as u32, 2.0), (2, 5, 3.0)],
    )
    .unwrap();
    let s = StagedCsr::build(
        &a,
        &StagedSpec {
            max_window_rows: 2,
            slot_cap: 2,
        },
    )
    .unwrap();
    assert_eq!(s.window_rows(), &[0, 2, 3]);
    assert_eq!(s.unique_cols(), &[5, (cols - 1) as u32, 5]);
    assert_same(&s.to_csr(), &a);
}

/// Every shared matrix at the staged kernel's default cuts (128 rows; 768 slots for 32-column
/// slices, 384 for 64): built, checked window by window and converted back bit for bit, or
/// refused for its first row longer than the cap.
#[test]
fn every_shared_matrix_round_trips_or_is_refused_for_its_longest_row() {
    common::for_each_shared_matrix(|name, a| {
        for slot_cap in [768, 384] {
            let spec = StagedSpec {
                max_window_rows: 128,
                slot_cap,
            };
            match StagedCsr::build(a, &spec) {
                Ok(s) => {
                    assert_eq!(s.validate(), Ok(()), "{name}");
                    check_windows(a, &s, spec);
                    assert_same(&s.to_csr(), a);
                    eprintln!(
                        "{name} cap {slot_cap}: {} windows, nnz/staged rows {:.2}",
                        s.windows(),
                        a.nnz() as f64 / s.staged_rows().max(1) as f64
                    );
                }
                Err(FormatError::RowOverCap { row, columns, cap }) => {
                    // The first row over the cap, named with its length.
                    let o = a.row_offsets();
                    let len = |r: usize| (o[r + 1] - o[r]) as usize;
                    assert_eq!((len(row), cap), (columns, slot_cap as usize), "{name}");
                    assert!(columns > cap, "{name}");
                    assert!((0..row).all(|r| len(r) <= cap), "{name}");
                }
                Err(e) => panic!("{name}: {e}"),
            }
        }
    });
}
