//! `tcsparse info`: statistics of a matrix file, optionally its formats and reorderings.

use crate::out::{out, outln};
use std::path::PathBuf;
use std::time::Instant;

use tcsparse::formats::stats::MatrixStats;

/// Arguments of `tcsparse info`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Print statistics of a matrix: shape, nnz, density, row lengths (average AvgL, min, max, \
empty rows), bandwidth and a power-of-two row-length histogram.\n\n\
INPUT is Matrix Market (`.mtx`, or gzip `.mtx.gz`: detected by content) in coordinate format with a \
real, integer or pattern field and general, symmetric or skew-symmetric storage (expanded), or a \
scipy sparse `.npz` (csr/csc/coo). Use -v to log reading progress and speed."
)]
pub struct Args {
    /// Matrix file: .mtx, .mtx.gz or .npz.
    pub input: PathBuf,
    /// Also print, for each tensor-core format, its size and block statistics.
    #[arg(long)]
    pub formats: bool,
    /// Also print how the reorderings change the block statistics.
    #[arg(long)]
    pub reorder: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let csr = crate::input::read_matrix(&args.input)?;
    tracing::info!(seconds = start.elapsed().as_secs_f64(), "matrix read");
    outln!("{}", args.input.display())?;
    out!("{}", MatrixStats::compute(&csr))?;
    let non_finite = csr.non_finite();
    if non_finite > 0 {
        outln!(
            "non-finite values: {non_finite} NaN or ±inf (accepted, as scipy does; products that use them are not finite)"
        )?;
    }
    if args.formats {
        outln!()?;
        crate::cmd::formats_table::print(&csr)?;
    }
    if args.reorder {
        outln!()?;
        crate::cmd::reorder_table::print(&csr)?;
    }
    Ok(())
}
