//! GPU failures as typed errors (ignored by default; `--include-ignored` on a GPU machine, where
//! they FAIL without one): device out of memory during preparation, upload and products, forced
//! deterministically with the GPU handle's allocation budget (`Gpu::set_alloc_budget`); after a
//! failed preparation nothing stays allocated (100 failing preparations, device free memory
//! flat); a product after a failure still gives the right result.
//!
//! Device free memory is the whole device's: run this binary with the GPU to itself (the GPU
//! bundle's run.sh runs one test binary at a time); another process allocating meanwhile fails
//! the flat-memory check without a leak of ours.

use tcsparse::formats::Csr;
use tcsparse::formats::generate::banded;
use tcsparse::gpu::{Gpu, GpuError, GpuErrorKind};
use tcsparse::{Error, KernelRequest, SpmvOptions};

mod support;
use support::engine_and_gpu;
use support::reproducible_options as spmm_options;

fn matrix() -> Csr {
    banded(3000, 9, 0.6, 7).expect("valid generator")
}

fn synced_free(gpu: &Gpu) -> usize {
    gpu.synchronize().expect("sync");
    gpu.memory_info().expect("cuMemGetInfo").0
}

/// Device free memory may move by the driver's allocation granularity, not by a preparation.
const FLAT_SLACK: usize = 4 << 20;

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_upload_past_the_budget_is_out_of_memory_and_draws_nothing() {
    let gpu = Gpu::require().expect("this test needs a CUDA GPU");
    gpu.set_alloc_budget(Some(1000));
    let e = gpu
        .upload(&[1f32; 300])
        .expect_err("1200 bytes over a 1000-byte budget");
    assert_eq!(e.kind(), GpuErrorKind::OutOfMemory, "{e}");
    assert!(matches!(
        e,
        GpuError::OutOfMemory {
            requested: 1200,
            drawn: 0,
            limit: 1000
        }
    ));
    let a = gpu.upload(&[2f32; 250]).expect("1000 bytes fit");
    assert_eq!(gpu.download(&a).unwrap(), vec![2f32; 250]);
    assert!(gpu.alloc_zeros::<u8>(1).is_err());
    gpu.set_alloc_budget(None);
    assert!(gpu.alloc_zeros::<u8>(1 << 20).is_ok());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn failed_preparations_are_typed_and_leave_no_device_memory() {
    let (engine, gpu) = engine_and_gpu();
    let a = matrix();
    // Each preparation's allocations, without a budget.
    type Prep<'a> = Box<dyn Fn() -> Result<(), tcsparse::Error> + 'a>;
    let (e, m) = (&engine, &a);
    let spmm = |name, kernel| -> (&str, Prep) {
        (
            name,
            Box::new(move || e.prepare_spmm(m, &spmm_options(kernel)).map(drop)),
        )
    };
    let preps: Vec<(&str, Prep)> = vec![
        spmm("SpMM Acc-SpMM", KernelRequest::AccSpmm),
        spmm("SpMM CSR", KernelRequest::Csr),
        spmm("SpMM cuSPARSE", KernelRequest::Cusparse),
        (
            "SpMV",
            Box::new(|| {
                let o = SpmvOptions::builder().tune(false).build();
                engine.prepare_spmv(&a, &o).map(drop)
            }),
        ),
    ];
    let mut full = Vec::new();
    for (what, prep) in &preps {
        gpu.set_alloc_budget(None);
        prep().unwrap_or_else(|e| panic!("{what} without a budget: {e}"));
        let drawn = gpu.alloc_budget().0;
        assert!(drawn > 0, "{what} allocated nothing through the budget");
        full.push(drawn);
        // One failure first, so modules, library handles and the pool are warm.
        gpu.set_alloc_budget(Some(0));
        assert!(prep().is_err(), "{what} with a budget of 0");
    }
    let before = synced_free(&gpu);
    // 100 failing preparations: budgets from 0 to just under what each preparation draws, in
    // 25 steps, round robin over the preparations (a budget that a preparation fits by leaving
    // out an optional device array does not count).
    let (mut failures, mut attempts) = (0, 0u64);
    while failures < 100 && attempts < 400 {
        let k = attempts as usize % preps.len();
        let ((what, prep), drawn) = (&preps[k], full[k]);
        let budget = drawn * ((attempts / preps.len() as u64) % 25) / 25;
        attempts += 1;
        gpu.set_alloc_budget(Some(budget));
        match prep() {
            Err(e) => {
                assert_eq!(
                    e.gpu_kind(),
                    Some(GpuErrorKind::OutOfMemory),
                    "{what}, budget {budget} of {drawn}: {e}"
                );
                failures += 1;
            }
            Ok(()) => assert!(gpu.alloc_budget().0 <= budget),
        }
    }
    gpu.set_alloc_budget(None);
    let after = synced_free(&gpu);
    eprintln!(
        "{attempts} preparations under budgets, {failures} failed; device free memory {before} → {after} bytes"
    );
    assert_eq!(failures, 100, "{attempts} preparations under budgets");
    assert!(
        after + FLAT_SLACK >= before,
        "device free memory fell from {before} to {after} over {failures} failed preparations"
    );
    // The engine still prepares and multiplies correctly afterwards.
    let mut p = engine
        .prepare_spmm(&a, &spmm_options(KernelRequest::Csr))
        .unwrap();
    p.set_n(1);
    let b = vec![1f32; a.cols()];
    let mut c = vec![f32::NAN; a.rows()];
    p.spmm(1.0, &b, 0.0, &mut c).unwrap();
    let ip = a.indptr();
    let ip = ip.raw_storage();
    for r in 0..a.rows() {
        let want: f64 = a.data()[ip[r] as usize..ip[r + 1] as usize]
            .iter()
            .map(|&v| v as f64)
            .sum();
        assert!(
            (c[r] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "row {r}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn products_out_of_memory_are_typed_and_the_next_product_is_right() {
    let (engine, gpu) = engine_and_gpu();
    let a = matrix();
    let x: Vec<f32> = (0..a.cols()).map(|i| (i % 13) as f32 - 6.0).collect();

    let mut p = engine
        .prepare_spmm(&a, &spmm_options(KernelRequest::AccSpmm))
        .unwrap();
    p.set_n(1);
    oom_then_right(&gpu, "SpMM", a.rows(), |c| p.spmm(1.0, &x, 0.0, c));

    // (Untuned: our walk, bitwise reproducible; a tuned one may keep cuSPARSE.)
    let untuned = SpmvOptions::builder().tune(false).build();
    let mut s = engine.prepare_spmv(&a, &untuned).unwrap();
    oom_then_right(&gpu, "SpMV", a.rows(), |y| s.spmv(1.0, &x, 0.0, y));
}

/// `product` (into a host output of `len` values) runs once; with no device memory left it fails
/// as out of memory, typed; with the budget lifted it gives the first result again.
fn oom_then_right(
    gpu: &Gpu,
    what: &str,
    len: usize,
    mut product: impl FnMut(&mut [f32]) -> Result<(), Error>,
) {
    let mut want = vec![0f32; len];
    product(&mut want).unwrap();
    gpu.set_alloc_budget(Some(0));
    let mut c = vec![0f32; len];
    let e = product(&mut c).expect_err("no device memory left");
    assert_eq!(e.gpu_kind(), Some(GpuErrorKind::OutOfMemory), "{what}: {e}");
    gpu.set_alloc_budget(None);
    product(&mut c).unwrap();
    assert_eq!(c, want, "{what} after a failed product");
}
