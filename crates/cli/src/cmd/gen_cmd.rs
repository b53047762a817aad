//! `tcsparse gen` (to be written).

/// Arguments of `tcsparse gen`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse gen` is not implemented yet")
}
