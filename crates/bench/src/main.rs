//! `tcsparse-bench`: our SpMM against cuSPARSE in one process on one GPU, written as
//! `<op>-<device>.json` (machine-readable, for the regression gate `--compare`) and `<op>-<device>.md`
//! (table + geomean lines), e.g. `spmm-h200.json` / `spmm-h200.md` (results.rs names them).
//!
//! Per matrix and N: cuSPARSE SpMM (CSR, the fastest of its algorithms) and our engine (planner's choice, plus
//! Acc-SpMM with/without reordering and with/without balancing); median of CUDA-event-timed launches
//! after warm-up, rotating B buffers when B fits in L2; accuracy checked against f64 before and after
//! timing; preprocessing stages reported separately. Without a GPU it says so and runs the CPU
//! reference path on the small shipped matrices only.
//!
//! `--dtype f16|bf16` and `--precision 3xtf32` (typed.rs, numerics.rs) run SpMM in that type or
//! precision against cuSPARSE in the same type and in f32, into `spmm-<type>-<device>.json`/`.md`.
//!
//! `--op spmv` (spmv.rs: bitBSR SpMV vs cuSPARSE) and `--op spamm` (spamm.rs: cuSpAMM vs cuBLAS)
//! produce the same `Report` of `Case` records; every op's run ends alike (`finish`): its Markdown
//! (`results::render`), its files (`results::write`), the gate of `--compare`, and a non-zero exit
//! on a FAILED case.

mod backends;
mod baseline;
mod compare;
mod distributed;
mod matrices;
mod multi;
mod numerics;
mod numerics_kind;
mod plots;
mod report;
mod results;
mod soak;
mod spamm;
mod spmm_markdown;
mod spmv;
mod typed;

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use clap::Parser;

use backends::Device;
use report::{Group, Op, Report, VendorBaseline};

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(
    name = "tcsparse-bench",
    about = "SpMM, SpMV and SpAMM: tcsparse vs cuSPARSE/cuBLAS on one GPU"
)]
struct Args {
    /// Small subset for smoke runs (two shared matrices, two small generated ones, N = 128).
    #[arg(long)]
    quick: bool,
    /// Write `<op>-<device>.json` and `.md` here (e.g. spmm-h200.json, spmm-cpu.md).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Widths of B to run (default 128,256,512; --quick: 128).
    #[arg(long, value_delimiter = ',')]
    n: Option<Vec<usize>>,
    /// Timed launches per case (median reported; ≥ 30 for published numbers).
    #[arg(long, default_value_t = 50)]
    iters: usize,
    /// Untimed warm-up launches per case.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Shared dataset folder (default: $TCSPARSE_SHARED_DATASETS, ../shared/datasets, …).
    #[arg(long)]
    datasets: Option<PathBuf>,
    /// Skip the generated large matrices.
    #[arg(long)]
    no_generated: bool,
    /// Only matrices whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// SpMM: only the backends whose names start with one of these (comma-separated, e.g.
    /// `tcsparse,hrpb/`), besides the cuSPARSE baseline.
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<String>>,
    /// Check every row against f64 up to this many rows; sample beyond.
    #[arg(long, default_value_t = 65_536)]
    max_full_check: usize,
    /// Run nothing: merge these result JSON files (e.g. from runs split to fit a time limit) into
    /// one report written to --out.
    #[arg(long, num_args = 1.., value_name = "BENCH_JSON")]
    merge: Vec<PathBuf>,
    /// Regression gate: compare with these result files (JSON files, or folders whose `*.json` are
    /// all read; SpMM, SpMV and SpAMM results may be in separate files). Compares this run, or the
    /// files of --current without running. Exits non-zero on a regression or a FAILED case.
    #[arg(long, num_args = 1.., value_name = "BASE_JSON")]
    compare: Vec<PathBuf>,
    /// Run nothing: render the SVG plots of these result files into --out (default: the folder of
    /// each file), e.g. `--plot docs/results/spmm-h200.json`.
    #[arg(long, num_args = 1.., value_name = "RESULT_JSON")]
    plot: Vec<PathBuf>,
    /// With --compare: the new results (files or folders) instead of running the bench.
    #[arg(long, num_args = 1.., value_name = "NEW_JSON", requires = "compare")]
    current: Vec<PathBuf>,
    /// With --compare: largest loss of the geomean speedup ratio of one op, group and backend that
    /// passes (0.05 = 5 %; default from the H200's run-to-run spread, docs/results/README.md).
    #[arg(long, default_value_t = compare::DEFAULT_TOLERANCE, requires = "compare")]
    tolerance: f64,
    /// With --compare: largest loss of one case's speedup ratio that passes.
    #[arg(long, default_value_t = compare::DEFAULT_CASE_TOLERANCE, requires = "compare")]
    case_tolerance: f64,
    /// Operation: spmm (default), spmv (bitBSR SpMV vs cuSPARSE CSR SpMV; --rhs gives the
    /// right-hand-side counts; writes `spmv-<device>.json`/`.md`) or spamm (cuSpAMM vs cuBLAS; --n gives
    /// the matrix sizes, default 4096,8192,16384; writes `spamm-<device>.json`/`.md`) or multi
    /// (SpAMM and SpMM split over 1, 2 and 4 GPUs; writes `multi-gpu-<device>.json`/`.md`) or soak
    /// (10⁶ SpMM and SpMV products with value updates: memory flat, results bit-stable; writes
    /// `soak-<device>.json`/`.md`).
    #[arg(long, default_value = "spmm")]
    op: String,
    /// SpAMM C block edge (64 or 128).
    #[arg(long, default_value_t = 64)]
    spamm_block: usize,
    /// SpAMM strided balance parameter s.
    #[arg(long, default_value_t = 1)]
    spamm_s: usize,
    /// `--op multi`: size of the SpAMM problem (exp decay r = 0.02).
    #[arg(long, default_value_t = 32768)]
    multi_spamm_n: usize,
    /// `--op multi`: width of B of the SpMM problems.
    #[arg(long, default_value_t = 512)]
    multi_spmm_n: usize,
    /// SpMV right-hand sides per case (default 1,8).
    #[arg(long, value_delimiter = ',')]
    rhs: Option<Vec<usize>>,
    /// `--op soak`: SpMM products, and as many SpMV products.
    #[arg(long, default_value_t = 1_000_000)]
    soak_products: usize,
    /// `--op soak`: products between two value updates.
    #[arg(long, default_value_t = 1000)]
    soak_update_every: usize,
    /// `--op soak`: rows of the banded matrix.
    #[arg(long, default_value_t = 16_384)]
    soak_rows: usize,
    /// `--op soak`: width of B and right-hand sides of the SpMV (1..=8).
    #[arg(long, default_value_t = 8)]
    soak_n: usize,
    /// SpMM only: element type of A, B and C, `f32` (default), `f16` or `bf16` (as `tcsparse spmm
    /// --dtype`). f16 / bf16: per case the tuned engine in that type (`tcsparse-f16`), cuSPARSE
    /// in that type at its fastest algorithm (`cusparse-f16`) and cuSPARSE f32 (`cusparse`);
    /// writes `spmm-<dtype>-<device>.json`/`.md`. Refused with another --op.
    #[arg(long, value_name = "DTYPE")]
    dtype: Option<String>,
    /// SpMM only: precision of the f32 products, `tf32` (default) or `3xtf32` (as `tcsparse
    /// spmm --precision`). 3xtf32: the tuned engine in split TF32 (`tcsparse-3xtf32`) against
    /// cuSPARSE f32, both errors recorded; writes `spmm-3xtf32-<device>.json`/`.md`. `--dtype
    /// f16|bf16` takes only tf32. Refused with another --op.
    #[arg(long, value_name = "PRECISION")]
    precision: Option<String>,
}

impl Args {
    /// The element type or precision of an SpMM run (`None`: f32 operands at TF32), or why the
    /// flags are refused.
    fn numerics(&self) -> Result<Option<numerics::Numerics>> {
        if self.op != "spmm" && (self.dtype.is_some() || self.precision.is_some()) {
            anyhow::bail!(
                "--dtype and --precision apply to --op spmm only (--op {} measures its own \
                 precisions)",
                self.op
            );
        }
        numerics::Numerics::from_flags(
            self.dtype.as_deref().unwrap_or("f32"),
            self.precision.as_deref().unwrap_or("tf32"),
        )
        .map_err(anyhow::Error::msg)
    }
}

fn main() -> Result<()> {
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { tcsparse::gpu::multi::disable_nvls_at_startup() };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let tolerances = compare::Tolerances {
        group: args.tolerance,
        case: args.case_tolerance,
    };
    anyhow::ensure!(
        [tolerances.group, tolerances.case]
            .iter()
            .all(|t| t.is_finite() && (0.0..1.0).contains(t)),
        "tolerances are fractions in [0, 1) (0.05 = 5 %)"
    );
    if !args.merge.is_empty() {
        return merge(&args.merge, args.out.as_deref());
    }
    if !args.plot.is_empty() {
        return plot(&args.plot, args.out.as_deref());
    }
    if !args.compare.is_empty() && !args.current.is_empty() {
        return gate(&args.compare, &results::load(&args.current)?, tolerances);
    }
    let numerics = args.numerics()?;
    if let Some(v) = numerics {
        anyhow::ensure!(
            args.backends.is_none(),
            "--backends picks among the f32 bench's variants; the {v} run has one backend of ours \
             ({})",
            v.headline()
        );
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    if args.op == "spamm" {
        let report = run_spamm(&args, command)?;
        return finish(&args, &report, tolerances);
    }
    if args.op == "multi" {
        return run_multi(&args, command);
    }
    if args.op == "distributed" || args.op == "distributed-rank" {
        return distributed::run(&args, command);
    }
    if args.op == "soak" {
        return run_soak(&args, command);
    }
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let ns = args.n.clone().unwrap_or_else(|| {
        if args.quick {
            vec![128]
        } else {
            vec![128, 256, 512]
        }
    });
    anyhow::ensure!(
        !ns.is_empty() && ns.iter().all(|&n| n > 0),
        "N must be positive"
    );
    let keep = |name: &str| {
        args.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|s| name.contains(s.as_str())))
    };

    let device = backends::probe();
    if args.op == "spmv" {
        let report = run_spmv(&args, &device, &command, &keep)?;
        return finish(&args, &report, tolerances);
    }
    anyhow::ensure!(
        args.op == "spmm",
        "--op must be spmm, spmv, spamm, multi or soak"
    );
    let mut cases = Vec::new();
    let device_line = match &device {
        Device::Gpu(gpu) => {
            let mut d = backends::describe(gpu);
            if let Some(k) = backends::handicap() {
                eprintln!(
                    "WARNING: {}={k}: our kernels do {} launches per {k} timed (a deliberate {:.0} % \
                     slowdown to demonstrate the regression gate); do not publish these numbers",
                    backends::HANDICAP_ENV,
                    k + 1,
                    100.0 / f64::from(k)
                );
                d.push_str(&format!(" [handicapped: {}={k}]", backends::HANDICAP_ENV));
            }
            eprintln!("device: {d}");
            let mut mats = Vec::new();
            if let Some(dir) = matrices::shared_dir(args.datasets.as_deref()).filter(|d| d.is_dir())
            {
                let quick = ["cora", "bcsstk17"];
                let files = matrices::list_mtx(&dir, args.quick.then_some(&quick[..]))?;
                let files: Vec<_> = files
                    .into_iter()
                    .filter(|(n, _)| keep(n.as_str()))
                    .collect();
                eprintln!(
                    "reading {} shared matrices from {}",
                    files.len(),
                    dir.display()
                );
                mats.extend(matrices::read_all(&files, Group::Shared)?);
            } else {
                anyhow::ensure!(
                    std::env::var_os("TCSPARSE_REQUIRE_DATA").is_none_or(|v| v != "1"),
                    "TCSPARSE_REQUIRE_DATA=1 but no shared dataset folder (set TCSPARSE_SHARED_DATASETS)"
                );
                eprintln!(
                    "no shared dataset folder found (set TCSPARSE_SHARED_DATASETS): skipping"
                );
            }
            if !args.no_generated {
                let specs: Vec<_> = matrices::generated_specs(args.quick)
                    .into_iter()
                    .filter(|(n, _)| keep(n.as_str()))
                    .collect();
                let t = Instant::now();
                mats.extend(matrices::generate(&specs)?);
                eprintln!("generated {} matrices in {:.1?}", specs.len(), t.elapsed());
            }
            let timing = backends::Timing {
                warmup: args.warmup,
                iters: args.iters.max(1),
            };
            let sweep = backends::Sweep {
                ns: &ns,
                t: timing,
                max_full: args.max_full_check,
            };
            for m in &mats {
                let t = Instant::now();
                let got = match numerics {
                    Some(v) => typed::gpu_cases(gpu, m, sweep, v),
                    None => {
                        backends::gpu_cases(gpu, m, sweep, args.backends.as_deref().unwrap_or(&[]))
                    }
                };
                m.log_cases(20, got.len(), t.elapsed());
                cases.extend(got);
                let so_far = Report {
                    command: command.clone(),
                    device: d.clone(),
                    started_unix,
                    cases: cases.clone(),
                    config: None,
                    baseline: Some(VendorBaseline::current(Op::Spmm)),
                };
                results::write_partial(args.out.as_deref(), &so_far)?;
            }
            d
        }
        Device::None(why) => {
            if let Some(v) = numerics {
                anyhow::bail!(
                    "--dtype/--precision {v} needs a CUDA GPU ({why}): the {v} bench times \
                     device kernels against cuSPARSE"
                );
            }
            eprintln!(
                "no GPU ({why}): running the CPU reference path on the small shipped matrices only"
            );
            let dir = matrices::shipped_dir()
                .context("datasets/ folder not found (run from the repository)")?;
            let files: Vec<_> = matrices::list_mtx(&dir, None)?
                .into_iter()
                .filter(|(n, _)| keep(n.as_str()))
                .collect();
            let mats = matrices::read_all(&files, Group::Shipped)?;
            for m in &mats {
                cases.extend(backends::cpu_cases(m, &ns, 5.min(args.iters.max(1)), why));
            }
            format!(
                "{} ({why}); CPU reference path only, no cuSPARSE baseline",
                results::NO_GPU
            )
        }
    };

    let report = Report {
        command,
        device: device_line,
        started_unix,
        cases,
        config: None,
        baseline: Some(VendorBaseline::current(Op::Spmm)),
    };
    finish(&args, &report, tolerances)
}

/// The end of a run of any op: prints the report's Markdown, writes `<op>-<device>.json` / `.md`
/// into --out, runs the regression gate of --compare; an error on a FAILED case.
fn finish(args: &Args, report: &Report, tolerances: compare::Tolerances) -> Result<()> {
    print!("{}", results::render(report));
    if let Some(out) = &args.out {
        for p in results::write(out, report)? {
            eprintln!("wrote {}", p.display());
        }
    }
    let failed = report.cases.iter().filter(|c| c.failed()).count();
    if !args.compare.is_empty() {
        gate(&args.compare, std::slice::from_ref(report), tolerances)?;
    }
    anyhow::ensure!(
        failed == 0,
        "{failed} cases FAILED (accuracy check or error): see the status column"
    );
    Ok(())
}

/// Compares `current` with the base files, prints the table; an error when the gate fails.
fn gate(base: &[PathBuf], current: &[Report], tolerances: compare::Tolerances) -> Result<()> {
    let base = results::load(base)?;
    // Speedups over different vendor baselines do not compare: refuse, never a false regression.
    baseline::check_comparable(&base, current).map_err(anyhow::Error::msg)?;
    // An f16, bf16 or 3×TF32 case only ever compares with one of the same type.
    numerics::check_comparable(&base, current).map_err(anyhow::Error::msg)?;
    let c = compare::Comparison::new(&base, current, tolerances);
    print!("{}", c.table());
    anyhow::ensure!(
        c.passed(),
        "regression gate failed: {}",
        c.failures().join("; ")
    );
    Ok(())
}

/// `--op multi`: SpAMM and SpMM split over 1, 2 and 4 GPUs (those present); `--only` names the
/// generated SpMM matrices (default: banded2m-hb32 and reddit-like, the largest).
fn run_multi(args: &Args, command: String) -> Result<()> {
    let Device::Gpu(gpu) = backends::probe() else {
        anyhow::bail!("--op multi needs a CUDA GPU");
    };
    let ma = multi::MultiArgs {
        spamm_n: args.multi_spamm_n,
        spmm_n: args.multi_spmm_n,
        matrices: args
            .only
            .clone()
            .unwrap_or_else(|| vec!["banded2m-hb32".into(), "reddit-like".into()]),
        iters: args.iters.clamp(1, 50),
        command,
    };
    let report = multi::run(&gpu, &ma)?;
    print!("{}", multi::markdown(&report));
    if let Some(out) = &args.out {
        for p in multi::write(out, &report)? {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// `--op spamm`: needs a GPU.
fn run_spamm(args: &Args, command: String) -> Result<Report> {
    let Device::Gpu(gpu) = backends::probe() else {
        anyhow::bail!("--op spamm needs a CUDA GPU");
    };
    let block = match args.spamm_block {
        64 => tcsparse::gpu::spamm::SpammBlock::B64,
        128 => tcsparse::gpu::spamm::SpammBlock::B128,
        b => anyhow::bail!("--spamm-block must be 64 or 128, not {b}"),
    };
    let sa = spamm::SpammBenchArgs {
        sizes: args.n.clone().unwrap_or_else(|| vec![4096, 8192, 16384]),
        iters: args.iters.clamp(1, 20),
        warmup: args.warmup.min(3),
        partial: &|r| results::write_partial(args.out.as_deref(), r),
        only: args.only.clone(),
        block,
        s: args.spamm_s.max(1),
        command,
    };
    spamm::run(&gpu, backends::describe(&gpu), &sa)
}

/// `--op spmv`: shared datasets + the large generated SpMV set, n ∈ --rhs (default 1, 8).
/// `--op soak` (soak.rs): prints the Markdown, writes `soak-<device>.json`/`.md` to --out, and
/// fails when results drifted or memory grew.
fn run_soak(args: &Args, command: String) -> Result<()> {
    let engine = tcsparse::Engine::new();
    eprintln!("{}", engine.message());
    let cfg = soak::SoakConfig {
        products: args.soak_products,
        update_every: args.soak_update_every,
        rows: args.soak_rows,
        n: args.soak_n,
    };
    let r = soak::run(&engine, &cfg, command)?;
    let md = soak::render(&r);
    print!("{md}");
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        let slug = match engine.gpu() {
            Some(g) => results::device_slug(&g.info().name),
            None => "cpu".into(),
        };
        std::fs::write(out.join(format!("soak-{slug}.md")), &md)?;
        std::fs::write(
            out.join(format!("soak-{slug}.json")),
            serde_json::to_string_pretty(&r)?,
        )?;
    }
    anyhow::ensure!(
        r.passed(),
        "soak failed: {} mismatches, memory flat: {}, first-epoch error {:.2e}",
        r.mismatches.len(),
        r.memory_flat(),
        r.first_error
    );
    Ok(())
}

fn run_spmv(
    args: &Args,
    device: &Device,
    command: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Report> {
    let Device::Gpu(gpu) = device else {
        anyhow::bail!("--op spmv needs a GPU (the CPU path is `tcsparse spmv FILE`)");
    };
    let d = backends::describe(gpu);
    eprintln!("device: {d}");
    let ns = args.rhs.clone().unwrap_or_else(|| vec![1, 8]);
    anyhow::ensure!(
        ns.iter().all(|&n| (1..=8).contains(&n)),
        "--rhs takes 1..=8"
    );
    let mut mats = Vec::new();
    if let Some(dir) = matrices::shared_dir(args.datasets.as_deref()).filter(|d| d.is_dir()) {
        let quick = ["cora", "bcsstk17"];
        let files: Vec<_> = matrices::list_mtx(&dir, args.quick.then_some(&quick[..]))?
            .into_iter()
            .filter(|(n, _)| keep(n.as_str()))
            .collect();
        mats.extend(matrices::read_all(&files, Group::Shared)?);
    }
    if !args.no_generated {
        let specs: Vec<_> = spmv::generated_specs()
            .into_iter()
            .filter(|(n, _)| keep(n.as_str()))
            .take(if args.quick { 1 } else { usize::MAX })
            .collect();
        let t = Instant::now();
        mats.extend(matrices::generate(&specs)?);
        eprintln!("generated {} matrices in {:.1?}", specs.len(), t.elapsed());
    }
    spmv::run(gpu, &d, command, &mats, &ns, &|r| {
        results::write_partial(args.out.as_deref(), r)
    })
}

/// Merges reports of the same device: cases concatenated, commands joined with `; `.
fn merge(files: &[PathBuf], out: Option<&std::path::Path>) -> Result<()> {
    let reports = results::load(files)?;
    baseline::per_op(&reports).map_err(|e| anyhow::anyhow!("refusing to merge: {e}"))?;
    results::same_numerics(&reports).map_err(|e| anyhow::anyhow!("refusing to merge: {e}"))?;
    let merged = Report::merge(reports).context("nothing to merge")?;
    print!("{}", results::render(&merged));
    if let Some(out) = out {
        write(out, &merged)?;
    }
    Ok(())
}

/// Renders the plots of each result file into `out` (default: beside the file).
fn plot(files: &[PathBuf], out: Option<&std::path::Path>) -> Result<()> {
    for f in files {
        let r = results::read(f)?;
        let dir = out
            .map(std::path::Path::to_path_buf)
            .or_else(|| f.parent().map(std::path::Path::to_path_buf))
            .unwrap_or_default();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let plots = plots::render(&r);
        if let Some(v) = r.numerics().filter(|_| plots.is_empty()) {
            eprintln!(
                "{}: nothing to plot: the plots show the {} backend's speedup over cuSPARSE f32; \
                 a {v} run's speedups ({} over cuSPARSE {v} and f32) are in its summary lines",
                f.display(),
                report::HEADLINE,
                v.headline()
            );
            continue;
        }
        if plots.is_empty() {
            // SpAMM (no single headline backend: one per precision, each at its own error)
            // and runs without a speedup (CPU runs) have no plot.
            eprintln!(
                "{}: nothing to plot ({} cases of {}; plots show the {} backend's speedup and \
                 bandwidth over SpMM/SpMV vendor baselines), skipped",
                f.display(),
                r.cases.len(),
                results::ops(&r)
                    .iter()
                    .map(|o| o.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                report::HEADLINE
            );
            continue;
        }
        for (name, svg) in plots {
            let p = dir.join(name);
            std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// Writes `<op>-<device>.json` and `.md` into `out` (results::write) and says which.
fn write(out: &std::path::Path, report: &Report) -> Result<()> {
    let written = results::write(out, report)?;
    tracing::info!("wrote {written:?}");
    Ok(())
}
