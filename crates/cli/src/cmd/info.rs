//! `tcsparse info` (to be written).

/// Arguments of `tcsparse info`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse info` is not implemented yet")
}
