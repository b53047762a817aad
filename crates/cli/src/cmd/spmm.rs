//! `tcsparse spmm`: one prepared product on a matrix file, with time, GFLOP/s and the error against
//! the f64 reference (on the CPU reference path when there is no GPU, said plainly).

use crate::out::outln;
use std::path::PathBuf;

use std::time::Instant;

use clap::builder::{PossibleValuesParser, TypedValueParser};

use tcsparse::element::{bf16, f16, widen};
use tcsparse::formats::Csr;
use tcsparse::{
    Backend, Balance, DType, Element, KernelRequest, Precision, PrepareOptions, Prepared, RowOrder,
};

use super::demo;

/// Arguments of `tcsparse spmm`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix file: Matrix Market (.mtx, .mtx.gz), SciPy sparse (.npz) or a layout file written by
    /// `convert`.
    pub input: PathBuf,
    /// Columns of B.
    #[arg(long, default_value_t = 128, value_parser = crate::args::dense_width)]
    pub n: usize,
    /// Kernel: auto (planner), acc (Acc-SpMM), tc16 / tc32 (row-tile tensor-core kernels on 16- or
    /// 32-row windows), tc16d / tc32d (the same with dense tiles), tc16d-tma / tc32d-tma (dense
    /// tiles on the TMA bulk-copy pipeline, sm_90), cusparse, csr (CUDA-core CSR),
    /// staged32 / staged64 (window-staged CSR on CUDA cores, 32- or 64-column slices), hrpb
    /// (cuTeSpMM's HRPB kernel, wave-aware split).
    #[arg(long, default_value = "auto", value_parser = PossibleValuesParser::new(KernelRequest::names()))]
    pub kernel: String,
    /// Reordering method (affinity, rabbit, lsh, degree, rcm, none) or `auto`.
    #[arg(long, default_value = "auto", value_parser = crate::args::reorder)]
    pub reorder: String,
    /// Schedule: auto, on (Acc-SpMM: Eq. 4 balanced; row-tile kernels: heavy windows split at 16
    /// blocks per thread block), off (one thread block per row window), packed:K (K consecutive
    /// row windows per thread block), cached:K[:R] (Acc-SpMM only; experimental, slower so
    /// far: packed:K run by the kernel variant with an R-row B cache per warp in shared memory; R
    /// defaults to 128), nnz:K (`--kernel csr` only: at most K nonzeros per warp, longer rows
    /// split; default 256, tuning tries 64, 256 and 1024).
    // `cached:K[:R]` is help text, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, default_value = "auto", value_parser = parse_balance)]
    pub balance: Balance,
    /// Arithmetic: tf32 (tensor-core kernels allowed; error ≤ 2·2⁻¹⁰·|A|·|B| per element), f32
    /// (only f32 kernels: cuSPARSE, csr; cuSPARSE-class error ~1e-7) or 3xtf32 (split TF32,
    /// f32-grade accuracy: on a GPU the row-tile 3xTF32 kernels, or, tuned, the f32 kernels
    /// where they are faster (a tighter bound; the report then says f32), cuSPARSE f32 where the
    /// 3xTF32 kernels do not take the matrix; exact f32 on the CPU path).
    #[arg(long, default_value = "tf32", value_parser = precision_arg())]
    pub precision: Precision,
    /// Element type of B and C: f32, f16 or bf16 (f32 accumulation, C rounded to the type; the
    /// bound printed includes that rounding). f16 and bf16 run on the row-tile f16 / bf16 kernels
    /// (A rounded to the type on upload) or the CSR kernel (A in f32) on a GPU, and on the CPU
    /// path with `--cpu`.
    #[arg(long, default_value = "f32", value_parser = dtype_arg())]
    pub dtype: DType,
    /// With `--kernel auto` on the GPU: trust the planner's model instead of timing the candidates.
    #[arg(long)]
    pub no_tune: bool,
    /// Seed of B and of randomized reorderings.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Timed repetitions (at most 10000).
    #[arg(long, default_value_t = crate::args::DEFAULT_ITERS, value_parser = crate::args::iters)]
    pub iters: usize,
    /// Use the CPU reference path even when a GPU is present.
    #[arg(long)]
    pub cpu: bool,
    /// Split A's rows over these GPUs, e.g. 0,1,2,3 (balanced by nonzeros, each block prepared
    /// on its own device, B broadcast through NCCL). Default: one GPU, as without the flag.
    #[arg(long, conflicts_with = "cpu")]
    pub devices: Option<String>,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
    /// One process per GPU, started once per rank by a launcher (torchrun, srun, or RANK /
    /// WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT by hand); rank 0 prints the result.
    #[arg(long, conflicts_with_all = ["cpu", "devices", "json"])]
    pub distributed: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    // Checked before reading a possibly large file (the engine refuses it too).
    if matches!(args.balance, Balance::NnzPerWarp(_)) && args.kernel != "csr" {
        anyhow::bail!(
            "--balance nnz:K sets the CSR kernel's nonzeros per warp: use it with --kernel csr (got --kernel {})",
            args.kernel
        );
    }
    let devices = args
        .devices
        .as_deref()
        .map(tcsparse::DeviceSet::parse)
        .transpose()?;
    // Before the warm-up below opens it too (a FIFO would block that thread).
    crate::input::check_regular(&args.input)?;
    if args.distributed {
        let opts = prepare_options(&args);
        let read = || {
            let (a, _) = demo::read(&args.input)?;
            super::checks::check_n(&a, args.n)?;
            Ok(a)
        };
        return super::distributed::run_spmm(read, &opts, args.n, args.seed, args.iters);
    }
    // The GPU is opened and the upload path's first-use costs are paid while the file is read.
    let (engine, read) = std::thread::scope(|s| {
        let opened = s.spawn(|| {
            let engine = tracing::info_span!("open_engine").in_scope(|| demo::engine(args.cpu));
            demo::warm_up_for_file(&engine, &args.input);
            engine
        });
        let read = demo::read(&args.input);
        // (A panic in the engine's thread is a bug; carry it on.)
        let engine = opened
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (engine, read)
    });
    let (a, read_ms) = read?;
    if engine.backend() == Backend::Cpu {
        outln!(
            "backend   CPU reference path — {}. The time below is a CPU time, not a GPU kernel time.",
            engine.message()
        )?;
        if args.kernel != "auto" {
            outln!(
                "note      --kernel {} needs a GPU; ignored on the CPU path",
                args.kernel
            )?;
        }
    } else {
        outln!("backend   {}", engine.message())?;
    }
    demo::print_read(read_ms, &a)?;
    super::checks::note_non_finite(&a, "C")?;
    super::checks::check_n(&a, args.n)?;
    let opts = prepare_options(&args);
    let (input, backend) = (
        args.input.display().to_string(),
        crate::json::backend(&engine),
    );
    let matrix = crate::json::Matrix::of(&a);
    let report =
        move |prepare, split, stages, product, cusparse_ms, break_even_calls| crate::json::Spmm {
            input,
            backend,
            read_ms,
            matrix,
            prepare,
            split,
            stages,
            product,
            cusparse_ms,
            break_even_calls,
            comparisons: Vec::new(),
        };
    if let Some(devices) = devices {
        let (split, first_ms, product) = run_split(devices, &a, &opts, &args)?;
        if args.json {
            let stages = vec![
                crate::json::Stage::new("read", read_ms),
                crate::json::Stage::new("prepare", split.prepare_ms),
                crate::json::Stage::new("first_product", first_ms),
            ];
            let doc = report(None, Some(split), stages, product, None, None);
            crate::json::emit("spmm", &doc)?;
        }
        return Ok(());
    }
    // Shared with the preparation: no copy of A where it runs in the original order.
    let a = std::sync::Arc::new(a);
    let mut prepared =
        tracing::info_span!("prepare").in_scope(|| engine.prepare_spmm_shared(&a, &opts))?;
    demo::print_prepare(&prepared)?;
    outln!(
        "dtype     {:>10}  {}: {}",
        "",
        args.dtype,
        prepared.bound_text()
    )?;
    let b = demo::random_b(a.cols(), args.n, args.seed);
    let m = match args.dtype {
        DType::F16 => measure_typed::<f16>(&mut prepared, &a, &b, args.n, args.iters)?,
        DType::BF16 => measure_typed::<bf16>(&mut prepared, &a, &b, args.n, args.iters)?,
        _ => demo::measure(&engine, &mut prepared, &a, &b, args.n, args.iters)?,
    };
    demo::print_first(&m)?;
    demo::print_measured(
        &prepared.kernel().to_string(),
        args.n,
        prepared.error_bound(),
        &m,
    )?;
    // cuSPARSE's time: the tuning's (its fastest algorithm's full timing at this N; on a
    // plan-cache hit, that of the tuning that stored the entry), else measured here.
    let tuned = prepared.report().cusparse_ms;
    let cusparse_ms = match (tuned, engine.backend(), prepared.kernel()) {
        (Some(ms), _, _) => Some(ms),
        (None, Backend::Gpu, tcsparse::ExecKernel::Cusparse { .. }) => Some(m.ms),
        (None, Backend::Gpu, _) => {
            let o = PrepareOptions::builder()
                .reorder(tcsparse::ReorderChoice::None)
                .kernel(KernelRequest::Cusparse)
                .tune(false)
                .n(args.n)
                .seed(args.seed)
                .build();
            let mut cus = engine.prepare_spmm(&a, &o)?;
            Some(demo::time_device(
                &engine,
                &mut cus,
                &b,
                a.rows(),
                args.n,
                args.iters,
            )?)
        }
        (None, _, _) => None,
    };
    demo::print_break_even(&prepared, cusparse_ms, m.ms)?;
    if args.json {
        let r = prepared.report();
        let product = crate::json::Product::of(
            &prepared.kernel().to_string(),
            args.n,
            prepared.error_bound(),
            &m,
        )
        .with_dtype(args.dtype);
        let calls = cusparse_ms.and_then(|c| r.break_even_calls(c, m.ms));
        let doc = report(
            Some(crate::json::Prepare::of(r)),
            None,
            crate::json::Stage::of_prepared(read_ms, r, m.first_ms),
            product,
            cusparse_ms,
            calls,
        );
        crate::json::emit("spmm", &doc)?;
    }
    Ok(())
}

/// The kernel `--kernel NAME` asks for (one of [`KernelRequest::names`], which clap checks;
/// `auto`: the planner's and the tuning's choice).
fn kernel_request(name: &str) -> KernelRequest {
    KernelRequest::from_name(name).unwrap_or_default()
}

/// The preparation options the flags ask for.
fn prepare_options(args: &Args) -> PrepareOptions {
    let kernel = kernel_request(&args.kernel);
    PrepareOptions::builder()
        .reorder(demo::reorder_choice(&args.reorder))
        .balance(args.balance)
        .kernel(kernel)
        .seed(args.seed)
        .n(args.n)
        .tune(!args.no_tune)
        .precision(args.precision)
        .dtype(args.dtype)
        .cache_dir(demo::cache_dir())
        // The timing runs the kernel alone: B and C in prepared order.
        .device_order(RowOrder::Prepared)
        .build()
}

/// `--precision`: tf32, f32 or 3xtf32 (f16 is SpMV's and SpAMM's; f16 operands are `--dtype`).
fn precision_arg() -> impl TypedValueParser<Value = Precision> {
    PossibleValuesParser::new(["tf32", "f32", "3xtf32"]).try_map(|s: String| Precision::parse(&s))
}

/// `--dtype`: f32, f16 or bf16.
fn dtype_arg() -> impl TypedValueParser<Value = DType> {
    PossibleValuesParser::new(DType::ALL.map(DType::name)).try_map(|s: String| s.parse::<DType>())
}

/// `--dtype f16|bf16`: [`demo::measure`] with B rounded to `T` (C in `T`): one product checked
/// against the f64 reference of the ORIGINAL matrix and B as rounded, then the host call timed
/// (these types run on the CPU path only: a GPU engine refuses them at preparation).
fn measure_typed<T: Element>(
    prepared: &mut Prepared,
    a: &Csr,
    b: &[f32],
    n: usize,
    iters: usize,
) -> anyhow::Result<demo::Measured> {
    prepared.set_n(n);
    let b: Vec<T> = b.iter().map(|&v| T::from_f32(v)).collect();
    let mut c = vec![T::default(); a.rows() * n];
    let first = Instant::now();
    tracing::info_span!("first_product", n)
        .in_scope(|| prepared.spmm_typed(1.0, &b, 0.0, &mut c))?;
    let first_ms = Some(first.elapsed().as_secs_f64() * 1e3);
    let error = demo::error_vs_reference_stored(a, &widen(&b), n, &widen(&c), T::DTYPE);
    let iters = iters.max(1);
    let _run = tracing::info_span!("run", n, iters).entered();
    let mut samples = Vec::new();
    for _ in 0..iters.min(5) {
        let t = Instant::now();
        prepared.spmm_typed(1.0, &b, 0.0, &mut c)?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    samples.sort_by(f64::total_cmp);
    let ms = samples[samples.len() / 2];
    Ok(demo::Measured {
        ms,
        gflops: 2.0 * a.nnz() as f64 * n as f64 / (ms * 1e-3) / 1e9,
        error,
        device_time: false,
        first_ms,
    })
}

/// `--devices`: the product over several GPUs, timed as the wall time from queueing every
/// device's product to the last one finishing (B already broadcast), median of `--iters`.
fn run_split(
    devices: tcsparse::DeviceSet,
    a: &tcsparse::formats::Csr,
    opts: &PrepareOptions,
    args: &Args,
) -> anyhow::Result<(crate::json::Split, f64, crate::json::Product)> {
    let t = std::time::Instant::now();
    let mut split = tracing::info_span!("prepare", %devices)
        .in_scope(|| tcsparse::prepare_split(devices, a, opts))?;
    let prep_ms = t.elapsed().as_secs_f64() * 1e3;
    outln!(
        "devices   {devices} (B: {}); prepare {prep_ms:.1} ms on all of them",
        split.transport()
    )?;
    let mut parts = Vec::new();
    for ((r0, r1), p) in split.row_ranges().into_iter().zip(split.parts()) {
        let nnz = a.row_offsets()[r1] - a.row_offsets()[r0];
        outln!("part      rows {r0}..{r1}: {nnz} nonzeros, {}", p.kernel())?;
        parts.push(crate::json::SplitPart {
            row_start: r0,
            row_end: r1,
            nnz: nnz as u64,
            kernel: p.kernel().to_string(),
        });
    }
    let b = demo::random_b(a.cols(), args.n, args.seed);
    let mut c = vec![0f32; a.rows() * args.n];
    let first = std::time::Instant::now();
    tracing::info_span!("first_product", n = args.n)
        .in_scope(|| split.spmm(1.0, &b, 0.0, &mut c))?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    let error = demo::error_vs_reference(a, &b, args.n, &c);
    let mut samples = Vec::new();
    for i in 0..args.iters.max(1) + 3 {
        let t = std::time::Instant::now();
        split.run(1.0)?;
        split.synchronize()?;
        if i >= 3 {
            samples.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    samples.sort_by(f64::total_cmp);
    let ms = samples[samples.len() / 2];
    let m = demo::Measured {
        ms,
        gflops: 2.0 * a.nnz() as f64 * args.n as f64 / (ms * 1e-3) / 1e9,
        error,
        device_time: false,
        first_ms: Some(first_ms),
    };
    let bound = split.parts().map(|p| p.error_bound()).fold(0.0, f64::max);
    let label = "split over the devices";
    demo::print_first(&m)?;
    demo::print_measured(label, args.n, bound, &m)?;
    let split = crate::json::Split {
        devices: devices.to_string(),
        transport: split.transport().to_string(),
        prepare_ms: prep_ms,
        parts,
    };
    Ok((
        split,
        first_ms,
        crate::json::Product::of(label, args.n, bound, &m),
    ))
}

/// Parses `--balance`: auto, on, off, packed:K (K ≥ 1), `cached:K[:R]` (K windows per thread block,
/// a B-row cache of R rows per warp, a power of two from 8 to 1024, default 128) or nnz:K (K ≥ 1
/// nonzeros per warp, CSR kernel).
fn parse_balance(s: &str) -> Result<Balance, String> {
    let expected = || {
        format!(
            "expected auto, on, off, packed:K, cached:K[:R] (K ≥ 1 windows per thread block, \
             R = 8, 16, …, 1024 cached B rows) or nnz:K (K ≥ 1 nonzeros per warp, --kernel csr), \
             got `{s}`"
        )
    };
    match s {
        "auto" => return Ok(Balance::Auto),
        "on" => return Ok(Balance::On),
        "off" => return Ok(Balance::Off),
        _ => {}
    }
    let windows = |k: &str| k.parse::<u32>().ok().filter(|&k| k >= 1);
    if let Some(k) = s.strip_prefix("packed:") {
        return windows(k).map(Balance::Packed).ok_or_else(expected);
    }
    if let Some(k) = s.strip_prefix("nnz:") {
        return windows(k).map(Balance::NnzPerWarp).ok_or_else(expected);
    }
    if let Some(rest) = s.strip_prefix("cached:") {
        let (k, r) = rest.split_once(':').unwrap_or((rest, "128"));
        let rows = r
            .parse::<u32>()
            .ok()
            .filter(|r| r.is_power_of_two() && (8..=1024).contains(r));
        if let (Some(windows), Some(cache_rows)) = (windows(k), rows) {
            return Ok(Balance::PackedCached {
                windows,
                cache_rows,
            });
        }
    }
    Err(expected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_name_asks_for_its_own_kernel() {
        let names = KernelRequest::names();
        let requests: Vec<KernelRequest> = names.iter().map(|n| kernel_request(n)).collect();
        assert_eq!(requests[0], KernelRequest::Auto);
        for (i, r) in requests.iter().enumerate().skip(1) {
            assert_ne!(*r, KernelRequest::Auto, "{}", names[i]);
            assert!(!requests[..i].contains(r), "{} repeats a kernel", names[i]);
        }
        assert_eq!(
            kernel_request("staged64"),
            KernelRequest::Staged(tcsparse::StagedSlice::S64)
        );
        assert_eq!(
            kernel_request("tc16d"),
            KernelRequest::RowTile(tcsparse::RowTileKernel::TC16D)
        );
    }

    #[test]
    fn balance_values_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(parse_balance("auto"), Ok(Balance::Auto));
        assert_eq!(parse_balance("on"), Ok(Balance::On));
        assert_eq!(parse_balance("off"), Ok(Balance::Off));
        assert_eq!(parse_balance("packed:16"), Ok(Balance::Packed(16)));
        assert_eq!(parse_balance("nnz:64"), Ok(Balance::NnzPerWarp(64)));
        assert_eq!(
            parse_balance("cached:64"),
            Ok(Balance::PackedCached {
                windows: 64,
                cache_rows: 128
            })
        );
        assert_eq!(
            parse_balance("cached:16:256"),
            Ok(Balance::PackedCached {
                windows: 16,
                cache_rows: 256
            })
        );
        for bad in [
            "packed:0",
            "packed:",
            "packed:x",
            "fast",
            "cached:0",
            "cached:4:100",
            "cached:4:2048",
            "cached:4:4",
            "cached:",
            "nnz:0",
            "nnz:-3",
        ] {
            let e = parse_balance(bad).unwrap_err();
            assert!(
                e.contains("packed:K")
                    && e.contains("cached:K[:R]")
                    && e.contains("nnz:K")
                    && e.contains(bad),
                "{e}"
            );
        }
    }
}
