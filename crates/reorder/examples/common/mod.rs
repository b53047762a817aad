//! Helpers both reordering examples use (`mod common;` in each).

#![allow(dead_code)] // not every example uses every helper

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_reorder::Permutation;

/// `a` with its rows and columns under one random permutation (seeded): labels shuffled.
pub fn shuffled(a: Csr, seed: u64) -> Csr {
    let mut v: Vec<u32> = (0..a.rows() as u32).collect();
    v.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    Permutation::new(v)
        .and_then(|p| p.apply_symmetric(&a))
        .expect("square")
}

/// User + system CPU seconds of this process (all threads), from /proc (0 where unavailable).
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}
