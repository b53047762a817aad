//! Reordering scaling: affinity and Rabbit on generated matrices at several rayon thread counts.
//!
//! `cargo run --release -p tcsparse-reorder --example reorder_scaling -- [--threads 1,2,4,8,16]
//! [--scale 20] [--clustered-rows 262144] [--methods affinity,rabbit]`
//!
//! Matrices: R-MAT (scale `--scale`, edge factor 11, Graph500 probabilities, like the bench's
//! rmat20-ef11) and a clustered block-diagonal matrix (`--clustered-rows` rows, 64-row blocks,
//! rows and columns randomly permuted). For every method and thread count it prints wall time,
//! ns per nonzero, speedup over the first thread count, the 8×8 MeanNNZTC after reordering and a
//! hash of the permutation: the hash must be the same on every line of a (matrix, method) pair,
//! since the result does not depend on the thread count.

mod common;

use common::{cpu_seconds, shuffled};
use std::time::Instant;
use tcsparse_formats::Csr;
use tcsparse_formats::generate::{clustered_block_diagonal, rmat, uniform_random};
use tcsparse_reorder::metrics::mean_nnz_tc;
use tcsparse_reorder::{Gate, Mode, Permutation, by_name};

fn flag(args: &[String], f: &str) -> Option<String> {
    args.iter()
        .position(|a| a == f)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// FNV-1a over the permutation: equal hashes on every thread count show determinism.
fn hash(p: &Permutation) -> u64 {
    p.as_slice().iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ x as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: Vec<usize> = flag(&args, "--threads")
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .map(|t| t.parse().expect("--threads: comma-separated counts"))
        .collect();
    let scale: u32 = flag(&args, "--scale").map_or(18, |s| s.parse().expect("--scale"));
    let crows: usize =
        flag(&args, "--clustered-rows").map_or(65_536, |s| s.parse().expect("--clustered-rows"));
    let methods = flag(&args, "--methods").unwrap_or_else(|| "affinity,rabbit".into());
    let reps: usize = flag(&args, "--reps").map_or(1, |s| s.parse().expect("--reps"));
    let inputs: Vec<(String, Csr)> = vec![
        (
            format!("rmat{scale}-ef11"),
            rmat(scale, 11, (0.57, 0.19, 0.19, 0.05), 1).expect("rmat"),
        ),
        (
            format!("clustered{crows}-b64-shuffled"),
            shuffled(
                clustered_block_diagonal(crows, 64, 0.3, 2.0, 2).expect("clustered"),
                3,
            ),
        ),
    ];
    // The gate first (on the machine's default pool).
    let extra: Vec<(String, Csr)> = vec![
        (
            format!("rmat{scale}-ef11-shuffled"),
            shuffled(
                rmat(scale, 11, (0.57, 0.19, 0.19, 0.05), 1).expect("rmat"),
                4,
            ),
        ),
        (
            format!("uniform{crows}-16"),
            uniform_random(crows, crows, 16.0, 5).expect("uniform"),
        ),
    ];
    println!(
        "| matrix | nnz | gate ms | gate ns/nnz | MeanNNZTC now | reachable (est.) | reorder? |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, a) in inputs.iter().chain(&extra) {
        let g = Gate::default().assess(a);
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {} |",
            a.nnz(),
            g.seconds * 1e3,
            g.seconds * 1e9 / a.nnz().max(1) as f64,
            g.mean_nnz_tc_now,
            g.mean_nnz_tc_reachable,
            if g.worth_reordering { "yes" } else { "skip" }
        );
    }
    if flag(&args, "--gate-only").is_some() || args.iter().any(|a| a == "--gate-only") {
        return;
    }
    println!();
    println!(
        "| matrix | nnz | method | threads | ms | ns/nnz | speedup | CPU s | MeanNNZTC | perm hash |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, a) in &inputs {
        for m in methods.split(',') {
            let method = by_name(m, 0).expect("method");
            let mut base = None;
            for &t in &threads {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(t)
                    .build()
                    .expect("thread pool");
                let mut best = f64::INFINITY;
                let mut perm = None;
                let cpu0 = cpu_seconds();
                for _ in 0..reps {
                    let t0 = Instant::now();
                    let p = pool
                        .install(|| method.permutation(a, Mode::Symmetric))
                        .expect("reorder");
                    best = best.min(t0.elapsed().as_secs_f64());
                    perm = Some(p);
                }
                let cpu = (cpu_seconds() - cpu0) / reps as f64;
                let p = perm.expect("reps >= 1");
                let base_s = *base.get_or_insert(best);
                let after = mean_nnz_tc(&p.apply_rows(a).expect("apply"), 8, 8);
                println!(
                    "| {name} | {} | {m} | {t} | {:.1} | {:.1} | {:.2} | {cpu:.2} | {:.3} | {:016x} |",
                    a.nnz(),
                    best * 1e3,
                    best * 1e9 / a.nnz().max(1) as f64,
                    base_s / best,
                    after,
                    hash(&p)
                );
            }
        }
    }
}
