//! `tcsparse reorder`: reorder a matrix and write the permutation or the reordered matrix.

use crate::out::outln;
use std::path::PathBuf;

use anyhow::bail;
use tcsparse::reorder::{Mode, apply, by_name};

/// Arguments of `tcsparse reorder`.
#[derive(clap::Args, Debug)]
#[command(
    long_about = "Reorder the rows (row mode) or rows and columns together (symmetric mode, square \
matrices) of a matrix so that its nonzeros pack into denser 8×8 tensor-core blocks, and write either the \
permutation (OUT ending in .perm: one old index per line, line i = row placed at position i) or the \
reordered matrix (OUT ending in .mtx, or .mtx.gz for gzip). Prints MeanNNZTC and TC blocks before and after."
)]
pub struct Args {
    /// Matrix file: .mtx, .mtx.gz, .npz or a layout file written by `convert`.
    pub input: PathBuf,
    /// Method: affinity, rabbit, lsh, degree, rcm or none.
    #[arg(long, default_value = "affinity")]
    pub method: String,
    /// What to permute: symmetric (P·A·Pᵀ, square only) or row (P·A).
    #[arg(long, default_value = "symmetric", value_parser = ["symmetric", "row"])]
    pub mode: String,
    /// Seed of randomized methods (lsh).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output: `.perm` (permutation) or `.mtx` / `.mtx.gz` (reordered matrix).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    let out_name = args.output.to_string_lossy().to_string();
    let write_perm = out_name.ends_with(".perm");
    if !write_perm && !out_name.ends_with(".mtx") && !out_name.ends_with(".mtx.gz") {
        bail!("OUT must end in .perm, .mtx or .mtx.gz, got {out_name}");
    }
    let method = by_name(&args.method, args.seed)?;
    let mode = if args.mode == "row" {
        Mode::RowOnly
    } else {
        Mode::Symmetric
    };
    let a = crate::input::read_matrix(&args.input)?;
    // A spinner on long runs.
    let bar = super::spinner(
        a.nnz() > 1_000_000,
        format!("{} reordering of {} nonzeros", method.name(), a.nnz()),
    );
    let r = method.reorder(&a, mode)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let rep = &r.report;
    outln!(
        "{} ({:?}): {:.3} s, MeanNNZTC 8×8 {:.2} -> {:.2}, TC blocks {} -> {}",
        rep.method,
        mode,
        rep.seconds,
        rep.mean_nnz_tc_before,
        rep.mean_nnz_tc_after,
        rep.blocks_before,
        rep.blocks_after
    )?;
    if write_perm {
        crate::output::write_with(&args.output, |w| {
            r.perm
                .as_slice()
                .iter()
                .try_for_each(|old| writeln!(w, "{old}"))
        })?;
    } else {
        let b = apply(&r.perm, &a, mode)?;
        crate::output::write_matrix(&args.output, &b)?;
    }
    if args.json {
        crate::json::emit(
            "reorder",
            &crate::json::Reorder {
                input: args.input.display().to_string(),
                output: out_name,
                written: if write_perm {
                    crate::json::kind("permutation")
                } else {
                    crate::json::kind_with("matrix", "gzip", crate::output::is_gz(&args.output))
                },
                mode: crate::json::tagged(&mode),
                method: rep.method.clone(),
                reorder_ms: rep.seconds * 1e3,
                mean_nnz_tc_before: rep.mean_nnz_tc_before,
                mean_nnz_tc_after: rep.mean_nnz_tc_after,
                blocks_before: rep.blocks_before,
                blocks_after: rep.blocks_after,
            },
        )?;
    }
    Ok(())
}
