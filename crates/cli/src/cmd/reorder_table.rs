//! Table printed by `tcsparse info --reorder`: what each reordering does to the block statistics.

use crate::out::outln;
use std::time::Instant;

use tcsparse::reorder::metrics::window_stats;
use tcsparse::reorder::{METHODS, Mode, by_name};

/// Prints, for one matrix, a row per method: MeanNNZTC with 8×8 (BitTCF) and 16×8 (ME-TCF) blocks,
/// 8×8 TC blocks, distinct B rows touched per non-empty 8-row window, and the reordering time in ns
/// per nonzero. Square matrices are reordered symmetrically, others by rows.
pub fn print(csr: &tcsparse::formats::Csr) -> anyhow::Result<crate::json::Reorderings> {
    let mode = if csr.rows() == csr.cols() {
        Mode::Symmetric
    } else {
        Mode::RowOnly
    };
    outln!("reordering ({mode:?})")?;
    outln!(
        "{:<10} {:>14} {:>15} {:>12} {:>14} {:>10}",
        "method",
        "MeanNNZTC 8×8",
        "MeanNNZTC 16×8",
        "TC blocks",
        "B rows/window",
        "ns/nnz"
    )?;
    let mut methods = Vec::new();
    for name in METHODS {
        let m = by_name(name, 1)?;
        let t = Instant::now();
        let p = m.permutation(csr, mode)?;
        let ns = t.elapsed().as_secs_f64() * 1e9 / csr.nnz().max(1) as f64;
        let b = p.apply_rows(csr)?;
        let (s8, s16) = (window_stats(&b, 8, 8), window_stats(&b, 16, 8));
        outln!(
            "{:<10} {:>14.2} {:>15.2} {:>12} {:>14.1} {:>10.0}",
            name,
            s8.mean_nnz_tc(),
            s16.mean_nnz_tc(),
            s8.blocks,
            s8.mean_distinct_cols(),
            ns
        )?;
        methods.push(crate::json::ReorderingRow {
            method: name.to_string(),
            mean_nnz_tc_8x8: s8.mean_nnz_tc(),
            mean_nnz_tc_16x8: s16.mean_nnz_tc(),
            blocks_8x8: s8.blocks,
            b_rows_per_window: s8.mean_distinct_cols(),
            ns_per_nnz: ns,
        });
    }
    Ok(crate::json::Reorderings {
        mode: crate::json::tagged(&mode),
        methods,
    })
}
