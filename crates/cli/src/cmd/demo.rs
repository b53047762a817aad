//! `tcsparse demo` (to be written).

/// Arguments of `tcsparse demo`.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`tcsparse demo` is not implemented yet")
}
