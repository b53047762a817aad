//! `cargo xtask bench [-- BENCH ARGS]`: builds `tcsparse-bench` in release and runs it here, writing
//! `<op>-<device>.{json,md}` (e.g. `spmm-h200.json`) into docs/results when this machine has an
//! NVIDIA GPU, else into target/bench-results (or `--out DIR`): a machine without a GPU never
//! writes docs/results. Without a GPU the bench says so and runs the CPU reference path on the
//! shipped matrices.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output folder (default: docs/results of this checkout with a GPU, target/bench-results
    /// without one).
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
    let out = args.out.unwrap_or_else(|| {
        if has_gpu() {
            root.join("docs/results")
        } else {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            eprintln!(
                "no NVIDIA GPU here (nvidia-smi -L lists none): results go to target/bench-results, \
                 not docs/results"
            );
            target.join("bench-results")
        }
    });
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

/// Whether `nvidia-smi -L` runs and lists a GPU (the bench itself probes the driver; this only picks
/// the default output folder).
fn has_gpu() -> bool {
    Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("GPU "))
}
