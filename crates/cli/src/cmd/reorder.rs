//! `tcsparse reorder` (to be written).

/// Arguments of `tcsparse reorder`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse reorder` is not implemented yet")
}
