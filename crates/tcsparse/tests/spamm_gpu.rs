//! GPU tests of the facade's SpAMM orchestration (ignored by default; they FAIL without a GPU,
//! never pass vacuously): C's rows split over several streams of one device and over every
//! device present give the single-GPU result bit for bit, and an error target is met.

use tcsparse::formats::generate::exponential_decay_dense;
use tcsparse::gpu::Gpu;
use tcsparse::gpu::spamm::{SpammBlock, SpammConfig, SpammPrecision, SpammRun, TauTarget};
use tcsparse::spamm::{DenseRef, SpammOptions, measured_error, spamm_on_group};
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
    let (c, report) = Engine::with_gpu(g.clone())
        .prepare_spamm(d, &opts)
        .unwrap()
        .spamm(d)
        .unwrap();
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
