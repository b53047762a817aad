//! GPU tests of the facade's SpAMM orchestration (ignored by default; they FAIL without a GPU,
//! never pass vacuously): C's rows split over several streams of one device and over every
//! device present give the single-GPU result bit for bit, an error target is met, and the
//! measured error checked on the device equals the CPU's.

use tcsparse::formats::generate::exponential_decay_dense;
use tcsparse::gpu::Gpu;
use tcsparse::gpu::spamm::{
    SpammBlock, SpammConfig, SpammPrecision, SpammRun, TauTarget, error_sums,
};
use tcsparse::spamm::{DenseRef, SpammOptions, SpammReport, measured_error, spamm_on_group};
use tcsparse::{DeviceGroup, DeviceSet, Engine, Precision};

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

fn cfg(s: usize) -> SpammConfig {
    SpammConfig {
        precision: SpammPrecision::Tf32x3,
        block: SpammBlock::B64,
        s,
        target: TauTarget::RelError(1e-5),
    }
}

/// The test's GPU, A (`n × n`, exponential decay at rate 0.1) and `A·A` at strided balance `s`
/// over a group of one handle: the single-GPU product a split must equal.
fn decay_case(n: usize, s: usize) -> (Gpu, Vec<f32>, (Vec<f32>, SpammRun)) {
    let g = gpu();
    let a = exponential_decay_dense(n, 0.1);
    let one = DeviceGroup::host_staged(vec![g.clone()], "one handle").unwrap();
    let single = spamm_on_group(
        &one,
        DenseRef::new(&a, n, n),
        DenseRef::new(&a, n, n),
        &cfg(s),
    )
    .unwrap();
    (g, a, single)
}

/// Asserts that `A·A` split over `group` at strided balance `s` covers C's rows in order, one
/// range per member, and gives `single` (the one-handle product, [`decay_case`]) bit for bit:
/// the same τ and valid products, the same tiles in the same order of accumulation per C element.
fn assert_split_equals_single(
    group: &DeviceGroup,
    a: &[f32],
    n: usize,
    s: usize,
    single: &(Vec<f32>, SpammRun),
) {
    let (c1, r1) = single;
    let (c, r) = spamm_on_group(
        group,
        DenseRef::new(a, n, n),
        DenseRef::new(a, n, n),
        &cfg(s),
    )
    .unwrap();
    assert_eq!(r.row_ranges.len(), group.len());
    assert_eq!(r.row_ranges.first().map(|x| x.0), Some(0));
    assert_eq!(r.row_ranges.last().map(|x| x.1), Some(n));
    assert_eq!((r.tau, r.valid_products), (r1.tau, r1.valid_products));
    assert_eq!(&c, c1, "{:?}", group.transport());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spamm_split_over_the_devices_equals_the_single_gpu_product() {
    let n = 900;
    let (g, a, single) = decay_case(n, 1);
    let mut groups = vec![DeviceGroup::streams_of(&g, 3).unwrap()];
    let count = Gpu::device_count();
    if count > 1 {
        groups.push(DeviceGroup::open(DeviceSet::first(count)).unwrap());
    }
    for group in &groups {
        assert_split_equals_single(group, &a, n, 1, &single);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_streams_give_the_single_gpu_result_and_error_target_is_met() {
    let n = 700;
    let (g, a, single) = decay_case(n, 2);
    assert_split_equals_single(&DeviceGroup::streams_of(&g, 2).unwrap(), &a, n, 2, &single);
    let (c1, r1) = single;
    let rows: Vec<usize> = (0..n).collect();
    let e = measured_error(&a, &a, &c1, n, n, &rows);
    println!("{r1:?} measured rel err {e:.3e}");
    assert!(r1.rel_bound <= 1e-5, "{r1:?}");
    assert!(e <= r1.rel_bound + 1e-6, "{e:.3e} vs {r1:?}");
    assert!(
        r1.valid_ratio < 0.5,
        "a decay matrix skips most tiles: {r1:?}"
    );
}

/// `d · d` by an engine on `g`.
fn engine_spamm(g: &Gpu, d: DenseRef<'_>, opts: &SpammOptions) -> (Vec<f32>, SpammReport) {
    Engine::with_gpu(g.clone())
        .prepare_spamm(d, opts)
        .unwrap()
        .spamm(d)
        .unwrap()
}

/// The engine's SpAMM on its GPU equals the product over a one-handle group, and its report
/// names the GPU path.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_engine_runs_spamm_on_its_gpu() {
    let n = 300;
    let (g, a, (want, _)) = decay_case(n, 1);
    let d = DenseRef::new(&a, n, n);
    let opts = SpammOptions::builder()
        .precision(Precision::Tf32x3)
        .measure_error(true, 0)
        .build();
    let (c, report) = engine_spamm(&g, d, &opts);
    assert_eq!(
        (report.backend, report.transport.as_str()),
        ("gpu", "single")
    );
    assert_eq!(report.precision, "3xtf32");
    assert_eq!(c, want);
    assert!(
        report.measured_error.unwrap() <= report.rel_bound + 1e-6,
        "{report:?}"
    );
}

/// A deterministic value in [-1, 1) from `i`.
fn val(i: usize) -> f32 {
    ((i.wrapping_mul(2654435761) >> 7) % 2000) as f32 / 1000.0 - 1.0
}

/// The device check (`error_sums`) against the CPU's `measured_error` on `rows`: the same
/// relative error to 1e-12 (each reference element is the CPU's bit for bit; only the order of
/// the final sums differs).
fn assert_device_check_matches(
    g: &Gpu,
    (a, b, c): (&[f32], &[f32], &[f32]),
    (m, n, k): (usize, usize, usize),
    rows: &[usize],
) -> f64 {
    let db = g.upload(if b.is_empty() { &[0.0][..] } else { b }).unwrap();
    let got = error_sums(g, a, &db, c, (m, n, k), rows)
        .unwrap()
        .relative();
    let want = measured_error(a, b, c, n, k, rows);
    assert!(
        got == want || (got - want).abs() <= 1e-12 * want.abs(),
        "{m}×{k}·{k}×{n}, {} rows: device {got:e}, CPU {want:e}",
        rows.len()
    );
    got
}

/// `a · b` in f32 (`m × k · k × n`, row-major), in ascending k.
fn product(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for t in 0..k {
            let x = a[i * k + t];
            for j in 0..n {
                c[i * n + j] += x * b[t * n + j];
            }
        }
    }
    c
}

/// Operands of `m × k · k × n` with zeros in A and C = the product perturbed by `noise`.
fn check_case(m: usize, n: usize, k: usize, noise: f32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let a: Vec<f32> = (0..m * k)
        .map(|i| if i % 5 == 0 { 0.0 } else { val(i) })
        .collect();
    let b: Vec<f32> = (0..k * n).map(|i| val(i + 7919)).collect();
    let mut c = product(&a, &b, (m, n, k));
    for (i, x) in c.iter_mut().enumerate() {
        *x += noise * val(i + 31);
    }
    (a, b, c)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_device_error_check_equals_the_cpu_measured_error() {
    let g = gpu();
    // Shapes off every block size (128 columns, 16 k steps, 64 rows per launch), one column,
    // one k step, no k step; samples with repeats and both edge rows, more than one launch.
    for (m, n, k) in [
        (37, 301, 45),
        (130, 129, 1),
        (5, 1, 1000),
        (70, 257, 33),
        (9, 40, 0),
        (200, 1000, 700),
    ] {
        let (a, b, c) = check_case(m, n, k, 1e-3);
        let mut dup: Vec<usize> = vec![0, m - 1, m / 2, m / 2, 0, m - 1];
        dup.extend((0..150).map(|i| (i * 7) % m));
        for rows in [vec![m - 1], (0..m).collect(), dup] {
            let e = assert_device_check_matches(&g, (&a, &b, &c), (m, n, k), &rows);
            assert!(e > 0.0, "{m}×{n}×{k}");
        }
    }
    // C equal to the f64 reference (small integers: every sum exact in f32) → 0.
    let (m, n, k) = (66, 150, 40);
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
    let c = product(&a, &b, (m, n, k));
    let all: Vec<usize> = (0..m).collect();
    assert_eq!(
        assert_device_check_matches(&g, (&a, &b, &c), (m, n, k), &all),
        0.0
    );
    // A zero: the reference is 0; C zero gives 0, C non-zero ‖C‖F of the rows.
    let zero_a = vec![0f32; m * k];
    let zero_c = vec![0f32; m * n];
    assert_eq!(
        assert_device_check_matches(&g, (&zero_a, &b, &zero_c), (m, n, k), &all),
        0.0
    );
    let e = assert_device_check_matches(&g, (&zero_a, &b, &c), (m, n, k), &all);
    let norm = c.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    assert!((e - norm).abs() <= 1e-12 * norm, "{e} vs {norm}");
    // Non-finite B where the sampled rows of A are 0: skipped, as on the CPU (finite).
    let mut a2 = a.clone();
    let mut b2 = b.clone();
    for i in 0..m {
        a2[i * k + 3] = 0.0;
    }
    b2[3 * n + 5] = f32::INFINITY;
    b2[3 * n + 140] = f32::NAN;
    let e = assert_device_check_matches(&g, (&a2, &b2, &c), (m, n, k), &all);
    assert!(e.is_finite(), "{e}");
    // A row outside C is refused.
    let db = g.upload(&b).unwrap();
    assert!(error_sums(&g, &a, &db, &c, (m, n, k), &[m]).is_err());
}

/// The engine's measured error (checked on its GPU) equals the CPU's on the C it returns, for
/// f32 operands on the device (B read where the product read it) and f16 ones (B uploaded again
/// in f32).
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_engine_measures_the_error_on_its_gpu() {
    let g = gpu();
    let (m, n) = (333, 333);
    let a = exponential_decay_dense(m, 0.05);
    let d = DenseRef::new(&a, m, n);
    for precision in [Precision::F32, Precision::Tf32, Precision::F16] {
        for sample in [0, 64, 100] {
            let opts = SpammOptions::builder()
                .precision(precision)
                .measure_error(true, sample)
                .build();
            let (c, report) = engine_spamm(&g, d, &opts);
            let rows = if sample == 0 || sample >= m {
                (0..m).collect::<Vec<_>>()
            } else {
                (0..sample)
                    .map(|i| i * m / sample + (m / sample) / 2)
                    .collect()
            };
            let want = measured_error(&a, &a, &c, n, n, &rows);
            let got = report.measured_error.unwrap();
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "{precision:?}, {sample} rows: {got:e} vs {want:e}"
            );
        }
    }
}
