//! `tcsparse-bench`: our kernels against cuSPARSE/cuBLAS in one process (to be written).

fn main() -> anyhow::Result<()> {
    anyhow::bail!("tcsparse-bench is not written yet")
}
