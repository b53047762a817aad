//! `tcsparse demo`: the whole pipeline on a shipped matrix (reorder → BitTCF → plan → upload →
//! SpMM, each stage timed), on the GPU with the cuSPARSE comparison when there is one, on the CPU
//! reference path otherwise (said plainly), with the error against the f64 reference.

use crate::out::outln;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tcsparse::formats::Csr;
use tcsparse::formats::reference::{CheckedRows, spmm_error};

pub use crate::measured::{CHECK_MADDS, ErrorReport, Measured};
use tcsparse::{
    Backend, Balance, DType, Engine, KernelRequest, Precision, PrepareOptions, Prepared,
    ReorderChoice, RowOrder,
};

/// Arguments of `tcsparse demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix file: Matrix Market (.mtx, .mtx.gz), SciPy sparse (.npz) or a layout file written by
    /// `convert`. default: cora.mtx.gz,
    /// shipped in datasets/ and embedded in the binary.
    pub input: Option<PathBuf>,
    /// The old spelling of INPUT.
    #[arg(long, hide = true, conflicts_with = "input")]
    pub matrix: Option<PathBuf>,
    /// Columns of B.
    #[arg(long, default_value_t = 128, value_parser = crate::args::dense_width)]
    pub n: usize,
    /// Reordering method (affinity, rabbit, lsh, degree, rcm, none) or `auto`.
    #[arg(long, default_value = "auto", value_parser = crate::args::reorder)]
    pub reorder: String,
    /// Seed of B and of randomized reorderings.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Arithmetic: tf32 (tensor-core kernels allowed) or f32 (only f32 kernels), as for spmm.
    #[arg(long, default_value = "tf32", value_parser = ["tf32", "f32"])]
    pub precision: String,
    /// Use the CPU reference path even when a GPU is present.
    #[arg(long)]
    pub cpu: bool,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
    /// Timed repetitions per kernel (at most 10000).
    #[arg(long, default_value_t = crate::args::DEFAULT_ITERS, value_parser = crate::args::iters)]
    pub iters: usize,
}

/// Engine honoring `--cpu`.
pub fn engine(cpu: bool) -> Engine {
    if cpu {
        Engine::cpu("--cpu given")
    } else {
        Engine::new()
    }
}

/// Parses a `--reorder` value.
pub fn reorder_choice(s: &str) -> ReorderChoice {
    match s {
        "auto" => ReorderChoice::Auto,
        "none" => ReorderChoice::None,
        m => ReorderChoice::Method(m.to_string()),
    }
}

/// Parses a `--precision` of SpMM (`tf32` or `f32`; clap has checked it is one of them).
pub fn precision(s: &str) -> Precision {
    match s {
        "f32" => Precision::F32,
        _ => Precision::Tf32,
    }
}

/// Seeded B in [-1, 1) (a small LCG: reproducible without extra dependencies).
pub fn random_b(rows: usize, n: usize, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    // s_{k+1} = A·s_k + C (mod 2^64); value k comes from s_{k+1}. Chunks start from the state
    // the sequence reaches there (jumped ahead in O(log k)), so the values do not depend on the
    // number of threads.
    const A: u64 = 6364136223846793005;
    const C: u64 = 1442695040888963407;
    const CHUNK: usize = 1 << 16;
    let s0 = seed.wrapping_mul(A).wrapping_add(C);
    let mut b = vec![0f32; rows * n];
    b.par_chunks_mut(CHUNK).enumerate().for_each(|(i, chunk)| {
        let mut s = lcg_jump(s0, (i * CHUNK) as u64, A, C);
        for v in chunk {
            s = s.wrapping_mul(A).wrapping_add(C);
            *v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
        }
    });
    b
}

/// The state `steps` steps of s ↦ a·s + c (mod 2^64) after `s`, by squaring the affine map.
fn lcg_jump(mut s: u64, mut steps: u64, mut a: u64, mut c: u64) -> u64 {
    while steps > 0 {
        if steps & 1 == 1 {
            s = s.wrapping_mul(a).wrapping_add(c);
        }
        c = c.wrapping_mul(a.wrapping_add(1));
        a = a.wrapping_mul(a);
        steps >>= 1;
    }
    s
}

/// Compares `got` with the f64 reference of `a·b`.
pub fn error_vs_reference(a: &Csr, b: &[f32], n: usize, got: &[f32]) -> ErrorReport {
    error_vs_reference_stored(a, b, n, got, DType::F32)
}

/// [`error_vs_reference`] for a result stored in `dtype`: a difference up to the type's
/// underflow step ([`DType::underflow_step`]: results below its normal range are rounded
/// absolutely) is forgiven before scaling, as the library's own accuracy check does.
pub fn error_vs_reference_stored(
    a: &Csr,
    b: &[f32],
    n: usize,
    got: &[f32],
    dtype: DType,
) -> ErrorReport {
    let checked = CheckedRows::within(a, n, CHECK_MADDS);
    let e = spmm_error(a, b, n, n, got, dtype.underflow_step(), &checked);
    ErrorReport {
        max_scaled: e.max_scaled,
        relative: e.relative,
        checked,
    }
}

/// Runs `prepared` on host data once (checked against the f64 reference of the ORIGINAL matrix)
/// and times it: the device hot path on the GPU, the whole host call on the CPU path.
pub fn measure(
    engine: &Engine,
    prepared: &mut Prepared,
    a: &Csr,
    b: &[f32],
    n: usize,
    iters: usize,
) -> anyhow::Result<Measured> {
    prepared.set_n(n);
    let mut c = vec![0f32; a.rows() * n];
    let first = Instant::now();
    tracing::info_span!("first_product", n).in_scope(|| prepared.spmm(1.0, b, 0.0, &mut c))?;
    let first_ms = Some(first.elapsed().as_secs_f64() * 1e3);
    let error = error_vs_reference(a, b, n, &c);
    let iters = iters.max(1);
    let _run = tracing::info_span!("run", n, iters).entered();
    let (ms, device_time) = match engine.gpu() {
        Some(_) => (time_device(engine, prepared, b, a.rows(), n, iters)?, true),
        None => {
            let mut samples = Vec::new();
            for _ in 0..iters.min(5) {
                let t = Instant::now();
                prepared.spmm(1.0, b, 0.0, &mut c)?;
                samples.push(t.elapsed().as_secs_f64() * 1e3);
            }
            samples.sort_by(f64::total_cmp);
            (samples[samples.len() / 2], false)
        }
    };
    let gflops = 2.0 * a.nnz() as f64 * n as f64 / (ms * 1e-3) / 1e9;
    Ok(Measured {
        ms,
        gflops,
        error,
        device_time,
        first_ms,
    })
}

/// Median milliseconds of `prepared`'s device hot path (`spmm_device`, B and C resident) over
/// `iters` products after 3 warm-up launches, on an engine with a GPU; `rows` are A's rows.
pub fn time_device(
    engine: &Engine,
    prepared: &mut Prepared,
    b: &[f32],
    rows: usize,
    n: usize,
    iters: usize,
) -> anyhow::Result<f64> {
    let gpu = engine
        .gpu()
        .ok_or_else(|| anyhow::anyhow!("device timing needs a GPU"))?;
    prepared.set_n(n);
    // Any B gives the same time, so B is not permuted into the prepared order.
    let bd = gpu.upload(b)?;
    let mut cd = gpu.alloc_zeros::<f32>(rows * n)?;
    let t = gpu.time_launches(3, iters.max(1), || {
        prepared
            .spmm_device(1.0, &bd, 0.0, &mut cd)
            .map_err(|e| tcsparse::gpu::GpuError::Invalid(e.to_string()))
    })?;
    Ok(t.median_ms)
}

/// The prepared-plan cache directory: `$TCSPARSE_CACHE_DIR` when set and not empty.
pub fn cache_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("TCSPARSE_CACHE_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
}

/// Pays the GPU's first-use costs of uploading `path`'s matrix ([`Engine::warm_up_for`], sized by
/// its Matrix Market header; [`Engine::warm_up`] where there is no header to read, e.g. `.npz`),
/// meant for a thread beside [`read`]. A failure only costs the time it saves, so it is logged.
pub fn warm_up_for_file(engine: &Engine, path: &Path) {
    let warmed = match tcsparse::formats::mtx::read_header(path) {
        Ok(h) => {
            use tcsparse::formats::mtx::Symmetry;
            let stored = usize::try_from(h.entries).unwrap_or(usize::MAX);
            // (A symmetric file's triangle expands to at most twice its entries.)
            let nnz = match h.symmetry {
                Symmetry::General => stored,
                Symmetry::Symmetric | Symmetry::SkewSymmetric => stored.saturating_mul(2),
            };
            engine.warm_up_for(usize::try_from(h.rows).unwrap_or(usize::MAX), nnz)
        }
        Err(_) => engine.warm_up(),
    };
    if let Err(e) = warmed {
        tracing::debug!("GPU warm-up: {e}");
    }
}

/// Reads a matrix, timing it.
pub fn read(path: &Path) -> anyhow::Result<(Csr, f64)> {
    let t = Instant::now();
    let a = crate::input::read_matrix(path)?;
    Ok((a, t.elapsed().as_secs_f64() * 1e3))
}

/// Prints the `read` line: the time to read `a` and its shape.
pub fn print_read(read_ms: f64, a: &Csr) -> anyhow::Result<()> {
    outln!(
        "read      {read_ms:>10.3} ms  {} × {}, {} nonzeros",
        a.rows(),
        a.cols(),
        a.nnz()
    )?;
    Ok(())
}

/// Prints the stage lines of a prepare report.
pub fn print_prepare(p: &Prepared) -> anyhow::Result<()> {
    let r = p.report();
    match &r.reorder {
        Some(rr) => outln!(
            "reorder   {:>10.3} ms  {} ({:?}){}: MeanNNZTC {:.2} -> {:.2}, TC blocks {} -> {}",
            r.reorder_s * 1e3,
            rr.method,
            r.mode,
            if r.reordered {
                ""
            } else {
                ", not applied (no gain)"
            },
            rr.mean_nnz_tc_before,
            rr.mean_nnz_tc_after,
            rr.blocks_before,
            rr.blocks_after
        )?,
        None if r.reordered => outln!(
            "reorder   {:>10.3} ms  permutation applied (given, or from the plan cache)",
            r.reorder_s * 1e3
        )?,
        None => match &r.reorder_gate {
            Some(g) if !g.worth_reordering => outln!(
                "reorder   {:>10.3} ms  none: {}",
                r.reorder_s * 1e3,
                g.reason
            )?,
            _ => outln!("reorder   {:>10.3} ms  none", r.reorder_s * 1e3)?,
        },
    }
    outln!(
        "build     {:>10.3} ms  BitTCF: {} TC blocks, MeanNNZTC {:.2}",
        r.build_s * 1e3,
        r.blocks,
        r.mean_nnz_tc
    )?;
    outln!(
        "plan      {:>10.3} ms  {}: {}",
        r.plan_s * 1e3,
        r.kernel,
        r.kernel_note
    )?;
    outln!(
        "precision {:>10}  {}: {}",
        "",
        r.precision(),
        r.precision().bound_text()
    )?;
    if !r.tuning.is_empty() {
        outln!(
            "tune      {:>10.3} ms  {} candidates timed",
            r.tune_s * 1e3,
            r.tuning.len()
        )?;
        for t in &r.tuning {
            outln!("          {:>10.3} ms  {}", t.ms, t.candidate)?;
        }
    } else {
        outln!("tune      {:>10.3} ms  no candidates timed", r.tune_s * 1e3)?;
    }
    if r.thread_blocks > 0 {
        outln!(
            "upload    {:>10.3} ms  {} thread blocks, {} split windows",
            r.upload_s * 1e3,
            r.thread_blocks,
            r.split_windows
        )?;
    } else {
        outln!("upload    {:>10.3} ms", r.upload_s * 1e3)?;
    }
    let what = match &r.cache {
        tcsparse::CacheOutcome::Off => None,
        tcsparse::CacheOutcome::Hit => {
            Some("hit: permutation and kernel decision loaded".to_string())
        }
        tcsparse::CacheOutcome::Miss => Some("miss: prepared in full and stored".to_string()),
        tcsparse::CacheOutcome::Rebuilt(why) => Some(format!(
            "entry not trusted ({why}): prepared in full and stored again"
        )),
        tcsparse::CacheOutcome::StoreFailed(why) => Some(format!("not stored: {why}")),
    };
    if let Some(what) = what {
        outln!(
            "cache     {:>10.3} ms  {what} (checksum, entry read and checks, store)",
            r.cache_s * 1e3
        )?;
    }
    outln!(
        "prepare   {:>10.3} ms  total, every stage above",
        r.total_s * 1e3
    )?;
    Ok(())
}

/// Prints how many products repay the preparation against cuSPARSE (`cusparse_ms`, `None` when
/// there is no cuSPARSE time) when ours takes `ours_ms`.
pub fn print_break_even(
    p: &Prepared,
    cusparse_ms: Option<f64>,
    ours_ms: f64,
) -> anyhow::Result<()> {
    let r = p.report();
    match cusparse_ms {
        Some(cus) => outln!(
            "break-even {} calls: preparation {:.3} ms / (cuSPARSE {cus:.3} ms − ours {ours_ms:.3} ms per call)",
            tcsparse::format_break_even(r.break_even_calls(cus, ours_ms)),
            r.total_s * 1e3
        )?,
        None => outln!("break-even n/a: no cuSPARSE time (CPU path)")?,
    }
    Ok(())
}

/// Prints the first product's line (the last stage before the timed products), if it was timed.
pub fn print_first(m: &Measured) -> anyhow::Result<()> {
    if let Some(ms) = m.first_ms {
        outln!("first     {ms:>10.3} ms  first product, host call (B in, C out)")?;
    }
    Ok(())
}

/// Prints one product line.
/// `bound` is the kernel's scaled error bound ([`Prepared::error_bound`]).
pub fn print_measured(label: &str, n: usize, bound: f64, m: &Measured) -> anyhow::Result<()> {
    outln!(
        "spmm      {:>10.3} ms  {label}, N = {n}: {:.1} GFLOP/s{}; error vs f64{}: max scaled {:.2e} (bound {:.2e}), relative {:.2e}",
        m.ms,
        m.gflops,
        if m.device_time {
            " (median device time)"
        } else {
            " (host call)"
        },
        m.error.sample_text(),
        m.error.max_scaled,
        bound,
        m.error.relative
    )?;
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    let (a, read_ms, name) = match args.input.or(args.matrix) {
        Some(path) => {
            let (a, ms) = read(&path)?;
            let name = path
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (a, ms, name)
        }
        None => {
            let t = Instant::now();
            let a = crate::input::demo_matrix()?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            (a, ms, crate::input::DEMO_MATRIX_NAME.to_string())
        }
    };
    let engine = engine(args.cpu);
    outln!("tcsparse demo: C = A·B on {name}")?;
    if engine.backend() == Backend::Cpu {
        outln!(
            "backend   CPU reference path — {}. Times below are CPU times, not GPU kernel times.",
            engine.message()
        )?;
    } else {
        outln!("backend   {}", engine.message())?;
    }
    super::checks::check_n(&a, args.n)?;
    super::checks::note_non_finite(&a, "C")?;
    print_read(read_ms, &a)?;
    let opts = PrepareOptions::builder()
        .reorder(reorder_choice(&args.reorder))
        .balance(Balance::Auto)
        .kernel(KernelRequest::Auto)
        .seed(args.seed)
        .n(args.n)
        .tune(true)
        .precision(precision(&args.precision))
        .cache_dir(cache_dir())
        .device_order(RowOrder::Prepared)
        .build();
    let mut prepared =
        tracing::info_span!("prepare").in_scope(|| engine.prepare_spmm(&a, &opts))?;
    print_prepare(&prepared)?;
    let b = random_b(a.cols(), args.n, args.seed);
    let label = prepared.kernel().to_string();
    let m = measure(&engine, &mut prepared, &a, &b, args.n, args.iters)?;
    print_first(&m)?;
    print_measured(&label, args.n, prepared.error_bound(), &m)?;

    let (mut cusparse_ms, mut comparisons) = (None, Vec::new());
    if engine.backend() == Backend::Gpu {
        // Acc-SpMM and cuSPARSE side by side on the same reordered matrix.
        let same = prepared.matrix().clone();
        let mut others = Vec::new();
        for kernel in [KernelRequest::AccSpmm, KernelRequest::Cusparse] {
            let is_cusparse = kernel == KernelRequest::Cusparse;
            let mut o = opts.clone();
            o.reorder = ReorderChoice::None;
            o.kernel = kernel;
            let mut p = engine.prepare_spmm(&same, &o)?;
            if p.kernel() == prepared.kernel() {
                continue;
            }
            let mut bs = b.clone();
            if let (Some(perm), tcsparse::reorder::Mode::Symmetric) =
                (prepared.permutation(), prepared.report().mode)
            {
                bs = perm.apply_dense_rows(&b, a.cols(), args.n)?;
            }
            let mm = measure(&engine, &mut p, &same, &bs, args.n, args.iters)?;
            print_measured(&p.kernel().to_string(), args.n, p.error_bound(), &mm)?;
            if is_cusparse {
                cusparse_ms = Some(mm.ms);
            }
            comparisons.push(crate::json::Product::of(
                &p.kernel().to_string(),
                args.n,
                p.error_bound(),
                &mm,
            ));
            others.push((p.kernel(), mm.ms));
        }
        for (k, ms) in others {
            outln!("speedup   {label} over {k}: {:.2}×", ms / m.ms)?;
        }
    } else {
        outln!(
            "note      no GPU, so no cuSPARSE comparison; run on a CUDA machine for kernel times"
        )?;
    }
    if args.json {
        let r = prepared.report();
        let doc = crate::json::Spmm {
            input: name,
            backend: crate::json::backend(&engine),
            read_ms,
            matrix: crate::json::Matrix::of(&a),
            prepare: Some(crate::json::Prepare::of(r)),
            split: None,
            stages: crate::json::Stage::of_prepared(read_ms, r, m.first_ms),
            product: crate::json::Product::of(&label, args.n, prepared.error_bound(), &m),
            cusparse_ms,
            break_even_calls: cusparse_ms.and_then(|c| r.break_even_calls(c, m.ms)),
            comparisons,
        };
        crate::json::emit("demo", &doc)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunked generator gives the one sequential LCG sequence, across chunk boundaries.
    #[test]
    fn random_b_is_the_sequential_sequence() {
        let (rows, n, seed) = (3, 50_000, 7u64);
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let want: Vec<f32> = (0..rows * n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        assert_eq!(random_b(rows, n, seed), want);
    }
}
