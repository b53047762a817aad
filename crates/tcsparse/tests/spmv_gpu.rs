//! GPU tests of the facade's SpMV room (ignored by default; `--include-ignored` on a GPU machine).
//! Without a GPU they FAIL (`Gpu::require`), never pass vacuously.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse::Engine;
use tcsparse::formats::bitbsr_device::TileStorage;
use tcsparse::formats::csr::csr_from_triplets;
use tcsparse::formats::reference::spmm_f64;
use tcsparse::gpu::Gpu;
use tcsparse::gpu::spmv::baseline::CusparseSpmvAlg;
use tcsparse::gpu::spmv::{MULTI_LAYOUTS, TC_LAYOUTS};
use tcsparse::{Precision, SpmvKernel, SpmvOptions};

/// Tuned preparation at every precision and 1/8 RHS: y within the precision's bound of f64 (β = 0
/// with NaN y, then β ≠ 0 through spmv_device), the kept product never slower than cuSPARSE's
/// tuning sample, F32 only ever cuSPARSE or the f32 CUDA-core walk; the CUDA-core walk is timed at
/// every precision and n (at n = 8 only its set-bit layouts, the ones that serve several
/// right-hand sides).
#[test]
#[ignore = "needs a CUDA GPU"]
fn tuned_spmv_matches_f64_and_never_loses_to_cusparse() {
    let gpu = Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let engine = Engine::with_gpu(gpu.clone());
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    // Dense-ish band (bitBSR's favourable case) with K not a multiple of 8.
    let mut t = Vec::new();
    for r in 0..3001u32 {
        for d in 0..40u32 {
            let c = r + d;
            if c < 3003 && rng.random_range(0..4) > 0 {
                t.push((r, c, rng.random_range(-1.0f32..1.0)));
            }
        }
    }
    let a = csr_from_triplets(3001, 3003, &t).expect("csr");
    for prec in [Precision::F16, Precision::Tf32, Precision::F32] {
        for n in [1, 8] {
            let opts = SpmvOptions::builder().precision(prec).n(n).build();
            let mut p = engine.prepare_spmv(&a, &opts).expect("prepare");
            // Every cuSPARSE algorithm for n is timed (none fails on this matrix), the default first.
            let cus_algs: Vec<CusparseSpmvAlg> = p
                .samples()
                .iter()
                .filter_map(|s| match s.kernel {
                    SpmvKernel::Cusparse { alg, n: sn } => {
                        assert_eq!(sn, n);
                        Some(alg)
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(cus_algs, CusparseSpmvAlg::candidates(n), "{prec:?} n {n}");
            let cus = p
                .samples()
                .iter()
                .filter(|s| matches!(s.kernel, SpmvKernel::Cusparse { .. }))
                .map(|s| s.ms)
                .fold(f64::INFINITY, f64::min);
            let best = p
                .samples()
                .iter()
                .map(|s| s.ms)
                .fold(f64::INFINITY, f64::min);
            assert!(best <= cus, "{prec:?} n {n}: kept {best} > cuSPARSE {cus}");
            assert!(
                p.samples()
                    .iter()
                    .any(|s| matches!(s.kernel, SpmvKernel::BitBsr { core: Some(_), .. })),
                "{prec:?} n {n}: CUDA-core walk timed"
            );
            // Our CSR walk is timed at n ≥ 2 (every precision: an f32 product), never at n = 1.
            assert_eq!(
                p.samples()
                    .iter()
                    .any(|s| matches!(s.kernel, SpmvKernel::Csr { .. })),
                n > 1,
                "{prec:?} n {n}: CSR walk timed"
            );
            if n > 1 {
                for s in p.samples() {
                    if let SpmvKernel::BitBsr { core: Some(l), .. } = &s.kernel {
                        assert!(
                            MULTI_LAYOUTS.contains(l),
                            "{prec:?} n {n}: only the set-bit walks, not {l}"
                        );
                    }
                }
            }
            if prec == Precision::F32 {
                // f32 products only: cuSPARSE, or the CUDA-core walk on f32 tiles.
                let ok = match p.kernel() {
                    SpmvKernel::Cusparse { .. } | SpmvKernel::Csr { .. } => true,
                    SpmvKernel::BitBsr { storage, core, .. } => {
                        *storage == TileStorage::F32
                            && core.is_some_and(|l| !TC_LAYOUTS.contains(&l))
                    }
                    _ => false,
                };
                assert!(ok, "F32 n {n}: {}", p.kernel());
                // The tensor-core walk (a TF32 product) is not even timed.
                for s in p.samples() {
                    if let SpmvKernel::BitBsr { core: Some(l), .. } = &s.kernel {
                        assert!(!TC_LAYOUTS.contains(l), "F32 n {n}: timed {l}");
                    }
                }
            }
            let x: Vec<f32> = (0..a.cols() * n)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let mut y = vec![f32::NAN; a.rows() * n];
            p.spmv(1.0, &x, 0.0, &mut y).expect("spmv");
            let want = spmm_f64(&a, &x, n, n, false);
            let scale = spmm_f64(&a, &x, n, n, true);
            for i in 0..y.len() {
                assert!(
                    (y[i] as f64 - want[i]).abs() <= prec.spmv_bound() * scale[i],
                    "{prec:?} n {n} ({}): y[{i}] = {} want {}",
                    p.kernel(),
                    y[i],
                    want[i]
                );
            }
            let y0: Vec<f32> = (0..a.rows() * n)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect();
            let dx = gpu.upload(&x).expect("x");
            let mut dy = gpu.upload(&y0).expect("y");
            p.spmv_device(2.0, &dx, 0.5, &mut dy).expect("spmv_device");
            let y = gpu.download(&dy).expect("y");
            for i in 0..y.len() {
                let w = 2.0 * want[i] + 0.5 * y0[i] as f64;
                let b = prec.spmv_bound() * (2.0 * scale[i] + 0.5 * y0[i].abs() as f64);
                assert!(
                    (y[i] as f64 - w).abs() <= b,
                    "{prec:?} n {n} device β: y[{i}]"
                );
            }
            println!(
                "{prec:?} n {n}: {} (cuSPARSE {:.2} µs, kept {:.2} µs)",
                p.kernel(),
                cus * 1e3,
                best * 1e3
            );
        }
    }
}

/// One 8-row tile mixing magnitudes 1e12 apart on the GPU: an F16 preparation (tuned and not)
/// keeps no f16 tiles, and every row, the small ones included, meets the F16 bound.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_spmv_never_flushes_a_tile_rows_small_rows() {
    let gpu = Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let engine = Engine::with_gpu(gpu);
    let mut t = Vec::new();
    for r in 0..2048u32 {
        for k in 0..6u32 {
            // Row 8·i of every tile-row at 1e6, the other seven at 1e-6.
            let mag = if r % 8 == 0 { 1.0e6 } else { 1.0e-6 };
            t.push((r, (r * 5 + k * 131) % 2048, mag * (1.0 + k as f32 / 8.0)));
        }
    }
    let a = csr_from_triplets(2048, 2048, &t).unwrap();
    let x: Vec<f32> = (0..2048).map(|i| 1.0 + (i % 5) as f32 / 4.0).collect();
    let want = spmm_f64(&a, &x, 1, 1, false);
    let scale = spmm_f64(&a, &x, 1, 1, true);
    for tune in [false, true] {
        let opts = SpmvOptions::builder()
            .precision(Precision::F16)
            .tune(tune)
            .build();
        let mut p = engine.prepare_spmv(&a, &opts).unwrap();
        if let SpmvKernel::BitBsr { storage, .. } = p.kernel() {
            assert_ne!(*storage, TileStorage::F16, "f16 tiles kept (tune {tune})");
        }
        let mut y = vec![f32::NAN; 2048];
        p.spmv(1.0, &x, 0.0, &mut y).unwrap();
        for i in 0..2048 {
            assert!(
                (y[i] as f64 - want[i]).abs() <= Precision::F16.spmv_bound() * scale[i],
                "tune {tune}, {:?}: row {i} = {} want {}",
                p.kernel(),
                y[i],
                want[i]
            );
        }
    }
}

/// `spmv_device` on views into larger buffers (X and y at offsets, the rest untouched) gives
/// the host product, tuned (any kernel) and untuned.
#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_device_takes_views_into_larger_buffers() {
    let gpu = Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let engine = Engine::with_gpu(gpu.clone());
    let mut t = Vec::new();
    for r in 0..700u32 {
        for k in 0..(r % 9) {
            t.push((r, (r * 7 + k * 61) % 650, 1.0 - (k as f32) / 8.0));
        }
    }
    let a = csr_from_triplets(700, 650, &t).unwrap();
    for (n, tune) in [(1, true), (3, false), (8, true)] {
        let opts = SpmvOptions::builder().n(n).tune(tune).build();
        let mut p = engine.prepare_spmv(&a, &opts).unwrap();
        let x: Vec<f32> = (0..650 * n).map(|i| (i % 17) as f32 / 8.0 - 1.0).collect();
        let mut want = vec![0f32; 700 * n];
        p.spmv(1.0, &x, 0.0, &mut want).unwrap();
        let (off_x, off_y) = (37, 101);
        let mut xb = vec![f32::NAN; off_x + x.len() + 5];
        xb[off_x..off_x + x.len()].copy_from_slice(&x);
        let dx = gpu.upload(&xb).unwrap();
        let mut dy = gpu.upload(&vec![-7f32; off_y + want.len() + 9]).unwrap();
        {
            let xv = dx.slice(off_x..off_x + x.len());
            let mut yv = dy.slice_mut(off_y..off_y + want.len());
            p.spmv_device(1.0, &xv, 0.0, &mut yv).unwrap();
        }
        let y = gpu.download(&dy).unwrap();
        assert!(
            y[..off_y]
                .iter()
                .chain(&y[off_y + want.len()..])
                .all(|&v| v == -7.0)
        );
        let bound = Precision::Tf32.spmv_bound();
        let scale = spmm_f64(&a, &x, n, n, true);
        for i in 0..want.len() {
            let d = (y[off_y + i] as f64 - want[i] as f64).abs();
            assert!(d <= 2.0 * bound * scale[i], "n {n} tune {tune}: y[{i}]");
        }
    }
}
