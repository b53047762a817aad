//! Layout build speed (BitTCF, row-tile 16/32, bitBSR) on generated ~5M-nonzero matrices, in ns per
//! nonzero, at several rayon thread counts (best of `--reps`, after a warm-up).
//!
//! `cargo run --release -p tcsparse-formats --example build_speed -- [--threads 1,2,4,8,16]
//! [--reps 5]`

mod bench_args;

use bench_args::{best_ns, flag, threads, with_threads};
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::generate::{clustered_block_diagonal, rmat, uniform_random};
use tcsparse_formats::rowtile::RowTileTcf;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads = threads(&args);
    let reps: usize = flag(&args, "--reps").map_or(5, |s| s.parse().expect("--reps"));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    let inputs: Vec<(&str, Csr)> = vec![
        (
            "clustered262144-b64",
            clustered_block_diagonal(262_144, 64, 0.3, 2.0, 1).expect("clustered"),
        ),
        (
            "rmat19-ef11",
            rmat(19, 11, (0.57, 0.19, 0.19, 0.05), 2).expect("rmat"),
        ),
        (
            "uniform262144-20",
            uniform_random(262_144, 262_144, 20.0, 3).expect("uniform"),
        ),
    ];
    println!("| matrix | nnz | threads | BitTCF | row-tile 16 | row-tile 32 | bitBSR | ns/nnz |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for (name, a) in &inputs {
        let nnz = a.nnz().max(1) as f64;
        for &t in &threads {
            let (bt, r16, r32, bb) = with_threads(t, || {
                (
                    best_ns(reps, || BitTcf::from_csr(a).expect("bittcf")) / nnz,
                    best_ns(reps, || RowTileTcf::from_csr(a, 16).expect("rowtile")) / nnz,
                    best_ns(reps, || RowTileTcf::from_csr(a, 32).expect("rowtile")) / nnz,
                    best_ns(reps, || BitBsr::from_csr(a).expect("bitbsr")) / nnz,
                )
            });
            println!(
                "| {name} | {} | {t} | {bt:.2} | {r16:.2} | {r32:.2} | {bb:.2} | |",
                a.nnz()
            );
        }
    }
}
