//! `tcsparse-bench --op spmv`: bitBSR SpMV on tensor cores against cuSPARSE CSR SpMV (SpMM for more
//! than one right-hand side) in the same process, both timed as the median over CUDA graphs of
//! [`GRAPH_LAUNCHES`] launches each (cuSPARSE's per-call floor would otherwise hide small matrices).
//!
//! Backends per (matrix, n): `cusparse` (the fastest of the CSR algorithms cuSPARSE offers for n,
//! [`CusparseSpmvAlg::candidates`]); `tcsparse/f16` and `tcsparse/tf32` (our tensor-core
//! kernels: the MMA kernel and the tensor-core walk [`TC_LAYOUTS`], best of both and of the tile
//! budgets per half of [`CHUNKS`]); `tcsparse/core-f16` and `tcsparse/core-f32` (the CUDA-core
//! walk on f16 / f32 tiles: the layouts of [`tuned_walk_layouts`], the facade's; one pass over A
//! for all n right-hand sides); `tcsparse` (the tuned engine at the default precision: the
//! fastest of cuSPARSE, the TF32 kernel and the f32 walk), `tcsparse-f16` (the tuned engine with f16
//! tiles allowed) and `tcsparse-f32` (f32 products only: cuSPARSE or the f32 walk).
//! GFLOP/s = 2·nnz·n/t; GB/s over the bytes that must move once (bitBSR arrays + X + y for ours, CSR
//! + X + y for cuSPARSE); accuracy against f64, element-wise, scaled by |A|·|X|.

use std::time::Instant;

use anyhow::Result;
use cudarc::driver::CudaSlice;
use rand::{Rng, SeedableRng, rngs::StdRng};
use tcsparse::formats::bitbsr::BitBsr;
use tcsparse::formats::bitbsr_device::{DeviceBitBsr, TileStorage};
use tcsparse::formats::generate::GeneratorSpec;
use tcsparse::formats::reference::{max_scaled_error, relative_error, spmm_f64};
use tcsparse::gpu::cusparse::CusparseCsr;
use tcsparse::gpu::spmv::baseline::{CusparseSpmvAlg, CusparseSpmvGraphable};
use tcsparse::gpu::spmv::csr::{CSR_CHUNKS, CsrSpmv};
use tcsparse::gpu::spmv::graph::time_spmv;
use tcsparse::gpu::spmv::{BitBsrSpmv, TC_LAYOUTS, tuned_walk_layouts};
use tcsparse::gpu::{DeviceProduct, Gpu, GpuError};

use crate::matrices::Matrix;
use crate::report::{Case, Op, Report, Status, VendorBaseline, geomean};

/// Launches per captured graph.
pub const GRAPH_LAUNCHES: usize = 20;
/// Graph launches timed per case (median reported).
pub const SAMPLES: usize = 15;
/// Tile budgets per half tried for our kernel (plus the wave-fitted one for
/// `WAVE_FITTED_LAYOUTS`: `BitBsrSpmv::tuning_chunks`).
pub const CHUNKS: [u32; 4] = [4, 8, 32, 128];
/// Backend name of our CSR walks for 2 to 8 right-hand sides (`spmv_csr{n}` or `spmv_csrrows{n}`:
/// the best walk and budget of [`CSR_CHUNKS`]); candidates of every tuned engine at n ≥ 2.
pub const CSR_BACKEND: &str = "tcsparse/csr";
/// Accuracy bound of our kernels (f16 and TF32 keep 11 bits of A and X): 2⁻⁹·(|A|·|X|).
pub const TOL_OURS: f64 = 1.0 / 512.0;
/// Accuracy bound of cuSPARSE (f32): 2⁻¹⁷·(|A|·|X|), far above its rounding.
pub const TOL_F32: f64 = 1.0 / 131_072.0;

/// The large generated set for SpMV (≥ 10M nonzeros each): four of SpMM's and a FEM-like band.
pub fn generated_specs() -> Vec<(String, GeneratorSpec)> {
    use crate::matrices::{banded2m_hb32, clustered1m_b64, clustered256k_b256, rmat20_ef11};
    vec![
        banded2m_hb32(),
        // FEM-like: a dense-ish band (512K rows, |i-j| ≤ 48 at 80%: ~78 nnz/row, ~40M nnz).
        (
            "fem-like512k-hb48".into(),
            GeneratorSpec::Banded {
                n: 1 << 19,
                half_bandwidth: 48,
                fill: 0.8,
                seed: 9,
            },
        ),
        clustered1m_b64(),
        clustered256k_b256(),
        rmat20_ef11(),
    ]
}

#[derive(Clone)]
struct Measured {
    ms: f64,
    scaled_err: f64,
    rel_err: f64,
    plan: String,
    bytes: u64,
}

impl Measured {
    /// A backend's median time `ms` with its checked errors `(scaled, relative)`.
    fn new(ms: f64, (scaled_err, rel_err): (f64, f64), plan: String, bytes: u64) -> Self {
        Self {
            ms,
            scaled_err,
            rel_err,
            plan,
            bytes,
        }
    }
}

fn case(m: &Matrix, n: usize, backend: &str, r: Result<Measured, String>, tol: f64) -> Case {
    let (status, ms, bytes, rel, scaled, plan) = match r {
        Ok(x) => {
            let st = if x.scaled_err <= tol {
                Status::Ok
            } else {
                Status::Failed {
                    reason: format!("scaled error {:.3e} > {tol:.3e}", x.scaled_err),
                }
            };
            (
                st,
                Some(x.ms),
                Some(x.bytes),
                Some(x.rel_err),
                Some(x.scaled_err),
                Some(x.plan),
            )
        }
        Err(e) => (Status::Failed { reason: e }, None, None, None, None, None),
    };
    Case {
        ms,
        bytes,
        rel_err: rel,
        scaled_err: scaled,
        plan,
        ..Case::new(
            crate::report::Op::Spmv,
            &m.name,
            m.group,
            (m.csr.rows(), m.csr.cols(), m.csr.nnz()),
            n,
            backend,
            status,
        )
    }
}

/// All cases of one matrix for each n in `ns`.
pub fn gpu_cases(gpu: &Gpu, m: &Matrix, ns: &[usize]) -> Vec<Case> {
    let mut out = Vec::new();
    let a = &m.csr;
    let t = Instant::now();
    let bsr = match BitBsr::from_csr(a) {
        Ok(b) => b,
        Err(e) => {
            for &n in ns {
                out.push(case(
                    m,
                    n,
                    "tcsparse/f16",
                    Err(format!("bitBSR: {e}")),
                    TOL_OURS,
                ));
            }
            return out;
        }
    };
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut ours: Vec<(TileStorage, Result<BitBsrSpmv, String>)> = Vec::new();
    for st in [TileStorage::F16, TileStorage::Tf32, TileStorage::F32] {
        let k = DeviceBitBsr::encode(&bsr, st)
            .map_err(|e| e.to_string())
            .and_then(|d| BitBsrSpmv::new(gpu, &d).map_err(|e| e.to_string()));
        ours.push((st, k));
    }
    let ca = CusparseCsr::new(gpu, a).map_err(|e| e.to_string());
    let mut rng = StdRng::seed_from_u64(a.nnz() as u64);
    for &n in ns {
        let x: Vec<f32> = (0..a.cols() * n)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let want = spmm_f64(a, &x, n, n, false);
        let scale = spmm_f64(a, &x, n, n, true);
        let y0 = vec![f32::NAN; a.rows() * n];
        let check = |y: &[f32]| (max_scaled_error(y, &want, &scale), relative_error(y, &want));
        let run = || -> Result<_, GpuError> {
            let dx = gpu.upload(&x)?;
            let dy = gpu.upload(&y0)?;
            Ok((dx, dy))
        };
        let Ok((dx, mut dy)) = run() else {
            continue;
        };
        // cuSPARSE: every CSR algorithm it offers for n, the fastest reported (each logged at
        // debug level; one that fails to prepare or run is skipped unless all do).
        let base = ca.as_ref().map_err(|e| e.clone()).and_then(|ca| {
            let mut best: Option<Measured> = None;
            let mut errors = Vec::new();
            for &alg in CusparseSpmvAlg::candidates(n) {
                let mut measure = || -> Result<Measured, GpuError> {
                    let b = CusparseSpmvGraphable::with_alg(gpu, ca, n, alg)?;
                    gpu.stream().memcpy_htod(&y0, &mut dy)?;
                    let tm = time_spmv(gpu, &b, &dx, &mut dy, n, GRAPH_LAUNCHES, SAMPLES)?;
                    let y = gpu.download(&dy)?;
                    let op = if n == 1 {
                        "cusparseSpMV"
                    } else {
                        "cusparseSpMM"
                    };
                    Ok(Measured::new(
                        tm.median_ms,
                        check(&y),
                        format!("{op} CSR {}", alg.name(n)),
                        (4 * (a.rows() + 1) + 8 * a.nnz() + 4 * n * (a.rows() + a.cols())) as u64,
                    ))
                };
                match measure() {
                    Ok(r) => {
                        tracing::debug!(
                            candidate = alg.name(n),
                            us = r.ms * 1e3,
                            "{} cusparse n {n}",
                            m.name
                        );
                        if best.as_ref().is_none_or(|b| r.ms < b.ms) {
                            best = Some(r);
                        }
                    }
                    Err(e) => errors.push(format!("{}: {e}", alg.name(n))),
                }
            }
            best.ok_or_else(|| errors.join("; "))
        });
        let mut results: Vec<(String, Result<Measured, String>)> = Vec::new();
        // (storage, CUDA-core walk, backend, accuracy bound): the MMA kernels and the walks at
        // every n (the walks' layouts: all at n = 1, the set-bit walks at n > 1).
        let variants = [
            (TileStorage::F16, false, "tcsparse/f16", TOL_OURS),
            (TileStorage::Tf32, false, "tcsparse/tf32", TOL_OURS),
            (TileStorage::F16, true, "tcsparse/core-f16", TOL_OURS),
            (TileStorage::F32, true, "tcsparse/core-f32", TOL_F32),
        ];
        let mut tols: Vec<(String, f64)> = Vec::new();
        for (st, core, name, tol) in variants {
            let Some((_, k)) = ours.iter_mut().find(|o| o.0 == st) else {
                continue;
            };
            tols.push((name.into(), tol));
            let r = k.as_mut().map_err(|e| e.clone()).and_then(|k| {
                // The walk's layouts are timed like the tile budgets, as in the facade's tuning
                // (tuned_walk_layouts); the tensor-core walk (TC_LAYOUTS, a TF32 product) with
                // the MMA kernels, not with the CUDA-core walks.
                let layouts: Vec<Option<&str>> = if core {
                    tuned_walk_layouts(n).into_iter().map(Some).collect()
                } else {
                    std::iter::once(None)
                        .chain(TC_LAYOUTS.iter().map(|&l| Some(l)))
                        .collect()
                };
                let mut best: Option<(f64, u32, Option<&str>)> = None;
                let mut measure = || -> Result<Measured, GpuError> {
                    // The walks for n from their module before any graph is captured.
                    k.load_walks(n)?;
                    for &l in &layouts {
                        k.set_core_layout(l)?;
                        for c in k.tuning_chunks(l, &CHUNKS)? {
                            k.set_chunk(c)?;
                            let tm = time_spmv(gpu, &*k, &dx, &mut dy, n, GRAPH_LAUNCHES, SAMPLES)?;
                            tracing::debug!(
                                candidate = k.kernel_name(n),
                                chunk = c,
                                us = tm.median_ms * 1e3,
                                "{} {name} n {n}",
                                m.name
                            );
                            if best.is_none_or(|b| tm.median_ms < b.0) {
                                best = Some((tm.median_ms, c, l));
                            }
                        }
                    }
                    let (ms, c, l) = best.unwrap_or((f64::NAN, 32, None));
                    k.set_core_layout(l)?;
                    k.set_chunk(c)?;
                    let errors =
                        checked_run(gpu, &y0, &mut dy, &check, |dy| k.run(1.0, &dx, 0.0, dy, n))?;
                    let plan = format!(
                        "{} chunk {c} ({} split tile-rows)",
                        k.kernel_name(n),
                        k.num_split_rows()
                    );
                    Ok(Measured::new(ms, errors, plan, k.min_bytes(n) as u64))
                };
                measure().map_err(|e| e.to_string())
            });
            results.push((name.into(), r));
        }
        // Our CSR walks (n ≥ 2; f32 products, so candidates of every tuned engine): each walk at
        // each budget of CSR_CHUNKS timed, the fastest reported.
        if n >= 2 {
            let r = ca.as_ref().map_err(|e| e.clone()).and_then(|ca| {
                let mut measure = || -> Result<Measured, GpuError> {
                    let mut k = CsrSpmv::new(gpu, a, ca.device(), CSR_CHUNKS[0])?;
                    let (ms, _, c) = k.tune(n, |k| {
                        let tm = time_spmv(gpu, k, &dx, &mut dy, n, GRAPH_LAUNCHES, SAMPLES)?;
                        tracing::debug!(
                            candidate = k.kernel_name(n)?,
                            chunk = k.chunk_nnz(),
                            us = tm.median_ms * 1e3,
                            "{} tcsparse/csr n {n}",
                            m.name
                        );
                        Ok::<f64, GpuError>(tm.median_ms)
                    })?;
                    let errors =
                        checked_run(gpu, &y0, &mut dy, &check, |dy| k.run(1.0, &dx, 0.0, dy, n))?;
                    let plan = format!(
                        "{} chunk {c} nnz ({} split rows)",
                        k.kernel_name(n)?,
                        k.split_rows()
                    );
                    Ok(Measured::new(ms, errors, plan, k.min_bytes(n) as u64))
                };
                measure().map_err(|e| e.to_string())
            });
            tols.push((CSR_BACKEND.into(), TOL_F32));
            results.push((CSR_BACKEND.into(), r));
        }
        let tol_of = |name: &str| {
            tols.iter()
                .find(|t| t.0 == name)
                .map(|t| t.1)
                .unwrap_or(TOL_OURS)
        };
        let pick = |allowed: &[&str]| -> Result<Measured, String> {
            let mut best: Option<Measured> = base
                .as_ref()
                .ok()
                .filter(|b| b.scaled_err <= TOL_F32)
                .map(|b| Measured {
                    plan: format!("cuSPARSE ({})", b.plan),
                    ..b.clone()
                });
            for (name, r) in &results {
                if let Ok(r) = r
                    && allowed.contains(&name.as_str())
                    && r.scaled_err <= tol_of(name)
                    && best.as_ref().is_none_or(|b| r.ms < b.ms)
                {
                    best = Some(r.clone());
                }
            }
            best.ok_or_else(|| "no backend passed".into())
        };
        let tuned = pick(&["tcsparse/tf32", "tcsparse/core-f32", CSR_BACKEND]);
        let tuned16 = pick(&[
            "tcsparse/f16",
            "tcsparse/tf32",
            "tcsparse/core-f16",
            "tcsparse/core-f32",
            CSR_BACKEND,
        ]);
        let tuned32 = pick(&["tcsparse/core-f32", CSR_BACKEND]);
        out.push(case(m, n, "cusparse", base, TOL_F32));
        for (name, r) in results {
            let tol = tol_of(&name);
            out.push(case(m, n, &name, r, tol));
        }
        out.push(case(m, n, "tcsparse", tuned, TOL_OURS));
        out.push(case(m, n, "tcsparse-f16", tuned16, TOL_OURS));
        out.push(case(m, n, "tcsparse-f32", tuned32, TOL_F32));
    }
    eprintln!("  {}: bitBSR built in {build_ms:.0} ms", m.name);
    out
}

/// Runs `run` once with y reset to `y0` and returns `check` of the result (scaled error, relative
/// error): the kept setting of a backend, checked after its timings.
fn checked_run(
    gpu: &Gpu,
    y0: &[f32],
    dy: &mut CudaSlice<f32>,
    check: &dyn Fn(&[f32]) -> (f64, f64),
    run: impl FnOnce(&mut CudaSlice<f32>) -> Result<(), GpuError>,
) -> Result<(f64, f64), GpuError> {
    gpu.stream().memcpy_htod(y0, dy)?;
    run(dy)?;
    let y = gpu.download(dy)?;
    Ok(check(&y))
}

fn ms_of(cases: &[Case], m: &str, n: usize, b: &str) -> Option<f64> {
    cases
        .iter()
        .find(|c| c.matrix == m && c.n == n && c.backend == b && c.ok())
        .and_then(|c| c.ms)
}

/// The Markdown report: one table per n and the summary lines per tuned engine.
pub fn markdown(device: &str, command: &str, cases: &[Case]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# SpMV (bitBSR on tensor cores) vs cuSPARSE CSR — {device}\n"
    );
    let _ = writeln!(s, "Command: `{command}`\n");
    let _ = writeln!(
        s,
        "Times: median over {SAMPLES} CUDA-graph launches of {GRAPH_LAUNCHES} calls each, per call. \
         Speedup = cuSPARSE time / ours (same matrix, same n, same process; cuSPARSE time = the \
         fastest of its CSR algorithms, named in the JSON's plan). GB/s over the bytes \
         that must move once (bitBSR arrays + X + y; CSR + X + y for cuSPARSE).\n"
    );
    let mut ns: Vec<usize> = cases.iter().map(|c| c.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let mut mats: Vec<(String, usize, usize)> = Vec::new();
    for c in cases {
        if !mats.iter().any(|m| m.0 == c.matrix) {
            mats.push((c.matrix.clone(), c.rows, c.nnz));
        }
    }
    for &n in &ns {
        let _ = writeln!(s, "## n = {n}\n");
        let _ = writeln!(
            s,
            "| matrix | rows | nnz | nnz/row | cuSPARSE µs | f16 µs (×) | TF32 µs (×) | core f16 µs (×) | core f32 µs (×) | CSR walk µs (×) | tuned µs (×) | tuned+f16 µs (×) | tuned f32 µs (×) | f16 GB/s | core f16 GB/s | kernel (tuned+f16) |"
        );
        let _ = writeln!(
            s,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        );
        for (m, rows, nnz) in &mats {
            let base = ms_of(cases, m, n, "cusparse");
            let cell = |b: &str| match (ms_of(cases, m, n, b), base) {
                (Some(t), Some(bt)) => format!("{:.2} ({:.2}×)", t * 1e3, bt / t),
                (Some(t), None) => format!("{:.2}", t * 1e3),
                _ => {
                    if cases
                        .iter()
                        .any(|c| c.matrix == *m && c.n == n && c.backend == b)
                    {
                        "FAILED".into()
                    } else {
                        "–".into()
                    }
                }
            };
            let gbs_of = |b: &str| {
                cases
                    .iter()
                    .find(|c| c.matrix == *m && c.n == n && c.backend == b && c.ok())
                    .and_then(|c| c.gbps())
                    .map(|g| format!("{g:.0}"))
                    .unwrap_or_else(|| "–".into())
            };
            let gbs = gbs_of("tcsparse/f16");
            let gbs_core = gbs_of("tcsparse/core-f16");
            let plan = cases
                .iter()
                .find(|c| c.matrix == *m && c.n == n && c.backend == "tcsparse-f16")
                .and_then(|c| c.plan.clone())
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| {m} | {rows} | {nnz} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {gbs} | {gbs_core} | {plan} |",
                *nnz as f64 / (*rows).max(1) as f64,
                base.map(|b| format!("{:.2}", b * 1e3))
                    .unwrap_or_else(|| "FAILED".into()),
                cell("tcsparse/f16"),
                cell("tcsparse/tf32"),
                cell("tcsparse/core-f16"),
                cell("tcsparse/core-f32"),
                cell(CSR_BACKEND),
                cell("tcsparse"),
                cell("tcsparse-f16"),
                cell("tcsparse-f32"),
            );
        }
        let _ = writeln!(s);
        for (title, backend) in [
            (
                "tuned engine, default precision (TF32 tiles, the f32 CUDA-core walk, or cuSPARSE)",
                "tcsparse",
            ),
            ("tuned engine with f16 tiles allowed", "tcsparse-f16"),
            (
                "tuned engine at f32 precision (the f32 CUDA-core walk, or cuSPARSE)",
                "tcsparse-f32",
            ),
            (
                "our CUDA-core f16 walk alone (no cuSPARSE fallback)",
                "tcsparse/core-f16",
            ),
            (
                "our CUDA-core f32 walk alone (no cuSPARSE fallback)",
                "tcsparse/core-f32",
            ),
            (
                "our f16 kernel alone (no cuSPARSE fallback)",
                "tcsparse/f16",
            ),
            (
                "our TF32 kernel alone (no cuSPARSE fallback)",
                "tcsparse/tf32",
            ),
            (
                "our CSR walk alone (2 to 8 right-hand sides; no cuSPARSE fallback)",
                CSR_BACKEND,
            ),
        ] {
            let mut all = Vec::new();
            let mut dense = Vec::new();
            let mut worst: Option<(f64, String)> = None;
            for (m, rows, nnz) in &mats {
                if let (Some(b), Some(t)) =
                    (ms_of(cases, m, n, "cusparse"), ms_of(cases, m, n, backend))
                {
                    let r = b / t;
                    all.push(r);
                    if *nnz as f64 / (*rows).max(1) as f64 > 32.0 {
                        dense.push(r);
                    }
                    if worst.as_ref().is_none_or(|w| r < w.0) {
                        worst = Some((r, m.clone()));
                    }
                }
            }
            if all.is_empty() && backend == CSR_BACKEND {
                continue; // (n = 1: cuSPARSE SpMV and the bitBSR walks serve it)
            }
            let _ = writeln!(s, "{title}, n = {n}:\n");
            let f = |g: Option<f64>| {
                g.map(|g| format!("{g:.2}×"))
                    .unwrap_or_else(|| "n/a".into())
            };
            let _ = writeln!(
                s,
                "- geomean (nnz/row > 32): {} over {} matrices",
                f(geomean(&dense)),
                dense.len()
            );
            let _ = writeln!(
                s,
                "- geomean (all): {} over {} matrices",
                f(geomean(&all)),
                all.len()
            );
            match worst {
                Some((r, m)) => {
                    let _ = writeln!(s, "- worst case: {r:.2}× ({m})\n");
                }
                None => {
                    let _ = writeln!(s, "- worst case: n/a\n");
                }
            }
        }
    }
    if ns.contains(&1) && ns.contains(&8) {
        let _ = writeln!(s, "## 8 right-hand sides vs 1 (time ratio)\n");
        let _ = writeln!(
            s,
            "Every ratio is t(8) of the column's product over **the tuned engine's 1-RHS time** (default \
             precision: the fastest of cuSPARSE SpMV, the TF32 MMA kernel and the f32 walk; at n = 8 \
             also our CSR walk), i.e. \
             what 8 right-hand sides cost against the best single product we have. own: the same \
             product's t(8)/t(1). Goal: tuned t(8) ≤ 2× tuned t(1).\n"
        );
        let _ = writeln!(
            s,
            "| matrix | nnz/row | f16 MMA | TF32 MMA | core f16 | core f32 | core f32 own | CSR walk | cuSPARSE | tuned | tuned ≤ 2× |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        let (mut met, mut total) = (0usize, 0usize);
        let mut missed: Vec<String> = Vec::new();
        for (m, rows, nnz) in &mats {
            let t1 = ms_of(cases, m, 1, "tcsparse");
            let r = |b: &str| match (ms_of(cases, m, 8, b), t1) {
                (Some(a), Some(b)) => format!("{:.2}", a / b),
                _ => "–".into(),
            };
            let own = |b: &str| match (ms_of(cases, m, 8, b), ms_of(cases, m, 1, b)) {
                (Some(a), Some(b)) => format!("{:.2}", a / b),
                _ => "–".into(),
            };
            let ok = match (ms_of(cases, m, 8, "tcsparse"), t1) {
                (Some(a), Some(b)) => {
                    total += 1;
                    if a <= 2.0 * b {
                        met += 1;
                        "yes"
                    } else {
                        missed.push(format!("{m} {:.2}×", a / b));
                        "no"
                    }
                }
                _ => "–",
            };
            let _ = writeln!(
                s,
                "| {m} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {ok} |",
                *nnz as f64 / (*rows).max(1) as f64,
                r("tcsparse/f16"),
                r("tcsparse/tf32"),
                r("tcsparse/core-f16"),
                r("tcsparse/core-f32"),
                own("tcsparse/core-f32"),
                r(CSR_BACKEND),
                r("cusparse"),
                r("tcsparse")
            );
        }
        let _ = writeln!(
            s,
            "\n- 8 right-hand sides in ≤ 2× the tuned 1-RHS time: {met} of {total} matrices"
        );
        if !missed.is_empty() {
            let _ = writeln!(s, "- missed: {}", missed.join(", "));
        }
        let _ = writeln!(s);
    }
    s
}

/// Runs the SpMV benchmark; hands the report so far to `partial` after each matrix (the bench
/// writes it as partial results, `results::write_partial`) and returns the whole report (the
/// caller writes, prints and gates it).
pub fn run(
    gpu: &Gpu,
    device: &str,
    command: &str,
    mats: &[Matrix],
    ns: &[usize],
    partial: &dyn Fn(&Report) -> Result<()>,
) -> Result<Report> {
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let report = |device: String, cases: Vec<Case>| Report {
        command: command.into(),
        device,
        started_unix,
        cases,
        config: None,
        baseline: Some(VendorBaseline::current(Op::Spmv)),
    };
    let mut cases = Vec::new();
    for m in mats {
        let t = Instant::now();
        let got = gpu_cases(gpu, m, ns);
        m.log_cases(22, got.len(), t.elapsed());
        cases.extend(got);
        partial(&report(device.into(), cases.clone()))?;
    }
    Ok(report(device.into(), cases))
}
