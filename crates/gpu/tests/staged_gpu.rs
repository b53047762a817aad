//! GPU tests of the window-staged CSR SpMM (`kernels-ptx/staged_spmm.cu`, [`StagedSpmm`]), ignored
//! by default; run with `--include-ignored` on a GPU machine. Without a GPU they FAIL (they call
//! `Gpu::require`), never pass vacuously.
//!
//! Every product is compared with the f64 CPU reference with the f32 bound of the CSR kernel's
//! tests (runtime_gpu.rs): |C − C_ref| ≤ 2·2⁻²³·(|α|·(|A|·|B|)·len(row) + |β·C₀| + |C_ref|). Both
//! slices (S = 32, 64); N ∈ {1, 8, 32, 33, 100, 128, 512, 1000}; β = 0 with C poisoned with NaN
//! (never read) and β ≠ 0; windows cut by the default spec and by small ones (ragged windows,
//! one-row windows, a row exactly at the cap); empty rows, an empty matrix, no rows, one row;
//! B at a leading dimension that is not a multiple of 4 and at an address that is not 16-byte
//! aligned (the plain-load stage) beside packed aligned B (the bulk-copy stage); NaN and ∞ in A
//! and B propagated as IEEE; every shared dataset.

mod data_support;

use cudarc::driver::{CudaSlice, CudaView};
use data_support::{dense, for_each_dataset, generated_cases};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::layout::FormatError;
use tcsparse_formats::reference::{max_scaled_error, spmm_f64};
use tcsparse_formats::staged::{StagedCsr, StagedSpec};
use tcsparse_gpu::spmm::staged::{Slice, StageCopy, StagedSpmm};
use tcsparse_gpu::{Dense, DenseMut, DeviceProduct, Gpu};

const F32_EPS: f64 = 1.0 / (1u64 << 23) as f64;
const WIDTHS: [usize; 8] = [1, 8, 32, 33, 100, 128, 512, 1000];

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

/// `spec` with its cap raised to `a`'s longest row where that row would be refused.
fn fitting(a: &Csr, spec: StagedSpec) -> StagedSpec {
    StagedSpec {
        slot_cap: spec.slot_cap.max(a.longest_row() as u32),
        ..spec
    }
}

/// Checks `got` (rows × n at leading dimension ldc) against α·A·B + β·C₀ (B at ldb, C₀ at ldc):
/// finite results within the f32 bound, non-finite ones exactly as the f64 reference has them
/// (NaN where it has NaN, ∞ of the same sign).
#[allow(clippy::too_many_arguments)]
fn check(
    what: &str,
    a: &Csr,
    b: &[f32],
    n: usize,
    ldb: usize,
    (alpha, beta): (f32, f32),
    c0: &[f32],
    got: &[f32],
    ldc: usize,
) {
    let exact = spmm_f64(a, b, n, ldb, false);
    let abs = spmm_f64(a, b, n, ldb, true);
    let ip = a.row_offsets();
    let (al, be) = (f64::from(alpha), f64::from(beta));
    let (mut g, mut want, mut scale) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..a.rows() {
        let len = f64::from((ip[r + 1] - ip[r]).max(1));
        for j in 0..n {
            let (i, ic) = (r * n + j, r * ldc + j);
            let cterm = if beta == 0.0 {
                0.0
            } else {
                be * f64::from(c0[ic])
            };
            let w = al * exact[i] + cterm;
            if !w.is_finite() {
                let gv = got[ic];
                assert!(
                    (w.is_nan() && gv.is_nan()) || f64::from(gv) == w,
                    "{what}: C[{r},{j}] = {gv}, the reference has {w}"
                );
                continue;
            }
            g.push(got[ic]);
            want.push(w);
            scale.push(al.abs() * abs[i] * len + cterm.abs() + w.abs());
        }
    }
    let err = max_scaled_error(&g, &want, &scale) / F32_EPS;
    assert!(err <= 2.0, "{what}: error {err:.3} f32 ulps·len (bound 2)");
}

/// Where B lies on the device for one call.
#[derive(Clone, Copy, Debug)]
enum BPlace {
    /// Its own allocation, leading dimension n (the bulk stage when 4 | n).
    Packed,
    /// Leading dimension n + 3 (never a multiple of 4 with n: the plain stage).
    Padded,
    /// One element into an allocation (not 16-byte aligned: the plain stage).
    Offset,
}

/// One product of `p` (made from `a`) at width `n` with B placed as `place`, for α, β = (1, 0)
/// with NaN in C and (0.75, −0.5), checked against the reference (B drawn fresh per call, or
/// `b_override`).
#[allow(clippy::too_many_arguments)]
fn run_case(
    gpu: &Gpu,
    rng: &mut ChaCha8Rng,
    what: &str,
    a: &Csr,
    p: &mut StagedSpmm,
    n: usize,
    place: BPlace,
    b_override: Option<&[f32]>,
) {
    let ldb = match place {
        BPlace::Padded => n + 3,
        _ => n,
    };
    let ldc = n + usize::from(matches!(place, BPlace::Padded));
    for (alpha, beta) in [(1.0f32, 0.0f32), (0.75, -0.5)] {
        let b: Vec<f32> = match b_override {
            Some(b) => b.to_vec(),
            None => dense(rng, a.cols() * ldb),
        };
        let c0: Vec<f32> = if beta == 0.0 {
            vec![f32::NAN; a.rows() * ldc]
        } else {
            dense(rng, a.rows() * ldc)
        };
        let shift = usize::from(matches!(place, BPlace::Offset));
        let mut staged_b = vec![0.0f32; shift];
        staged_b.extend_from_slice(&b);
        let db_full = gpu.upload(&staged_b).expect("upload B");
        let db: CudaView<'_, f32> = db_full.slice(shift..);
        // Each way of staging; the stage only moves B, so every way gives the same bits.
        let outputs: Vec<Vec<f32>> = StageCopy::ALL
            .into_iter()
            .map(|copy| {
                p.set_copy(copy);
                let mut dc: CudaSlice<f32> = gpu.upload(&c0).expect("upload C");
                p.enqueue(
                    alpha,
                    &Dense::new(&db, n, ldb),
                    beta,
                    &mut DenseMut::new(&mut dc, n, ldc),
                )
                .unwrap_or_else(|e| panic!("{what} {copy:?}: {e}"));
                gpu.download(&dc).expect("download C")
            })
            .collect();
        let got = &outputs[0];
        for (copy, other) in StageCopy::ALL.iter().zip(&outputs).skip(1) {
            let same = got
                .iter()
                .zip(other)
                .all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(
                same,
                "{what} n={n} {place:?}: {copy:?} differs from the bulk stage"
            );
        }
        check(
            &format!("{what} n={n} {place:?} α={alpha} β={beta}"),
            a,
            &b,
            n,
            ldb,
            (alpha, beta),
            &c0,
            got,
            ldc,
        );
    }
}

/// The generated matrices: [`generated_cases`] with a 1×3000 row of 300 values beside the
/// shapes the CSR kernel's tests use.
fn generated(rng: &mut ChaCha8Rng) -> Vec<(String, Csr)> {
    generated_cases(
        rng,
        &[
            (1, 1, 1),
            (1, 3000, 300),
            (37, 53, 5),
            (500, 300, 20),
            (2000, 4000, 3),
            (64, 5000, 200),
        ],
    )
}

/// The default and light window cuts and small ones (ragged windows of few rows and columns,
/// one-row windows, windows whose cap is the longest row: that row fills its window exactly).
fn specs(a: &Csr, slice: Slice) -> Vec<StagedSpec> {
    let longest = (a.longest_row() as u32).max(1);
    vec![
        fitting(a, slice.default_spec()),
        fitting(a, slice.light_spec()),
        StagedSpec {
            max_window_rows: 3,
            slot_cap: longest,
        },
        StagedSpec {
            max_window_rows: 1,
            slot_cap: longest,
        },
        StagedSpec {
            max_window_rows: 16,
            slot_cap: longest + 7,
        },
    ]
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn staged_kernel_matches_reference_on_generated_matrices() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    for (name, a) in generated(&mut rng) {
        for slice in Slice::ALL {
            for spec in specs(&a, slice) {
                let s = StagedCsr::build(&a, &spec).expect("fits");
                let mut p = StagedSpmm::new(&gpu, &s, slice).expect("upload");
                let what = format!("{name} {slice:?} {spec:?} ({} windows)", s.windows());
                for n in WIDTHS {
                    run_case(&gpu, &mut rng, &what, &a, &mut p, n, BPlace::Packed, None);
                }
                for place in [BPlace::Padded, BPlace::Offset] {
                    for n in [32, 100, 128] {
                        run_case(&gpu, &mut rng, &what, &a, &mut p, n, place, None);
                    }
                }
            }
        }
    }
}

/// The shared memory a block stages at its limits, for each slice: a row with exactly the default
/// cap's columns (a window of its own between short rows; 96 KB), and one more column, refused by
/// the build; then one-row windows whose staged rows end just below, at and just above the 48 KB a
/// launch may use without the opt-in attribute (with the kernel's static shared memory on top):
/// each launches and is right.
#[test]
#[ignore = "needs a CUDA GPU"]
fn windows_at_the_shared_memory_limits() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(37);
    for slice in Slice::ALL {
        let spec = slice.default_spec();
        let cap = spec.slot_cap;
        let k = 3 * cap as usize;
        let mut t: Vec<(u32, u32, f32)> = (0..cap)
            .map(|j| (2, 3 * j + 1, rng.random_range(-1.0f32..1.0)))
            .collect();
        for r in [0u32, 1, 3, 4] {
            t.push((r, r * 5, 0.5));
            t.push((r, 2 * cap, -0.25));
        }
        let a = csr_from_triplets(5, k, &t).unwrap();
        let s = StagedCsr::build(&a, &spec).expect("at the cap");
        assert_eq!(s.max_window_unique(), cap as usize);
        let mut p = StagedSpmm::new(&gpu, &s, slice).expect("upload");
        assert_eq!(p.shared_bytes(), 96 * 1024);
        for n in [8, 128, 1000] {
            let what = format!("row at cap {slice:?}");
            run_case(&gpu, &mut rng, &what, &a, &mut p, n, BPlace::Packed, None);
        }
        t.push((2, 3 * cap - 1, 1.0)); // (not of the form 3j + 1: a new column)
        let over = csr_from_triplets(5, k, &t).unwrap();
        assert!(matches!(
            StagedCsr::build(&over, &spec),
            Err(FormatError::RowOverCap { row: 2, .. })
        ));
        let at = (48 * 1024 / (4 * slice.width())) as usize;
        for u in [at - 2, at - 1, at, at + 1] {
            let t: Vec<(u32, u32, f32)> = (0..u as u32)
                .map(|j| (0, 2 * j, rng.random_range(-1.0f32..1.0)))
                .collect();
            let a = csr_from_triplets(1, 2 * u, &t).unwrap();
            let s = StagedCsr::build(&a, &spec).expect("fits");
            assert_eq!(s.max_window_unique(), u);
            let mut p = StagedSpmm::new(&gpu, &s, slice).expect("upload");
            assert_eq!(p.shared_bytes() as usize, u * 4 * slice.width() as usize);
            for n in [64, 128] {
                let what = format!("one row of {u} columns, {slice:?}");
                run_case(&gpu, &mut rng, &what, &a, &mut p, n, BPlace::Packed, None);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn no_rows_is_a_product_that_does_nothing() {
    let gpu = gpu();
    let a = csr_from_triplets(0, 4, &[]).unwrap();
    for slice in Slice::ALL {
        let s = StagedCsr::build(&a, &slice.default_spec()).unwrap();
        let mut p = StagedSpmm::new(&gpu, &s, slice).expect("upload");
        let b = gpu.upload(&[1.0f32; 16]).unwrap();
        let mut c = gpu.upload(&[0.0f32; 1]).unwrap();
        p.enqueue(
            1.0,
            &Dense::packed(&b, 4),
            0.0,
            &mut DenseMut::packed(&mut c, 4),
        )
        .expect("no rows");
        assert_eq!(gpu.download(&c).unwrap(), vec![0.0]);
    }
}

/// NaN and ∞ in A stay in their rows, NaN and ∞ in B in the features that meet them; nothing is
/// skipped (an explicit zero times ∞ is NaN, as IEEE has it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn nan_and_inf_in_a_and_b_propagate() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(38);
    let (m, k) = (64, 40);
    let mut t = Vec::new();
    for r in 0..m as u32 {
        for j in 0..6u32 {
            t.push((
                r,
                (r * 7 + j * 5) % k as u32,
                rng.random_range(-1.0f32..1.0),
            ));
        }
    }
    t.push((3, 39, f32::INFINITY));
    t.push((40, 38, f32::NAN));
    t.push((50, 11, 0.0)); // explicit zero times B's ∞ below: NaN
    t.push((51, 12, f32::NEG_INFINITY));
    let a = csr_from_triplets(m, k, &t).unwrap();
    for slice in Slice::ALL {
        for spec in [
            slice.default_spec(),
            StagedSpec {
                max_window_rows: 5,
                slot_cap: 12,
            },
        ] {
            let s = StagedCsr::build(&a, &spec).unwrap();
            let mut p = StagedSpmm::new(&gpu, &s, slice).expect("upload");
            for n in [8, 100, 128] {
                let mut b = dense(&mut rng, k * n);
                b[11 * n + 5] = f32::NAN;
                b[11 * n + 7] = f32::INFINITY;
                b[12 * n + 2] = f32::INFINITY;
                run_case(
                    &gpu,
                    &mut rng,
                    &format!("NaN/∞ {slice:?} {spec:?}"),
                    &a,
                    &mut p,
                    n,
                    BPlace::Packed,
                    Some(&b),
                );
            }
        }
    }
}

/// Every shared dataset at N = 128 and 512 with each slice's tuned cuts (a matrix with a row
/// beyond a cut's cap is refused by the build, as tuning skips it, and said so).
#[test]
#[ignore = "needs a CUDA GPU"]
fn staged_kernel_matches_reference_on_shared_datasets() {
    let gpu = gpu();
    for_each_dataset(39, |name, a, rng| {
        for (slice, spec) in Slice::ALL
            .into_iter()
            .flat_map(|slice| slice.tuned_specs().map(|spec| (slice, spec)))
        {
            let what = format!("{name} {slice:?} {spec:?}");
            let s = match StagedCsr::build(a, &spec) {
                Ok(s) => s,
                Err(e @ FormatError::RowOverCap { .. }) => {
                    println!("{what}: refused ({e})");
                    continue;
                }
                Err(e) => panic!("{what}: {e}"),
            };
            println!(
                "{what}: {} windows, gather reduction {:.2}",
                s.windows(),
                a.nnz() as f64 / s.staged_rows().max(1) as f64
            );
            let mut p = StagedSpmm::new(&gpu, &s, slice).expect("upload");
            for n in [128, 512] {
                run_case(&gpu, rng, &what, a, &mut p, n, BPlace::Packed, None);
            }
        }
    });
}
