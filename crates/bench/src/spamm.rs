//! `tcsparse-bench --op spamm`: cuSpAMM (our norm-gated dense products) against cuBLAS SGEMM,
//! TF32 GEMM and f16 GemmEx in the same process, on decay matrices of size N ∈ {4096, 8192,
//! 16384}: exp(−r|i−j|) with r ∈ {0.5, 0.1, 0.02}, the paper's algebraic matrix and an
//! exponential-decay matrix with random signs. Times are medians of CUDA-event-timed launches and
//! include the norm maps; errors are relative Frobenius errors against f64 on sampled rows.
//! Results are [`Report`]s of [`Case`]s with `op = "spamm"` (a dense matrix: group `decay`, rows =
//! cols = N, nnz = N²), written by `results::write` as `spamm-<device>.json` / `.md`; [`markdown`]
//! renders them from the report alone.

use std::time::Instant;

use anyhow::Result;
use tcsparse::formats::generate::{algebraic_decay_dense, exponential_decay_dense};
use tcsparse::gpu::Gpu;
use tcsparse::gpu::baselines::cublas::{Cublas, GemmPrecision};
use tcsparse::gpu::baselines::cublas_ex::{CublasEx, GemmExInput, GemmExKind};
use tcsparse::gpu::spamm::{
    SpammBlock, SpammKernel, SpammOperands, SpammPrecision, SpammSchedule, TILE, TauTarget,
    choose_tau, norm_maps, rel_bound, to_f16,
};
use tcsparse::spamm::measured_error;

use crate::report::{Case, Group, Op, Report, Status};

/// Options.
pub struct SpammBenchArgs<'a> {
    /// Matrix sizes.
    pub sizes: Vec<usize>,
    /// Timed samples.
    pub iters: usize,
    /// Warm-up launches.
    pub warmup: usize,
    /// What to do with the report so far after each matrix (the bench writes it as partial
    /// results, `results::write_partial`).
    pub partial: &'a dyn Fn(&Report) -> anyhow::Result<()>,
    /// Only matrices whose name contains one of these.
    pub only: Option<Vec<String>>,
    /// C block.
    pub block: SpammBlock,
    /// Balance parameter.
    pub s: usize,
    /// Command line.
    pub command: String,
}

/// exp(−rate·|i−j|) with a random sign per entry (a hash of (i, j, seed)): cancellation makes
/// the norm bound loose, unlike the all-positive decay matrices.
pub fn signed_exponential(n: usize, rate: f64, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    let mut a = vec![0f32; n * n];
    a.par_chunks_mut(n.max(1)).enumerate().for_each(|(i, row)| {
        for (j, x) in row.iter_mut().enumerate() {
            let mut h = (i as u64) << 32 ^ j as u64 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 33;
            let v = (-rate * (i as f64 - j as f64).abs()).exp() as f32;
            *x = if h & 1 == 1 { -v } else { v };
        }
    });
    a
}

fn matrices() -> Vec<(&'static str, TauTarget)> {
    vec![
        ("exp-r0.5", TauTarget::RelError(1e-5)),
        ("exp-r0.1", TauTarget::RelError(1e-5)),
        ("exp-r0.02", TauTarget::RelError(1e-5)),
        ("signed-exp-r0.1", TauTarget::RelError(1e-5)),
        ("algebraic", TauTarget::ValidRatio(0.05)),
    ]
}

fn build(name: &str, n: usize) -> Vec<f32> {
    match name {
        "exp-r0.5" => exponential_decay_dense(n, 0.5),
        "exp-r0.1" => exponential_decay_dense(n, 0.1),
        "exp-r0.02" => exponential_decay_dense(n, 0.02),
        "signed-exp-r0.1" => signed_exponential(n, 0.1, 7),
        _ => algebraic_decay_dense(n),
    }
}

fn sample_rows(n: usize) -> Vec<usize> {
    let k = 32.min(n);
    (0..k).map(|i| i * n / k + (n / k) / 2).collect()
}

/// Runs the SpAMM bench; writes partial results to `args.out` after each matrix and returns the
/// whole report (the caller writes, prints and gates it).
pub fn run(gpu: &Gpu, device: String, args: &SpammBenchArgs<'_>) -> Result<Report> {
    let mut cases: Vec<Case> = Vec::new();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let config = format!("block {:?}, s = {}", args.block, args.s);
    let report = |device: String, cases: Vec<Case>| Report {
        command: args.command.clone(),
        device,
        started_unix,
        cases,
        config: Some(config.clone()),
        baseline: Some(crate::baseline::VendorBaseline::current(
            crate::report::Op::Spamm,
        )),
    };
    let time = |f: &mut dyn FnMut() -> Result<(), tcsparse::gpu::GpuError>| -> Result<f64> {
        Ok(gpu
            .time_launches(args.warmup, args.iters.max(1), f)?
            .median_ms)
    };
    for &n in &args.sizes {
        for (name, target) in matrices() {
            if let Some(o) = &args.only
                && !o.iter().any(|s| name.contains(s.as_str()))
            {
                continue;
            }
            let t0 = Instant::now();
            let a = build(name, n);
            let rows = sample_rows(n);
            let da = gpu.upload(&a)?;
            let mut dc = gpu.alloc_zeros::<f32>(n * n)?;
            let err = |dc: &cudarc::driver::CudaSlice<f32>| -> Result<f64> {
                let c = gpu.download(dc)?;
                Ok(measured_error(&a, &a, &c, n, n, &rows))
            };
            // Vendor baselines.
            let mut blas = Cublas::new(gpu)?;
            let mut ex = CublasEx::new(gpu)?;
            let h = to_f16(gpu, &da)?;
            for (backend, which) in [("cublas-sgemm", 0), ("cublas-tf32", 1), ("cublas-f16", 2)] {
                let mut f = || -> Result<(), tcsparse::gpu::GpuError> {
                    match which {
                        0 => blas.gemm_row_major(
                            GemmPrecision::F32,
                            n,
                            n,
                            n,
                            1.0,
                            &da,
                            &da,
                            0.0,
                            &mut dc,
                        ),
                        1 => blas.gemm_row_major(
                            GemmPrecision::Tf32,
                            n,
                            n,
                            n,
                            1.0,
                            &da,
                            &da,
                            0.0,
                            &mut dc,
                        ),
                        _ => ex.gemm_row_major(
                            GemmExKind::F16,
                            n,
                            n,
                            n,
                            GemmExInput::F16(&h, &h),
                            &mut dc,
                        ),
                    }
                };
                let ms = time(&mut f)?;
                f()?;
                let rel_err = err(&dc)?;
                cases.push(case(name, n, backend, Status::Ok, ms, rel_err));
            }
            drop(h);
            for p in SpammPrecision::ALL {
                let mut ops = SpammOperands::from_device(gpu, da.clone(), da.clone(), n, n, n, p)?;
                let (na, nb) = ops.norms_host()?;
                let t = n.div_ceil(TILE);
                let maps = norm_maps(&na, &nb, (t, t, t))?;
                let c_est = maps.skipped_bound(f32::INFINITY);
                let kern = SpammKernel::new(gpu, n, n, p, args.block, args.s)?;
                let mut st = gpu.alloc_zeros::<u64>(1)?;
                // τ for the target; an error target is re-checked against the result's norm
                // and tightened (as tcsparse::spamm does).
                let mut c_norm = c_est;
                let (mut tau, mut bound, mut valid, mut sched);
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    tau = choose_tau(&maps, target, c_norm)?;
                    sched = SpammSchedule::new(gpu, &na, &nb, (t, t, t), args.block, tau)?;
                    gpu.stream().memset_zeros(&mut st)?;
                    kern.run(&ops, &sched, 1.0, 0.0, &mut dc, Some(&mut st))?;
                    valid = gpu.download(&st)?[0];
                    let c = gpu.download(&dc)?;
                    let norm = c.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
                    let abs = maps.skipped_bound(tau);
                    bound = rel_bound(abs, norm);
                    match target {
                        TauTarget::RelError(r) if bound > r && attempts < 4 && tau > 0.0 => {
                            c_norm = norm.min(c_norm) * if attempts > 1 { 0.5 } else { 1.0 };
                        }
                        _ => break,
                    }
                }
                let rel_err = err(&dc)?;
                let norms_ms = time(&mut || ops.compute_norms())?;
                let ms = time(&mut || {
                    ops.compute_norms()?;
                    kern.run(&ops, &sched, 1.0, 0.0, &mut dc, None)
                })?;
                let slack = p.rounding_bound();
                let status = if rel_err <= bound + slack {
                    Status::Ok
                } else {
                    Status::Failed {
                        reason: format!(
                            "rel err {rel_err:.2e} > bound {bound:.1e} + rounding {slack:.0e}"
                        ),
                    }
                };
                cases.push(Case {
                    norms_ms: Some(norms_ms),
                    tau: Some(tau),
                    valid_ratio: Some(valid as f64 / (t * t * t) as f64),
                    rel_bound: Some(bound),
                    target: Some(format!("{target:?}")),
                    ..case(name, n, &format!("spamm-{}", p.name()), status, ms, rel_err)
                });
            }
            eprintln!("{name} N={n}: {:.1?}", t0.elapsed());
            (args.partial)(&report(device.clone(), cases.clone()))?;
        }
    }
    Ok(report(device, cases))
}

/// A SpAMM case of the dense `n × n` matrix `matrix` (group [`Group::Decay`], nnz = n²) with no
/// SpAMM fields yet.
fn case(matrix: &str, n: usize, backend: &str, status: Status, ms: f64, rel_err: f64) -> Case {
    Case {
        ms: Some(ms),
        rel_err: Some(rel_err),
        ..Case::new(
            Op::Spamm,
            matrix,
            Group::Decay,
            (n, n, n * n),
            n,
            backend,
            status,
        )
    }
}

/// Speedup of the fastest passing SpAMM case of (matrix, n) with rel_err ≤ `max_err` over `vendor`.
pub fn headline(cases: &[Case], matrix: &str, n: usize, vendor: &str, max_err: f64) -> Option<f64> {
    let v = cases
        .iter()
        .find(|c| c.matrix == matrix && c.n == n && c.backend == vendor)?
        .ms?;
    let best = cases
        .iter()
        .filter(|c| {
            c.matrix == matrix
                && c.n == n
                && c.backend.starts_with("spamm-")
                && c.ok()
                && c.rel_err.is_some_and(|e| e <= max_err)
        })
        .filter_map(|c| c.ms)
        .fold(f64::INFINITY, f64::min);
    best.is_finite().then(|| v / best)
}

/// The device's model for the title: the device line before ` (`, without `NVIDIA `.
fn model(device: &str) -> &str {
    let name = device.split(" (").next().unwrap_or(device);
    name.strip_prefix("NVIDIA ").unwrap_or(name)
}

/// The Markdown report (`spamm-<device>.md`), from the report alone.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# SpAMM on the {}: tcsparse cuSpAMM vs cuBLAS\n\n",
        model(&r.device)
    ));
    s.push_str(&format!(
        "Device: {}\n\nCommand: `{}`\n\n",
        r.device, r.command
    ));
    if let Some(config) = &r.config {
        s.push_str(&format!("Config: {config}\n\n"));
    }
    let line = |vendor: &str, label: &str| match headline(&r.cases, "exp-r0.1", 16384, vendor, 1e-5)
    {
        Some(x) => format!("{label} at relerr ≤ 1e-5 (exp r=0.1, N=16384): {x:.2}×\n\n"),
        None => format!("{label} at relerr ≤ 1e-5 (exp r=0.1, N=16384): n/a (not measured)\n\n"),
    };
    s.push_str(&line("cublas-sgemm", "vs SGEMM"));
    s.push_str(&line("cublas-tf32", "vs TF32 GEMM"));
    s.push_str(
        "Times: median ms (CUDA events); SpAMM times include both norm maps. rel err: ‖C − C̃‖F/‖C‖F \
against f64 on 32 sampled rows. bound: the reported bound from the skipped norm products.\n\n",
    );
    s.push_str("| matrix | N | backend | ms | norms ms | vs SGEMM | vs TF32 | vs f16 | rel err | bound | valid % | τ | status |\n");
    s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    let f = |v: Option<String>| v.unwrap_or_else(|| "–".into());
    for c in &r.cases {
        let v = |b: &str| {
            r.cases
                .iter()
                .find(|x| x.matrix == c.matrix && x.n == c.n && x.backend == b)
                .and_then(|x| Some(format!("{:.2}×", x.ms? / c.ms?)))
                .unwrap_or_else(|| "–".into())
        };
        let status = c.status_cell();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {status} |\n",
            c.matrix,
            c.n,
            c.backend,
            f(c.ms.map(|x| format!("{x:.3}"))),
            f(c.norms_ms.map(|x| format!("{x:.3}"))),
            v("cublas-sgemm"),
            v("cublas-tf32"),
            v("cublas-f16"),
            f(c.rel_err.map(|x| format!("{x:.2e}"))),
            // Every SpAMM case (τ set) has a bound; JSON has no infinity, so serde writes an
            // infinite one (the skipped products may be as large as C) as null.
            match (c.rel_bound, c.tau) {
                (Some(x), _) => format!("{x:.1e}"),
                (None, Some(_)) => "inf".into(),
                (None, None) => "–".into(),
            },
            f(c.valid_ratio.map(|x| format!("{:.3}", 100.0 * x))),
            f(c.tau.map(|x| format!("{x:.2e}"))),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(backend: &str, ms: f64, err: f64) -> Case {
        super::case("exp-r0.1", 16384, backend, Status::Ok, ms, err)
    }

    fn report(cases: Vec<Case>) -> Report {
        Report {
            command: "x".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            cases,
            config: Some("block B64, s = 1".into()),
            baseline: None,
        }
    }

    #[test]
    fn headline_takes_the_fastest_accurate_enough() {
        let cases = vec![
            case("cublas-sgemm", 100.0, 1e-6),
            case("spamm-tf32", 0.5, 3e-4),
            case("spamm-3xtf32", 1.0, 2e-6),
            case("spamm-f32", 2.0, 1e-6),
        ];
        assert_eq!(
            headline(&cases, "exp-r0.1", 16384, "cublas-sgemm", 1e-5),
            Some(100.0)
        );
        assert_eq!(
            headline(&cases, "exp-r0.1", 8192, "cublas-sgemm", 1e-5),
            None
        );
        let md = markdown(&report(cases.clone()));
        assert!(md.starts_with("# SpAMM on the H200: "), "{md}");
        assert!(md.contains("Config: block B64, s = 1"), "{md}");
        assert!(md.contains("vs SGEMM at relerr ≤ 1e-5 (exp r=0.1, N=16384): 100.00×"));
        // No TF32 GEMM measured: the line says so.
        assert!(md.contains("vs TF32 GEMM at relerr ≤ 1e-5 (exp r=0.1, N=16384): n/a"));
        // A FAILED case never makes the headline and says why in its row.
        let mut failed = cases;
        failed[2].status = Status::Failed {
            reason: "rel err 3.00e-4 > bound 1.0e-5 + rounding 1e-5".into(),
        };
        assert_eq!(
            headline(&failed, "exp-r0.1", 16384, "cublas-sgemm", 1e-5),
            Some(50.0)
        );
        let md = markdown(&report(failed));
        assert!(md.contains("| FAILED: rel err 3.00e-4 > bound 1.0e-5 + rounding 1e-5 |"));
    }

    #[test]
    fn an_infinite_bound_survives_the_json_as_inf() {
        let mut c = case("spamm-f16", 1.0, 0.9);
        c.tau = Some(1.17);
        c.rel_bound = Some(f64::INFINITY);
        let r = report(vec![case("cublas-tf32", 2.0, 1e-4), c]);
        let back: Report =
            serde_json::from_str(&serde_json::to_string_pretty(&r).unwrap()).unwrap();
        // JSON has no infinity: null, read back as None; the table still says inf.
        assert_eq!(back.cases[1].rel_bound, None);
        assert_eq!(markdown(&back), markdown(&r));
        assert!(
            markdown(&back).contains("| 9.00e-1 | inf | "),
            "{}",
            markdown(&back)
        );
        // A vendor case (no τ) has no bound at all.
        assert!(markdown(&back).contains("| 1.00e-4 | – | "));
    }

    #[test]
    fn spamm_cases_are_dense_decay_cases() {
        let c = case("spamm-tf32", 2.0, 1e-6);
        assert_eq!((c.op, c.group), (Op::Spamm, Group::Decay));
        assert_eq!((c.rows, c.cols, c.nnz), (16384, 16384, 16384 * 16384));
        // 2·n³ flops in 2 ms.
        let want = 2.0 * 16384f64.powi(3) / 2e-3 / 1e9;
        assert!((c.gflops().unwrap() - want).abs() < 1e-6 * want);
    }

    #[test]
    fn signed_matrix_has_both_signs_and_decays() {
        let a = signed_exponential(64, 0.1, 1);
        assert!(a.iter().any(|&x| x < 0.0) && a.iter().any(|&x| x > 0.0));
        assert_eq!(a[0].abs(), 1.0);
        assert!((a[10].abs() - (-1.0f64).exp() as f32).abs() < 1e-6);
    }
}
