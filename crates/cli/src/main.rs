//! The `tcsparse` command-line tool.

use clap::{Parser, Subcommand};

mod cmd;

/// GPU sparse matrix products on NVIDIA tensor cores, with a CPU reference path.
#[derive(Parser, Debug)]
#[command(name = "tcsparse", version, about, long_about = None)]
struct Cli {
    /// More logging (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Memory budget for what scales with a declared size (bytes, or with a K/M/G/T suffix, or
    /// `unlimited`); default: TCSPARSE_MEMORY_BUDGET, else half of the memory available.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_budget)]
    memory_budget: Option<tcsparse::formats::Limits>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print statistics of a matrix (and, with flags, of its formats or reorderings).
    Info(cmd::info::Args),
    /// Write a generated matrix (Matrix Market).
    Gen(cmd::gen_cmd::Args),
    /// Convert a matrix into a tensor-core format and write its cache file.
    Convert(cmd::convert::Args),
    /// Reorder a matrix and write the reordered matrix or the permutation.
    Reorder(cmd::reorder::Args),
    /// Print the execution plan the planner chooses for a matrix and N.
    Plan(cmd::plan::Args),
    /// Run C = A·B on the GPU (or the CPU reference path) and report time and error.
    Spmm(cmd::spmm::Args),
    /// Run y = A·X (1–8 right-hand sides) with bitBSR on tensor cores, our CSR walk or cuSPARSE, whichever is faster.
    Spmv(cmd::spmv::Args),
    /// Run the whole pipeline on a shipped matrix: reorder, build, plan, multiply.
    Demo(cmd::demo::Args),
    /// Approximate dense product of decay matrices (cuSpAMM: norm-gated tile products).
    Spamm(cmd::spamm::Args),
}

fn main() -> anyhow::Result<()> {
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { tcsparse::gpu::multi::disable_nvls_at_startup() };
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    if let Some(limits) = cli.memory_budget {
        tcsparse::formats::Limits::set_global(limits);
    }
    match cli.command {
        Command::Info(a) => cmd::info::run(a),
        Command::Gen(a) => cmd::gen_cmd::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Reorder(a) => cmd::reorder::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Spmm(a) => cmd::spmm::run(a),
        Command::Spmv(a) => cmd::spmv::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Spamm(a) => cmd::spamm::run(a),
    }
}

fn parse_budget(s: &str) -> Result<tcsparse::formats::Limits, String> {
    tcsparse::formats::limits::parse_budget(s).ok_or_else(|| {
        format!("expected bytes with an optional K, M, G or T suffix, or `unlimited`, got `{s}`")
    })
}

fn init_tracing(verbose: u8) {
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
