//! Table printed by `tcsparse info` (to be written).

/// Prints the table for one matrix to stdout.
pub fn print(_csr: &tcsparse::formats::Csr) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
