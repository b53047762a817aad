//! Element types and 3×TF32 on a GPU engine (ignored without a GPU; they FAIL under
//! `--include-ignored` on a machine without one): B and C in f16 or bf16 run on the f16 / bf16
//! row-tile kernels or the CSR kernel and `Precision::Tf32x3` on the 3×TF32 ones, each within the bound
//! `Prepared::error_bound` reports, against the f64 reference; combinations no GPU kernel has are
//! refused at preparation with `Error::Unsupported` naming what was asked for, and f32 products
//! are unchanged.

use tcsparse::element::{bf16, f16};
use tcsparse::formats::Csr;
use tcsparse::formats::reference::spmm_f64;
use tcsparse::gpu::Gpu;
use tcsparse::{
    DType, Element, Engine, ExecKernel, KernelRequest, Precision, PrepareOptions,
    PrepareOptionsBuilder, Requested, RowTileArith, RowTileKernel,
};

mod support;
use support::gpu_engine as engine;
use support::{assert_element_type, assert_unsupported};

/// Products in `T` on a GPU preparation for `T` of `request` (`Auto`: tuned): the f16 / bf16
/// row-tile kernel of `arith` (not for a CSR request) or the CSR kernel runs, and every N meets
/// `Prepared::error_bound` (β = 0 with C poisoned by NaN, and β ≠ 0).
fn half_products<T: Element>(
    engine: &Engine,
    a: &Csr,
    arith: RowTileArith,
    request: KernelRequest,
) {
    let k = a.longest_row();
    for n in [8usize, 32, 37, 100, 128, 512, 1000] {
        let opts = PrepareOptions::builder()
            .n(n)
            .dtype(T::DTYPE)
            .kernel(request)
            .build();
        let mut p = engine.prepare_spmm(a, &opts).unwrap();
        let expected = match p.kernel() {
            ExecKernel::RowTile { kernel, .. } => {
                kernel.arith == arith && request != KernelRequest::Csr
            }
            ExecKernel::CsrCuda(_) => true,
            _ => false,
        };
        assert!(expected, "{} {request:?}: {}", T::DTYPE, p.kernel());
        assert_eq!(p.dtype(), T::DTYPE);
        let b: Vec<T> = support::values(a.cols() * n, 11)
            .into_iter()
            .map(T::from_f32)
            .collect();
        let bw: Vec<f32> = b.iter().map(|v| v.to_f32()).collect();
        let ab = spmm_f64(a, &bw, n, n, false);
        let abs = spmm_f64(a, &bw, n, n, true);
        for (alpha, beta) in [(1.0f32, 0.0f32), (-0.5, 2.0)] {
            let c0: Vec<T> = support::values(a.rows() * n, 12)
                .into_iter()
                .map(|v| T::from_f32(if beta == 0.0 { f32::NAN } else { v }))
                .collect();
            let mut c = c0.clone();
            p.spmm_typed(alpha, &b, beta, &mut c).unwrap();
            let got: Vec<f32> = c.iter().map(|v| v.to_f32()).collect();
            let c_old = |i: usize| {
                if beta == 0.0 {
                    0.0
                } else {
                    c0[i].to_f32() as f64
                }
            };
            let want: Vec<f64> = (0..ab.len())
                .map(|i| alpha as f64 * ab[i] + beta as f64 * c_old(i))
                .collect();
            let scale: Vec<f64> = (0..abs.len())
                .map(|i| (alpha as f64).abs() * abs[i] + (beta as f64).abs() * c_old(i).abs())
                .collect();
            let check =
                tcsparse::accuracy::check_stored(&got, &want, &scale, p.error_bound(), k, T::DTYPE);
            assert!(
                check.passed(),
                "{} n = {n}, α = {alpha}, β = {beta}: {check:?}",
                p.kernel()
            );
        }
        // The f32 device entry points do not take this preparation.
        let gpu = Gpu::require().unwrap();
        let bd = gpu.upload(&bw).unwrap();
        let mut cd = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
        let e = p.spmm_device(1.0, &bd, 0.0, &mut cd).unwrap_err();
        assert_element_type(&e, T::DTYPE, DType::F32);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f16_and_bf16_run_on_their_kernels_within_the_reported_bound() {
    let engine = engine();
    let a = support::hub_rows_203();
    for request in [KernelRequest::Auto, KernelRequest::Csr] {
        half_products::<f16>(&engine, &a, RowTileArith::F16, request);
        half_products::<bf16>(&engine, &a, RowTileArith::Bf16, request);
    }
    // TC32 on request; the report prints the kernel and its arithmetic.
    let opts = PrepareOptions::builder()
        .n(64)
        .dtype(DType::BF16)
        .kernel(KernelRequest::RowTile(RowTileKernel::TC32))
        .build();
    let p = engine.prepare_spmm(&a, &opts).unwrap();
    assert!(
        p.kernel().to_string().starts_with("TC32 bf16"),
        "{}",
        p.kernel()
    );
    // New values for the same pattern go up converted too.
    let mut p = engine
        .prepare_spmm(
            &a,
            &PrepareOptions::builder().n(8).dtype(DType::F16).build(),
        )
        .unwrap();
    let doubled: Vec<f32> = a.data().iter().map(|v| 2.0 * v).collect();
    p.update_values(&doubled).unwrap();
    let b = vec![f16::ONE; a.cols() * 8];
    let mut c = vec![f16::ZERO; a.rows() * 8];
    p.spmm_typed(1.0, &b, 0.0, &mut c).unwrap();
    for (r, row) in a.outer_iterator().enumerate() {
        let want: f64 = row.iter().map(|(_, &v)| 2.0 * v as f64).sum();
        let got = c[r * 8].to_f32() as f64;
        assert!(
            (got - want).abs() <= p.error_bound() * want.abs().max(1e-3) + 1e-3,
            "row {r}: {got} vs {want}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn three_tf32_prepares_the_split_row_tile_kernel_at_f32_grade() {
    let engine = engine();
    let a = support::hub_rows_203();
    let k = a.longest_row();
    for n in [8usize, 32, 100, 128, 512, 1000] {
        // Requested: the 3×TF32 row-tile kernel. Tuned: the faster of the 3×TF32 row-tile
        // kernels and the tuned f32 preparation, whose bound (γ_k) is below 3×TF32's.
        for request in [
            KernelRequest::RowTile(RowTileKernel::TC16),
            KernelRequest::Auto,
        ] {
            let opts = PrepareOptions::builder()
                .n(n)
                .precision(Precision::Tf32x3)
                .kernel(request)
                .build();
            let mut p = engine.prepare_spmm(&a, &opts).unwrap();
            let x3 = matches!(p.kernel(), ExecKernel::RowTile { kernel, .. } if kernel.arith == RowTileArith::Tf32x3);
            assert!(
                x3 || (p.precision() == Precision::F32 && request == KernelRequest::Auto),
                "{request:?}: {}",
                p.kernel()
            );
            let precision = if x3 {
                Precision::Tf32x3
            } else {
                Precision::F32
            };
            assert_eq!(p.precision(), precision, "{}", p.kernel());
            assert_eq!(p.error_bound(), precision.scaled_error_bound(k));
            assert!(p.error_bound() <= Precision::Tf32x3.scaled_error_bound(k));
            let b = support::values(a.cols() * n, 21);
            let mut c = vec![f32::NAN; a.rows() * n];
            p.spmm(1.0, &b, 0.0, &mut c).unwrap();
            let want = spmm_f64(&a, &b, n, n, false);
            let scale = spmm_f64(&a, &b, n, n, true);
            let check = precision.check_products(&c, &want, &scale, k);
            assert!(check.passed(), "n = {n}, {}: {check:?}", p.kernel());
            // The device entry point runs the same kernel (f32 buffers).
            let gpu = Gpu::require().unwrap();
            let bd = gpu.upload(&b).unwrap();
            let mut cd = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
            p.spmm_device(1.0, &bd, 0.0, &mut cd).unwrap();
            let dev = gpu.download(&cd).unwrap();
            let check = precision.check_products(&dev, &want, &scale, k);
            assert!(check.passed(), "device, n = {n}, {}: {check:?}", p.kernel());
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn combinations_without_a_gpu_kernel_are_refused_naming_both() {
    let engine = engine();
    let a = support::hub_rows_203();
    let refused = |opts: PrepareOptionsBuilder, requested, names: &[&str]| {
        let e = engine.prepare_spmm(&a, &opts.n(8).build()).unwrap_err();
        assert_unsupported(&e, requested, names);
    };
    let opts = PrepareOptions::builder;
    for dtype in [DType::F16, DType::BF16] {
        refused(
            opts().dtype(dtype).precision(Precision::F32),
            Requested::ElementAt(dtype, Precision::F32),
            &[dtype.name(), "F32"],
        );
        refused(
            opts().dtype(dtype).kernel(KernelRequest::Cusparse),
            Requested::Element(dtype),
            &["Cusparse"],
        );
    }
    refused(
        opts()
            .precision(Precision::Tf32x3)
            .kernel(KernelRequest::Hrpb),
        Requested::Precision(Precision::Tf32x3),
        &["3xTF32"],
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_products_on_a_gpu_engine_take_only_f32_operands() {
    let engine = engine();
    let a = support::hub_rows_203();
    let n = 8;
    let opts = PrepareOptions::builder().n(n).build();
    let mut p = engine.prepare_spmm(&a, &opts).unwrap();
    assert_eq!(p.dtype(), DType::F32);
    // Operands of another type: the typed error naming both, before any work.
    let mut c16 = vec![f16::ZERO; a.rows() * n];
    let e = p
        .spmm_typed(1.0, &vec![f16::ONE; a.cols() * n], 0.0, &mut c16)
        .unwrap_err();
    assert_element_type(&e, DType::F32, DType::F16);
    // The f32 entry point goes through the typed one and meets the kernel's bound.
    let b = support::values(a.cols() * n, 3);
    let mut c = vec![f32::NAN; a.rows() * n];
    p.spmm_typed(1.0, &b, 0.0, &mut c).unwrap();
    let want = spmm_f64(&a, &b, n, n, false);
    let scale = spmm_f64(&a, &b, n, n, true);
    let k = a.longest_row();
    let check = DType::F32.check_products(p.precision(), &c, &want, &scale, k);
    assert!(check.passed(), "{}: {check:?}", p.kernel());
}
