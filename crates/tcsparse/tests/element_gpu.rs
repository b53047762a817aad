//! Element types and 3×TF32 on a GPU engine (ignored without a GPU; they FAIL under
//! `--include-ignored` on a machine without one): until their kernels exist, B and C in f16 or
//! bf16 and `Precision::Tf32x3` are refused at preparation with `Error::Unsupported` naming what
//! was asked for and the GPU kernel families, and f32 products are unchanged.

use tcsparse::element::f16;
use tcsparse::formats::reference::spmm_f64;
use tcsparse::gpu::Gpu;
use tcsparse::{DType, Engine, Error, Precision, PrepareOptions, Requested};

mod support;

fn engine() -> Engine {
    Engine::with_gpu(Gpu::require().expect("this test needs a CUDA GPU"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn half_types_and_3xtf32_are_refused_on_a_gpu_engine_with_typed_errors() {
    let engine = engine();
    let a = support::hub_rows_203();
    for dtype in [DType::F16, DType::BF16] {
        let opts = PrepareOptions::builder().n(8).dtype(dtype).build();
        let e = engine.prepare_spmm(&a, &opts).unwrap_err();
        assert!(
            matches!(e, Error::Unsupported { requested: Requested::Element(d), .. } if d == dtype),
            "{dtype}: {e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(dtype.name()) && msg.contains("Acc-SpMM") && msg.contains("cuSPARSE"),
            "{msg}"
        );
    }
    let opts = PrepareOptions::builder()
        .n(8)
        .precision(Precision::Tf32x3)
        .build();
    let e = engine.prepare_spmm(&a, &opts).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Unsupported {
                requested: Requested::Precision(Precision::Tf32x3),
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("3xTF32"), "{e}");
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
    assert!(
        matches!(
            e,
            Error::ElementType {
                prepared: DType::F32,
                got: DType::F16
            }
        ),
        "{e}"
    );
    // The f32 entry point goes through the typed one and meets the kernel's bound.
    let b = support::values(a.cols() * n, 3);
    let mut c = vec![f32::NAN; a.rows() * n];
    p.spmm_typed(1.0, &b, 0.0, &mut c).unwrap();
    let want = spmm_f64(&a, &b, n, n, false);
    let scale = spmm_f64(&a, &b, n, n, true);
    let k = a
        .row_offsets()
        .windows(2)
        .map(|w| (w[1] - w[0]) as usize)
        .max()
        .unwrap_or(0);
    let check = DType::F32.check_products(p.precision(), &c, &want, &scale, k);
    assert!(check.passed(), "{}: {check:?}", p.kernel());
}
