//! Host time of SpAMM's τ choices on the tile norm maps of an n = 32768 exponential-decay matrix
//! (1024 × 1024 tiles of 32; norms of a_ij = e^(−0.02·|i − j|) per tile, approximated per tile
//! offset): the τ search for a valid ratio, the bound at τ = ∞ (the first estimate of ‖C‖F) and
//! τ for a relative error of 1e-5 (what `tcsparse spamm --gen exponential:n=32768,rate=0.02`
//! chooses).
//!
//! ```sh
//! cargo run --release -p tcsparse-planner --example tau_cost          # all of them
//! cargo run --release -p tcsparse-planner --example tau_cost -- error # the CLI's: maps, bound, τ
//! ```

use std::time::Instant;

use tcsparse_planner::spamm::NormMaps;

fn main() {
    let (tiles, tile, rate) = (1024usize, 32.0f64, 0.02f64);
    // A tile at tile offset d holds 32² values of about e^(−rate·32·d): its Frobenius norm.
    let norm = |d: usize| (tile * (-rate * tile * d as f64).exp()) as f32;
    let maps_a: Vec<f32> = (0..tiles * tiles)
        .map(|n| norm((n / tiles).abs_diff(n % tiles)))
        .collect();
    let start = Instant::now();
    let maps = NormMaps::new(&maps_a, &maps_a, (tiles, tiles, tiles)).expect("valid norm maps");
    println!(
        "maps (rows of B sorted): {:.3} s",
        start.elapsed().as_secs_f64()
    );
    let only_error = std::env::args().nth(1).as_deref() == Some("error");
    for target in [0.1, 0.3].into_iter().filter(|_| !only_error) {
        let start = Instant::now();
        let r = maps.tau_search(target).expect("a target in (0, 1]");
        println!(
            "tau_search({target}): {:.3} s, τ {:.4e}, ratio {:.4} ({} steps)",
            start.elapsed().as_secs_f64(),
            r.tau,
            r.valid_ratio,
            r.iterations
        );
    }
    let start = Instant::now();
    let c_norm = maps.skipped_bound(f32::INFINITY);
    println!(
        "skipped_bound(∞) = {c_norm:.4e}: {:.3} s",
        start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    let r = maps
        .tau_for_error(1e-5 / (1.0 + 1e-5) * c_norm)
        .expect("a finite bound");
    println!(
        "tau_for_error(1e-5): {:.3} s, τ {:.4e}, ratio {:.4}, bound {:.4e}",
        start.elapsed().as_secs_f64(),
        r.tau,
        r.valid_ratio,
        r.bound
    );
}
