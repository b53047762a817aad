//! `cargo xtask ptx [--check] [--nvcc]`: compiles every `kernels-ptx/*.cu` to a stamped
//! `kernels-ptx/<name>.ptx` and a stamped `kernels-ptx/<name>.sm_90.cubin.gz` with the pinned NVRTC (installed into a cache folder on first use), or
//! with `nvcc` from `PATH` when asked (or when NVRTC cannot be set up).

use std::path::PathBuf;

use anyhow::{Context, bail};
use nvptx_builder::{Compiler, toolchain};

/// Arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Recompile and compare with the committed PTX; change nothing, fail if anything differs.
    #[arg(long)]
    check: bool,
    /// Use `nvcc` from PATH instead of the pinned NVRTC (the stamp records which).
    #[arg(long)]
    nvcc: bool,
    /// Where the NVRTC wheel is installed (default: $XDG_CACHE_HOME/tcsparse/nvrtc-<ver>).
    #[allow(rustdoc::invalid_html_tags)] // help text
    #[arg(long)]
    nvrtc_dir: Option<PathBuf>,
}

/// The workspace's `kernels-ptx` folder.
pub fn kernels_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kernels-ptx")
}

fn compiler(args: &Args) -> anyhow::Result<Compiler> {
    if args.nvcc {
        return toolchain::find_nvcc().context("--nvcc given but no working nvcc on PATH");
    }
    let dir = args
        .nvrtc_dir
        .clone()
        .unwrap_or_else(toolchain::default_nvrtc_dir);
    match toolchain::ensure_nvrtc(&dir) {
        Ok(c) => Ok(c),
        Err(e) => match toolchain::find_nvcc() {
            Some(c) => {
                eprintln!("warning: {e}; falling back to {}", c.describe());
                Ok(c)
            }
            None => Err(e.into()),
        },
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let dir = kernels_dir();
    let c = compiler(&args)?;
    eprintln!("compiler: {}", c.describe());
    let built = nvptx_builder::build_all(&c, &dir, !args.check)?;
    let mut changed = 0;
    for b in &built {
        let name = b.path.file_name().unwrap_or_default().to_string_lossy();
        let what = match (b.changed, args.check) {
            (false, _) => "up to date",
            (true, true) => "DIFFERS",
            (true, false) => "written",
        };
        eprintln!("  {name}: {what}");
        changed += usize::from(b.changed);
    }
    if args.check && changed > 0 {
        bail!("{changed} generated file(s) differ from a fresh build: run `cargo xtask ptx`");
    }
    nvptx_builder::check_fresh(&dir)?;
    nvptx_builder::cubin::check_cubins_fresh(&dir)?;
    Ok(())
}
