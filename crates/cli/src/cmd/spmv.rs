//! `tcsparse spmv INPUT [--precision f16|tf32|f32] [--n K]`: y = A·X with K right-hand sides on the
//! GPU (bitBSR on tensor cores or CUDA cores, or cuSPARSE, whichever the
//! preparation timed faster) or the CPU walk of bitBSR; prints time, GB/s, GFLOP/s, the error against f64 and the kernel chosen.

use crate::out::outln;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use tcsparse::formats::reference::{max_scaled_error, relative_error, spmm_f64};
use tcsparse::{Backend, Engine};
use tcsparse::{Precision, SpmvOptions};

/// Arguments of `tcsparse spmv`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Runs y = A·X (X: cols × K, K = --n right-hand sides, 1..=8) with Spaden's bitBSR \
on tensor cores or a CUDA-core walk of bitBSR (every K: one pass over A for all K). On a GPU the preparation times cuSPARSE CSR \
SpMV (SpMM for K > 1; each of its CSR algorithms), our kernels (allowed tile storages × kernels × tile budgets) and, for \
K > 1, our CSR walk (8 lanes per nonzero) inside CUDA graphs and keeps the fastest; times are medians over CUDA graphs of 20 calls. Without a GPU the CPU walks bitBSR exactly as the kernel does.\n\n\
--precision: tf32 (default: TF32 tiles, f32 tiles on CUDA cores, or cuSPARSE), f16 (also \
f16 tiles, scaled per tile-row and per x segment so nothing overflows; same 11-bit significands as \
TF32), f32 (f32 products only: cuSPARSE, our CSR walk, f32 tiles on CUDA cores, f32 CSR on the CPU).\n\n\
There is no --reorder: the SpMV preparation does not reorder (reorder the file first with `tcsparse \
reorder`)."
)]
pub struct Args {
    /// Matrix file: .mtx, .mtx.gz, .npz or a layout file written by `convert`.
    pub input: PathBuf,
    /// f16, tf32 or f32.
    #[arg(long, default_value = "tf32", value_parser = ["f16", "tf32", "f32"])]
    pub precision: String,
    /// Columns of X and y: right-hand sides, 1 to 8.
    #[arg(long, alias = "rhs", default_value_t = 1, value_parser = crate::args::spmv_width)]
    pub n: usize,
    /// Timed samples (GPU: graph launches of 20 calls; CPU: calls; at most 10000).
    #[arg(long, default_value_t = crate::args::DEFAULT_ITERS, value_parser = crate::args::iters)]
    pub iters: usize,
    /// Seed of X.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Use the CPU path even when a GPU is present.
    #[arg(long)]
    pub cpu: bool,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    let precision = Precision::parse(&args.precision)?;
    let t = Instant::now();
    let a = crate::input::read_matrix(&args.input)?;
    let read_ms = t.elapsed().as_secs_f64() * 1e3;
    let engine = if args.cpu {
        Engine::cpu("--cpu")
    } else {
        Engine::new()
    };
    outln!("backend   {}", engine.message())?;
    outln!(
        "read {read_ms:.1} ms  {} × {}, {} nonzeros",
        a.rows(),
        a.cols(),
        a.nnz()
    )?;
    super::checks::note_non_finite(&a, "y")?;
    let n = args.n;
    let opts = SpmvOptions::builder().precision(precision).n(n).build();
    let t = Instant::now();
    // The GPU preparation times every candidate; a machine's first run also waits for the driver
    // to compile the kernels' PTX for its GPU (H200: ~3 s for one right-hand side, ~6 s for 8).
    let bar = super::spinner(
        matches!(engine.backend(), Backend::Gpu),
        "preparing: timing cuSPARSE and our kernels (a machine's first run also compiles them)"
            .into(),
    );
    let prepared = engine.prepare_spmv(&a, &opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut p = prepared?;
    let prepare_ms = t.elapsed().as_secs_f64() * 1e3;
    outln!(
        "prepare {prepare_ms:.1} ms  precision {precision:?}, {n} right-hand side(s), kernel: {}",
        p.kernel()
    )?;
    for s in p.samples() {
        outln!("  tuned {:.4} ms  {}", s.ms, s.kernel)?;
    }
    let x = super::demo::random_b(a.cols(), n, args.seed);
    let mut y = vec![0f32; a.rows() * n];
    p.spmv(1.0, &x, 0.0, &mut y)?;
    let want = spmm_f64(&a, &x, n, n, false);
    let scale = spmm_f64(&a, &x, n, n, true);
    let scaled = max_scaled_error(&y, &want, &scale);
    let rel = relative_error(&y, &want);
    let ms = match engine.backend() {
        Backend::Gpu if !args.cpu => {
            let gpu = engine.gpu().context("GPU backend without a GPU")?;
            let dx = gpu.upload(&x)?;
            let mut dy = gpu.alloc_zeros::<f32>((a.rows() * n).max(1))?;
            p.time_device(&dx, &mut dy, args.iters.max(1))?.median_ms
        }
        _ => {
            let mut times = Vec::new();
            for _ in 0..args.iters.max(1) {
                let t = Instant::now();
                p.spmv(1.0, &x, 0.0, &mut y)?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            times.sort_by(f64::total_cmp);
            times[times.len() / 2]
        }
    };
    let secs = ms * 1e-3;
    outln!(
        "spmv {ms:.4} ms  {:.1} GB/s, {:.2} GFLOP/s ({} bytes moved at least)",
        p.bytes() as f64 / secs / 1e9,
        2.0 * a.nnz() as f64 * n as f64 / secs / 1e9,
        p.bytes()
    )?;
    outln!(
        "error vs f64: max scaled {scaled:.2e} (bound {:.2e}), relative {rel:.2e}",
        precision.spmv_bound()
    )?;
    if args.json {
        let doc = crate::json::Spmv {
            input: args.input.display().to_string(),
            backend: crate::json::backend(&engine),
            read_ms,
            matrix: crate::json::Matrix::of(&a),
            n,
            precision: crate::json::kind_with(
                &args.precision.to_ascii_lowercase(),
                "bound",
                precision.spmv_bound(),
            ),
            prepare_ms,
            kernel: p.kernel().to_string(),
            tuning: p
                .samples()
                .iter()
                .map(|s| crate::json::Timed {
                    candidate: s.kernel.to_string(),
                    ms: s.ms,
                })
                .collect(),
            ms,
            gb_per_s: p.bytes() as f64 / secs / 1e9,
            gflops: 2.0 * a.nnz() as f64 * n as f64 / secs / 1e9,
            bytes: p.bytes(),
            max_scaled_error: scaled,
            error_bound: precision.spmv_bound(),
            relative_error: rel,
        };
        crate::json::emit("spmv", &doc)?;
    }
    // With NaN or ±inf stored (said above) the error is not finite either: nothing to check.
    anyhow::ensure!(
        a.non_finite() > 0 || scaled <= precision.spmv_bound(),
        "error {scaled:.3e} above the {precision:?} bound {:.3e}",
        precision.spmv_bound()
    );
    Ok(())
}
