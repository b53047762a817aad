//! `cargo xtask`: project automation, one module per subcommand (rust-analyzer style).

use clap::{Parser, Subcommand};

mod bench;
mod fetch;
mod gpu_bundle;
mod ptx;

#[derive(Parser)]
#[command(name = "xtask", about = "tcsparse project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile kernels-ptx/*.cu to stamped PTX (--check: recompile and diff, change nothing).
    Ptx(ptx::Args),
    /// Download public matrices listed in datasets/manifest.toml into the dataset cache.
    Fetch(fetch::Args),
    /// Run the benchmark binary (GPU when present) and write docs/results.
    Bench(bench::Args),
    /// Build release test + bench binaries, PTX and run.sh into one folder to carry to a GPU machine.
    GpuBundle(gpu_bundle::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Ptx(a) => ptx::run(a),
        Command::Fetch(a) => fetch::run(a),
        Command::Bench(a) => bench::run(a),
        Command::GpuBundle(a) => gpu_bundle::run(a),
    }
}
