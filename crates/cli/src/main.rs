//! The `tcsparse` command-line tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod cmd;
mod input;
mod json;
mod measured;
mod out;
mod output;

/// GPU sparse matrix products on NVIDIA tensor cores, with a CPU reference path.
#[derive(Parser, Debug)]
#[command(name = "tcsparse", version, about, long_about = None)]
struct Cli {
    /// More logging (-v info: each stage's time, -vv debug, -vvv trace). RUST_LOG overrides
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
    /// Convert a matrix into a tensor-core layout file (an INPUT of the other subcommands).
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

fn main() -> ExitCode {
    // SAFETY: first thing in main, before any other thread exists.
    unsafe { tcsparse::gpu::multi::disable_nvls_at_startup() };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    init_tracing(cli.verbose);
    if let Some(limits) = cli.memory_budget {
        tcsparse::formats::Limits::set_global(limits);
    }
    let result = run(cli.command).and_then(|()| Ok(out::flush()?));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit_for(&e),
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
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

/// Where clap stops the run: usage errors as clap prints them (status 2); `--help` and
/// `--version` through the checked writer when standard output is not a terminal (so a closed
/// pipe or a full disk ends as any other output does), as clap prints them otherwise.
fn clap_exit(e: &clap::Error) -> ExitCode {
    use std::io::IsTerminal;
    if e.use_stderr() || std::io::stdout().is_terminal() {
        e.exit()
    }
    match out::write(format_args!("{}", e.render())).and_then(|()| out::flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => exit_for(&err.into()),
    }
}

/// How a failed run ends: quietly with status 0 when the reader of standard output closed the
/// pipe (it has what it asked for); otherwise `error: ` and the error's chain of causes on one
/// line (`a: b: c`, never a backtrace, whatever `RUST_BACKTRACE` says) and status 1.
fn exit_for(e: &anyhow::Error) -> ExitCode {
    let closed_pipe = e
        .chain()
        .filter_map(|c| c.downcast_ref::<out::StdoutError>())
        .any(out::StdoutError::is_closed_pipe);
    if closed_pipe {
        return ExitCode::SUCCESS;
    }
    out::errln!("error: {e:#}");
    ExitCode::FAILURE
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
    // Colour only on a terminal: logs redirected to a file stay plain text. Each stage's span
    // (read, reorder, build, plan, upload, prepare, first_product, run) logs one line when it
    // closes, with its busy and idle time, at the span's level.
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
