//! The SpMM cases of a run in f16, bf16 or 3×TF32 ([`Numerics`]; `--dtype`, `--precision`): per
//! matrix and N, in one process on the same matrix and the same B,
//! - `cusparse`: cuSPARSE in f32 at its fastest CSR algorithm (the f32 bench's baseline,
//!   [`backends::cusparse_case`]), on B as the run's type holds it (widened to f32: exact);
//! - f16 / bf16 only, `cusparse-f16` / `cusparse-bf16`: cuSPARSE with A, B and C in the type and
//!   f32 compute ([`CusparseSpmmHalf`]), each CSR algorithm timed and the fastest that passes the
//!   type's bound kept (its name in the plan, its default's time beside it);
//! - `tcsparse-f16` / `tcsparse-bf16` / `tcsparse-3xtf32`: the tuned engine prepared with that
//!   element type or precision, B and C in the prepared row order (the kernel alone is timed).
//!
//! f16 products are `C = α·A·B` with α a power of two that keeps C within f16's range
//! ([`f16_alpha`]; 1 for most matrices, and for bf16), the same α for both f16 products of a
//! case; the f32 cuSPARSE row computes `A·B`.
//!
//! Timing as the f32 bench ([`backends`]): median of CUDA-event-timed launches after warm-up, B
//! buffers rotated when B fits in L2, C poisoned with NaN and checked before and after timing.
//! Accuracy: B is rounded to the type before the f64 reference is computed, so the reference is
//! of the operands actually used; A's rounding to the type on upload is part of the bound
//! ([`Numerics::scaled_bound`]: [`tcsparse::DType::rounded_a_bound`] plus C's rounding for f16 /
//! bf16, the 3×TF32 bound for 3×TF32), k = the longest row's nonzeros; ours is checked with
//! [`Prepared::error_bound`], the same formula for the kernel its preparation kept. A cuSPARSE f32 error is
//! checked with the f32 bench's bound ([`backends::TOL`]) and recorded, so the 3×TF32 report can
//! divide the two. Bytes to move are counted as CSR (32-bit offsets and indices, values in the
//! type) plus B and C in the type, for every backend of a case.

use std::time::Instant;

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use tcsparse::element::{bf16, f16};
use tcsparse::formats::Csr;
use tcsparse::gpu::baselines::cusparse::{CusparseCsr, CusparseSpmmHalf, SpmmAlg};
use tcsparse::gpu::row_tile_spmm::RowTileHalf;
use tcsparse::gpu::{Gpu, GpuError};
use tcsparse::{DType, Element, Engine, PrepareOptions, Prepared, RowOrder};

use crate::backends::{self, Buffers, Reference, Sweep, Timing};
use crate::matrices::Matrix;
use crate::numerics::Numerics;
use crate::report::{BASELINE, Case, PrepTimes, Status};

/// The accuracy rule of one run: relative bound per element, terms per element (the longest
/// row's nonzeros), and the type C is stored in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bound {
    rel: f64,
    terms: usize,
    stored: DType,
}

impl Bound {
    /// The bound of `v` on `a` ([`Numerics::scaled_bound`] for its longest row).
    pub(crate) fn of(v: Numerics, a: &Csr) -> Self {
        let terms = max_row_nnz(a);
        Self {
            rel: v.scaled_bound(terms),
            terms,
            stored: v.dtype(),
        }
    }
}

impl Bound {
    /// The bound of what `p` was prepared to run ([`Prepared::error_bound`]: the type's bound
    /// for its f16 / bf16 or 3×TF32 kernels, the tighter f32 one where its tuning kept cuSPARSE
    /// f32), for the same rows and storage type.
    fn prepared(self, p: &Prepared) -> Self {
        Self {
            rel: p.error_bound(),
            ..self
        }
    }
}

/// Nonzeros of the longest row of `a`.
pub(crate) fn max_row_nnz(a: &Csr) -> usize {
    let ip = a.indptr();
    let ip = ip.raw_storage();
    ip.windows(2)
        .map(|w| w[1].saturating_sub(w[0]) as usize)
        .max()
        .unwrap_or(0)
}

/// What one product measured: (median ms, relative error, scaled error) and the failure, if any
/// element broke the bound (the worse of the checks before and after timing).
pub(crate) struct Measured {
    ms: f64,
    rel: f64,
    scaled: f64,
    failure: Option<String>,
}

/// Checks the sampled rows of `c` (row-major, ld = n, in `T`) against `r` within `bound`.
fn check<T: Element>(c: &[T], n: usize, r: &Reference, bound: Bound) -> (f64, f64, Option<String>) {
    let got: Vec<f32> = r
        .rows
        .iter()
        .flat_map(|&row| c[row * n..row * n + n].iter().map(|v| v.to_f32()))
        .collect();
    let rel = tcsparse::formats::reference::relative_error(&got, &r.want);
    let chk = tcsparse::accuracy::check_stored(
        &got,
        &r.want,
        &r.scale,
        bound.rel,
        bound.terms,
        bound.stored,
    );
    let failure = (!chk.passed()).then(|| {
        format!(
            "{} elements over the bound {:.2e}·(|A|·|B|) (scaled error {:.2e}, rel {rel:.2e})",
            chk.failures, bound.rel, chk.worst_scaled
        )
    });
    (rel, chk.worst_scaled, failure)
}

/// [`backends`]' measurement for elements `T`: `launch` once on NaN-poisoned C, checked within
/// `bound`; `t.iters` timed launches rotating among the B buffers; C checked again.
fn measure<T: Element + DeviceRepr + ValidAsZeroBits>(
    gpu: &Gpu,
    r: &Reference,
    b: &[T],
    n: usize,
    t: Timing,
    bound: Bound,
    mut launch: impl FnMut(&CudaSlice<T>, &mut CudaSlice<T>) -> Result<(), GpuError>,
) -> Result<Measured, GpuError> {
    let mut buf = Buffers::new(gpu, b, r.c_len)?;
    buf.poison(gpu, T::from_f32(f32::NAN))?;
    launch(&buf.bs[0], &mut buf.c)?;
    let (rel, scaled, failure) = check(&gpu.download(&buf.c)?, n, r, bound);
    let timing = gpu.time_launches(t.warmup, t.iters, || {
        buf.next = (buf.next + 1) % buf.bs.len();
        launch(&buf.bs[buf.next], &mut buf.c)
    })?;
    let (rel2, scaled2, failure2) = check(&gpu.download(&buf.c)?, n, r, bound);
    Ok(Measured {
        ms: timing.median_ms,
        rel: rel.max(rel2),
        scaled: scaled.max(scaled2),
        failure: failure.or(failure2),
    })
}

/// Stores a measurement (or its error) in `case`.
fn record(case: &mut Case, result: Result<Measured, GpuError>) {
    match result {
        Ok(m) => {
            case.status = match m.failure {
                None => Status::Ok,
                Some(reason) => Status::Failed { reason },
            };
            case.ms = Some(m.ms);
            case.rel_err = Some(m.rel);
            case.scaled_err = Some(m.scaled);
        }
        Err(e) => {
            case.status = Status::Failed {
                reason: e.to_string(),
            }
        }
    }
}

/// Bytes a product must move once in CSR with values of `value_bytes` and B and C of
/// `elem_bytes`: offsets, indices and values of A, B and C.
fn bytes(a: &Csr, n: usize, value_bytes: u64, elem_bytes: u64) -> u64 {
    4 * (a.rows() as u64 + 1)
        + (4 + value_bytes) * a.nnz() as u64
        + elem_bytes * (a.cols() + a.rows()) as u64 * n as u64
}

/// Runs the cases of `v` on one matrix for every N (see the module's documentation).
pub fn gpu_cases(gpu: &Gpu, m: &Matrix, sweep: Sweep<'_>, v: Numerics) -> Vec<Case> {
    let Sweep { ns, t, max_full } = sweep;
    let engine = Engine::with_gpu(gpu.clone());
    let a: &Csr = &m.csr;
    let bound = Bound::of(v, a);
    let dev = CusparseCsr::new(gpu, a);
    let mut out = Vec::new();
    for &n in ns {
        let at = At {
            gpu,
            engine: &engine,
            m,
            n,
            t,
            max_full,
            v,
            bound,
        };
        let b32 = backends::random_b(a.cols(), n, 0x5eed ^ n as u64);
        match v {
            Numerics::F16 => out.extend(half_cases::<f16>(&at, &dev, &b32)),
            Numerics::Bf16 => out.extend(half_cases::<bf16>(&at, &dev, &b32)),
            Numerics::Tf32x3 => {
                out.push(backends::cusparse_case(gpu, m, a, &b32, n, t, max_full));
                out.push(tf32x3_case(&at, &b32));
            }
        }
    }
    out
}

/// What the cases of one matrix at one N share: the device and the engine on it, the matrix,
/// the width N, the timing, the rows checked in full, the run's numerics and its bound.
#[derive(Clone, Copy)]
struct At<'a> {
    gpu: &'a Gpu,
    engine: &'a Engine,
    m: &'a Matrix,
    n: usize,
    t: Timing,
    max_full: usize,
    v: Numerics,
    bound: Bound,
}

/// The three cases of an f16 / bf16 run at one N: cuSPARSE f32, cuSPARSE in `H`, ours in `H`.
fn half_cases<H: RowTileHalf + Element>(
    at: &At<'_>,
    dev: &Result<CusparseCsr, GpuError>,
    b32: &[f32],
) -> Vec<Case> {
    let a: &Csr = &at.m.csr;
    // B as the type holds it; the f32 baseline and every reference use these values.
    let bh: Vec<H> = b32.iter().map(|&x| <H as Element>::from_f32(x)).collect();
    let bw: Vec<f32> = bh.iter().map(|x| Element::to_f32(*x)).collect();
    let alpha = f16_alpha(a, at.v.dtype());
    vec![
        backends::cusparse_case(at.gpu, at.m, a, &bw, at.n, at.t, at.max_full),
        cusparse_half_case::<H>(at, dev, (&bh, &bw, alpha)),
        engine_half_case::<H>(at, (&bh, &bw, alpha)),
    ]
}

/// The power of two cuSPARSE's f16 values are divided by (and α multiplied by), as the f16
/// row-tile upload does: the largest |value| lands in [2¹⁴, 2¹⁵), so nothing overflows f16 and
/// values down to 2⁻²⁹ of the largest round relatively. 1 for bf16 (f32's range) and for a
/// matrix without a finite nonzero value.
fn f16_scale(values: &[f32], dtype: DType) -> f32 {
    let max = values
        .iter()
        .map(|v| v.abs())
        .filter(|v| v.is_finite())
        .fold(0.0f32, f32::max);
    if dtype != DType::F16 || max == 0.0 {
        return 1.0;
    }
    // A normal f32 power of two whatever the matrix (f32's exponents −126 … 127).
    2f32.powi((max.log2().floor() as i32 - 14).clamp(-126, 127))
}

/// The α of an f16 run's products `C = α·A·B`: the power of two that keeps the largest row sum
/// of |A| (|B| ≤ 1) at most 2¹⁴, so that C stays within f16's range (65504) instead of becoming
/// ±∞ (bcsstk17, c-62, xenon1 among the shared datasets); 1 where it already does, and always 1
/// for bf16 (f32's range). Both f16 products of a case use it; timing does not depend on it.
fn f16_alpha(a: &Csr, dtype: DType) -> f32 {
    if dtype != DType::F16 {
        return 1.0;
    }
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let v = a.data();
    let norm = ip
        .windows(2)
        .map(|w| {
            v[w[0] as usize..w[1] as usize]
                .iter()
                .map(|x| f64::from(x.abs()))
                .filter(|x| x.is_finite())
                .sum::<f64>()
        })
        .fold(0.0f64, f64::max);
    if norm <= 16384.0 {
        return 1.0;
    }
    // ≥ 1 since norm > 2¹⁴; f32 holds 2^-k down to 2⁻¹⁴⁹, and a norm of f32 values stays below
    // 2¹⁶⁰.
    let k = (norm.log2() - 14.0).ceil() as i32;
    2f32.powi(-k.min(149))
}

/// The plan column of a cuSPARSE case in f16 / bf16: type, algorithm, the power of two A's values
/// were divided by and the α of the product, each where it is not 1.
fn cusparse_half_plan(v: Numerics, alg: &str, scale: f32, alpha: f32) -> String {
    let mut plan = format!("cuSPARSE CSR {v}, {alg}");
    if scale != 1.0 {
        plan.push_str(&format!(", A scaled by 2^{}", -scale.log2()));
    }
    plan + &alpha_note(alpha)
}

/// The plan column's note of an α other than 1 (`, C = 2^-k·A·B`).
fn alpha_note(alpha: f32) -> String {
    if alpha == 1.0 {
        String::new()
    } else {
        format!(", C = 2^{}·A·B", alpha.log2())
    }
}

/// The f64 reference of `α·a·b` on the checked rows (α a power of two: exact).
fn reference(a: &Csr, b: &[f32], n: usize, max_full: usize, alpha: f32) -> Reference {
    let mut r = Reference::new(a, b, n, max_full);
    let al = f64::from(alpha);
    for x in r.want.iter_mut().chain(r.scale.iter_mut()) {
        *x *= al;
    }
    r
}

/// cuSPARSE SpMM with A, B and C in `H` (f32 compute) on the original matrix: each CSR algorithm
/// timed, the fastest that passes the bound kept; the default's result (or error) when none
/// passes.
fn cusparse_half_case<H: RowTileHalf + Element>(
    at: &At<'_>,
    dev: &Result<CusparseCsr, GpuError>,
    (bh, bw, alpha): (&[H], &[f32], f32),
) -> Case {
    let (gpu, m, n, v) = (at.gpu, at.m, at.n, at.v);
    let a: &Csr = &m.csr;
    let name = v.same_type_baseline().unwrap_or(BASELINE);
    let mut case = backends::blank(m, a, n, name, Status::Ok);
    case.numerics = Some(v);
    let reference = reference(a, bw, n, at.max_full, alpha);
    let scale = f16_scale(a.data(), v.dtype());
    let values: Vec<f32> = a.data().iter().map(|x| x / scale).collect();
    let run = |alg: SpmmAlg| -> Result<Measured, GpuError> {
        let dev = dev.as_ref().map_err(|e| GpuError::Invalid(e.to_string()))?;
        let mut spmm = CusparseSpmmHalf::<H>::new(gpu, dev, &values, n, alg)?;
        measure(gpu, &reference, bh, n, at.t, at.bound, |bd, c| {
            spmm.run(scale * alpha, bd, 0.0, c)
        })
    };
    let label = format!("{} {name} N {n}", m.name);
    let ms = |g: &Measured| g.ms;
    let passes = |g: &Measured| g.failure.is_none();
    if let Some(alg) = backends::fastest_cusparse(&mut case, &label, run, ms, passes, record) {
        let e = v.dtype().size_bytes() as u64;
        case.bytes = Some(bytes(a, n, e, e));
        case.plan = Some(cusparse_half_plan(v, alg.name(), scale, alpha));
    }
    case
}

/// A preparation of the tuned engine for `v` at width `n`, B and C in the prepared row order;
/// the case with its preparation times and plan filled, or a FAILED case.
fn prepare(
    engine: &Engine,
    m: &Matrix,
    n: usize,
    v: Numerics,
) -> Result<(Prepared, Case), Box<Case>> {
    let a: &Csr = &m.csr;
    let mut case = backends::blank(m, a, n, v.headline(), Status::Ok);
    case.numerics = Some(v);
    let opts = PrepareOptions::builder()
        .dtype(v.dtype())
        .precision(v.precision())
        .n(n)
        .device_order(RowOrder::Prepared)
        .build();
    let t0 = Instant::now();
    let p = match engine.prepare_spmm_shared(&m.csr, &opts) {
        Ok(p) => p,
        Err(e) => {
            case.status = Status::Failed {
                reason: format!("prepare: {e}"),
            };
            return Err(Box::new(case));
        }
    };
    tracing::info!("{} {v} N {n}: prepared in {:.2?}", m.name, t0.elapsed());
    let r = p.report();
    case.prep = Some(PrepTimes {
        reorder_ms: Some(r.reorder_s * 1e3),
        build_ms: Some(r.build_s * 1e3),
        plan_ms: Some(r.plan_s * 1e3),
        upload_ms: Some(r.upload_s * 1e3),
        tune_ms: (!r.tuning.is_empty()).then_some(r.tune_s * 1e3),
        total_ms: Some(r.total_s * 1e3),
    });
    case.plan = Some(r.kernel.to_string());
    case.plan_note = Some(r.kernel_note.clone());
    Ok((p, case))
}

/// Ours in `H`: the tuned engine prepared with the type, timed on device buffers in `H`.
fn engine_half_case<H: RowTileHalf + Element>(
    at: &At<'_>,
    (bh, bw, alpha): (&[H], &[f32], f32),
) -> Case {
    let n = at.n;
    let (mut p, mut case) = match prepare(at.engine, at.m, n, at.v) {
        Ok(x) => x,
        Err(c) => return *c,
    };
    // B is random, so it is "in prepared order" already; the reference is in that order too.
    let reference = reference(p.matrix(), bw, n, at.max_full, alpha);
    let bound = at.bound.prepared(&p);
    if let Some(plan) = &mut case.plan {
        plan.push_str(&alpha_note(alpha));
    }
    let e = at.v.dtype().size_bytes() as u64;
    case.bytes = Some(bytes(p.matrix(), n, e, e));
    let result = measure_engine(at.gpu, &reference, bh, n, at.t, bound, |bd, c| {
        p.spmm_device_typed::<H, _, _>(alpha, bd, 0.0, c)
    });
    record(&mut case, result);
    case
}

/// [`measure`] of the tuned engine's device product `product`, run `k + 1` times per launch
/// under the bench's handicap `k` ([`backends::handicap`]) and its time divided by `k`.
#[allow(clippy::too_many_arguments)]
fn measure_engine<T: Element + DeviceRepr + ValidAsZeroBits>(
    gpu: &Gpu,
    reference: &Reference,
    b: &[T],
    n: usize,
    t: Timing,
    bound: Bound,
    mut product: impl FnMut(&CudaSlice<T>, &mut CudaSlice<T>) -> Result<(), tcsparse::Error>,
) -> Result<Measured, GpuError> {
    let (launches, per) = backends::handicap().map_or((1, 1), |k| (k + 1, k));
    measure(gpu, reference, b, n, t, bound, |bd, c| {
        for _ in 0..launches {
            product(bd, c).map_err(|e| GpuError::Invalid(e.to_string()))?;
        }
        Ok(())
    })
    .map(|mut got| {
        got.ms /= f64::from(per);
        got
    })
}

/// Ours in 3×TF32: the tuned engine prepared with [`tcsparse::Precision::Tf32x3`], f32 operands.
fn tf32x3_case(at: &At<'_>, b: &[f32]) -> Case {
    let n = at.n;
    let (mut p, mut case) = match prepare(at.engine, at.m, n, Numerics::Tf32x3) {
        Ok(x) => x,
        Err(c) => return *c,
    };
    let reference = Reference::new(p.matrix(), b, n, at.max_full);
    let bound = at.bound.prepared(&p);
    case.bytes = Some(bytes(p.matrix(), n, 4, 4));
    let result = measure_engine(at.gpu, &reference, b, n, at.t, bound, |bd, c| {
        p.spmm_device(1.0, bd, 0.0, c)
    });
    record(&mut case, result);
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse::formats::csr::csr_from_triplets;

    #[test]
    fn f16_scale_puts_the_largest_value_in_the_top_binade() {
        for max in [1.0f32, 3.5, 1e6, 7e-3, 65504.0, 1e30] {
            let s = f16_scale(&[max * 0.5, -max, f32::NAN], DType::F16);
            let top = max / s;
            assert!((16384.0..32768.0).contains(&top), "{max}: {top}");
            assert_eq!(s.log2().fract(), 0.0, "{max}: a power of two");
        }
        assert_eq!(f16_scale(&[1e6], DType::BF16), 1.0);
        // Values near f32's smallest normals: a normal power of two, never 0.
        let tiny = f16_scale(&[1e-37], DType::F16);
        assert!(tiny.is_normal() && tiny == 2f32.powi(-126), "{tiny}");
        assert_eq!(f16_scale(&[0.0], DType::F16), 1.0);
    }

    #[test]
    fn f16_alpha_keeps_the_largest_row_sum_within_two_to_the_fourteen() {
        let a = |v: f32| csr_from_triplets(2, 3, &[(0, 0, v), (0, 2, -v), (1, 1, 1.0)]).unwrap();
        assert_eq!(f16_alpha(&a(100.0), DType::F16), 1.0);
        assert_eq!(f16_alpha(&a(8192.0), DType::F16), 1.0);
        for v in [8193.0f32, 1e6, 3.9e9, 3e28] {
            let al = f16_alpha(&a(v), DType::F16);
            let top = 2.0 * f64::from(v) * f64::from(al);
            assert!((8192.0..=16384.0).contains(&top), "{v}: {al} → {top}");
            assert_eq!(al.log2().fract(), 0.0, "{v}: a power of two");
        }
        assert_eq!(f16_alpha(&a(3e28), DType::BF16), 1.0);
        assert_eq!(alpha_note(1.0), "");
        assert_eq!(alpha_note(0.25), ", C = 2^-2·A·B");
        assert_eq!(
            cusparse_half_plan(
                Numerics::F16,
                "SPMM_CSR_ALG2",
                2f32.powi(80),
                2f32.powi(-84)
            ),
            "cuSPARSE CSR f16, SPMM_CSR_ALG2, A scaled by 2^-80, C = 2^-84·A·B"
        );
        assert_eq!(
            cusparse_half_plan(Numerics::Bf16, "SPMM_ALG_DEFAULT", 1.0, 1.0),
            "cuSPARSE CSR bf16, SPMM_ALG_DEFAULT"
        );
        // The reference is scaled exactly.
        let m = a(1e6);
        let b = [1.0f32, 0.5, -0.25];
        let r1 = reference(&m, &b, 1, 10, 1.0);
        let r2 = reference(&m, &b, 1, 10, 0.125);
        assert_eq!(
            r2.want,
            r1.want.iter().map(|x| x * 0.125).collect::<Vec<_>>()
        );
        assert_eq!(
            r2.scale,
            r1.scale.iter().map(|x| x * 0.125).collect::<Vec<_>>()
        );
    }

    #[test]
    fn bound_uses_the_longest_row_and_the_type() {
        let a =
            csr_from_triplets(3, 4, &[(0, 0, 1.0), (1, 0, 1.0), (1, 1, 2.0), (1, 3, 3.0)]).unwrap();
        assert_eq!(max_row_nnz(&a), 3);
        let b = Bound::of(Numerics::Bf16, &a);
        assert_eq!(b.terms, 3);
        assert_eq!(b.stored, DType::BF16);
        assert_eq!(b.rel, Numerics::Bf16.scaled_bound(3));
        // An f16 product one f16 rounding off passes; an element 2⁻⁶ off fails.
        let rows = vec![0, 1, 2];
        let want = vec![1.0, 2.0, 0.0];
        let r = Reference {
            c_len: 3,
            rows,
            want,
            scale: vec![1.0, 6.0, 0.0],
        };
        let bound = Bound::of(Numerics::F16, &a);
        let ok = [1.0f32 + 2f32.powi(-11), 2.0, 0.0].map(f16::from_f32);
        assert_eq!(check(&ok, 1, &r, bound).2, None);
        let bad = [1.0f32 + 2f32.powi(-6), 2.0, 0.0].map(f16::from_f32);
        let why = check(&bad, 1, &r, bound).2.unwrap();
        assert!(why.contains("1 elements over the bound"), "{why}");
    }
}
