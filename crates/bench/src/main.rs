//! `tcsparse-bench`: our SpMM against cuSPARSE in one process on one GPU, written as `bench.json`
//! (machine-readable, for regression) and `spmm-h200.md` (table + geomean lines).
//!
//! Per matrix and N: cuSPARSE SpMM (CSR, default algorithm) and our engine (planner's choice, plus
//! Acc-SpMM with/without reordering and with/without balancing); median of CUDA-event-timed launches
//! after warm-up, rotating B buffers when B fits in L2; accuracy checked against f64 before and after
//! timing; preprocessing stages reported separately. Without a GPU it says so and runs the CPU
//! reference path on the small shipped matrices only.

mod backends;
mod matrices;
mod report;
mod spmv;

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use clap::Parser;

use backends::Device;
use report::{Group, Report};

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(
    name = "tcsparse-bench",
    about = "SpMM: tcsparse vs cuSPARSE on one GPU"
)]
struct Args {
    /// Small subset for smoke runs (two shared matrices, two small generated ones, N = 128).
    #[arg(long)]
    quick: bool,
    /// Write bench.json and spmm-h200.md here.
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
    /// Check every row against f64 up to this many rows; sample beyond.
    #[arg(long, default_value_t = 65_536)]
    max_full_check: usize,
    /// Run nothing: merge these bench.json files (e.g. from runs split to fit a time limit) into
    /// one report written to --out.
    #[arg(long, num_args = 1.., value_name = "BENCH_JSON")]
    merge: Vec<PathBuf>,
    /// Operation: `spmm` (default) or `spmv` (bitBSR SpMV vs cuSPARSE CSR SpMV; writes
    /// spmv-h200.json and spmv-h200.md; --rhs picks the right-hand-side counts).
    #[arg(long, default_value = "spmm")]
    op: String,
    /// SpMV right-hand sides per case (default 1,8).
    #[arg(long, value_delimiter = ',')]
    rhs: Option<Vec<usize>>,
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if !args.merge.is_empty() {
        return merge(&args.merge, args.out.as_deref());
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
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
        return run_spmv(&args, &device, &command, &keep);
    }
    anyhow::ensure!(args.op == "spmm", "--op must be spmm or spmv");
    let mut cases = Vec::new();
    let device_line = match &device {
        Device::Gpu(gpu) => {
            let d = backends::describe(gpu);
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
            for m in &mats {
                let t = Instant::now();
                let got = backends::gpu_cases(gpu, m, &ns, timing, args.max_full_check);
                eprintln!(
                    "{:<20} {:>9} rows {:>11} nnz: {} cases in {:.1?}",
                    m.name,
                    m.csr.rows(),
                    m.csr.nnz(),
                    got.len(),
                    t.elapsed()
                );
                cases.extend(got);
                // Partial results survive an interrupted run.
                if let Some(out) = &args.out {
                    let partial = Report {
                        command: command.clone(),
                        device: format!("{d} (partial: run in progress)"),
                        started_unix,
                        cases: cases.clone(),
                    };
                    write(out, &partial)?;
                }
            }
            d
        }
        Device::None(why) => {
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
            format!("no GPU ({why}); CPU reference path only, no cuSPARSE baseline")
        }
    };

    let report = Report {
        command,
        device: device_line,
        started_unix,
        cases,
    };
    let md = report.markdown();
    print!("{md}");
    if let Some(out) = &args.out {
        write(out, &report)?;
        eprintln!("wrote {}/bench.json and spmm-h200.md", out.display());
    }
    Ok(())
}

/// `--op spmv`: shared datasets + the large generated SpMV set, n ∈ --rhs (default 1, 8).
fn run_spmv(
    args: &Args,
    device: &Device,
    command: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Result<()> {
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
    spmv::run(gpu, &d, command, &mats, &ns, args.out.as_deref())
}

/// Merges reports of the same device: cases concatenated, commands joined with `; `.
fn merge(files: &[PathBuf], out: Option<&std::path::Path>) -> Result<()> {
    let mut reports = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let r: Report =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", f.display()))?;
        reports.push(r);
    }
    let merged = Report::merge(reports).context("nothing to merge")?;
    print!("{}", merged.markdown());
    if let Some(out) = out {
        write(out, &merged)?;
    }
    Ok(())
}

/// Writes `bench.json` and `spmm-h200.md` into `out`.
fn write(out: &std::path::Path, report: &Report) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(
        out.join("bench.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    std::fs::write(out.join("spmm-h200.md"), report.markdown())?;
    Ok(())
}
