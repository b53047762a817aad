//! What the planner's block counts cost: one `metrics::planner_block_counts` pass against what
//! a preparation did before (a BitTCF build for the 8×8 blocks and `block_count` at 16×4 and
//! 16×8), in ns per nonzero, best of `--reps`, at each `--threads` count.
//!
//! `cargo run --release -p tcsparse-formats --example planner_counts_speed -- --threads 1,16`

mod bench_args;

use bench_args::{best_ns, flag, threads, with_threads};
use tcsparse_formats::Csr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::generate::{clustered_block_diagonal, rmat};
use tcsparse_formats::metrics::{block_count, planner_block_counts};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = threads(&args);
    let reps: usize = flag(&args, "--reps").map_or(3, |s| s.parse().expect("--reps"));
    let scale: u32 = flag(&args, "--scale").map_or(19, |s| s.parse().expect("--scale"));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    let inputs: Vec<(String, Csr)> = vec![
        (
            format!("rmat{scale}-ef11"),
            rmat(scale, 11, (0.57, 0.19, 0.19, 0.05), 2).expect("rmat"),
        ),
        (
            "clustered262144-b256".into(),
            clustered_block_diagonal(262_144, 256, 0.45, 2.0, 17).expect("clustered"),
        ),
    ];
    println!("| matrix | nnz | threads | one pass | BitTCF + 2 block counts | ns/nnz |");
    println!("|---|---:|---:|---:|---:|---|");
    for (name, a) in &inputs {
        let nnz = a.nnz().max(1) as f64;
        for &t in &threads {
            let (one, before) = with_threads(t, || {
                (
                    best_ns(reps, || planner_block_counts(a)) / nnz,
                    best_ns(reps, || {
                        (
                            BitTcf::from_csr(a).expect("bittcf"),
                            block_count(a, 16, 4),
                            block_count(a, 16, 8),
                        )
                    }) / nnz,
                )
            });
            println!("| {name} | {} | {t} | {one:.2} | {before:.2} | |", a.nnz());
        }
    }
}
