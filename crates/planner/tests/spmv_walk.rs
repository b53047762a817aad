//! The bitBSR SpMV kernels' CPU walk (`tcsparse_formats::bitbsr_device::DeviceBitBsr::spmv_cpu`)
//! over the planner's work lists ([`spmv_work`]) against the f64 reference, in every tile storage,
//! every chunk budget and 1–8 right-hand sides.

#[path = "../../formats/tests/support/spmv_check.rs"]
mod spmv_check;

use half::f16;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bitbsr_device::{
    DeviceBitBsr, TileStorage, TileValues, f16_scale, f16_unfit_tile_row,
};
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::layout::FormatError;
use tcsparse_planner::work::spmv::spmv_work;

use spmv_check::{check, operands};

fn random_csr(
    rng: &mut ChaCha8Rng,
    rows: usize,
    cols: usize,
    nnz: usize,
    big: bool,
) -> tcsparse_formats::Csr {
    let t: Vec<(u32, u32, f32)> = (0..nnz)
        .map(|_| {
            let v: f32 = rng.random_range(-1.0..1.0);
            (
                rng.random_range(0..rows as u32),
                rng.random_range(0..cols as u32),
                if big { v * 3.0e10 } else { v },
            )
        })
        .collect();
    csr_from_triplets(rows, cols, &t).unwrap()
}

/// The CPU walk against f64 ([`check`]: |y − y64| ≤ tol · (|α|·|A|·|X| + |β|·|y0|) element-wise).
fn check_walk(
    a: &tcsparse_formats::Csr,
    storage: TileStorage,
    n: usize,
    chunk: u32,
    beta: f32,
    tol: f64,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(a.nnz() as u64 + n as u64);
    let b = BitBsr::from_csr(a).unwrap();
    let d = DeviceBitBsr::encode(&b, storage).unwrap();
    let w = spmv_work(d.tile_row_ptr(), chunk);
    let (x, y0) = operands(&mut rng, a, n, beta);
    let mut y = y0.clone();
    let alpha = 1.5f32;
    d.spmv_cpu(&w, alpha, &x, beta, &mut y, n).unwrap();
    let what = format!("{storage:?} n {n} chunk {chunk}");
    check(&what, a, &x, n, alpha, beta, &y0, &y, tol);
}

#[test]
fn cpu_walk_matches_f64() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    // M, K not multiples of 8; rectangular; empty tile-rows (rows ≥ 40 of 61 are empty).
    let mut t: Vec<(u32, u32, f32)> = Vec::new();
    for _ in 0..900 {
        t.push((
            rng.random_range(0..40),
            rng.random_range(0..53),
            rng.random_range(-1.0..1.0),
        ));
    }
    // One tile-row 1000× longer than the rest.
    for c in 0..4000u32 {
        t.push((3, c * 7 % 9000 + 53, 0.5));
    }
    let long = csr_from_triplets(61, 9053, &t).unwrap();
    let square = random_csr(&mut rng, 203, 203, 4000, false);
    let wide = random_csr(&mut rng, 37, 1001, 2000, false);
    for a in [&long, &square, &wide] {
        for (storage, tol) in [
            (TileStorage::F16, 2f64.powi(-9)),
            (TileStorage::Tf32, 2f64.powi(-9)),
            (TileStorage::F32, 2f64.powi(-17)),
        ] {
            for n in [1, 3, 8] {
                for chunk in [1, 5, 32] {
                    check_walk(a, storage, n, chunk, 0.0, tol);
                }
                check_walk(a, storage, n, 32, -0.75, tol);
            }
        }
    }
}

#[test]
fn f16_scales_huge_and_tiny_rows() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let big = random_csr(&mut rng, 64, 64, 700, true);
    check_walk(&big, TileStorage::F16, 1, 32, 0.0, 2f64.powi(-9));
    let d = DeviceBitBsr::encode(&BitBsr::from_csr(&big).unwrap(), TileStorage::F16).unwrap();
    let TileValues::F16 { bits, row_scale } = d.values() else {
        panic!("f16 storage")
    };
    assert!(bits.iter().all(|&b| f16::from_bits(b).is_finite()));
    assert!(
        row_scale
            .iter()
            .all(|&s| s > 1.0 && s.log2().fract() == 0.0)
    );
    assert_eq!(f16_scale(0.0), 1.0);
    assert_eq!(f16_scale(f32::NAN), 1.0);
    assert_eq!(f16_scale(1.0), 2f32.powi(-14));
    assert_eq!(f16_scale(65504.0 * 4.0), 8.0);
}

/// The GPU test `spmv_f16_never_overflows` on the CPU walk: one magnitude class (3e10, 1e-9, 1)
/// per tile-row, X with 1e6 spikes, within 2⁻⁹·|A|·|X|.
#[test]
fn f16_walk_meets_the_bound_per_tile_row_classes() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let t: Vec<(u32, u32, f32)> = (0..5000)
        .map(|i| {
            let r = rng.random_range(0..200u32);
            let v: f32 = rng.random_range(-1.0..1.0);
            let s = [3.0e10, 1.0e-9, 1.0][((r / 8) % 3) as usize];
            (r, (i * 37 % 300) as u32, v * s)
        })
        .collect();
    let a = csr_from_triplets(200, 300, &t).unwrap();
    let d = DeviceBitBsr::encode(&BitBsr::from_csr(&a).unwrap(), TileStorage::F16).unwrap();
    let w = spmv_work(d.tile_row_ptr(), 32);
    for n in [1, 8] {
        let x: Vec<f32> = (0..300 * n)
            .map(|i| rng.random_range(-1.0f32..1.0) * if i % 5 == 0 { 1.0e6 } else { 1.0 })
            .collect();
        let y0 = vec![f32::NAN; 200 * n];
        let mut y = y0.clone();
        d.spmv_cpu(&w, 1.0, &x, 0.0, &mut y, n).unwrap();
        check(
            &format!("n {n}"),
            &a,
            &x,
            n,
            1.0,
            0.0,
            &y0,
            &y,
            2f64.powi(-9),
        );
    }
}

/// One 8-row tile-row mixing magnitudes 1e12 apart: one f16 scale would flush the small rows
/// to zero, so f16 tiles are refused and TF32 tiles hold every row to the bound.
#[test]
fn a_tile_row_beyond_one_f16_scale_is_refused_and_tf32_holds_it() {
    let mut t: Vec<(u32, u32, f32)> = Vec::new();
    for r in 0..24u32 {
        for c in 0..5u32 {
            // Rows 8..16: row 8 at 1e6, rows 9..16 at 1e-6 (same tile-row).
            let mag = match r {
                8 => 1.0e6,
                9..16 => 1.0e-6,
                _ => 1.0,
            };
            t.push((r, (r * 3 + c * 7) % 40, mag * (1.0 + c as f32 / 8.0)));
        }
    }
    let a = csr_from_triplets(24, 40, &t).unwrap();
    let b = BitBsr::from_csr(&a).unwrap();
    let u = f16_unfit_tile_row(&b).expect("tile-row 1 does not fit");
    assert_eq!(u.tile_row, 1);
    assert!(u.max_abs >= 1.0e6 && u.min_abs <= 2.0e-6, "{u:?}");
    let e = DeviceBitBsr::encode(&b, TileStorage::F16).unwrap_err();
    assert!(matches!(e, FormatError::BadArgument(_)), "{e}");
    for n in [1, 4] {
        check_walk(&a, TileStorage::Tf32, n, 4, 0.0, 2f64.powi(-9));
    }
    // Within one scale's reach (2¹⁶ below the scale, about 2⁻³⁰ of the maximum) f16 still fits.
    let mut t2 = t.clone();
    for e in t2.iter_mut().filter(|e| (9..16).contains(&e.0)) {
        e.2 *= 1.0e4;
    }
    let a2 = csr_from_triplets(24, 40, &t2).unwrap();
    assert_eq!(f16_unfit_tile_row(&BitBsr::from_csr(&a2).unwrap()), None);
    check_walk(&a2, TileStorage::F16, 1, 4, 0.0, 2f64.powi(-9));
    // Magnitudes 1e12 apart inside each row (as in stiffness matrices such as bcsstk17): every
    // row's largest term sets its accuracy, so f16 tiles hold the tile-row within the bound.
    let mut t3 = t.clone();
    for e in t3.iter_mut().filter(|e| (8..16).contains(&e.0)) {
        e.2 = if e.2 > 0.0 && (e.1 % 2 == 0) {
            1.0e6
        } else {
            1.0e-6
        };
    }
    for r in 8..16u32 {
        t3.push((r, 39, 1.0e6));
    }
    let a3 = csr_from_triplets(24, 40, &t3).unwrap();
    assert_eq!(f16_unfit_tile_row(&BitBsr::from_csr(&a3).unwrap()), None);
    check_walk(&a3, TileStorage::F16, 1, 4, 0.0, 2f64.powi(-9));
}

#[test]
fn walk_refuses_bad_operands() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let a = random_csr(&mut rng, 20, 20, 50, false);
    let d = DeviceBitBsr::encode(&BitBsr::from_csr(&a).unwrap(), TileStorage::F16).unwrap();
    let w = spmv_work(d.tile_row_ptr(), 4);
    let mut y = vec![0f32; 20];
    assert!(d.spmv_cpu(&w, 1.0, &[0.0; 19], 0.0, &mut y, 1).is_err());
    assert!(
        d.spmv_cpu(&w, 1.0, &[0.0; 20 * 9], 0.0, &mut vec![0.0; 180], 9)
            .is_err()
    );
    let other = spmv_work(&[0, 5], 4);
    assert!(d.spmv_cpu(&other, 1.0, &[0.0; 20], 0.0, &mut y, 1).is_err());
}
