//! `--op soak`: many products on one prepared matrix, to show that nothing leaks or drifts.
//!
//! A banded matrix is prepared once for SpMM (Acc-SpMM, no balancing, so no atomics: every result
//! is bitwise reproducible) and for SpMV (the untuned CUDA-core walk). Then `products` SpMM and
//! `products` SpMV calls run on device buffers, in epochs of `update_every`: between epochs the
//! SpMM's values change with `Prepared::update_values`, alternating between two value sets, and
//! the SpMV is prepared again on the same values (a prepared SpMV has no value update). After each
//! epoch both results are read back and compared bit for bit with the first epoch of the same value
//! set. Host RSS and device free memory are read after the first epoch and at the end. Without a
//! GPU the same runs on the CPU path through host slices.

use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tcsparse::SpmvOptions;
use tcsparse::formats::Csr;
use tcsparse::formats::generate::banded;
use tcsparse::{Balance, Engine, KernelRequest, PrepareOptions, ReorderChoice};

/// What to run.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// SpMM products, and as many SpMV products.
    pub products: usize,
    /// Products between two value updates.
    pub update_every: usize,
    /// Rows (and columns) of the banded matrix.
    pub rows: usize,
    /// Width of B (SpMM) and right-hand sides (SpMV, at most 8).
    pub n: usize,
}

impl Default for SoakConfig {
    fn default() -> Self {
        Self {
            products: 1_000_000,
            update_every: 1000,
            rows: 16_384,
            n: 8,
        }
    }
}

/// Host RSS growth (bytes) past which the soak fails.
pub const RSS_SLACK: u64 = 32 << 20;
/// Device free-memory loss (bytes) past which the soak fails.
pub const DEVICE_SLACK: u64 = 8 << 20;

/// What a soak measured.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SoakResult {
    /// The device (or the CPU path and why).
    pub device: String,
    /// The command line.
    pub command: String,
    /// Rows, columns and stored nonzeros of the matrix.
    pub rows: usize,
    /// Stored nonzeros.
    pub nnz: usize,
    /// Width of B and right-hand sides.
    pub n: usize,
    /// SpMM products run (as many SpMV products).
    pub products: usize,
    /// Value updates (SpMM `update_values`, SpMV preparations after the first).
    pub updates: usize,
    /// The SpMM kernel.
    pub spmm_kernel: String,
    /// The SpMV kernel.
    pub spmv_kernel: String,
    /// Wall seconds of the products and updates.
    pub seconds: f64,
    /// Host RSS after the first epoch and at the end (bytes; 0 where /proc is missing).
    pub rss_start: u64,
    /// See `rss_start`.
    pub rss_end: u64,
    /// Device free memory after the first epoch and at the end (bytes; GPU only).
    pub device_free_start: Option<u64>,
    /// See `device_free_start`.
    pub device_free_end: Option<u64>,
    /// Result comparisons made (one SpMM and one SpMV per epoch).
    pub comparisons: usize,
    /// Comparisons that were not bitwise equal to the first epoch of the same values.
    pub mismatches: Vec<String>,
    /// Largest relative error of the first epoch against f64 (scaled by |A|·|B|).
    pub first_error: f64,
}

impl SoakResult {
    /// Host RSS and device free memory flat (within [`RSS_SLACK`] and [`DEVICE_SLACK`]).
    pub fn memory_flat(&self) -> bool {
        let host = self.rss_end.saturating_sub(self.rss_start) <= RSS_SLACK;
        let device = match (self.device_free_start, self.device_free_end) {
            (Some(s), Some(e)) => s.saturating_sub(e) <= DEVICE_SLACK,
            _ => true,
        };
        host && device
    }

    /// Bit-stable, memory flat and accurate (≤ 2⁻⁹ of |A|·|B|, the TF32/f16 bound).
    pub fn passed(&self) -> bool {
        self.mismatches.is_empty() && self.memory_flat() && self.first_error <= 2f64.powi(-9)
    }
}

/// The process's resident set in bytes (`VmRSS`), 0 where it cannot be read.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn with_values(a: &Csr, values: &[f32]) -> Csr {
    let mut b = a.clone();
    b.data_mut().copy_from_slice(values);
    b
}

/// Largest |got − want| / (|A|·|B|) over all elements (0 where the scale is 0 and equal).
fn scaled_error(a: &Csr, b: &[f32], n: usize, got: &[f32]) -> f64 {
    let want = tcsparse::formats::reference::spmm_f64(a, b, n, n, false);
    let scale = tcsparse::formats::reference::spmm_f64(a, b, n, n, true);
    got.iter()
        .zip(want.iter().zip(&scale))
        .map(|(&g, (&w, &s))| {
            let d = (g as f64 - w).abs();
            if d == 0.0 {
                0.0
            } else {
                d / s.max(f64::MIN_POSITIVE)
            }
        })
        .fold(0.0, f64::max)
}

/// Runs the soak on `engine` (GPU device buffers, or host slices on the CPU path).
pub fn run(engine: &Engine, cfg: &SoakConfig, command: String) -> Result<SoakResult> {
    anyhow::ensure!(
        cfg.update_every > 0 && (1..=8).contains(&cfg.n) && cfg.rows > 0,
        "soak: --soak-update-every > 0, --rhs in 1..=8 and rows > 0"
    );
    let a0 = banded(cfg.rows, 4, 0.8, 11).context("generating the banded matrix")?;
    let values = [
        a0.data().to_vec(),
        a0.data()
            .iter()
            .map(|v| 0.5 * v + 0.25)
            .collect::<Vec<f32>>(),
    ];
    let mats = [with_values(&a0, &values[0]), with_values(&a0, &values[1])];
    let n = cfg.n;
    let b: Vec<f32> = (0..a0.cols() * n)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect();
    let opts = PrepareOptions::builder()
        .kernel(if engine.gpu().is_some() {
            KernelRequest::AccSpmm
        } else {
            KernelRequest::Auto
        })
        .balance(Balance::Off)
        .reorder(ReorderChoice::None)
        .tune(false)
        .build();
    let spmv_opts = SpmvOptions::builder().n(n).tune(false).build();
    let mut spmm = engine.prepare_spmm(&mats[0], &opts)?;
    spmm.set_n(n);
    let mut spmv = engine.prepare_spmv(&mats[0], &spmv_opts)?;
    let spmm_kernel = spmm.kernel().to_string();
    let spmv_kernel = format!("{:?}", spmv.kernel());
    let rows = a0.rows();

    // Device operands (GPU) or host ones (CPU path).
    let dev = match engine.gpu() {
        Some(g) => Some((
            g.clone(),
            g.upload(&b)?,
            g.alloc_zeros::<f32>(rows * n)?,
            g.alloc_zeros::<f32>(rows * n)?,
        )),
        None => None,
    };
    let mut dev = dev;
    let mut host_c = vec![0f32; rows * n];
    let mut host_y = vec![0f32; rows * n];

    let epochs = cfg.products.div_ceil(cfg.update_every);
    let mut reference: [Option<(Vec<f32>, Vec<f32>)>; 2] = [None, None];
    let mut mismatches = Vec::new();
    let (mut comparisons, mut updates, mut first_error) = (0, 0, 0.0);
    let (mut rss_start, mut free_start) = (0, None);
    let t = Instant::now();
    for e in 0..epochs {
        let set = e % 2;
        if e > 0 {
            spmm.update_values(&values[set])?;
            spmv = engine.prepare_spmv(&mats[set], &spmv_opts)?;
            updates += 1;
        }
        let count = cfg.update_every.min(cfg.products - e * cfg.update_every);
        let (c, y) = match &mut dev {
            Some((g, db, dc, dy)) => {
                for _ in 0..count {
                    spmm.spmm_device(1.0, db, 0.0, dc)?;
                    spmv.spmv_device(1.0, db, 0.0, dy)?;
                }
                (g.download(dc)?, g.download(dy)?)
            }
            None => {
                for _ in 0..count {
                    spmm.spmm(1.0, &b, 0.0, &mut host_c)?;
                    spmv.spmv(1.0, &b, 0.0, &mut host_y)?;
                }
                (host_c.clone(), host_y.clone())
            }
        };
        match &reference[set] {
            None => {
                let err =
                    scaled_error(&mats[set], &b, n, &c).max(scaled_error(&mats[set], &b, n, &y));
                first_error = f64::max(first_error, err);
                reference[set] = Some((c, y));
            }
            Some((rc, ry)) => {
                comparisons += 2;
                let differs = |got: &[f32], want: &[f32]| {
                    got.iter()
                        .zip(want)
                        .filter(|(g, w)| g.to_bits() != w.to_bits())
                        .count()
                };
                for (what, got, want) in [("SpMM", &c, rc), ("SpMV", &y, ry)] {
                    let d = differs(got, want);
                    if d > 0 {
                        mismatches.push(format!(
                            "{what}, epoch {e} (values {set}): {d} of {} elements differ",
                            got.len()
                        ));
                    }
                }
            }
        }
        if e == 0 {
            rss_start = rss_bytes();
            free_start = match &dev {
                Some((g, ..)) => Some(g.memory_info()?.0 as u64),
                None => None,
            };
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let free_end = match &dev {
        Some((g, ..)) => {
            g.synchronize()?;
            Some(g.memory_info()?.0 as u64)
        }
        None => None,
    };
    Ok(SoakResult {
        device: engine.message().to_string(),
        command,
        rows,
        nnz: a0.nnz(),
        n,
        products: cfg.products,
        updates,
        spmm_kernel,
        spmv_kernel,
        seconds,
        rss_start,
        rss_end: rss_bytes(),
        device_free_start: free_start,
        device_free_end: free_end,
        comparisons,
        mismatches,
        first_error,
    })
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1048576.0)
}

/// The result as a small Markdown section (the soak section of a sanitizer record).
pub fn render(r: &SoakResult) -> String {
    let per = if r.products > 0 {
        r.seconds * 1e6 / r.products as f64
    } else {
        0.0
    };
    let dev = match (r.device_free_start, r.device_free_end) {
        (Some(s), Some(e)) => format!("{} → {}", mib(s), mib(e)),
        _ => "—".into(),
    };
    let mut s = String::new();
    s.push_str("## Soak\n\n");
    s.push_str(&format!("`{}`\n\n", r.command));
    s.push_str(&format!("Device: {}\n\n", r.device));
    s.push_str("| matrix | n | SpMM products | SpMV products | value updates | SpMM kernel | SpMV kernel | seconds | µs per SpMM + SpMV | host RSS | device free | bitwise comparisons | mismatches | first-epoch error |\n");
    s.push_str("|---|---:|---:|---:|---:|---|---|---:|---:|---|---|---:|---:|---:|\n");
    s.push_str(&format!(
        "| banded {}×{}, {} nnz | {} | {} | {} | {} | {} | {} | {:.1} | {:.2} | {} → {} | {} | {} | {} | {:.1e} |\n",
        r.rows,
        r.rows,
        r.nnz,
        r.n,
        r.products,
        r.products,
        r.updates,
        r.spmm_kernel,
        r.spmv_kernel,
        r.seconds,
        per,
        mib(r.rss_start),
        mib(r.rss_end),
        dev,
        r.comparisons,
        r.mismatches.len(),
        r.first_error
    ));
    s.push('\n');
    s.push_str(&format!(
        "Memory flat (host RSS growth ≤ {}, device free-memory loss ≤ {}): {}. Bit-stable: {}.\n",
        mib(RSS_SLACK),
        mib(DEVICE_SLACK),
        if r.memory_flat() { "yes" } else { "NO" },
        if r.mismatches.is_empty() { "yes" } else { "NO" }
    ));
    for m in r.mismatches.iter().take(20) {
        s.push_str(&format!("- {m}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_soak_on_the_cpu_path_is_bit_stable_and_accurate() {
        let cfg = SoakConfig {
            products: 25,
            update_every: 5,
            rows: 300,
            n: 3,
        };
        let r = run(&Engine::cpu("test"), &cfg, "soak test".into()).unwrap();
        assert_eq!(r.updates, 4);
        // Epochs 2, 3 and 4 are compared with epochs 0 and 1: SpMM and SpMV each.
        assert_eq!(r.comparisons, 6);
        assert!(r.mismatches.is_empty(), "{:?}", r.mismatches);
        assert!(r.first_error <= 2f64.powi(-9), "{}", r.first_error);
        assert!(r.passed(), "{r:?}");
        let md = render(&r);
        assert!(md.contains("| banded 300×300, "), "{md}");
        assert!(md.contains("Bit-stable: yes"), "{md}");
    }

    #[test]
    fn memory_growth_past_the_slack_fails() {
        let mut r = SoakResult {
            device: "d".into(),
            command: "c".into(),
            rows: 1,
            nnz: 1,
            n: 1,
            products: 1,
            updates: 0,
            spmm_kernel: "k".into(),
            spmv_kernel: "k".into(),
            seconds: 1.0,
            rss_start: 100 << 20,
            rss_end: (100 << 20) + RSS_SLACK,
            device_free_start: Some(1 << 30),
            device_free_end: Some((1 << 30) - DEVICE_SLACK),
            comparisons: 0,
            mismatches: Vec::new(),
            first_error: 0.0,
        };
        assert!(r.passed());
        r.rss_end += 1;
        assert!(!r.memory_flat());
        r.rss_end -= 1;
        r.device_free_end = Some((1 << 30) - DEVICE_SLACK - 1);
        assert!(!r.passed());
        r.device_free_end = Some(1 << 30);
        r.mismatches.push("SpMM".into());
        assert!(!r.passed());
    }

    #[test]
    fn rss_is_read_on_linux() {
        if std::path::Path::new("/proc/self/status").exists() {
            assert!(rss_bytes() > 0);
        }
    }
}
