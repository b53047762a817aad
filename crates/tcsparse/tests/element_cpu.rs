//! Element types of B and C on the CPU path (no GPU needed): f16 and bf16 products are the f32
//! product rounded by `half`, within the documented bound of an f64 reference (property test
//! over random small matrices), overflow to ±∞ as a cast, NaN kept, β = 0 never reading C, and
//! the typed refusals (operands of another type than prepared, `Precision::F16`); 3×TF32 runs as
//! exact f32.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse::element::{bf16, f16, widen};
use tcsparse::formats::Csr;
use tcsparse::formats::csr::csr_from_triplets;
use tcsparse::reorder::Mode;
use tcsparse::{
    DType, Element, Engine, Error, ExecKernel, Precision, PrepareOptions, ReorderChoice, Requested,
};

mod support;
use support::{assert_element_type, assert_unsupported, reference};

fn engine() -> Engine {
    Engine::cpu("element type tests")
}

/// `rows × cols` with about `per_row` entries a row, values rounded to `T` (an f16 or bf16 A,
/// widened exactly).
fn matrix<T: Element>(rows: usize, cols: usize, per_row: usize, seed: u64) -> Csr {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    for r in 0..rows {
        for _ in 0..rng.random_range(0..=2 * per_row) {
            let v = T::from_f32(rng.random_range(-1.0f32..1.0));
            t.push((r as u32, rng.random_range(0..cols) as u32, v.to_f32()));
        }
    }
    csr_from_triplets(rows, cols, &t).unwrap()
}

/// `len` values of `T`: a mantissa in [-1, 1) times 2^e, e in `exps` (small ones reach the
/// subnormals of f16).
fn dense<T: Element>(len: usize, exps: std::ops::Range<i32>, seed: u64) -> Vec<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let m = rng.random_range(-1.0f32..1.0);
            T::from_f32(m * 2f32.powi(rng.random_range(exps.clone())))
        })
        .collect()
}

fn options(dtype: DType, n: usize, mode: Mode) -> PrepareOptions {
    PrepareOptions::builder()
        .n(n)
        .dtype(dtype)
        .reorder(ReorderChoice::Method("rcm".into()))
        .mode(Some(mode))
        .build()
}

/// C = α·A·B + β·C₀ in `T` through the typed entry point, checked against the f64 reference
/// with the documented bound: the f32 product's (γ_k, k = the longest row + 2 for the roundings
/// of α·(A·B), β·C₀ and their sum) plus the rounding of `T`
/// ([`DType::check_products`]).
fn check_typed<T: Element>(a: &Csr, n: usize, alpha: f32, beta: f32, seed: u64, mode: Mode) {
    let b = dense::<T>(a.cols() * n, -12..3, seed);
    let c0 = dense::<T>(a.rows() * n, -12..3, seed + 1);
    let mut p = engine()
        .prepare_spmm(a, &options(T::DTYPE, n, mode))
        .unwrap();
    let mut c = c0.clone();
    p.spmm_typed(alpha, &b, beta, &mut c).unwrap();
    let (bw, c0w) = (widen(&b), widen(&c0));
    let (want, scale) = reference(a, alpha, &bw, beta, &c0w, n);
    let got = widen(&c);
    let k = a.longest_row() + 2;
    let check = T::DTYPE.check_products(p.precision(), &got, &want, &scale, k);
    assert!(check.passed(), "{}: {check:?}", T::DTYPE);
    assert_eq!(check.non_finite_reference, 0);
}

#[test]
fn typed_products_are_the_f32_product_rounded_to_the_type() {
    // One code path: B widened, the f32 product, C rounded. So the f16 (bf16) product equals the
    // f32 product of the widened operands, rounded, bit for bit, in every reordering mode and
    // with padded leading dimensions (padding never written).
    fn same<T: Element>(mode: Mode) {
        let a = matrix::<T>(45, 45, 4, 7);
        let (n, ldb, ldc) = (5, 7, 6);
        let b = dense::<T>(a.cols() * ldb, -8..2, 1);
        let c0 = dense::<T>(a.rows() * ldc, -8..2, 2);
        let mut typed = engine()
            .prepare_spmm(&a, &options(T::DTYPE, n, mode))
            .unwrap();
        let mut plain = engine()
            .prepare_spmm(&a, &options(DType::F32, n, mode))
            .unwrap();
        assert!(typed.permutation().is_some(), "rcm reorders");
        for (alpha, beta) in [(1.0, 0.0), (-0.75, 1.5)] {
            let mut c = c0.clone();
            typed
                .spmm_typed_strided(alpha, &b, ldb, beta, &mut c, ldc)
                .unwrap();
            let mut c32 = widen(&c0);
            plain
                .spmm_strided(alpha, &widen(&b), ldb, beta, &mut c32, ldc)
                .unwrap();
            for (i, (&got, &v)) in c.iter().zip(&c32).enumerate() {
                if i % ldc >= n {
                    assert_eq!(got, c0[i], "{}: padding C[{i}] written", T::DTYPE);
                } else {
                    assert_eq!(
                        got,
                        T::from_f32(v),
                        "{}: C[{i}] ({alpha}, {beta})",
                        T::DTYPE
                    );
                }
            }
        }
    }
    for mode in [Mode::Symmetric, Mode::RowOnly] {
        same::<f16>(mode);
        same::<bf16>(mode);
        same::<f32>(mode);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random small matrices, widths, α and β, each element type: within the documented bound.
    #[test]
    fn typed_products_meet_the_documented_bound(
        rows in 1usize..40,
        cols in 1usize..40,
        per_row in 0usize..6,
        n in 1usize..9,
        alpha in -2.0f32..2.0,
        beta in prop_oneof![Just(0.0f32), -2.0f32..2.0],
        seed in any::<u64>(),
        symmetric in any::<bool>(),
    ) {
        let mode = if symmetric && rows == cols { Mode::Symmetric } else { Mode::RowOnly };
        check_typed::<f16>(&matrix::<f16>(rows, cols, per_row, seed), n, alpha, beta, seed, mode);
        check_typed::<bf16>(&matrix::<bf16>(rows, cols, per_row, seed), n, alpha, beta, seed, mode);
        check_typed::<f32>(&matrix::<f32>(rows, cols, per_row, seed), n, alpha, beta, seed, mode);
    }
}

#[test]
fn results_beyond_the_range_are_infinite_as_a_cast_and_nan_stays_nan() {
    // A = [1 1; 0 1] (n = 1): C = [b0 + b1, b1].
    let a = csr_from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 1.0), (1, 1, 1.0)]).unwrap();
    let run = |dtype: DType| {
        engine()
            .prepare_spmm(&a, &options(dtype, 1, Mode::RowOnly))
            .unwrap()
    };
    // f16: 40000 + 40000 = 80000 > 65504 is +∞ (and −∞ for the negatives); the f32 product was
    // finite. The bound check takes ±∞ for what the cast gives.
    let mut p = run(DType::F16);
    for s in [1.0f32, -1.0] {
        let b = [f16::from_f32(s * 40000.0), f16::from_f32(s * 40000.0)];
        let mut c = [f16::ZERO; 2];
        p.spmm_typed(1.0, &b, 0.0, &mut c).unwrap();
        assert_eq!(
            c[0],
            if s > 0.0 {
                f16::INFINITY
            } else {
                f16::NEG_INFINITY
            }
        );
        assert_eq!(c[0], f16::from_f32(s * 80000.0), "as a cast");
        assert_eq!(c[1], b[1]);
        let want = [s as f64 * 80000.0, s as f64 * 40000.0];
        let scale = [80000.0, 40000.0];
        let check = DType::F16.check_products(p.precision(), &widen(&c), &want, &scale, 4);
        assert!(check.passed(), "{check:?}");
    }
    // bf16: a sum finite in f32 but beyond bf16's largest finite value is +∞.
    let mut p = run(DType::BF16);
    let b = [bf16::MAX, bf16::from_f32(1e36)];
    let sum = b[0].to_f32() + b[1].to_f32();
    assert!(sum.is_finite() && sum as f64 >= DType::BF16.overflow_threshold());
    let mut c = [bf16::ZERO; 2];
    p.spmm_typed(1.0, &b, 0.0, &mut c).unwrap();
    assert_eq!(c, [bf16::INFINITY, b[1]]);
    // NaN in B stays NaN in the rows that use it.
    for dtype in [DType::F16, DType::BF16] {
        let mut p = run(dtype);
        let c = match dtype {
            DType::F16 => {
                let mut c = [f16::ZERO; 2];
                p.spmm_typed(1.0, &[f16::ONE, f16::NAN], 0.0, &mut c)
                    .unwrap();
                widen(&c)
            }
            _ => {
                let mut c = [bf16::ZERO; 2];
                p.spmm_typed(1.0, &[bf16::ONE, bf16::NAN], 0.0, &mut c)
                    .unwrap();
                widen(&c)
            }
        };
        assert!(c[0].is_nan() && c[1].is_nan(), "{dtype}: {c:?}");
    }
}

#[test]
fn beta_zero_never_reads_c_of_any_type() {
    fn check<T: Element>(a: &Csr) {
        let mut p = engine()
            .prepare_spmm(a, &options(T::DTYPE, 4, Mode::Symmetric))
            .unwrap();
        let b = dense::<T>(30 * 4, -4..2, 9);
        let mut c = vec![T::from_f32(f32::NAN); 30 * 4];
        p.spmm_typed(1.0, &b, 0.0, &mut c).unwrap();
        assert!(c.iter().all(|v| !v.to_f32().is_nan()), "{}", T::DTYPE);
    }
    // One A (values rounded to f16) for both types.
    let a = matrix::<f16>(30, 30, 3, 3);
    check::<f16>(&a);
    check::<bf16>(&a);
}

#[test]
fn operands_of_another_type_than_prepared_are_a_typed_error_naming_both() {
    let a = matrix::<f32>(16, 16, 2, 4);
    let mut p = engine()
        .prepare_spmm(&a, &options(DType::F32, 2, Mode::Symmetric))
        .unwrap();
    assert_eq!(p.dtype(), DType::F32);
    let mut c = vec![f16::ZERO; 32];
    let e = p.spmm_typed(1.0, &[f16::ONE; 32], 0.0, &mut c).unwrap_err();
    assert_element_type(&e, DType::F32, DType::F16);
    assert!(
        e.to_string().contains("f16") && e.to_string().contains("f32"),
        "{e}"
    );
    let mut p = engine()
        .prepare_spmm(&a, &options(DType::BF16, 2, Mode::Symmetric))
        .unwrap();
    let e = p.spmm(1.0, &[1.0; 32], 0.0, &mut [0.0; 32]).unwrap_err();
    assert_element_type(&e, DType::BF16, DType::F32);
    // Shapes are still checked for the right type.
    let e = p
        .spmm_typed(1.0, &[bf16::ONE; 31], 0.0, &mut [bf16::ZERO; 32])
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgs(_)), "{e}");
}

#[test]
fn error_bound_includes_the_rounding_of_the_type() {
    let a = matrix::<f32>(24, 24, 3, 5);
    let bound = |dtype| {
        engine()
            .prepare_spmm(&a, &options(dtype, 2, Mode::Symmetric))
            .unwrap()
            .error_bound()
    };
    let f32_bound = bound(DType::F32);
    assert_eq!(
        f32_bound,
        Precision::F32.scaled_error_bound(a.longest_row())
    );
    assert_eq!(
        bound(DType::F16),
        f32_bound + 2f64.powi(-11) * (1.0 + f32_bound)
    );
    assert_eq!(
        bound(DType::BF16),
        f32_bound + 2f64.powi(-8) * (1.0 + f32_bound)
    );
}

#[test]
fn three_tf32_runs_as_exact_f32_on_the_cpu_path() {
    let a = matrix::<f32>(40, 40, 4, 6);
    let b: Vec<f32> = dense::<f32>(40 * 3, -4..2, 1);
    let mut outs = Vec::new();
    for precision in [Precision::Tf32x3, Precision::F32] {
        let opts = PrepareOptions::builder()
            .n(3)
            .precision(precision)
            .reorder(ReorderChoice::None)
            .build();
        let mut p = engine().prepare_spmm(&a, &opts).unwrap();
        assert_eq!(p.kernel(), ExecKernel::CpuBitTcf);
        assert_eq!(p.precision(), Precision::F32);
        let mut c = vec![0f32; 40 * 3];
        p.spmm(1.0, &b, 0.0, &mut c).unwrap();
        outs.push(c);
    }
    assert_eq!(outs[0], outs[1]);
}

#[test]
fn f16_precision_is_refused_for_spmm_with_a_typed_error() {
    let a = matrix::<f32>(8, 8, 2, 1);
    let opts = PrepareOptions::builder()
        .precision(Precision::F16)
        .n(2)
        .build();
    let e = engine().prepare_spmm(&a, &opts).unwrap_err();
    assert_unsupported(
        &e,
        Requested::Precision(Precision::F16),
        &["PrepareOptions::dtype"],
    );
}
