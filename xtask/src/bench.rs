//! `cargo xtask bench [-- BENCH ARGS]`: builds `tcsparse-bench` in release and runs it here, writing
//! `docs/results/{bench.json, spmm-h200.md}` (or `--out DIR`). Uses the GPU when there is one; without
//! one the bench says so and runs the CPU reference path on the shipped matrices.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output folder (default: docs/results of this checkout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Small smoke subset.
    #[arg(long)]
    quick: bool,
    /// Further arguments for tcsparse-bench (after `--`), e.g. `-- --n 128,512 --iters 100`.
    #[arg(last = true)]
    rest: Vec<String>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .context("xtask has no parent folder")?;
    let out = args.out.unwrap_or_else(|| root.join("docs/results"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["run", "--release", "-p", "tcsparse-bench", "--"])
        .arg("--out")
        .arg(&out);
    if args.quick {
        cmd.arg("--quick");
    }
    cmd.args(&args.rest);
    eprintln!("running {cmd:?}");
    let status = cmd.status().context("starting cargo")?;
    if !status.success() {
        bail!("tcsparse-bench failed ({status})");
    }
    Ok(())
}
