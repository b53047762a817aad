//! `--op multi`: SpAMM and SpMM split over 1, 2 and 4 GPUs of one host (the counts present),
//! each timed the same way on every count: the wall time from queueing every device's product to
//! the last one finishing (operands already resident, B already broadcast), median of `iters`.
//! Scaling = time on 1 GPU / time on G GPUs of the same problem in the same process.
//!
//! Writes `multi-gpu-<device>.json` and `.md`. Its JSON is its own schema (a [`MultiReport`]),
//! so [`crate::results::json_files`] leaves `multi-gpu-*` files out of the SpMM/SpMV/SpAMM
//! loaders and the regression gate.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tcsparse::formats::generate::exponential_decay_dense;
use tcsparse::gpu::Gpu;
use tcsparse::gpu::multi::{DeviceGroup, DeviceSet};
use tcsparse::gpu::spamm::{
    SpammBlock, SpammConfig, SpammOperands, SpammPrecision, TauTarget, norm_maps, spamm_block_rows,
};
use tcsparse::spamm::{DenseRef, SpammSplit, measured_error, spamm_on_group};
use tcsparse::{PrepareOptions, prepare_split};

use crate::backends;
use crate::matrices;

/// One timed problem on one device count.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MultiCase {
    /// `spamm` or `spmm`.
    pub op: String,
    /// Problem name (matrix and size).
    pub problem: String,
    /// GPUs used.
    pub gpus: usize,
    /// Median wall ms per product (all devices, B resident).
    pub ms: f64,
    /// C rows per device.
    pub row_ranges: Vec<(usize, usize)>,
    /// How B reached the devices.
    pub transport: String,
    /// Relative error against the f64 reference (sampled rows).
    pub rel_err: f64,
}

/// The results of one `--op multi` run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MultiReport {
    /// Exact command line.
    pub command: String,
    /// Device description.
    pub device: String,
    /// CUDA devices present.
    pub devices_present: usize,
    /// Every case, in run order.
    pub cases: Vec<MultiCase>,
}

/// What `--op multi` runs.
pub struct MultiArgs {
    /// SpAMM matrix size (exp decay r = 0.02).
    pub spamm_n: usize,
    /// Width of B for SpMM.
    pub spmm_n: usize,
    /// Generated matrices for SpMM (names from the bench's large set).
    pub matrices: Vec<String>,
    /// Timed repetitions.
    pub iters: usize,
    /// Command line.
    pub command: String,
}

/// Device counts to run: 1, 2, 4 where present (`--op multi` and `--op distributed`).
pub(crate) fn counts(present: usize) -> Vec<usize> {
    [1, 2, 4].into_iter().filter(|&g| g <= present).collect()
}

fn median_wall(iters: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..2 {
        f()?;
    }
    let mut t: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let s = Instant::now();
            f().map(|_| s.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<Result<_>>()?;
    t.sort_by(f64::total_cmp);
    Ok(t[t.len() / 2])
}

/// Runs the SpAMM and SpMM problems on every device count present.
pub fn run(gpu: &Gpu, args: &MultiArgs) -> Result<MultiReport> {
    let present = Gpu::device_count();
    let mut cases = Vec::new();
    // SpAMM: exp decay r = 0.02, relative error ≤ 1e-5, 3×TF32.
    let n = args.spamm_n;
    eprintln!("multi: generating exp decay {n}×{n}");
    let a = exponential_decay_dense(n, 0.02);
    let cfg = SpammConfig {
        precision: SpammPrecision::Tf32x3,
        block: SpammBlock::B64,
        s: 1,
        target: TauTarget::RelError(1e-5),
    };
    let one = DeviceGroup::open(DeviceSet::default())?;
    let ad = DenseRef::new(&a, n, n);
    let (c1, run1) = spamm_on_group(&one, ad, ad, &cfg)?;
    let rows = sample(n);
    let rel = measured_error(&a, &a, &c1, n, n, &rows);
    drop(c1);
    let full = SpammOperands::upload(gpu, &a, &a, n, n, n, cfg.precision)?;
    let (na, nb) = full.norms_host()?;
    let tiles = full.tiles();
    drop(full);
    for g in counts(present) {
        let group = DeviceGroup::open(DeviceSet::first(g))?;
        let ranges = spamm_block_rows(&norm_maps(&na, &nb, tiles)?, run1.tau, n, cfg.block, g)?;
        let mut split = SpammSplit::new(&group, ad, ad, &cfg, &ranges)?;
        split.schedule(run1.tau)?;
        let ms = median_wall(args.iters, || {
            split.run()?;
            split.synchronize()?;
            Ok(())
        })?;
        let mut c = vec![0f32; n * n];
        split.gather(&mut c)?;
        let err = measured_error(&a, &a, &c, n, n, &rows);
        eprintln!("multi: spamm exp-r0.02 N={n} on {g} GPU(s): {ms:.3} ms, rel err {err:.2e}");
        cases.push(MultiCase {
            op: "spamm".into(),
            problem: format!("exp-r0.02 N={n} (τ {:.3e}, ref err {rel:.1e})", run1.tau),
            gpus: g,
            ms,
            row_ranges: split.row_ranges(),
            transport: group.transport().to_string(),
            rel_err: err,
        });
    }
    drop(a);
    // SpMM: the largest generated matrices at N = spmm_n.
    let specs: Vec<_> = matrices::generated_specs(false)
        .into_iter()
        .filter(|(name, _)| args.matrices.iter().any(|m| m == name))
        .collect();
    for m in matrices::generate(&specs)? {
        let n = args.spmm_n;
        let b = backends::random_b(m.csr.cols(), n, 1);
        let rows = backends::sample_rows(&m.csr, 4096);
        let (want, _) = backends::reference_rows(&m.csr, &b, n, &rows);
        for g in counts(present) {
            let opts = PrepareOptions::builder().n(n).build();
            let mut split = prepare_split(DeviceSet::first(g), &m.csr, &opts)?;
            split.place_b(&b, n)?;
            let ms = median_wall(args.iters, || {
                split.run(1.0)?;
                split.synchronize()?;
                Ok(())
            })?;
            let mut c = vec![0f32; m.csr.rows() * n];
            split.gather(&mut c, n)?;
            let got: Vec<f32> = rows
                .iter()
                .flat_map(|&r| c[r * n..r * n + n].iter().copied())
                .collect();
            let err = tcsparse::formats::reference::relative_error(&got, &want);
            let kernels: Vec<String> = split.parts().map(|p| p.kernel().to_string()).collect();
            eprintln!(
                "multi: spmm {} N={n} on {g} GPU(s): {ms:.3} ms, rel err {err:.2e}, kernels {kernels:?}",
                m.name
            );
            cases.push(MultiCase {
                op: "spmm".into(),
                problem: format!("{} N={n} ({} nnz)", m.name, m.csr.nnz()),
                gpus: g,
                ms,
                row_ranges: split.row_ranges(),
                transport: split.transport().to_string(),
                rel_err: err,
            });
        }
    }
    Ok(MultiReport {
        command: args.command.clone(),
        device: backends::describe(gpu),
        devices_present: present,
        cases,
    })
}

fn sample(n: usize) -> Vec<usize> {
    let k = 64.min(n);
    (0..k).map(|i| i * n / k.max(1)).collect()
}

/// Scaling of `g` GPUs for every problem: (op, problem, t1 / tg).
fn scalings(r: &MultiReport, g: usize) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for c in r.cases.iter().filter(|c| c.gpus == g) {
        if let Some(one) = r
            .cases
            .iter()
            .find(|o| o.gpus == 1 && o.op == c.op && o.problem == c.problem)
        {
            out.push((c.op.clone(), c.problem.clone(), one.ms / c.ms));
        }
    }
    out
}

/// The summary line of `g` GPUs: the worse of the two operations' (worst problem) scaling.
pub fn scaling_line(r: &MultiReport, g: usize) -> String {
    let s = scalings(r, g);
    let worst = s
        .iter()
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(op, p, x)| (op, p, *x));
    match worst {
        Some((op, p, x)) => format!("scaling ({g} GPUs): {x:.2}× ({op}, {p})"),
        None => not_measured(g, r.devices_present),
    }
}

/// The scaling line of a device count `g` that was not run, `present` devices present.
pub(crate) fn not_measured(g: usize, present: usize) -> String {
    format!("scaling ({g} GPUs): not measured ({present} CUDA device(s) present)")
}

/// The report as Markdown (deterministic from the report alone).
pub fn markdown(r: &MultiReport) -> String {
    let mut s = format!(
        "# SpAMM and SpMM over several GPUs — {}\n\nCommand: `{}`\n\nTimes: median wall ms per \
         product on all devices (operands resident, B broadcast once), the same path on every \
         count. Scaling = 1-GPU time / G-GPU time, same problem, same process.\n\n",
        r.device, r.command
    );
    s.push_str(
        "| op | problem | GPUs | ms | scaling | rows per device | B transport | rel err |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---|---|---:|\n");
    for c in &r.cases {
        let one = r
            .cases
            .iter()
            .find(|o| o.gpus == 1 && o.op == c.op && o.problem == c.problem);
        let scale = one.map_or("—".into(), |o| format!("{:.2}×", o.ms / c.ms));
        let ranges: Vec<String> = c
            .row_ranges
            .iter()
            .map(|(a, b)| format!("{}", b - a))
            .collect();
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} | {scale} | {} | {} | {:.1e} |\n",
            c.op,
            c.problem,
            c.gpus,
            c.ms,
            ranges.join(" / "),
            c.transport,
            c.rel_err
        ));
    }
    s.push('\n');
    for g in [2, 4] {
        s.push_str(&format!("- {}\n", scaling_line(r, g)));
    }
    s
}

/// Writes `multi-gpu-<device>.json` / `.md` into `out`.
pub fn write(out: &Path, r: &MultiReport) -> Result<Vec<PathBuf>> {
    write_pair(out, "multi-gpu", &r.device, r, &markdown(r))
}

/// Writes `<stem>-<device slug>.json` (`report` as pretty JSON) and `.md` (`md`) into `out`; shared
/// by the multi-GPU reports.
pub(crate) fn write_pair(
    out: &Path,
    stem: &str,
    device: &str,
    report: &impl Serialize,
    md: &str,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let slug = crate::results::device_slug(device.split(" (").next().unwrap_or(device));
    let json = out.join(format!("{stem}-{slug}.json"));
    let md_path = out.join(format!("{stem}-{slug}.md"));
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
    Ok(vec![json, md_path])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(op: &str, problem: &str, gpus: usize, ms: f64) -> MultiCase {
        MultiCase {
            op: op.into(),
            problem: problem.into(),
            gpus,
            ms,
            row_ranges: vec![(0, 10); gpus],
            transport: if gpus == 1 { "single" } else { "nccl" }.into(),
            rel_err: 1e-6,
        }
    }

    #[test]
    fn scaling_is_the_worse_operation_and_missing_counts_say_so() {
        let r = MultiReport {
            command: "tcsparse-bench --op multi".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            devices_present: 2,
            cases: vec![
                case("spamm", "exp", 1, 10.0),
                case("spamm", "exp", 2, 5.2),
                case("spmm", "banded", 1, 4.0),
                case("spmm", "banded", 2, 2.5),
            ],
        };
        assert_eq!(
            scaling_line(&r, 2),
            "scaling (2 GPUs): 1.60× (spmm, banded)"
        );
        assert_eq!(
            scaling_line(&r, 4),
            "scaling (4 GPUs): not measured (2 CUDA device(s) present)"
        );
        let md = markdown(&r);
        assert!(md.contains("| spamm | exp | 2 | 5.200 | 1.92× | 10 / 10 | nccl | 1.0e-6 |"));
        assert_eq!(counts(1), vec![1]);
        assert_eq!(counts(3), vec![1, 2]);
        assert_eq!(counts(8), vec![1, 2, 4]);
    }
}
