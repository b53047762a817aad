//! GPU tests of cuSpAMM (ignored by default; they FAIL without a GPU, never pass vacuously).
//!
//! Error bounds (relative Frobenius error vs the f64 product, all tiles valid, inputs in [−1, 1],
//! K ≤ 16 400): f32 and 3×TF32 ≤ 1e-5 (f32 accumulation: ~√K·2⁻²⁴ relative), TF32 and f16
//! ≤ 4e-3 (operands rounded to 10-bit mantissas: ≤ 2·2⁻¹¹ per product, random signs average
//! down). With skipped tiles: ‖C − C_gpu‖F ≤ reported bound + the precision's own error.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use tcsparse_formats::generate::exponential_decay_dense;
use tcsparse_formats::normmap::{NormMap, spamm_cpu};
use tcsparse_gpu::Gpu;
use tcsparse_gpu::baselines::cublas::{Cublas, GemmPrecision};
use tcsparse_gpu::baselines::cublas_ex::{CublasEx, GemmExInput, GemmExKind};
use tcsparse_gpu::spamm::{
    SpammBlock, SpammKernel, SpammOperands, SpammPrecision, SpammSchedule, TILE, TauTarget,
    choose_tau, to_f16,
};
use tcsparse_planner::spamm::NormMaps;

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

fn random(len: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..len)
        .map(|_| scale * r.random_range(-1.0f32..1.0))
        .collect()
}

/// f64 product of rows `rows` of A (m × k) with B (k × n): rows.len() × n.
fn reference(a: &[f32], b: &[f32], k: usize, n: usize, rows: &[usize]) -> Vec<f64> {
    let mut out = vec![0f64; rows.len() * n];
    out.par_chunks_mut(n.max(1))
        .zip(rows.par_iter())
        .for_each(|(c, &r)| {
            for t in 0..k {
                let av = a[r * k + t] as f64;
                if av == 0.0 {
                    continue;
                }
                for (cj, &bv) in c.iter_mut().zip(&b[t * n..(t + 1) * n]) {
                    *cj += av * bv as f64;
                }
            }
        });
    out
}

/// (‖C_ref − C‖F, ‖C_ref‖F) over the sampled rows.
fn errors(c: &[f32], cref: &[f64], n: usize, rows: &[usize]) -> (f64, f64) {
    let (mut e, mut r) = (0f64, 0f64);
    for (i, &row) in rows.iter().enumerate() {
        for j in 0..n {
            let x = cref[i * n + j];
            let d = c[row * n + j] as f64 - x;
            e += d * d;
            r += x * x;
        }
    }
    (e.sqrt(), r.sqrt())
}

fn bound(p: SpammPrecision) -> f64 {
    match p {
        SpammPrecision::F32 | SpammPrecision::Tf32x3 => 1e-5,
        SpammPrecision::Tf32 | SpammPrecision::F16 => 4e-3,
    }
}

struct Case {
    m: usize,
    n: usize,
    k: usize,
}

impl Case {
    fn new(m: usize, n: usize, k: usize) -> Self {
        Self { m, n, k }
    }

    /// Every row of C (`0..m`) and the f64 product `a·b` there.
    fn full_reference(&self, a: &[f32], b: &[f32]) -> (Vec<usize>, Vec<f64>) {
        let rows: Vec<usize> = (0..self.m).collect();
        let cref = reference(a, b, self.k, self.n, &rows);
        (rows, cref)
    }

    /// A (`m × k`, seed `seed_a`) and B (`k × n`, seed `seed_b`), uniform in ±1.
    fn operands(&self, seed_a: u64, seed_b: u64) -> (Vec<f32>, Vec<f32>) {
        (
            random(self.m * self.k, seed_a, 1.0),
            random(self.k * self.n, seed_b, 1.0),
        )
    }
}

/// One product `C = α·A·B + β·C₀` on the device (`kernel` = precision, block, s; `ab` = α, β):
/// C and the count of valid tile products.
#[allow(clippy::too_many_arguments)]
fn run_on(
    g: &Gpu,
    a: &[f32],
    b: &[f32],
    c: &Case,
    (p, blk, s): (SpammPrecision, SpammBlock, usize),
    tau: f32,
    (alpha, beta): (f32, f32),
    c0: &[f32],
) -> (Vec<f32>, u64) {
    let ops = SpammOperands::upload(g, a, b, c.m, c.n, c.k, p).unwrap();
    let kern = SpammKernel::new(g, c.m, c.n, p, blk, s).unwrap();
    let (na, nb) = ops.norms_host().unwrap();
    let sched = SpammSchedule::new(g, &na, &nb, ops.tiles(), blk, tau).unwrap();
    let mut dc = g.upload(c0).unwrap();
    let mut st = g.alloc_zeros::<u64>(1).unwrap();
    kern.run(&ops, &sched, alpha, beta, &mut dc, Some(&mut st))
        .unwrap();
    (g.download(&dc).unwrap(), g.download(&st).unwrap()[0])
}

/// [`run_on`] with α = 1, β = 0 and C poisoned with NaN first (β = 0 must not read it).
#[allow(clippy::too_many_arguments)]
fn run(
    g: &Gpu,
    a: &[f32],
    b: &[f32],
    c: &Case,
    p: SpammPrecision,
    blk: SpammBlock,
    s: usize,
    tau: f32,
) -> (Vec<f32>, u64) {
    let nan = vec![f32::NAN; c.m * c.n];
    run_on(g, a, b, c, (p, blk, s), tau, (1.0, 0.0), &nan)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_precision_matches_f64_with_all_tiles_valid_ragged_shapes() {
    let g = gpu();
    // K not a multiple of the tile (nor of 4: the unaligned load path), M and N ragged too.
    for (ci, c) in [Case::new(200, 136, 264), Case::new(97, 75, 123)]
        .iter()
        .enumerate()
    {
        let (a, b) = c.operands(1 + ci as u64, 11 + ci as u64);
        let (rows, cref) = c.full_reference(&a, &b);
        let tiles = (c.m.div_ceil(TILE) * c.k.div_ceil(TILE) * c.n.div_ceil(TILE)) as u64;
        for p in SpammPrecision::ALL {
            for blk in [SpammBlock::B64, SpammBlock::B128] {
                for s in [1, 2] {
                    let (out, valid) = run(&g, &a, &b, c, p, blk, s, 0.0);
                    let (e, r) = errors(&out, &cref, c.n, &rows);
                    println!(
                        "{}x{}x{} {} {:?} s={s}: rel err {:.3e}",
                        c.m,
                        c.n,
                        c.k,
                        p.name(),
                        blk,
                        e / r
                    );
                    assert!(
                        e / r <= bound(p),
                        "{p:?} {blk:?} s={s}: {:.3e} > {:.1e}",
                        e / r,
                        bound(p)
                    );
                    assert_eq!(valid, tiles, "{p:?} {blk:?}: every tile product counted");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn k_above_12288_is_handled() {
    let g = gpu();
    let c = Case::new(70, 66, 16_400);
    let (a, b) = c.operands(5, 6);
    let (rows, cref) = c.full_reference(&a, &b);
    for p in SpammPrecision::ALL {
        let (out, valid) = run(&g, &a, &b, &c, p, SpammBlock::B64, 1, 0.0);
        let (e, r) = errors(&out, &cref, c.n, &rows);
        println!("K=16400 {}: rel err {:.3e}", p.name(), e / r);
        assert!(e / r <= bound(p), "{p:?}: {:.3e}", e / r);
        assert_eq!(valid, (3 * 3 * 16_400usize.div_ceil(32)) as u64);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_norms_match_cpu_and_f16_norms_do_not_overflow() {
    let g = gpu();
    let (m, n, k) = (100, 70, 90);
    // |a| up to 300 (> 256: its square overflows f16), integers: exact in f16.
    let a: Vec<f32> = random(m * k, 9, 300.0)
        .into_iter()
        .map(|x| x.round())
        .collect();
    let b = random(k * n, 10, 1.0);
    for p in [SpammPrecision::F32, SpammPrecision::F16] {
        let ops = SpammOperands::upload(&g, &a, &b, m, n, k, p).unwrap();
        let (na, nb) = ops.norms_host().unwrap();
        let ca = NormMap::from_dense(&a, m, k, TILE).unwrap();
        for (x, y) in na.iter().zip(ca.norms()) {
            assert!(x.is_finite(), "{p:?}: norm {x}");
            // f16 rounding of B's values changes its norms by ≤ 2⁻¹¹ relative; A is exact.
            assert!((x - y).abs() <= 1e-5 * y.max(1.0), "{p:?}: {x} vs {y}");
        }
        let cb = NormMap::from_dense(&b, k, n, TILE).unwrap();
        for (x, y) in nb.iter().zip(cb.norms()) {
            assert!((x - y).abs() <= 1e-3 * y.max(1e-6), "{p:?}: {x} vs {y}");
        }
    }
    // And the f16 product with such values.
    let c = Case::new(m, n, k);
    let (rows, cref) = c.full_reference(&a, &b);
    let (out, _) = run(&g, &a, &b, &c, SpammPrecision::F16, SpammBlock::B64, 1, 0.0);
    let (e, r) = errors(&out, &cref, n, &rows);
    assert!(e / r <= bound(SpammPrecision::F16), "{:.3e}", e / r);
}

/// A τ near `tau0` in a gap of the sorted distinct products `prods` that is at least 0.1 % wide
/// (equal-looking products of a Toeplitz matrix differ in the last bit), at its geometric middle.
fn tie_free_tau(prods: &[f32], tau0: f32) -> f32 {
    let p = prods
        .partition_point(|&x| x < tau0)
        .clamp(1, prods.len() - 1);
    let wide = |i: usize| prods[i] / prods[i - 1] > 1.001;
    let i = (0..prods.len())
        .flat_map(|d| [p + d, p.wrapping_sub(d)])
        .find(|&i| i >= 1 && i < prods.len() && wide(i))
        .expect("a gap of 0.1 %");
    ((prods[i - 1] as f64) * (prods[i] as f64)).sqrt() as f32
}

#[test]
fn tie_free_tau_skips_near_ties() {
    let prods = [1.0f32, 2.0, 2.0000002, 2.0000005, 4.0];
    let t = tie_free_tau(&prods, 2.0000001);
    assert!(t > 2.0000005 && t < 4.0 || t > 1.0 && t < 2.0, "{t}");
    assert!((tie_free_tau(&prods, 3.0) - 8f32.sqrt().max(2.0000005)).abs() < 0.01);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn skipped_tiles_stay_within_the_bound_and_match_cpu_spamm() {
    let g = gpu();
    let n = 640;
    let a = exponential_decay_dense(n, 0.05);
    let b = a.clone();
    let rows: Vec<usize> = (0..n).collect();
    let cref = reference(&a, &b, n, n, &rows);
    let na = NormMap::from_dense(&a, n, n, TILE).unwrap();
    let t = n / TILE;
    let maps = NormMaps::new(na.norms(), na.norms(), (t, t, t)).unwrap();
    for target in [0.3, 0.1] {
        let tau0 = maps.tau_search(target).unwrap().tau;
        // The matrix is Toeplitz: many tile products are equal, and τ from the search sits
        // within an ulp of one of them, where GPU (f32 sums) and CPU (f64 sums) norms may
        // disagree. Move τ to the geometric middle of the gap around it.
        let mut prods: Vec<f32> = Vec::new();
        for i in 0..t {
            for k in 0..t {
                for j in 0..t {
                    prods.push(na.get(i, k) * na.get(k, j));
                }
            }
        }
        prods.sort_by(f32::total_cmp);
        prods.dedup();
        let tau = tie_free_tau(&prods, tau0);
        let abs = maps.skipped_bound(tau);
        let (cpu, ratio) = spamm_cpu(&a, &na, &b, &na, n, n, n, TILE, tau).unwrap();
        for p in SpammPrecision::ALL {
            for blk in [SpammBlock::B64, SpammBlock::B128] {
                let c = Case::new(n, n, n);
                let (out, valid) = run(&g, &a, &b, &c, p, blk, 2, tau);
                let (e, r) = errors(&out, &cref, n, &rows);
                println!(
                    "exp n={n} ratio {ratio:.3} {} {blk:?}: err {:.3e} bound {:.3e} (rel {:.3e})",
                    p.name(),
                    e,
                    abs,
                    e / r
                );
                // τ is far from every product: the same products as the CPU SpAMM.
                let cpu_valid = (ratio * (t * t * t) as f64).round() as u64;
                assert_eq!(valid, cpu_valid);
                assert!(
                    e <= abs + bound(p) * r,
                    "{p:?}: error {e:.3e} above bound {abs:.3e} + precision"
                );
                // Same skipped set as the CPU SpAMM: the two agree to the precision's error.
                let d: f64 = out
                    .iter()
                    .zip(&cpu)
                    .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
                    .sum::<f64>()
                    .sqrt();
                // A product flipped across τ (GPU f32 vs CPU f64 norm sums) moves C by ≤ ~τ.
                let flips = valid.abs_diff(cpu_valid) as f64 * tau as f64 * 1.01;
                assert!(
                    d <= 2.0 * bound(p) * r + flips,
                    "{p:?}: vs CPU SpAMM {d:.3e}"
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn empty_c_tiles_are_written_and_nan_is_never_read_with_beta_zero() {
    let g = gpu();
    let c = Case::new(130, 100, 96);
    let (a, b) = c.operands(3, 4);
    for p in SpammPrecision::ALL {
        // τ above every product: nothing valid, C must be all zeros (it was all NaN).
        let (out, valid) = run(&g, &a, &b, &c, p, SpammBlock::B64, 1, f32::INFINITY);
        assert_eq!(valid, 0);
        assert!(
            out.iter().all(|&x| x == 0.0),
            "{p:?}: C tile left unwritten"
        );
    }
    // Block-diagonal A: only diagonal tiles valid, off-diagonal C tiles exactly 0.
    let n = 160;
    let mut a = vec![0f32; n * n];
    for i in 0..n {
        for j in 0..n {
            if i / 32 == j / 32 {
                a[i * n + j] = 1.0 + ((i * 7 + j * 3) % 11) as f32 / 11.0;
            }
        }
    }
    let cs = Case::new(n, n, n);
    let (out, valid) = run(
        &g,
        &a,
        &a,
        &cs,
        SpammPrecision::Tf32,
        SpammBlock::B128,
        1,
        1e-3,
    );
    assert_eq!(valid, 5);
    for i in 0..n {
        for j in 0..n {
            let x = out[i * n + j];
            if i / 32 != j / 32 {
                assert_eq!(x, 0.0, "({i},{j})");
            } else {
                assert!(x > 0.0 && x.is_finite(), "({i},{j}) = {x}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn alpha_beta_update_existing_c() {
    let g = gpu();
    let c = Case::new(64, 96, 40);
    let (a, b) = c.operands(21, 22);
    let c0 = random(c.m * c.n, 23, 1.0);
    let (_, cref) = c.full_reference(&a, &b);
    let kernel = (SpammPrecision::F32, SpammBlock::B64, 1);
    let (out, _) = run_on(&g, &a, &b, &c, kernel, 0.0, (2.0, -0.5), &c0);
    for i in 0..c.m * c.n {
        let want = 2.0 * cref[i] - 0.5 * c0[i] as f64;
        assert!(
            (out[i] as f64 - want).abs() <= 1e-4,
            "{i}: {} vs {want}",
            out[i]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// First timings (printed, not asserted): exp decay r = 0.1 at N = 8192, 16384.

fn median_ms(g: &Gpu, mut f: impl FnMut()) -> f64 {
    g.time_launches(2, 7, || {
        f();
        Ok(())
    })
    .unwrap()
    .median_ms
}

/// Every (block, s) configuration gives the same C bit for bit (each warp adds its valid k tiles in
/// ascending order whatever the block: the configurations differ only in scheduling), with an
/// error near the target; prints timings (set SPAMM_SIZES=8192,16384 for the large sizes; the
/// bench, `tcsparse-bench --op spamm`, is where speed is reported).
#[test]
#[ignore = "needs a CUDA GPU"]
fn configurations_agree_on_exp_decay_with_timings() {
    let g = gpu();
    let sizes: Vec<usize> = std::env::var("SPAMM_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![4096]);
    for n in sizes {
        for rate in [0.1f64, 0.02] {
            let a = exponential_decay_dense(n, rate);
            let da = g.upload(&a).unwrap();
            let flops = 2.0 * (n as f64).powi(3);
            let mut dc = g.alloc_zeros::<f32>(n * n).unwrap();
            let mut blas = Cublas::new(&g).unwrap();
            let t_sgemm = median_ms(&g, || {
                blas.gemm_row_major(GemmPrecision::F32, n, n, n, 1.0, &da, &da, 0.0, &mut dc)
                    .unwrap()
            });
            let t_tf32 = median_ms(&g, || {
                blas.gemm_row_major(GemmPrecision::Tf32, n, n, n, 1.0, &da, &da, 0.0, &mut dc)
                    .unwrap()
            });
            let h = to_f16(&g, &da).unwrap();
            let mut ex = CublasEx::new(&g).unwrap();
            let t_f16 = median_ms(&g, || {
                ex.gemm_row_major(GemmExKind::F16, n, n, n, GemmExInput::F16(&h, &h), &mut dc)
                    .unwrap()
            });
            println!(
                "N={n} r={rate}: cuBLAS SGEMM {t_sgemm:.3} ms ({:.1} TF/s), TF32 {t_tf32:.3} ms ({:.1}), f16 GemmEx {t_f16:.3} ms ({:.1})",
                flops / t_sgemm / 1e9,
                flops / t_tf32 / 1e9,
                flops / t_f16 / 1e9
            );
            // Sampled rows for the error.
            let rows: Vec<usize> = (0..16).map(|i| i * (n / 16) + 7).collect();
            let cref = reference(&a, &a, n, n, &rows);
            for p in SpammPrecision::ALL {
                let mut ops =
                    SpammOperands::from_device(&g, da.clone(), da.clone(), n, n, n, p).unwrap();
                let (na, nb) = ops.norms_host().unwrap();
                let t = n / TILE;
                let maps = NormMaps::new(&na, &nb, (t, t, t)).unwrap();
                let c_norm = maps.skipped_bound(f32::INFINITY);
                let tau = choose_tau(&maps, TauTarget::RelError(1e-5), c_norm).unwrap();
                let abs = maps.skipped_bound(tau);
                let t_norms = median_ms(&g, || ops.compute_norms().unwrap());
                let mut first: Option<Vec<f32>> = None;
                for blk in [SpammBlock::B64, SpammBlock::B128] {
                    for s in [1usize, 4] {
                        let kern = SpammKernel::new(&g, n, n, p, blk, s).unwrap();
                        let sched = SpammSchedule::new(&g, &na, &nb, (t, t, t), blk, tau).unwrap();
                        let mut st = g.alloc_zeros::<u64>(1).unwrap();
                        kern.run(&ops, &sched, 1.0, 0.0, &mut dc, Some(&mut st))
                            .unwrap();
                        let valid = g.download(&st).unwrap()[0];
                        let out = g.download(&dc).unwrap();
                        let (e, r) = errors(&out, &cref, n, &rows);
                        // Sampled rows: the target 1e-5 (global bound) plus the rounding.
                        assert!(
                            e / r <= 1e-4 + bound(p),
                            "{p:?} {blk:?} s={s}: {:.3e}",
                            e / r
                        );
                        match &first {
                            None => first = Some(out),
                            Some(f) => {
                                let diff = f.iter().zip(&out).filter(|(x, y)| x != y).count();
                                assert_eq!(diff, 0, "{p:?} {blk:?} s={s}: differs from b64 s=1");
                            }
                        }
                        let t_mm = median_ms(&g, || {
                            kern.run(&ops, &sched, 1.0, 0.0, &mut dc, None).unwrap()
                        });
                        let t_all = median_ms(&g, || {
                            ops.compute_norms().unwrap();
                            kern.run(&ops, &sched, 1.0, 0.0, &mut dc, None).unwrap()
                        });
                        let floor_ms = 3.0 * (n * n * 4) as f64 / 3.9e12 * 1e3;
                        println!(
                            "  {} {blk:?} s={s}: tau {tau:.3e} valid {:.4}% bound {:.2e} relerr(sampled) {:.2e} | norms {t_norms:.3} ms, mm {t_mm:.3} ms, total {t_all:.3} ms (floor {floor_ms:.3}) | vs SGEMM {:.1}x, TF32 {:.2}x, f16 {:.2}x",
                            p.name(),
                            100.0 * valid as f64 / (t * t * t) as f64,
                            abs / c_norm,
                            e / r,
                            t_sgemm / t_all,
                            t_tf32 / t_all,
                            t_f16 / t_all
                        );
                    }
                }
                ops.compute_norms().unwrap();
            }
        }
    }
}

/// The device's skipped-product bound equals the host's (`NormMaps::skipped_bound`) to a relative
/// 1e-12 at every τ (0, products' values and their neighbours, +∞) on maps with ragged edges and
/// zero tiles, and the τ an error target chooses with it meets the target on the host's bound and
/// is the host's choice to 1e-3.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_skipped_bound_equals_the_hosts_and_chooses_the_same_tau() {
    use tcsparse_gpu::spamm::{DeviceBound, SkippedBound, choose_tau_with};
    let g = gpu();
    // 71 × 45 tiles of A and 45 × 40 of B (edge tiles of 1 row, 1 k and 7 columns), decaying
    // values with a band of zero tiles in A; then 3 × 2 × 2 tiles.
    for (m, k, n, rate) in [
        (2241usize, 1409usize, 1255usize, 0.01f64),
        (96, 64, 33, 0.3),
    ] {
        let decay = |i: usize, j: usize| (-(rate * (i as f64 - j as f64).abs())).exp() as f32;
        let a: Vec<f32> = (0..m * k)
            .map(|x| {
                let (i, j) = (x / k, x % k);
                if (300..400).contains(&j) {
                    0.0
                } else {
                    decay(i, j)
                }
            })
            .collect();
        let b: Vec<f32> = (0..k * n).map(|x| decay(x / n, x % n) * 0.5).collect();
        let ops = SpammOperands::upload(&g, &a, &b, m, n, k, SpammPrecision::Tf32x3).unwrap();
        let (na, nb) = ops.norms_host().unwrap();
        let tiles = ops.tiles();
        let maps = NormMaps::new(&na, &nb, tiles).unwrap();
        let mut dev = DeviceBound::new(&ops).unwrap();
        let mut products: Vec<f32> = na
            .iter()
            .step_by(7)
            .flat_map(|&x| nb.iter().step_by(11).map(move |&y| x * y))
            .collect();
        products.sort_by(f32::total_cmp);
        let picks = products.iter().step_by(products.len() / 9 + 1);
        let mut taus = vec![0.0f32, f32::MIN_POSITIVE, 1e-30, f32::INFINITY];
        for &p in picks {
            taus.extend([p, p.next_up(), p.next_down()]);
        }
        for tau in taus {
            let host = maps.skipped_bound(tau);
            let device = dev.skipped_bound(tau).unwrap();
            assert!(
                (device - host).abs() <= 1e-12 * host,
                "{m}×{k}×{n} τ = {tau:e}: device {device:e}, host {host:e}"
            );
            assert_eq!(device, dev.skipped_bound(tau).unwrap(), "repeatable");
        }
        let c_norm = maps.skipped_bound(f32::INFINITY);
        for rel in [1e-2, 1e-5] {
            let target = TauTarget::RelError(rel);
            let host_tau = choose_tau(&maps, target, c_norm).unwrap();
            let mut bound = SkippedBound::device(DeviceBound::new(&ops).unwrap());
            let c_dev = bound.at(&maps, f32::INFINITY).unwrap();
            let tau = choose_tau_with(&maps, &mut bound, target, c_dev).unwrap();
            let max_bound = rel / (1.0 + rel) * c_norm;
            assert!(
                maps.skipped_bound(tau) <= max_bound * (1.0 + 1e-12),
                "{m}×{k}×{n} rel {rel}: τ {tau:e} breaks the bound"
            );
            assert!(
                (tau - host_tau).abs() <= 1e-3 * host_tau,
                "{m}×{k}×{n} rel {rel}: device τ {tau:e}, host τ {host_tau:e}"
            );
        }
    }
    // No tile: refused.
    let empty = SpammOperands::upload(&g, &[], &[0.5; 16], 0, 4, 4, SpammPrecision::F32).unwrap();
    assert!(DeviceBound::new(&empty).is_err());
}
