//! GPU tests of the row-tile kernels in f16, bf16 and 3×TF32, and of the CSR kernel in f16 and
//! bf16, against the f64 reference.
//! Ignored without a GPU; with `--include-ignored` on a machine without one they FAIL
//! (Gpu::require), never pass vacuously.
//!
//! Bounds per element, relative to |α|·|A|·|B| + |β|·|C₀| (k = the row's nonzeros):
//! - f16 / bf16 (u = 2⁻¹¹ / 2⁻⁸): the product's p = u + γ_2k·(1 + u) (A rounded to the type on
//!   upload, exact products, f32 sums), then C rounded to the type, + u·(1 + p); plus, below the
//!   type's normal range, half its smallest subnormal for C and 2⁻²⁵·|α|·Σ|b| for A's values in
//!   f16 (absolute); a result beyond the type's range must be ±∞ as a cast.
//! - 3×TF32: 2⁻²⁰ + γ_6k.
//! - The CSR kernel in f16 / bf16: A's f32 values times B (exact in f32), k + 2 f32 roundings
//!   (the fused multiply-adds, α's product, β's), so p = γ_{k+2}, then C rounded as above.
//!
//! Covered: the edge matrices of the TF32 row-tile test (ragged M and K, empty and trailing empty
//! windows, hubs, one row, empty) plus banded and clustered ones, both window heights, N ∈ {8, 32,
//! 100, 128, 512, 1000}, packed schedules (and split ones for 3×TF32), β = 0 with NaN-poisoned C
//! and β ≠ 0 with padded leading dimensions (padding never written), NaN and ∞ in A and B,
//! overflow to ±∞, and the shared datasets.

mod data_support;

mod acc_support;

use acc_support::{
    Dense, Gen, banded_clustered_and_edges, dense, non_finite_operands, operands, visit_elements,
};
use data_support::for_each_dataset;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::reference::spmm_f64;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::spmm::csr::CsrSpmm;
use tcsparse_gpu::spmm::row_tile::{
    RowTileArith, RowTileDevice, RowTileHalf, RowTileKernel, RowTileSchedule,
};
use tcsparse_gpu::{DeviceProduct, Gpu};

fn gpu() -> Gpu {
    Gpu::require().expect("this test needs a CUDA GPU")
}

const NS: [usize; 6] = [8, 32, 100, 128, 512, 1000];

/// γ_k = k·2⁻²⁴ / (1 − k·2⁻²⁴).
fn gamma(k: usize) -> f64 {
    let ku = k.max(1) as f64 * 2f64.powi(-24);
    ku / (1.0 - ku)
}

/// What one arithmetic allows (see the module docs).
#[derive(Clone, Copy)]
struct Bound {
    /// Relative to the scale.
    rel: f64,
    /// Absolute, per |α|·Σ|b| over the row's nonzeros (A's values below f16's normal range).
    per_b: f64,
    /// Absolute (C below the type's normal range).
    step: f64,
    /// The smallest magnitude that rounds to ±∞ in C's type.
    overflow: f64,
}

impl Bound {
    fn of(arith: RowTileArith, k: usize) -> Self {
        Self::with_product(arith, k, |u| u + gamma(2 * k) * (1.0 + u))
    }

    /// The CSR kernel's: A not rounded (no absolute term for A's values), p = γ_{k+2}.
    fn csr(arith: RowTileArith, k: usize) -> Self {
        Bound {
            per_b: 0.0,
            ..Self::with_product(arith, k, |_| gamma(k + 2))
        }
    }

    /// f16 / bf16 with the product's bound `p(u)` (u: the type's rounding); 3×TF32's otherwise.
    fn with_product(arith: RowTileArith, k: usize, p: impl Fn(f64) -> f64) -> Self {
        let half = |u: f64, per_b: f64, step: f64, overflow: f64| {
            let p = p(u);
            Bound {
                rel: p + u * (1.0 + p),
                per_b,
                step,
                overflow,
            }
        };
        match arith {
            RowTileArith::F16 => half(2f64.powi(-11), 2f64.powi(-25), 2f64.powi(-25), 65520.0),
            RowTileArith::Bf16 => half(
                2f64.powi(-8),
                0.0,
                2f64.powi(-134),
                (2.0 - 2f64.powi(-8)) * 2f64.powi(127),
            ),
            _ => Bound {
                rel: 2f64.powi(-20) + gamma(6 * k),
                per_b: 0.0,
                step: 0.0,
                overflow: f64::INFINITY,
            },
        }
    }
}

/// Checks `got = α·A·B + β·C0` (all widened to f32; `a` with the values as given, before the
/// kernel's rounding) with `bound`; padding columns of C keep their bits. Elements in `skip(r, f)`
/// are only checked to be non-finite where the reference is. Returns the largest scaled error.
fn check(
    what: &str,
    a: &Csr,
    d: Dense<'_>,
    got: &[f32],
    bound: Bound,
    skip: &dyn Fn(usize, usize) -> bool,
) -> f64 {
    let (alpha, b, ldb, n) = (d.alpha, d.b, d.ldb, d.n);
    let mut ones = a.clone();
    ones.data_mut().iter_mut().for_each(|v| *v = 1.0);
    let sum_b = spmm_f64(&ones, b, n, ldb, true);
    let mut worst = 0f64;
    visit_elements(what, a, d, got, |r, f, g: f32, want: f64, scale: f64| {
        if !want.is_finite() {
            assert!(!g.is_finite(), "{what}: C[{r}][{f}] = {g}, want {want}");
            return;
        }
        if skip(r, f) {
            return;
        }
        if g.is_infinite() {
            // A cast's ∞: the exact result is at the threshold, up to the rounding before it.
            let reach = want.abs() + bound.rel * scale;
            assert!(
                reach >= bound.overflow && (g > 0.0) == (want > 0.0),
                "{what}: C[{r}][{f}] = {g}, want {want} (overflow at {})",
                bound.overflow
            );
            return;
        }
        assert!(g.is_finite(), "{what}: C[{r}][{f}] = {g} (want {want})");
        let err = (g as f64 - want).abs();
        let allowed =
            bound.rel * scale + bound.per_b * (alpha as f64).abs() * sum_b[r * n + f] + bound.step;
        assert!(
            err <= allowed,
            "{what}: C[{r}][{f}] = {g}, want {want}, error {err:.3e} > {allowed:.3e}"
        );
        if scale > 0.0 {
            worst = worst.max(err / scale);
        }
    });
    worst
}

fn to_half<H: RowTileHalf>(v: &[f32]) -> Vec<H> {
    v.iter().map(|&x| H::from_f32(x)).collect()
}

fn widen<H: RowTileHalf>(v: &[H]) -> Vec<f32> {
    v.iter().map(|&x| x.to_f32()).collect()
}

/// One f16 / bf16 product on the GPU: B and C0 rounded to `H`, C downloaded widened.
fn run_half<H: RowTileHalf>(
    gpu: &Gpu,
    dev: &mut RowTileDevice,
    d: Dense<'_>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    run_half_with::<H>(gpu, d, |b, c| {
        dev.enqueue_half::<H>(d.alpha, b, d.beta, c).unwrap()
    })
}

/// [`run_half`] of the launch `enqueue` (α and β of `d`).
fn run_half_with<H: RowTileHalf>(
    gpu: &Gpu,
    d: Dense<'_>,
    enqueue: impl FnOnce(&tcsparse_gpu::Dense<'_, H>, &mut tcsparse_gpu::DenseMut<'_, H>),
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (bh, ch) = (to_half::<H>(d.b), to_half::<H>(d.c0));
    let bd = gpu.upload(&bh).unwrap();
    let mut cd = gpu.upload(&ch).unwrap();
    enqueue(
        &tcsparse_gpu::Dense::new(&bd, d.n, d.ldb),
        &mut tcsparse_gpu::DenseMut::new(&mut cd, d.n, d.ldc),
    );
    let got: Vec<H> = gpu.download(&cd).unwrap();
    (widen(&bh), widen(&ch), widen(&got))
}

/// One product of the CSR kernel in `arith` (f16 or bf16), as [`run_half`].
fn run_csr(
    gpu: &Gpu,
    dev: &mut CsrSpmm,
    arith: RowTileArith,
    d: Dense<'_>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    match arith {
        RowTileArith::F16 => run_half_with::<half::f16>(gpu, d, |b, c| {
            dev.enqueue_half(d.alpha, b, d.beta, c).unwrap()
        }),
        RowTileArith::Bf16 => run_half_with::<half::bf16>(gpu, d, |b, c| {
            dev.enqueue_half(d.alpha, b, d.beta, c).unwrap()
        }),
        other => panic!("no CSR kernel in {other:?}"),
    }
}

/// One product on the GPU in `dev`'s arithmetic `arith`: f16 / bf16 as [`run_half`], 3×TF32 on
/// f32 operands as given. Returns B, C0 (as the kernel saw them, widened) and C.
fn run_in(
    gpu: &Gpu,
    dev: &mut RowTileDevice,
    arith: RowTileArith,
    d: Dense<'_>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    match arith {
        RowTileArith::F16 => run_half::<half::f16>(gpu, dev, d),
        RowTileArith::Bf16 => run_half::<half::bf16>(gpu, dev, d),
        _ => {
            let bd = gpu.upload(d.b).unwrap();
            let mut cd = gpu.upload(d.c0).unwrap();
            dev.enqueue(
                d.alpha,
                &tcsparse_gpu::Dense::new(&bd, d.n, d.ldb),
                d.beta,
                &mut tcsparse_gpu::DenseMut::new(&mut cd, d.n, d.ldc),
            )
            .unwrap();
            (d.b.to_vec(), d.c0.to_vec(), gpu.download(&cd).unwrap())
        }
    }
}

/// The kernels of `arith` (TC16 and TC32) on [`matrices`] at every N of [`NS`] and every schedule
/// of `scheds`, β = 0 with NaN-poisoned C and β ≠ 0 with padded leading dimensions (operands from
/// `seed`). Returns the largest scaled error.
fn arith_cases(gpu: &Gpu, arith: RowTileArith, scheds: &[RowTileSchedule], seed: u64) -> f64 {
    let mut worst = 0f64;
    for (name, a) in banded_clustered_and_edges(700, 1000, 31) {
        let bound = Bound::of(arith, a.longest_row());
        for base in [RowTileKernel::TC16, RowTileKernel::TC32] {
            let kernel = base.with_arith(arith);
            let m = RowTileTcf::from_csr(&a, kernel.window_rows as usize).unwrap();
            let mut dev =
                RowTileDevice::upload_as(gpu, &m, false, arith, RowTileSchedule::Packed(1))
                    .unwrap();
            assert_eq!(dev.kernel(), kernel);
            for n in NS {
                for &sched in scheds {
                    dev.set_schedule(gpu, sched).unwrap();
                    for &(alpha, beta, pad) in &[(1.0f32, 0.0f32, 0usize), (-0.75, 1.25, 5)] {
                        let (ldb, ldc, b, c0) = operands(&a, n, pad, beta, seed);
                        let (b, c0, got) = run_in(
                            gpu,
                            &mut dev,
                            arith,
                            Dense::new(alpha, &b, ldb, beta, &c0, ldc, n),
                        );
                        let what =
                            format!("{}/{name}/n={n}/{sched}/α={alpha}/β={beta}", kernel.name());
                        let d = Dense::new(alpha, &b, ldb, beta, &c0, ldc, n);
                        worst = worst.max(check(&what, &a, d, &got, bound, &|_, _| false));
                    }
                }
            }
        }
    }
    worst
}

/// Packed and split schedules: split windows add f32 partial sums (β pre-scale and atomics in
/// 3×TF32; scratch rows and the finish kernel in f16 / bf16).
const SCHEDULES: [RowTileSchedule; 4] = [
    RowTileSchedule::Packed(1),
    RowTileSchedule::Packed(4),
    RowTileSchedule::Split { max_blocks: 1 },
    RowTileSchedule::Split { max_blocks: 3 },
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_kernels_match_reference() {
    let worst = arith_cases(&gpu(), RowTileArith::F16, &SCHEDULES, 3000);
    println!("f16 row-tile kernels: worst scaled error {worst:.3e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bf16_kernels_match_reference() {
    let worst = arith_cases(&gpu(), RowTileArith::Bf16, &SCHEDULES, 3000);
    println!("bf16 row-tile kernels: worst scaled error {worst:.3e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn three_tf32_kernels_match_reference_at_f32_grade() {
    let worst = arith_cases(&gpu(), RowTileArith::Tf32x3, &SCHEDULES, 5000);
    println!("3xTF32 row-tile kernels: worst scaled error {worst:.3e}");
}

/// NaN and ∞ in A stay in their row (a row's products never meet another row's values); NaN and
/// ∞ in B reach every element whose reference has them (and, through 0·∞ with a block's absent
/// entries, possibly others of the windows that gather that row of B: those are not checked).
fn non_finite_cases(gpu: &Gpu, arith: RowTileArith) {
    let n = 40;
    let (a, b) = non_finite_operands(n, n);
    let bound = Bound::of(arith, a.longest_row());
    let c0 = vec![f32::NAN; 70 * n];
    for window_rows in [16usize, 32] {
        let m = RowTileTcf::from_csr(&a, window_rows).unwrap();
        let mut dev =
            RowTileDevice::upload_as(gpu, &m, false, arith, RowTileSchedule::Packed(2)).unwrap();
        let (b, _, got) = run_in(gpu, &mut dev, arith, Dense::new(1.0, &b, n, 0.0, &c0, n, n));
        // Row 3: +∞ in every feature B's row 11 leaves alone (A's ∞ times positive B); 3×TF32
        // multiplies that ∞ by B's small parts too (0, or of the other sign: NaN), so there it is
        // only non-finite. Row 40: NaN.
        for f in 0..n {
            if f != 5 && f != 9 {
                let g = got[3 * n + f];
                if arith == RowTileArith::Tf32x3 {
                    assert!(!g.is_finite(), "{arith:?}: C[3][{f}] = {g}");
                } else {
                    assert_eq!(g, f32::INFINITY, "{arith:?}: C[3][{f}]");
                }
            }
            assert!(got[40 * n + f].is_nan(), "{arith:?}: C[40][{f}]");
        }
        // Windows that gather B's row 11: features 5 and 9 may be non-finite anywhere there.
        let touches: Vec<bool> = (0..m.num_windows())
            .map(|w| {
                let rwo = m.row_window_offset();
                m.block_cols()[8 * rwo[w] as usize..8 * rwo[w + 1] as usize].contains(&11)
            })
            .collect();
        let skip = |r: usize, f: usize| {
            r == 3 || r == 40 || ((f == 5 || f == 9) && touches[r / window_rows])
        };
        let what = format!("{arith:?} non-finite, {window_rows}-row windows");
        let d = Dense::new(1.0, &b, n, 0.0, &c0, n, n);
        check(&what, &a, d, &got, bound, &skip);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn non_finite_values_propagate_in_every_arithmetic() {
    let gpu = gpu();
    for arith in [RowTileArith::F16, RowTileArith::Bf16, RowTileArith::Tf32x3] {
        non_finite_cases(&gpu, arith);
    }
}

/// `m` on the GPU for the masked kernel of `arith`, one window per thread block.
fn upload_packed(gpu: &Gpu, m: &RowTileTcf, arith: RowTileArith) -> RowTileDevice {
    RowTileDevice::upload_as(gpu, m, false, arith, RowTileSchedule::Packed(1)).unwrap()
}

/// A result beyond f16's range is ±∞ as a cast (from ±65520 on), one below stays finite; in
/// bf16 the same values are finite.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_overflow_is_infinite_as_a_cast() {
    let gpu = gpu();
    let t: Vec<(u32, u32, f32)> = (0..4u32).map(|i| (i, i, 1.0)).collect();
    let a = csr_from_triplets(4, 4, &t).unwrap();
    let n = 8;
    let b = vec![65504.0f32; 4 * n];
    let m = RowTileTcf::from_csr(&a, 16).unwrap();
    for (alpha, want) in [
        (1.0f32, 65504.0f32),
        (1.0009, f32::INFINITY),
        (-1.0009, f32::NEG_INFINITY),
        (1.0001, 65504.0),
    ] {
        let mut dev = upload_packed(&gpu, &m, RowTileArith::F16);
        let c0 = vec![0.0f32; 4 * n];
        let (_, _, got) =
            run_half::<half::f16>(&gpu, &mut dev, Dense::new(alpha, &b, n, 0.0, &c0, n, n));
        // The reference rounds as `half` does.
        assert_eq!(half::f16::from_f32(alpha * 65504.0).to_f32(), want);
        assert!(got.iter().all(|&g| g == want), "α = {alpha}: {got:?}");
        let mut dev = upload_packed(&gpu, &m, RowTileArith::Bf16);
        let (_, _, got) =
            run_half::<half::bf16>(&gpu, &mut dev, Dense::new(alpha, &b, n, 0.0, &c0, n, n));
        assert!(
            got.iter().all(|g| g.is_finite()),
            "bf16, α = {alpha}: {got:?}"
        );
    }
}

/// A half kernel refuses f32 operands and the other 16-bit type before anything is queued, and
/// dense tiles on upload.
#[test]
#[ignore = "needs a CUDA GPU"]
fn half_kernels_refuse_other_operand_types() {
    let gpu = gpu();
    let a = Gen::new(40, 40, 4, 3).build();
    let m = RowTileTcf::from_csr(&a, 16).unwrap();
    let mut dev = upload_packed(&gpu, &m, RowTileArith::F16);
    let n = 8;
    let b = gpu.upload(&vec![0f32; 40 * n]).unwrap();
    let mut c = gpu.upload(&vec![0f32; 40 * n]).unwrap();
    assert!(dev.run(1.0, &b, 0.0, &mut c, n).is_err());
    let b = gpu.upload(&vec![half::bf16::ZERO; 40 * n]).unwrap();
    let mut c = gpu.upload(&vec![half::bf16::ZERO; 40 * n]).unwrap();
    assert!(
        dev.enqueue_half(
            1.0,
            &tcsparse_gpu::Dense::packed(&b, n),
            0.0,
            &mut tcsparse_gpu::DenseMut::packed(&mut c, n)
        )
        .is_err()
    );
    assert!(
        RowTileDevice::upload_as(
            &gpu,
            &m,
            true,
            RowTileArith::F16,
            RowTileSchedule::Packed(1)
        )
        .is_err()
    );
}

/// Every shared dataset (values scaled into [-1, 1], so f16 holds them) in f16, bf16 and
/// 3×TF32 at N = 32 and 128, TC16 packed and split.
#[test]
#[ignore = "needs a CUDA GPU"]
fn shared_datasets_meet_the_bounds_in_every_arithmetic() {
    let gpu = gpu();
    let mut count = 0;
    for_each_dataset(37, |name, a, _| {
        let mut a = a.clone();
        let max = a.data().iter().fold(0f32, |m, v| m.max(v.abs()));
        if max > 0.0 {
            a.data_mut().iter_mut().for_each(|v| *v /= max);
        }
        let m = RowTileTcf::from_csr(&a, 16).unwrap();
        for arith in [RowTileArith::F16, RowTileArith::Bf16, RowTileArith::Tf32x3] {
            let bound = Bound::of(arith, a.longest_row());
            let mut dev =
                RowTileDevice::upload_as(&gpu, &m, false, arith, RowTileSchedule::Packed(4))
                    .unwrap();
            for (n, sched) in [32usize, 128].into_iter().flat_map(|n| {
                [
                    RowTileSchedule::Packed(4),
                    RowTileSchedule::Split { max_blocks: 8 },
                ]
                .map(|s| (n, s))
            }) {
                dev.set_schedule(&gpu, sched).unwrap();
                let b = dense(a.cols(), n, n, 7000 + n as u64);
                let c0 = dense(a.rows(), n, n, 8000 + n as u64);
                let (alpha, beta) = (1.0f32, 0.5f32);
                let (b, c0, got) = run_in(
                    &gpu,
                    &mut dev,
                    arith,
                    Dense::new(alpha, &b, n, beta, &c0, n, n),
                );
                let what = format!("{name}/{arith:?}/n={n}/{sched}");
                let d = Dense::new(alpha, &b, n, beta, &c0, n, n);
                let worst = check(&what, &a, d, &got, bound, &|_, _| false);
                println!("{what}: worst scaled error {worst:.3e}");
            }
        }
        count += 1;
    });
    println!("{count} shared datasets");
}

/// Median time per call (ms) of a queued launch.
type TimeFn<'a> = dyn Fn(&mut dyn FnMut() -> Result<(), tcsparse_gpu::GpuError>) -> f64 + 'a;

/// Largest |got − A·B| / allowed over the elements of `got` (α = 1, β = 0, packed), with the
/// allowance of [`check`]; ∞ for a non-finite result where the reference is finite.
fn worst_over_bound(a: &Csr, b: &[f32], got: &[f32], n: usize, bound: Bound) -> f64 {
    let ab = spmm_f64(a, b, n, n, false);
    let abs = spmm_f64(a, b, n, n, true);
    let mut ones = a.clone();
    ones.data_mut().iter_mut().for_each(|v| *v = 1.0);
    let sum_b = spmm_f64(&ones, b, n, n, true);
    let mut worst = 0f64;
    for (i, &g) in got.iter().enumerate().take(ab.len()) {
        let allowed = bound.rel * abs[i] + bound.per_b * sum_b[i] + bound.step;
        let err = (g as f64 - ab[i]).abs();
        let r = if !g.is_finite() {
            f64::INFINITY
        } else if err == 0.0 {
            0.0
        } else {
            err / allowed.max(f64::MIN_POSITIVE)
        };
        worst = worst.max(r);
    }
    worst
}

/// Geometric mean of `v` (0 when empty).
fn geomean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

/// The fastest of `candidates` (name, per-call time) as (ms, name).
fn fastest(candidates: Vec<(String, f64)>) -> Option<(f64, String)> {
    candidates
        .into_iter()
        .map(|(n, ms)| (ms, n))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

/// The same-precision cuSPARSE baseline (A, B, C in f16 / bf16, f32 compute) runs at one
/// algorithm at least in each type (its error against our bound printed per algorithm), and every
/// shared dataset
/// (values scaled into [-1, 1]) is timed at N = 32 and 128: the row-tile kernels at their best
/// window height and packing against cuSPARSE at its best algorithm, in the same type and in f32;
/// 3×TF32 against cuSPARSE f32. Prints each ratio and their geometric means (no speed is asserted).
#[test]
#[ignore = "needs a CUDA GPU"]
fn cusparse_half_baseline_runs_and_is_timed_beside_the_row_tile_kernels() {
    use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
    let gpu = gpu();
    let algs = [
        SpmmAlg::Default,
        SpmmAlg::CsrAlg1,
        SpmmAlg::CsrAlg2,
        SpmmAlg::CsrAlg3,
    ];
    // (label, ratios)
    let mut lines: Vec<(String, Vec<f64>)> = [
        "f16 vs cuSPARSE f16",
        "bf16 vs cuSPARSE bf16",
        "f16 vs cuSPARSE f32",
        "bf16 vs cuSPARSE f32",
        "3xTF32 vs cuSPARSE f32",
    ]
    .into_iter()
    .map(|l| (l.to_string(), Vec::new()))
    .collect();
    let time = |f: &mut dyn FnMut() -> Result<(), tcsparse_gpu::GpuError>| {
        gpu.time_launches(3, 10, f).unwrap().median_ms
    };
    for_each_dataset(41, |name, a, _| {
        let mut a = a.clone();
        let max = a.data().iter().fold(0f32, |m, v| m.max(v.abs()));
        if max > 0.0 {
            a.data_mut().iter_mut().for_each(|v| *v /= max);
        }
        let csr = CusparseCsr::new(&gpu, &a).unwrap();
        let k = a.longest_row();
        for n in [32usize, 128] {
            let b = dense(a.cols(), n, n, 9000 + n as u64);
            // cuSPARSE f32 at its fastest algorithm.
            let bd = gpu.upload(&b).unwrap();
            let mut cd = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
            let mut f32_times = Vec::new();
            for alg in algs {
                let Ok(mut s) = CusparseSpmm::with_buffers(&gpu, &csr, n, alg, &bd, &mut cd) else {
                    continue;
                };
                let ms = time(&mut || s.run(1.0, &bd, 0.0, &mut cd, n));
                f32_times.push((alg.name().to_string(), ms));
            }
            let (cus32, cus32_alg) = fastest(f32_times).expect("cuSPARSE f32 runs");
            // 3xTF32 row-tile kernels (f32 operands).
            let mut x3 = Vec::new();
            for rows in [16usize, 32] {
                let m = RowTileTcf::from_csr(&a, rows).unwrap();
                for sched in [
                    RowTileSchedule::Packed(1),
                    RowTileSchedule::Packed(4),
                    RowTileSchedule::Split { max_blocks: 8 },
                ] {
                    let mut dev =
                        RowTileDevice::upload_as(&gpu, &m, false, RowTileArith::Tf32x3, sched)
                            .unwrap();
                    let ms = time(&mut || dev.run(1.0, &bd, 0.0, &mut cd, n));
                    x3.push((format!("{} {sched}", dev.kernel().name()), ms));
                }
            }
            let (x3_ms, x3_name) = fastest(x3).unwrap();
            println!(
                "{name} n={n}: 3xTF32 {x3_ms:.4} ms ({x3_name}), cuSPARSE f32 {cus32:.4} ms \
                 ({cus32_alg}): {:.2}x",
                cus32 / x3_ms
            );
            lines[4].1.push(cus32 / x3_ms);
            for (ti, arith) in [RowTileArith::F16, RowTileArith::Bf16]
                .into_iter()
                .enumerate()
            {
                let bound = Bound::of(arith, k);
                let (ours, theirs) = match arith {
                    RowTileArith::F16 => {
                        half_timings::<half::f16>(&gpu, &a, &csr, &b, n, bound, &algs, &time, name)
                    }
                    _ => {
                        half_timings::<half::bf16>(&gpu, &a, &csr, &b, n, bound, &algs, &time, name)
                    }
                };
                let ty = arith.name();
                println!(
                    "{name} n={n}: {ty} {:.4} ms ({}), cuSPARSE {ty} {:.4} ms ({}): {:.2}x; \
                     vs cuSPARSE f32: {:.2}x",
                    ours.0,
                    ours.1,
                    theirs.0,
                    theirs.1,
                    theirs.0 / ours.0,
                    cus32 / ours.0
                );
                lines[ti].1.push(theirs.0 / ours.0);
                lines[2 + ti].1.push(cus32 / ours.0);
            }
        }
    });
    for (label, r) in &lines {
        let min = r.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "geomean (shared datasets, {label}) {:.2}x over {} cases, lowest {min:.2}x",
            geomean(r),
            r.len()
        );
    }
}

/// Times the f16 / bf16 row-tile kernels (TC16, TC32 at 1, 4, 16 windows per TB and split at 8
/// and 16 blocks) and cuSPARSE
/// in `H` at every algorithm it accepts (each checked against the bound first) on `a` at width
/// `n`: the fastest of each as (ms, name).
#[allow(clippy::too_many_arguments)]
fn half_timings<H: RowTileHalf>(
    gpu: &Gpu,
    a: &Csr,
    csr: &tcsparse_gpu::baselines::cusparse::CusparseCsr,
    b: &[f32],
    n: usize,
    bound: Bound,
    algs: &[tcsparse_gpu::baselines::cusparse::SpmmAlg],
    time: &TimeFn<'_>,
    name: &str,
) -> ((f64, String), (f64, String)) {
    use tcsparse_gpu::baselines::cusparse::CusparseSpmmHalf;
    let bh = to_half::<H>(b);
    let bw = widen(&bh);
    let bd = gpu.upload(&bh).unwrap();
    let mut cd = gpu.alloc_zeros::<H>(a.rows() * n).unwrap();
    let mut ours = Vec::new();
    for rows in [16usize, 32] {
        let m = RowTileTcf::from_csr(a, rows).unwrap();
        let scheds = [1u32, 4, 16]
            .map(RowTileSchedule::Packed)
            .into_iter()
            .chain([8, 16].map(|max_blocks| RowTileSchedule::Split { max_blocks }));
        for sched in scheds {
            let mut dev = RowTileDevice::upload_as(gpu, &m, false, H::ARITH, sched).unwrap();
            let ms = time(&mut || {
                dev.enqueue_half::<H>(
                    1.0,
                    &tcsparse_gpu::Dense::packed(&bd, n),
                    0.0,
                    &mut tcsparse_gpu::DenseMut::packed(&mut cd, n),
                )
            });
            ours.push((format!("{} {}", dev.kernel().name(), dev.schedule()), ms));
        }
    }
    let mut theirs = Vec::new();
    for &alg in algs {
        let mut s = match CusparseSpmmHalf::<H>::new(gpu, csr, a.data(), n, alg) {
            Ok(s) => s,
            Err(e) => {
                println!(
                    "{name}: cuSPARSE {} {} refused: {e}",
                    H::ARITH.name(),
                    alg.name()
                );
                continue;
            }
        };
        s.run(1.0, &bd, 0.0, &mut cd).unwrap();
        let got = widen(&gpu.download(&cd).unwrap());
        // cuSPARSE's accuracy is its own: printed against our bound, not asserted (a baseline
        // outside it is reported, and still timed).
        let worst = worst_over_bound(a, &bw, &got, n, bound);
        println!(
            "{name}: cuSPARSE {} {} n={n}: worst error / bound {worst:.3}",
            H::ARITH.name(),
            alg.name()
        );
        assert!(!worst.is_nan(), "{name}: cuSPARSE {} gave NaN", alg.name());
        let ms = time(&mut || s.run(1.0, &bd, 0.0, &mut cd));
        theirs.push((alg.name().to_string(), ms));
    }
    let ours = fastest(ours).unwrap();
    let theirs = fastest(theirs)
        .unwrap_or_else(|| panic!("{name}: cuSPARSE takes no algorithm in {}", H::ARITH.name()));
    (ours, theirs)
}

/// Widths of the CSR kernel's tests: one feature, ragged (scalar loads and scratch atomics), one
/// slab exactly, a slab and one, three slabs.
const CSR_NS: [usize; 5] = [1, 37, 128, 129, 300];

/// The CSR kernel in f16 and bf16 on [`banded_clustered_and_edges`] at every width of
/// [`CSR_NS`] and nonzero budgets that split rows (3, 16) or not (256), β = 0 with NaN-poisoned C
/// and β ≠ 0 with padded leading dimensions (padding never written), against the f64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn csr_half_kernels_match_reference() {
    let gpu = gpu();
    for arith in [RowTileArith::F16, RowTileArith::Bf16] {
        let mut worst = 0f64;
        let mut split_rows = 0;
        for (name, a) in banded_clustered_and_edges(700, 1000, 31) {
            let bound = Bound::csr(arith, a.longest_row());
            for chunk in [3u32, 16, 256] {
                let mut dev = CsrSpmm::with_chunk(&gpu, &a, chunk).unwrap();
                split_rows += dev.num_split_rows();
                for n in CSR_NS {
                    for &(alpha, beta, pad) in &[(1.0f32, 0.0f32, 0usize), (-0.75, 1.25, 5)] {
                        let (ldb, ldc, b, c0) = operands(&a, n, pad, beta, 4000);
                        let d = Dense::new(alpha, &b, ldb, beta, &c0, ldc, n);
                        let (b, c0, got) = run_csr(&gpu, &mut dev, arith, d);
                        let what = format!("CSR {arith:?}/{name}/chunk {chunk}/n={n}/β={beta}");
                        let d = Dense::new(alpha, &b, ldb, beta, &c0, ldc, n);
                        worst = worst.max(check(&what, &a, d, &got, bound, &|_, _| false));
                    }
                }
            }
        }
        assert!(split_rows > 0, "no case split a row");
        println!("CSR kernel in {arith:?}: worst scaled error {worst:.3e}");
    }
}

/// NaN and ∞ in A and B reach exactly the elements whose f64 reference has them (the CSR kernel
/// multiplies only stored nonzeros), split rows included; an f16 result beyond the range is ±∞.
#[test]
#[ignore = "needs a CUDA GPU"]
fn csr_half_kernels_propagate_non_finite_values_and_overflow_as_a_cast() {
    let gpu = gpu();
    let n = 40;
    let (a, b) = non_finite_operands(n, n);
    let c0 = vec![f32::NAN; 70 * n];
    for arith in [RowTileArith::F16, RowTileArith::Bf16] {
        let bound = Bound::csr(arith, a.longest_row());
        for chunk in [2u32, 256] {
            let mut dev = CsrSpmm::with_chunk(&gpu, &a, chunk).unwrap();
            let (b, _, got) = run_csr(
                &gpu,
                &mut dev,
                arith,
                Dense::new(1.0, &b, n, 0.0, &c0, n, n),
            );
            let what = format!("CSR {arith:?} non-finite, chunk {chunk}");
            check(
                &what,
                &a,
                Dense::new(1.0, &b, n, 0.0, &c0, n, n),
                &got,
                bound,
                &|_, _| false,
            );
        }
    }
    let t: Vec<(u32, u32, f32)> = (0..4u32).map(|i| (i, i, 1.0)).collect();
    let a = csr_from_triplets(4, 4, &t).unwrap();
    let n = 8;
    let b = vec![65504.0f32; 4 * n];
    let c0 = vec![0.0f32; 4 * n];
    let mut dev = CsrSpmm::new(&gpu, &a).unwrap();
    for (alpha, want) in [
        (1.0f32, 65504.0f32),
        (1.0009, f32::INFINITY),
        (-1.0009, f32::NEG_INFINITY),
        (1.0001, 65504.0),
    ] {
        let d = Dense::new(alpha, &b, n, 0.0, &c0, n, n);
        let (_, _, got) = run_csr(&gpu, &mut dev, RowTileArith::F16, d);
        assert!(got.iter().all(|&g| g == want), "α = {alpha}: {got:?}");
    }
}

/// Operands shorter than the shapes need are refused before anything is queued.
#[test]
#[ignore = "needs a CUDA GPU"]
fn csr_half_kernel_refuses_short_operands() {
    let gpu = gpu();
    let a = Gen::new(40, 30, 4, 3).build();
    let mut dev = CsrSpmm::new(&gpu, &a).unwrap();
    let n = 8;
    // A B one element short, then a C one element short (each beside a long enough other).
    for (b_len, c_len) in [(30 * n - 1, 40 * n), (30 * n, 40 * n - 1)] {
        let b = gpu.upload(&vec![half::f16::ZERO; b_len]).unwrap();
        let mut c = gpu.upload(&vec![half::f16::ZERO; c_len]).unwrap();
        let r = dev.enqueue_half(
            1.0,
            &tcsparse_gpu::Dense::packed(&b, n),
            0.0,
            &mut tcsparse_gpu::DenseMut::packed(&mut c, n),
        );
        assert!(
            matches!(r, Err(tcsparse_gpu::GpuError::Invalid(_))),
            "B {b_len}, C {c_len}: {r:?}"
        );
    }
}
