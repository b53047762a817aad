//! Bytes and FLOPs an Acc-SpMM product must move, per matrix and N, with the roofline time at the
//! H200's measured 3.9 TB/s (the table in docs/kernels/acc-spmm.md).
//!
//! `cargo run --release -p tcsparse --example acc_bytes -- [DIR_OR_FILES...]` (default: the
//! repository's datasets/). No GPU needed: reorders (affinity), builds BitTCF and counts.

use std::path::PathBuf;

use tcsparse::formats::bittcf::BitTcf;
use tcsparse::reorder::Mode;

const BW: f64 = 3.9e12;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut files: Vec<PathBuf> = Vec::new();
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let roots = if args.is_empty() {
        vec![PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../datasets"
        ))]
    } else {
        args
    };
    for r in roots {
        if r.is_dir() {
            for e in std::fs::read_dir(&r)? {
                let p = e?.path();
                if p.to_string_lossy().ends_with(".mtx.gz") {
                    files.push(p);
                }
            }
        } else {
            files.push(r);
        }
    }
    files.sort();
    println!(
        "| matrix | order | rows | nnz | TC blocks | nnz/block | N | A bytes | B once | C once | min MB | gathered B MB | GFLOP | roofline µs (min) | µs if every gather hits DRAM |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in files {
        let a = tcsparse::formats::mtx::read_matrix(&f)?;
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .replace(".mtx.gz", "");
        let mode = if a.rows() == a.cols() {
            Mode::Symmetric
        } else {
            Mode::RowOnly
        };
        let re = tcsparse::reorder::by_name("affinity", 0)?.reorder(&a, mode)?;
        let ar = tcsparse::reorder::apply(&re.perm, &a, mode)?;
        for (order, m) in [("original", &a), ("affinity", &ar)] {
            let bt = BitTcf::from_csr(m)?;
            let blocks = bt.num_blocks() as f64;
            let a_bytes = blocks * (8.0 + 32.0 + 4.0)
                + 4.0 * m.nnz() as f64
                + 4.0 * (bt.num_windows() + 1) as f64;
            let real_slots = bt
                .sparse_a_to_b()
                .iter()
                .filter(|&&c| c != u32::MAX)
                .count() as f64;
            for n in [32usize, 128, 512] {
                let nf = n as f64;
                let b_once = 4.0 * m.cols() as f64 * nf;
                let c_once = 4.0 * m.rows() as f64 * nf;
                let min = a_bytes + b_once + c_once;
                let gathered = real_slots * 4.0 * nf;
                let gflop = 2.0 * m.nnz() as f64 * nf / 1e9;
                println!(
                    "| {name} | {order} | {} | {} | {} | {:.1} | {n} | {:.2} MB | {:.2} MB | {:.2} MB | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} |",
                    m.rows(),
                    m.nnz(),
                    bt.num_blocks(),
                    m.nnz() as f64 / blocks.max(1.0),
                    a_bytes / 1e6,
                    b_once / 1e6,
                    c_once / 1e6,
                    min / 1e6,
                    gathered / 1e6,
                    gflop,
                    min / BW * 1e6,
                    (a_bytes + gathered + c_once) / BW * 1e6,
                );
            }
        }
    }
    Ok(())
}
