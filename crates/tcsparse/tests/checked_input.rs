//! `prepare` takes only the checked `Csr` (issue 15 item 2): a matrix stored column-wise or sliced
//! from a larger one goes through `Csr::try_from` first and then multiplies as the matrix it is.

use tcsparse::formats::Csr;
use tcsparse::formats::sprs::CsMatI;
use tcsparse::{Engine, PrepareOptions};

fn product(a: &Csr, b: &[f32]) -> Vec<f32> {
    let engine = Engine::cpu("test");
    let mut p = engine
        .prepare_spmm(a, &PrepareOptions::builder().n(1).build())
        .unwrap();
    let mut c = vec![0f32; a.rows()];
    p.spmm(1.0, b, 0.0, &mut c).unwrap();
    c
}

#[test]
fn csc_probe_gives_201_30() {
    // A = [[1, 0, 2], [0, 3, 0]] stored as CSC.
    let csc: CsMatI<f32, u32> =
        CsMatI::new_csc((2, 3), vec![0, 1, 2, 3], vec![0, 1, 0], vec![1.0, 3.0, 2.0]);
    let a = Csr::try_from(csc).unwrap();
    assert_eq!(product(&a, &[1.0, 10.0, 100.0]), vec![201.0, 30.0]);
}

#[test]
fn sliced_rows_with_offset_indptr_prepare_and_multiply() {
    let full: CsMatI<f32, u32> = CsMatI::new(
        (4, 3),
        vec![0, 2, 3, 5, 6],
        vec![0, 2, 1, 0, 2, 1],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    let a = Csr::try_from(full.slice_outer(1..3).to_owned()).unwrap();
    assert_eq!(product(&a, &[1.0, 10.0, 100.0]), vec![30.0, 504.0]);
}
