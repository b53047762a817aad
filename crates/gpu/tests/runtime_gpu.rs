//! GPU tests (ignored by default; run with `--include-ignored` on a GPU machine, e.g. through
//! `cargo xtask gpu-bundle`). Without a GPU they FAIL (they call `Gpu::require`), never pass vacuously.
//!
//! Every product is compared with the f64 CPU reference using element-wise bounds:
//! f32: |C − C_ref| ≤ c·2⁻²³·(|α|·(|A|·|B|)·len(row) + |β|·|C₀|), TF32: c·2⁻¹⁰·(|A|·|B|) (+ f32 terms).
//! B is drawn fresh for every check; with β = 0, C is poisoned with NaN first (must never be read).

mod data_support;

use data_support::{dense, for_each_dataset, generated_cases, random_csr};

use cudarc::driver::CudaSlice;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::generate::rmat;
use tcsparse_formats::reference::{max_scaled_error, spmm_f64};
use tcsparse_gpu::baselines::cublas::{Cublas, GemmPrecision};
use tcsparse_gpu::baselines::cusparse::{CusparseBsr, CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::spmm::csr::{CsrSpmm, DEFAULT_CHUNK_NNZ};
use tcsparse_gpu::spmv::baseline::CusparseSpmvGraphable;
use tcsparse_gpu::{Dense, DenseMut, DeviceProduct, Gpu, GpuStatus};

const F32_EPS: f64 = 1.0 / (1u64 << 23) as f64;
const TF32_EPS: f64 = 1.0 / 1024.0;
/// (rows, cols, average row length) of the generated matrices ([`generated_cases`]).
const SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 1),
    (37, 53, 5),
    (500, 300, 20),
    (2000, 4000, 3),
    (64, 5000, 200),
];

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

/// The C₀ of a product with `beta`: all NaN when β = 0 (it must never be read), else random.
fn c0_for(rng: &mut ChaCha8Rng, len: usize, beta: f32) -> Vec<f32> {
    if beta == 0.0 {
        vec![f32::NAN; len]
    } else {
        dense(rng, len)
    }
}

/// Checks `got ≈ α·A·B + β·C₀` with the f32 bound (c = 2, row-length scaled).
#[allow(clippy::too_many_arguments)]
fn check_spmm(
    what: &str,
    a: &Csr,
    b: &[f32],
    n: usize,
    alpha: f32,
    beta: f32,
    c0: &[f32],
    got: &[f32],
) {
    let exact = spmm_f64(a, b, n, n, false);
    let abs = spmm_f64(a, b, n, n, true);
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let (alpha, beta) = (alpha as f64, beta as f64);
    let mut want = vec![0f64; exact.len()];
    let mut scale = vec![0f64; exact.len()];
    for r in 0..a.rows() {
        let len = (ip[r + 1] - ip[r]).max(1) as f64;
        for j in 0..n {
            let i = r * n + j;
            let cterm = if beta == 0.0 {
                0.0
            } else {
                beta * c0[i] as f64
            };
            want[i] = alpha * exact[i] + cterm;
            scale[i] = alpha.abs() * abs[i] * len + (beta * c0[i] as f64).abs() + want[i].abs();
        }
    }
    let err = max_scaled_error(got, &want, &scale) / F32_EPS;
    assert!(err <= 2.0, "{what}: error {err:.3} f32 ulps·len (bound 2)");
}

/// A device product `(α, B, β, C)`.
type RunFn<'a> = dyn FnMut(f32, &CudaSlice<f32>, f32, &mut CudaSlice<f32>) + 'a;

/// One SpMM case through a closure that runs the product on the device.
fn spmm_case(gpu: &Gpu, rng: &mut ChaCha8Rng, what: &str, a: &Csr, n: usize, run: &mut RunFn<'_>) {
    for (alpha, beta) in [(1.0f32, 0.0f32), (0.75, -0.5)] {
        let b = dense(rng, a.cols() * n);
        let c0 = c0_for(rng, a.rows() * n, beta);
        let db = gpu.upload(&b).expect("upload B");
        let mut dc = gpu.upload(&c0).expect("upload C");
        run(alpha, &db, beta, &mut dc);
        let got = gpu.download(&dc).expect("download C");
        check_spmm(
            &format!("{what} α={alpha} β={beta}"),
            a,
            &b,
            n,
            alpha,
            beta,
            &c0,
            &got,
        );
    }
}

/// One SpMM case of the prepared product `p` at width `n` (packed operands).
fn product_case(
    gpu: &Gpu,
    rng: &mut ChaCha8Rng,
    what: &str,
    a: &Csr,
    n: usize,
    p: &mut dyn DeviceProduct,
) {
    spmm_case(gpu, rng, what, a, n, &mut |al, b, be, c| {
        p.enqueue(al, &Dense::packed(b, n), be, &mut DenseMut::packed(c, n))
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    });
}

/// The GPU, a generator seeded with `seed`, and the generated matrices it drew first.
fn generated_setup(seed: u64) -> (Gpu, ChaCha8Rng, Vec<(String, Csr)>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let cases = generated_cases(&mut rng, &SHAPES);
    (gpu(), rng, cases)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn probe_reports_a_working_device() {
    match Gpu::probe() {
        GpuStatus::Ready(g) => {
            let i = g.info();
            println!("GPU: {i:?}");
            assert!(!i.name.is_empty());
            assert!(i.sm_count > 0);
            assert!(i.compute_capability.0 >= 7, "{:?}", i.compute_capability);
            assert!(i.memory_bytes > 1 << 30);
            assert!(i.driver_version >= 12000, "{}", i.driver_version);
            assert!(i.l2_bytes > 0);
        }
        other => panic!("no GPU: {other:?}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn csr_kernel_matches_reference_on_generated_matrices() {
    let (gpu, mut rng, cases) = generated_setup(1);
    // The default budget, and budgets that split most rows (atomics after the β pre-scale).
    for (name, a) in cases {
        for chunk in [DEFAULT_CHUNK_NNZ, 7, 1] {
            let mut k = CsrSpmm::with_chunk(&gpu, &a, chunk).expect("upload");
            for n in [1, 7, 32, 33, 128, 130, 300] {
                let what = format!("csr_spmm {name} chunk={chunk} n={n}");
                product_case(&gpu, &mut rng, &what, &a, n, &mut k);
            }
        }
    }
}

/// Both setups: on temporaries ([`CusparseSpmm::new`]) and on the very B and C of the product
/// ([`CusparseSpmm::with_buffers`], as the engine's first cuSPARSE product does; β ≠ 0 included:
/// the setup must leave C as it was).
#[test]
#[ignore = "needs a CUDA GPU"]
fn cusparse_spmm_matches_reference_on_generated_matrices() {
    let (gpu, mut rng, cases) = generated_setup(2);
    for (name, a) in cases {
        let ca = CusparseCsr::new(&gpu, &a).expect("upload");
        for alg in SpmmAlg::ALL {
            for n in [1, 8, 33, 128] {
                let mut s = CusparseSpmm::new(&gpu, &ca, n, alg).expect("prepare");
                let what = format!("cusparse {alg:?} {name} n={n}");
                product_case(&gpu, &mut rng, &what, &a, n, &mut s);
                spmm_case(
                    &gpu,
                    &mut rng,
                    &format!("cusparse with_buffers {alg:?} {name} n={n}"),
                    &a,
                    n,
                    &mut |al, b, be, c| {
                        let mut s =
                            CusparseSpmm::with_buffers(&gpu, &ca, n, alg, b, c).expect("prepare");
                        s.run(al, b, be, c, n).expect("cusparseSpMM");
                    },
                );
            }
        }
    }
    // Buffers smaller than B (cols·n) or C (rows·n) are refused.
    let a = generated_cases(&mut rng, &SHAPES).remove(0).1;
    let ca = CusparseCsr::new(&gpu, &a).expect("upload");
    let n = 8;
    let b = gpu.alloc_zeros::<f32>(a.cols() * n - 1).unwrap();
    let mut c = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
    assert!(CusparseSpmm::with_buffers(&gpu, &ca, n, SpmmAlg::Default, &b, &mut c).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reserved_device_memory_stays_in_the_pool_and_serves_uploads() {
    let gpu = gpu();
    assert_eq!(gpu.reserve_device_memory(0).expect("reserve 0"), None);
    let mib = 1usize << 20;
    let Some(r) = gpu.reserve_device_memory(96 * mib).expect("reserve") else {
        panic!("the H200 has memory pools: a reservation must happen");
    };
    assert_eq!(r.bytes, 96 * mib);
    assert!(r.release_threshold >= 96 * mib as u64, "{r:?}");
    // Freed, yet kept by the pool past the synchronisation.
    assert!(r.reserved >= 96 * mib as u64, "{r:?}");
    // A smaller reservation never lowers the threshold.
    let smaller = gpu
        .reserve_device_memory(8 * mib)
        .expect("reserve")
        .unwrap();
    assert_eq!(smaller.release_threshold, r.release_threshold);
    assert!(smaller.reserved >= 96 * mib as u64, "{smaller:?}");
    // Allocations served from the kept memory hold what was uploaded.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let a: Vec<u32> = (0..(40 * mib) / 4).map(|_| rng.random()).collect();
    let b: Vec<f32> = (0..(40 * mib) / 4).map(|_| rng.random()).collect();
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    assert_eq!(gpu.download(&da).unwrap(), a);
    assert_eq!(gpu.download(&db).unwrap(), b);
    // An impossible size is capped at half the free memory, not an error.
    let capped = gpu
        .reserve_device_memory(usize::MAX)
        .expect("capped")
        .unwrap();
    assert!(capped.bytes < usize::MAX / 2, "{capped:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn large_uploads_through_the_staging_buffers_arrive_intact() {
    use tcsparse_gpu::{STAGED_UPLOAD_BYTES, StagingLayout, UPLOAD_PIECE_BYTES};
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    // The default ring, a ring of three small buffers and one of two (both wrapping inside one
    // upload and across uploads).
    let small = StagingLayout {
        buffers: 3,
        chunk_bytes: 1 << 20,
    };
    let two = StagingLayout {
        buffers: 2,
        chunk_bytes: 2 << 20,
    };
    assert_eq!(gpu.staging_layout(), StagingLayout::DEFAULT);
    for layout in [StagingLayout::DEFAULT, small, two] {
        gpu.set_staging_layout(layout).expect("staging layout");
        assert_eq!(gpu.staging_layout(), layout);
        let chunk = layout.chunk_bytes;
        // Around the threshold, several chunks (buffers reused), a ragged last chunk.
        for bytes in [
            STAGED_UPLOAD_BYTES - 4,
            STAGED_UPLOAD_BYTES,
            2 * chunk,
            5 * chunk / 2 + 12,
            7 * chunk + 4,
        ] {
            let mut v: Vec<u32> = (0..bytes / 4).map(|_| rng.random()).collect();
            let kept = v.clone();
            let d = gpu.upload(&v).expect("upload");
            // The source may change as soon as upload returns.
            v.iter_mut().for_each(|x| *x = !*x);
            let w = gpu.upload(&v).expect("second upload");
            assert_eq!(
                gpu.download(&d).expect("download"),
                kept,
                "{layout:?}: {bytes} bytes"
            );
            assert_eq!(
                gpu.download(&w).expect("download"),
                v,
                "{layout:?}: {bytes} bytes, second"
            );
        }
        // Inspected uploads: the same pieces, in the same order, as the host's own split (a
        // staged one with its pieces inspected by the copying threads, and a small one).
        let fnv = |p: &[u8]| {
            p.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            })
        };
        for bytes in [STAGED_UPLOAD_BYTES - 4, 5 * chunk / 2 + 12] {
            let v: Vec<u32> = (0..bytes / 4).map(|_| rng.random()).collect();
            let (d, pieces) = gpu.upload_inspected(&v, fnv).expect("inspected upload");
            let host: Vec<u64> = bytemuck::cast_slice::<u32, u8>(&v)
                .chunks(UPLOAD_PIECE_BYTES)
                .map(fnv)
                .collect();
            assert_eq!(pieces, host, "{layout:?}: {bytes} bytes inspected");
            assert_eq!(
                gpu.download(&d).expect("download"),
                v,
                "{layout:?}: {bytes} bytes"
            );
        }
        // Element sizes other than 4, odd lengths.
        let bytes: Vec<u8> = (0..3 * chunk + 5).map(|_| rng.random()).collect();
        assert_eq!(gpu.download(&gpu.upload(&bytes).unwrap()).unwrap(), bytes);
        let wide: Vec<u64> = (0..(chunk / 8) * 3 + 3).map(|_| rng.random()).collect();
        assert_eq!(gpu.download(&gpu.upload(&wide).unwrap()).unwrap(), wide);
    }
    // Out-of-bounds layouts are refused and leave the ring as it was.
    for bad in [
        StagingLayout {
            buffers: 1,
            ..small
        },
        StagingLayout {
            chunk_bytes: 1000,
            ..small
        },
        StagingLayout {
            buffers: 64,
            chunk_bytes: 64 << 20,
        },
    ] {
        assert!(gpu.set_staging_layout(bad).is_err(), "{bad:?}");
    }
    assert_eq!(gpu.staging_layout(), two);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spmm_and_spmv_match_reference_on_shared_datasets() {
    let gpu = gpu();
    for_each_dataset(3, |name, a, rng| {
        let n = 64;
        let mut k = CsrSpmm::new(&gpu, a).expect("upload");
        product_case(&gpu, rng, &format!("csr_spmm {name}"), a, n, &mut k);
        let ca = CusparseCsr::new(&gpu, a).expect("upload");
        for alg in SpmmAlg::ALL {
            let mut s = CusparseSpmm::new(&gpu, &ca, n, alg).expect("prepare");
            product_case(&gpu, rng, &format!("cusparse {alg:?} {name}"), a, n, &mut s);
        }
        let mut sv = CusparseSpmvGraphable::new(&gpu, &ca, 1).expect("prepare spmv");
        product_case(&gpu, rng, &format!("cusparse SpMV {name}"), a, 1, &mut sv);
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cusparse_spmv_and_bsr_spmv_match_reference() {
    let (gpu, mut rng, cases) = generated_setup(4);
    for (name, a) in cases {
        let ca = CusparseCsr::new(&gpu, &a).expect("upload");
        let mut sv = CusparseSpmvGraphable::new(&gpu, &ca, 1).expect("prepare");
        product_case(&gpu, &mut rng, &format!("SpMV {name}"), &a, 1, &mut sv);
        for block in [2usize, 4] {
            // BSR vectors are padded to whole blocks: run on padded copies, compare the first rows.
            let bsr = CusparseBsr::from_csr(&gpu, &a, block).expect("bsr");
            let (mp, kp) = (
                a.rows().div_ceil(block) * block,
                a.cols().div_ceil(block) * block,
            );
            for (alpha, beta) in [(1.0f32, 0.0f32), (1.5, 0.25)] {
                let x = dense(&mut rng, a.cols());
                let y0 = c0_for(&mut rng, a.rows(), beta);
                let mut xp = x.clone();
                xp.resize(kp, 0.0);
                let mut yp = y0.clone();
                yp.resize(mp, 0.0);
                let dx = gpu.upload(&xp).expect("x");
                let mut dy = gpu.upload(&yp).expect("y");
                bsr.spmv(alpha, &dx, beta, &mut dy).expect("bsrmv");
                let got = gpu.download(&dy).expect("y");
                check_spmm(
                    &format!("BSR{block} SpMV {name} α={alpha} β={beta}"),
                    &a,
                    &x,
                    1,
                    alpha,
                    beta,
                    &y0,
                    &got[..a.rows()],
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cublas_sgemm_and_tf32_match_reference() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut blas = Cublas::new(&gpu).expect("cublas");
    for (m, n, k) in [(1, 1, 1), (33, 17, 65), (256, 128, 512), (100, 300, 7)] {
        for prec in [GemmPrecision::F32, GemmPrecision::Tf32] {
            for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 2.0)] {
                let a = dense(&mut rng, m * k);
                let b = dense(&mut rng, k * n);
                let c0 = c0_for(&mut rng, m * n, beta);
                let (da, db) = (gpu.upload(&a).expect("a"), gpu.upload(&b).expect("b"));
                let mut dc = gpu.upload(&c0).expect("c");
                blas.gemm_row_major(prec, m, n, k, alpha, &da, &db, beta, &mut dc)
                    .expect("gemm");
                let got = gpu.download(&dc).expect("c");
                let mut want = vec![0f64; m * n];
                let mut scale = vec![0f64; m * n];
                for i in 0..m {
                    for j in 0..n {
                        let (mut s, mut sa) = (0f64, 0f64);
                        for p in 0..k {
                            let x = a[i * k + p] as f64 * b[p * n + j] as f64;
                            s += x;
                            sa += x.abs();
                        }
                        let cterm = if beta == 0.0 {
                            0.0
                        } else {
                            beta as f64 * c0[i * n + j] as f64
                        };
                        want[i * n + j] = alpha as f64 * s + cterm;
                        // TF32: inputs rounded to 10 mantissa bits; f32: accumulation over k terms.
                        let per = match prec {
                            GemmPrecision::F32 => F32_EPS * k as f64,
                            GemmPrecision::Tf32 => TF32_EPS + F32_EPS * k as f64,
                        };
                        scale[i * n + j] =
                            (alpha.abs() as f64 * sa + cterm.abs() + want[i * n + j].abs()) * per;
                    }
                }
                let err = max_scaled_error(&got, &want, &scale);
                assert!(
                    err <= 2.0,
                    "cuBLAS {prec:?} {m}×{n}×{k} α={alpha} β={beta}: {err:.3} > 2"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn timing_rmat_scale20_n128() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    let t0 = std::time::Instant::now();
    // The bench's rmat20-ef11 and `tcsparse gen rmat:scale=20,ef=11,seed=20` (the torch cross-check).
    let a = rmat(20, 11, (0.57, 0.19, 0.19, 0.05), 20).expect("R-MAT");
    println!(
        "R-MAT scale 20 ef 11: {}×{} nnz {} (generated in {:.1}s)",
        a.rows(),
        a.cols(),
        a.nnz(),
        t0.elapsed().as_secs_f64()
    );
    let n = 128;
    let b = dense(&mut rng, a.cols() * n);
    let db = gpu.upload(&b).expect("B");
    let mut dc = gpu.alloc_zeros::<f32>(a.rows() * n).expect("C");
    let ca = CusparseCsr::new(&gpu, &a).expect("upload");
    let gflops = |ms: f64| 2.0 * a.nnz() as f64 * n as f64 / (ms * 1e6);
    for alg in SpmmAlg::ALL {
        let mut s = CusparseSpmm::new(&gpu, &ca, n, alg).expect("prepare");
        let t = gpu
            .time_launches(5, 20, || s.run(1.0, &db, 0.0, &mut dc, n))
            .expect("timing");
        println!(
            "cuSPARSE SpMM {alg:?}: median {:.3} ms, min {:.3} ms, mean {:.3} ms ({:.1} GFLOP/s; torch ≈ 1.36 ms)",
            t.median_ms,
            t.min_ms,
            t.mean_ms,
            gflops(t.median_ms)
        );
    }
    let mut k = CsrSpmm::new(&gpu, &a).expect("upload");
    let t = gpu
        .time_launches(5, 20, || k.run(1.0, &db, 0.0, &mut dc, n))
        .expect("timing");
    println!(
        "csr_spmm (ours): median {:.3} ms, min {:.3} ms ({:.1} GFLOP/s)",
        t.median_ms,
        t.min_ms,
        gflops(t.median_ms)
    );
    let got = gpu.download(&dc).expect("C");
    check_spmm(
        "csr_spmm R-MAT 20",
        &a,
        &b,
        n,
        1.0,
        0.0,
        &vec![0.0; a.rows() * n],
        &got,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn row_permutation_gathers_and_scatters_rows_exactly() {
    use tcsparse_gpu::permute::RowPermutation;
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let (rows, n, lds, ldd) = (37usize, 13usize, 16usize, 14usize);
    // A permutation: a fixed shuffle.
    let mut idx: Vec<u32> = (0..rows as u32).collect();
    for i in (1..rows).rev() {
        idx.swap(i, rng.random_range(0..=i));
    }
    let p = RowPermutation::new(&gpu, &idx).unwrap();
    let src = dense(&mut rng, 3 + rows * lds);
    let sd = gpu.upload(&src).unwrap();
    let mut dd = gpu.upload(&vec![f32::NAN; rows * ldd]).unwrap();
    // Gather from a view that starts 3 elements in.
    p.gather(&sd.slice(3..), lds, &mut dd, ldd, n).unwrap();
    let got = gpu.download(&dd).unwrap();
    for i in 0..rows {
        let r = idx[i] as usize;
        assert_eq!(
            got[i * ldd..i * ldd + n],
            src[3 + r * lds..3 + r * lds + n],
            "row {i}"
        );
        assert!(got[i * ldd + n..i * ldd + ldd].iter().all(|v| v.is_nan()));
    }
    // Scatter back into a fresh buffer: the original rows again, bit for bit.
    let mut back = gpu.upload(&vec![f32::NAN; rows * lds]).unwrap();
    p.scatter(&dd, ldd, &mut back, lds, n).unwrap();
    let back = gpu.download(&back).unwrap();
    for r in 0..rows {
        assert_eq!(
            back[r * lds..r * lds + n],
            src[3 + r * lds..3 + r * lds + n],
            "row {r}"
        );
    }
    // Too short a destination is refused before any launch.
    let mut short = gpu.alloc_zeros::<f32>(rows * n - 1).unwrap();
    assert!(p.gather(&sd, lds, &mut short, n, n).is_err());
    assert!(RowPermutation::new(&gpu, &[0, 2, 2]).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn csr_kernel_on_views_with_leading_dimensions() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let a = random_csr(&mut rng, 300, 250, 6);
    let (n, ldb, ldc, off) = (20usize, 23usize, 26usize, 5usize);
    for chunk in [8u32, DEFAULT_CHUNK_NNZ] {
        let mut k = CsrSpmm::with_chunk(&gpu, &a, chunk).unwrap();
        let b = dense(&mut rng, a.cols() * n);
        let c0 = dense(&mut rng, a.rows() * n);
        let mut bp = vec![f32::NAN; off + a.cols() * ldb];
        for r in 0..a.cols() {
            bp[off + r * ldb..off + r * ldb + n].copy_from_slice(&b[r * n..r * n + n]);
        }
        let mut cp = vec![f32::NAN; off + a.rows() * ldc];
        for r in 0..a.rows() {
            cp[off + r * ldc..off + r * ldc + n].copy_from_slice(&c0[r * n..r * n + n]);
        }
        let bd = gpu.upload(&bp).unwrap();
        let mut cd = gpu.upload(&cp).unwrap();
        let len = cd.len();
        k.enqueue(
            1.5,
            &Dense::new(&bd.slice(off..), n, ldb),
            0.5,
            &mut DenseMut::new(&mut cd.slice_mut(off..len), n, ldc),
        )
        .unwrap();
        let got = gpu.download(&cd).unwrap();
        let c: Vec<f32> = (0..a.rows())
            .flat_map(|r| got[off + r * ldc..off + r * ldc + n].to_vec())
            .collect();
        check_spmm(
            &format!("CSR on views, chunk {chunk}"),
            &a,
            &b,
            n,
            1.5,
            0.5,
            &c0,
            &c,
        );
        for r in 0..a.rows() {
            assert!(
                got[off + r * ldc + n..off + r * ldc + ldc]
                    .iter()
                    .all(|v| v.is_nan())
            );
        }
    }
}

/// On a compute-capability-9.0 device every module loads from its embedded sm_90 cubin (no JIT)
/// and every kernel entry of its PTX is in it; elsewhere every module loads from PTX.
#[test]
#[ignore = "needs a CUDA GPU"]
fn modules_load_from_the_cubin_on_sm90_with_every_ptx_entry() {
    use tcsparse_gpu::KernelModule;
    use tcsparse_gpu::module_image::{CUBIN_COMPUTE_CAPABILITY, KERNEL_IMAGE_ENV, ModuleImage};
    let gpu = gpu();
    let want = if gpu.info().compute_capability == CUBIN_COMPUTE_CAPABILITY
        && std::env::var(KERNEL_IMAGE_ENV).map_or(true, |v| !v.eq_ignore_ascii_case("ptx"))
    {
        ModuleImage::Cubin
    } else {
        ModuleImage::Ptx
    };
    for m in KernelModule::ALL {
        let t = std::time::Instant::now();
        let module = gpu.module(m).expect("module loads");
        println!(
            "{m:?}: {:?} in {:.1} ms",
            gpu.module_image(m),
            t.elapsed().as_secs_f64() * 1e3
        );
        assert_eq!(gpu.module_image(m), Some(want), "{m:?}");
        for e in nvptx_builder::ptx::entries(m.ptx()) {
            module
                .load_function(&e.name)
                .unwrap_or_else(|err| panic!("{m:?}: entry {} missing: {err:?}", e.name));
        }
    }
}
