//! Command-line pieces shared by the speed examples (`build_speed`, `planner_counts_speed`).

/// The value after `--name` in `args`, if any.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// `--threads 1,2,4` (default `1,2`).
pub fn threads(args: &[String]) -> Vec<usize> {
    flag(args, "--threads")
        .unwrap_or_else(|| "1,2".into())
        .split(',')
        .map(|t| t.parse().expect("--threads: comma-separated thread counts"))
        .collect()
}

/// Best (smallest) wall time of `reps` calls of `f` in ns, after one untimed warm-up call.
pub fn best_ns<T>(reps: usize, mut f: impl FnMut() -> T) -> f64 {
    std::hint::black_box(f());
    (0..reps.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_nanos() as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs `f` on a rayon pool of `threads` threads (what each row of a speed table is timed on).
pub fn with_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon thread pool")
        .install(f)
}
