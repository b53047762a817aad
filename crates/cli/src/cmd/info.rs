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
scipy sparse `.npz` (csr/csc/coo), or a layout file written by `tcsparse convert` (recognised by its header, whatever its name). Use -v to log reading progress and speed."
)]
pub struct Args {
    /// Matrix file: .mtx, .mtx.gz, .npz or a layout file written by `convert`.
    pub input: PathBuf,
    /// Also print, for each tensor-core format, its size and block statistics.
    #[arg(long)]
    pub formats: bool,
    /// Also print how the reorderings change the block statistics.
    #[arg(long)]
    pub reorder: bool,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    let start = Instant::now();
    let (csr, report) = crate::input::read_matrix_with_report(&args.input)?;
    // The read rate: in the JSON's `read`, and with -v as a log line (stdout holds the statistics).
    match &report {
        Some(r) => tracing::info!(
            seconds = r.seconds,
            megabytes = r.text_bytes as f64 / 1e6,
            gzip = r.gzip,
            gb_per_s = r.text_bytes_per_second() / 1e9,
            "matrix read"
        ),
        None => tracing::info!(seconds = start.elapsed().as_secs_f64(), "layout file read"),
    }
    outln!("{}", args.input.display())?;
    let stats = MatrixStats::compute(&csr);
    out!("{stats}")?;
    let non_finite = csr.non_finite();
    if non_finite > 0 {
        outln!(
            "non-finite values: {non_finite} NaN or ±inf (accepted, as scipy does; products that use them are not finite)"
        )?;
    }
    let mut formats = None;
    if args.formats {
        outln!()?;
        let r = crate::cmd::formats_table::print(&csr)?;
        let mut v = serde_json::to_value(&r)?;
        v["synergy"] = crate::json::tagged(&r.synergy);
        formats = Some(v);
    }
    let mut reorderings = None;
    if args.reorder {
        outln!()?;
        reorderings = Some(crate::cmd::reorder_table::print(&csr)?);
    }
    if args.json {
        crate::json::emit(
            "info",
            &crate::json::Info {
                input: args.input.display().to_string(),
                read: report.as_ref().map(crate::json::Read::of),
                matrix: crate::json::Matrix::of(&csr),
                stats: serde_json::to_value(&stats)?,
                formats,
                reorderings,
            },
        )?;
    }
    Ok(())
}
