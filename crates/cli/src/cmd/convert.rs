//! `tcsparse convert`: build a tensor-core layout from a matrix file and write its cache file.

use crate::out::outln;
use std::path::PathBuf;
use std::time::Instant;
use tcsparse::formats::{bitbsr::BitBsr, bittcf::BitTcf, cache, hrpb::Hrpb, metcf::MeTcf};

/// Layouts `convert` can write.
#[derive(clap::ValueEnum, Clone, Copy, Debug, serde::Serialize)]
pub enum Layout {
    /// Acc-SpMM BitTCF (8×8 blocks, u64 masks).
    Bittcf,
    /// DTC-SpMM ME-TCF (16×8 blocks, u8 local ids).
    Metcf,
    /// cuTeSpMM HRPB (16×16 blocks of 16×4 bricks).
    Hrpb,
    /// Spaden bitBSR (aligned 8×8 blocks).
    Bitbsr,
}

/// Arguments of `tcsparse convert`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix file: .mtx, .mtx.gz, .npz or a layout file written by `convert`.
    pub input: PathBuf,
    /// Layout to build.
    #[arg(long, value_enum)]
    pub format: Layout,
    /// Output layout file (`info`, `plan`, `spmm`, … read it back as INPUT).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    let csr = crate::input::read_matrix(&args.input)?;
    let t = Instant::now();
    // Builds layout type `$t`: its block count, its size and its cache file.
    macro_rules! build {
        ($t:ty) => {{
            let f = <$t>::from_csr(&csr)?;
            (f.num_blocks(), f.bytes(), cache::encode(&f, &csr)?)
        }};
    }
    let (blocks, bytes, file) = match args.format {
        Layout::Bittcf => build!(BitTcf),
        Layout::Metcf => build!(MeTcf),
        Layout::Hrpb => build!(Hrpb),
        Layout::Bitbsr => build!(BitBsr),
    };
    crate::output::write_bytes(&args.output, &file)?;
    outln!(
        "{:?}: {}x{} nnz {} -> {} blocks, {} bytes, built and written in {:.1} ms to {}",
        args.format,
        csr.rows(),
        csr.cols(),
        csr.nnz(),
        blocks,
        bytes,
        t.elapsed().as_secs_f64() * 1e3,
        args.output.display()
    )?;
    if args.json {
        crate::json::emit(
            "convert",
            &crate::json::Convert {
                input: args.input.display().to_string(),
                output: args.output.display().to_string(),
                layout: crate::json::tagged(&args.format),
                matrix: crate::json::Matrix::of(&csr),
                blocks,
                bytes,
                build_and_write_ms: t.elapsed().as_secs_f64() * 1e3,
            },
        )?;
    }
    Ok(())
}
