//! `tcsparse plan` (to be written).

/// Arguments of `tcsparse plan`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse plan` is not implemented yet")
}
