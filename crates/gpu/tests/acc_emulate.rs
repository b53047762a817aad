//! CPU tests of the Acc-SpMM launch path (no GPU needed): the lane-exact kernel model
//! (`acc_spmm::emulate`) against the f64 reference on every edge case the GPU tests also run, plus
//! validation of bad arrays and schedules. The same index expressions run on the GPU in
//! `acc_spmm_gpu.rs`.

mod acc_support;

use acc_support::*;
use tcsparse_formats::Csr;
use tcsparse_gpu::spmm::acc::{AccSpmmError, FlatSchedule, check_parts, emulate, flatten_schedule};
use tcsparse_planner::{AccSchedule, Eq4Model};

fn run_case(
    what: &str,
    a: &Csr,
    sched: &FlatSchedule,
    n: usize,
    alpha: f32,
    beta: f32,
    pad: usize,
) {
    let bt = OwnedBitTcf::from_csr(a);
    let parts = bt.parts();
    check_parts(&parts).expect("valid arrays");
    let (ldb, ldc) = (n + pad, n + 2 * pad);
    let b = dense(a.cols(), n, ldb, 7 + n as u64);
    let mut c0 = dense(a.rows(), n, ldc, 11 + n as u64);
    if beta == 0.0 {
        // NaN in C must not leak when β = 0.
        for r in 0..a.rows() {
            c0[r * ldc] = f32::NAN;
        }
    }
    let mut c = c0.clone();
    emulate(&parts, sched, alpha, &b, ldb, beta, &mut c, ldc, n);
    check_result(what, a, alpha, &b, ldb, beta, &c0, &c, ldc, n);
}

fn schedules(a: &Csr) -> Vec<(&'static str, FlatSchedule)> {
    let bt = OwnedBitTcf::from_csr(a);
    let cuts = Cuts {
        chop: 2,
        pack: 3,
        stream: 5,
    };
    let bal = AccSchedule::balanced(&bt.rwo, &Eq4Model::authors_code(), 32);
    acc_support::schedules(&bt.rwo, cuts, &bal)
}

#[test]
fn emulated_kernel_matches_reference_on_edge_cases() {
    let mut g = Gen::new(45, 37, 4, 1); // M, K not multiples of 8
    g.empty_windows = 2..3;
    g.trailing_empty = true;
    let cases = vec![
        ("ragged", g.build()),
        ("hubs", Gen::new(83, 300, 2, 2).with_hubs(2, 150).build()),
        ("banded", {
            let mut h = Gen::new(64, 64, 6, 3);
            h.banded = true;
            h.build()
        }),
        ("empty-matrix", Gen::new(19, 5, 0, 4).build()),
    ];
    for (name, a) in &cases {
        for (sname, s) in schedules(a) {
            for &n in &[8usize, 16, 24, 32, 40, 64, 96, 128, 384] {
                for &(alpha, beta) in &[(1.0f32, 0.0f32), (0.5, -1.5)] {
                    let what = format!("{name}/{sname}/n={n}/α={alpha}/β={beta}");
                    run_case(&what, a, &s, n, alpha, beta, 3);
                }
            }
        }
    }
}

#[test]
fn emulated_kernel_handles_wide_n() {
    let a = Gen::new(30, 20, 3, 9).build();
    let bt = OwnedBitTcf::from_csr(&a);
    let (work, split) = stream_schedule(&bt.rwo, 2);
    let s = flatten_schedule(&bt.rwo, work, &split).unwrap();
    for n in [512usize, 1024, 1000] {
        run_case(&format!("wide/n={n}"), &a, &s, n, 1.0, 0.25, 0);
    }
}

#[test]
fn bad_arrays_are_rejected() {
    let a = Gen::new(20, 20, 3, 5).build();
    let bt = OwnedBitTcf::from_csr(&a);
    let mut bad = OwnedBitTcf::from_csr(&a);
    bad.a2b[0] = 20; // column ≥ K
    assert!(matches!(
        check_parts(&bad.parts()),
        Err(AccSpmmError::InvalidFormat(_))
    ));
    let mut bad = OwnedBitTcf::from_csr(&a);
    bad.bits[0] ^= 1u64 << 63; // popcount no longer matches the stored values
    assert!(check_parts(&bad.parts()).is_err());
    let mut bad = OwnedBitTcf::from_csr(&a);
    bad.rwo.pop();
    assert!(check_parts(&bad.parts()).is_err());
    assert!(check_parts(&bt.parts()).is_ok());
}

#[test]
fn bad_schedules_are_rejected() {
    let mut g = Gen::new(40, 40, 4, 6);
    g.empty_windows = 1..2;
    let a = g.build();
    let bt = OwnedBitTcf::from_csr(&a);
    let rwo = &bt.rwo;
    let (work, split) = chopped_schedule(rwo, 1);
    assert!(flatten_schedule(rwo, work.clone(), &split).is_ok());
    // A block left out.
    let mut w2 = work.clone();
    w2.pop();
    assert!(flatten_schedule(rwo, w2, &split).is_err());
    // A split window not flagged split.
    let split0 = vec![0u8; split.len()];
    if split.contains(&1) {
        assert!(flatten_schedule(rwo, work.clone(), &split0).is_err());
    }
    // A block range outside its windows.
    let mut w3 = work.clone();
    w3[0][3] = *rwo.last().unwrap() as u64 + 1;
    assert!(flatten_schedule(rwo, w3, &split).is_err());
    // A window covered twice without the split flag (the empty window 1).
    let mut w4 = work.clone();
    w4.push([1, 2, rwo[1] as u64, rwo[1] as u64]);
    assert!(flatten_schedule(rwo, w4, &split).is_err());
    // An empty window in no range.
    let w5: Vec<_> = work.iter().copied().filter(|t| t[0] != 1).collect();
    assert!(flatten_schedule(rwo, w5, &split).is_err());
}
