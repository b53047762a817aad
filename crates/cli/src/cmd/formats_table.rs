//! Table of per-layout metrics printed by `tcsparse info --formats`.

use crate::out::outln;
use tcsparse::formats::metrics;

/// Prints the table for one matrix to stdout and returns what it printed.
pub fn print(csr: &tcsparse::formats::Csr) -> anyhow::Result<metrics::FormatReport> {
    let r = metrics::report(csr)?;
    outln!(
        "{:<8} {:>12} {:>12} {:>12} {:>10} {:>10} {:>8} {:>8}",
        "format",
        "bytes",
        "paper bytes",
        "block",
        "blocks",
        "nnz/block",
        "vs CSR",
        "vs TCF"
    )?;
    for f in &r.formats {
        let paper = f.paper_bytes.map_or("-".to_string(), |b| b.to_string());
        outln!(
            "{:<8} {:>12} {:>12} {:>12} {:>10} {:>10.2} {:>8.3} {:>8.3}",
            f.format,
            f.bytes,
            paper,
            if f.block_shape.is_empty() {
                "-"
            } else {
                &f.block_shape
            },
            f.blocks,
            f.mean_nnz_per_block,
            f.compression_vs_csr,
            f.compression_vs_tcf
        )?;
    }
    outln!(
        "cuTeSpMM alpha = {:.4} over {} bricks (synergy {:?}); Spaden 8x8 blocks: sparse {} / medium {} / dense {}",
        r.alpha,
        r.hrpb_bricks,
        r.synergy,
        r.spaden_classes.sparse,
        r.spaden_classes.medium,
        r.spaden_classes.dense
    )?;
    Ok(r)
}
