//! `tcsparse spmm` (to be written).

/// Arguments of `tcsparse spmm`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse spmm` is not implemented yet")
}
