//! `tcsparse convert` (to be written).

/// Arguments of `tcsparse convert`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse convert` is not implemented yet")
}
