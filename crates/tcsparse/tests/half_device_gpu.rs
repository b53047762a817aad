//! f16 / bf16 products on device operands (ignored without a GPU; they FAIL under
//! `--include-ignored` on a machine without one): `Prepared::spmm_device_typed` against the f64
//! reference within `Prepared::error_bound` on several widths (β = 0 with C filled with NaN, and
//! β ≠ 0), in the original order of an unreordered matrix and in the prepared order of a
//! reordered one and in the original order of a reordered one (rows permuted on the device); the tuned
//! preparation keeps its fastest sample, cuSPARSE in the same type among them; the shared
//! datasets go through the same path.

use tcsparse::element::{bf16, f16};
use tcsparse::formats::Csr;
use tcsparse::gpu::Gpu;
use tcsparse::reorder::Mode;
use tcsparse::{
    DType, Element, Engine, ExecKernel, PrepareOptions, Prepared, ReorderChoice, RowOrder,
};

mod support;
use support::{datasets_or_skip, product_bound, reference};
use support::{engine_and_gpu, gpu_engine as engine};

/// Device products in `T` of `p` (prepared for `T` at its width) against `a` in f64: `a` is the
/// matrix in the order the device path takes B and C in (the prepared matrix in the prepared
/// order, the original one in the original order).
fn device_products<T: Element + tcsparse::cudarc::driver::DeviceRepr>(
    gpu: &Gpu,
    p: &mut Prepared,
    a: &Csr,
    what: &str,
) {
    let n = p.n();
    let k = a.longest_row();
    let b: Vec<T> = support::values(a.cols() * n, 21)
        .into_iter()
        .map(T::from_f32)
        .collect();
    let bw: Vec<f32> = b.iter().map(|v| v.to_f32()).collect();
    let bd = gpu.upload(&b).unwrap();
    for (alpha, beta) in [(1.0f32, 0.0f32), (-0.5, 2.0)] {
        let c0: Vec<T> = support::values(a.rows() * n, 22)
            .into_iter()
            .map(|v| T::from_f32(if beta == 0.0 { f32::NAN } else { v }))
            .collect();
        let c0w: Vec<f32> = c0.iter().map(|v| v.to_f32()).collect();
        let mut cd = gpu.upload(&c0).unwrap();
        p.spmm_device_typed(alpha, &bd, beta, &mut cd).unwrap();
        let got: Vec<f32> = gpu
            .download(&cd)
            .unwrap()
            .iter()
            .map(|v: &T| v.to_f32())
            .collect();
        let (want, scale) = reference(a, alpha, &bw, beta, &c0w, n);
        let check =
            tcsparse::accuracy::check_stored(&got, &want, &scale, p.error_bound(), k, T::DTYPE);
        assert!(
            check.passed(),
            "{what} {} {} n = {n}, α = {alpha}, β = {beta}: {check:?}",
            T::DTYPE,
            p.kernel()
        );
    }
}

/// `a` prepared at width `n` for B and C in `dtype` (f16 or bf16), products in the prepared order.
fn prepare_half(engine: &Engine, a: &Csr, n: usize, dtype: DType) -> Prepared {
    let opts = PrepareOptions::builder()
        .n(n)
        .dtype(dtype)
        .device_order(RowOrder::Prepared)
        .build();
    engine.prepare_spmm(a, &opts).unwrap()
}

/// [`device_products`] in `p`'s element type (f16 or bf16) against the prepared matrix (`p` runs
/// in the prepared order).
fn prepared_order_products(gpu: &Gpu, p: &mut Prepared, what: &str) {
    let pa = p.matrix().clone();
    match p.dtype() {
        DType::F16 => device_products::<f16>(gpu, p, &pa, what),
        _ => device_products::<bf16>(gpu, p, &pa, what),
    }
}

fn half_device<T: Element + tcsparse::cudarc::driver::DeviceRepr>(engine: &Engine, a: &Csr) {
    let gpu = engine.gpu().unwrap().clone();
    for n in [8usize, 32, 100, 128] {
        // Original order, nothing reordered.
        let opts = PrepareOptions::builder()
            .n(n)
            .dtype(T::DTYPE)
            .reorder(ReorderChoice::None)
            .build();
        let mut p = engine.prepare_spmm(a, &opts).unwrap();
        assert!(p.permutation().is_none());
        device_products::<T>(&gpu, &mut p, a, "not reordered");
        // Reordered (symmetric and row-only), in the prepared and in the original order (B and
        // C permuted on the device in T).
        for mode in [Mode::Symmetric, Mode::RowOnly] {
            for order in [RowOrder::Prepared, RowOrder::Original] {
                let opts = PrepareOptions::builder()
                    .n(n)
                    .dtype(T::DTYPE)
                    .reorder(ReorderChoice::Method("degree".into()))
                    .mode(Some(mode))
                    .device_order(order)
                    .build();
                let mut p = engine.prepare_spmm(a, &opts).unwrap();
                assert!(p.permutation().is_some());
                let reference = match order {
                    RowOrder::Prepared => p.matrix().clone(),
                    _ => a.clone(),
                };
                device_products::<T>(&gpu, &mut p, &reference, &format!("{mode:?} {order:?}"));
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_and_bf16_device_products_meet_the_reported_bound() {
    let engine = engine();
    let a = support::hub_rows_203();
    half_device::<f16>(&engine, &a);
    half_device::<bf16>(&engine, &a);
}

/// f32 through the typed entry point is `spmm_device`: the same bits (on a kernel that writes
/// every element with one plain store; a kernel that splits rows adds partial sums with atomics,
/// in an order that may differ between two calls).
#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_typed_device_product_is_spmm_device() {
    let (engine, gpu) = engine_and_gpu();
    let a = support::hub_rows_203();
    let n = 32;
    let mut opts = support::reproducible_options(tcsparse::KernelRequest::RowTile(
        tcsparse::RowTileKernel::TC16,
    ));
    opts.n = n;
    let mut p = engine.prepare_spmm(&a, &opts).unwrap();
    let b = support::values(a.cols() * n, 5);
    let bd = gpu.upload(&b).unwrap();
    let mut c1 = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
    let mut c2 = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
    p.spmm_device(1.0, &bd, 0.0, &mut c1).unwrap();
    p.spmm_device_typed(1.0, &bd, 0.0, &mut c2).unwrap();
    assert_eq!(gpu.download(&c1).unwrap(), gpu.download(&c2).unwrap());
}

/// A scattered matrix (`rows` square, 2 entries a row at pseudo-random columns, values in
/// f16's normal range): row-tile windows of one entry per block, where cuSPARSE may win.
fn scattered(rows: usize) -> Csr {
    let mut t = Vec::new();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for r in 0..rows as u32 {
        for k in 0..2u32 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            t.push((r, (s % rows as u64) as u32, 0.5 + 0.25 * k as f32));
        }
    }
    tcsparse::formats::csr::csr_from_triplets(rows, rows, &t).unwrap()
}

/// The tuned f16 / bf16 preparation keeps the fastest kernel it timed (row-tile or CSR; cuSPARSE in
/// the type is neither timed nor kept: no bound holds for it), and it meets the bound on the host
/// and device paths.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_tuned_half_preparation_keeps_its_fastest_sample() {
    let (engine, gpu) = engine_and_gpu();
    for a in [scattered(50_000), support::hub_rows_203()] {
        for dtype in [DType::F16, DType::BF16] {
            let mut p = prepare_half(&engine, &a, 32, dtype);
            let tuning = &p.report().tuning;
            assert!(
                !tuning.iter().any(|s| s.candidate.starts_with("cuSPARSE")),
                "cuSPARSE in {dtype} timed: {tuning:?}"
            );
            let fastest = tuning.iter().min_by(|x, y| x.ms.total_cmp(&y.ms)).unwrap();
            match p.kernel() {
                ExecKernel::RowTile { kernel, .. } => {
                    assert!(
                        fastest.candidate.starts_with(&kernel.name()),
                        "{} kept, {fastest:?} fastest",
                        p.kernel()
                    );
                }
                k @ ExecKernel::CsrCuda(_) => {
                    assert!(
                        fastest.candidate.starts_with(&k.to_string()),
                        "{k} kept, {fastest:?} fastest"
                    );
                }
                other => panic!("{dtype}: {other}"),
            }
            println!(
                "{} rows, {dtype}: {} kept ({})",
                a.rows(),
                p.kernel(),
                p.report().kernel_note
            );
            prepared_order_products(&gpu, &mut p, "tuned");
        }
    }
}

/// A tuned `Precision::F32` preparation never keeps, nor times, the 3×TF32 row-tile kernels
/// (their bound exceeds f32's at every row length); what it keeps meets f32's bound.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_tuning_keeps_f32_kernels() {
    let engine = engine();
    for a in [support::hub_rows_203(), scattered(50_000)] {
        let n = 64;
        let opts = PrepareOptions::builder()
            .n(n)
            .precision(tcsparse::Precision::F32)
            .build();
        let mut p = engine.prepare_spmm(&a, &opts).unwrap();
        let tuning = &p.report().tuning;
        println!("{} rows: {} kept; {tuning:?}", a.rows(), p.kernel());
        assert!(
            !tuning.iter().any(|s| s.candidate.contains("3xTF32")),
            "3xTF32 timed: {tuning:?}"
        );
        support::assert_f32_kernel(&p);
        let b = support::values(a.cols() * n, 31);
        let c0 = support::values(a.rows() * n, 32);
        let mut c = c0.clone();
        p.spmm(1.5, &b, -0.5, &mut c).unwrap();
        let (want, scale) = reference(&a, 1.5, &b, -0.5, &c0, n);
        // (α = 1.5 and β = −0.5: f32 roundings beyond the product's bound, support::product_bound.)
        let check = tcsparse::accuracy::check_stored(
            &c,
            &want,
            &scale,
            product_bound(&p, &a),
            a.longest_row(),
            DType::F32,
        );
        assert!(check.passed(), "{}: {check:?}", p.kernel());
    }
}

/// The shared datasets cora, west0067 and citeseer in f16 and bf16 through the device path (the
/// preparation's own choice of reordering, prepared order).
#[test]
#[ignore = "needs a CUDA GPU"]
fn shared_datasets_through_the_half_device_path() {
    let (engine, gpu) = engine_and_gpu();
    let Some(dir) = datasets_or_skip("run") else {
        return;
    };
    for name in ["cora", "west0067", "citeseer"] {
        let a = tcsparse::read(dir.join(format!("{name}.mtx.gz"))).unwrap();
        for dtype in [DType::F16, DType::BF16] {
            let mut p = prepare_half(&engine, &a, 64, dtype);
            prepared_order_products(&gpu, &mut p, name);
        }
    }
}
