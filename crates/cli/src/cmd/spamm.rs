//! `tcsparse spamm`: approximate dense product C ≈ A·B of decay matrices (cuSpAMM) on the GPU, or
//! on the CPU reference path (small sizes) without one.

use crate::out::outln;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use tcsparse::formats::Limits;
use tcsparse::formats::generate::GeneratorSpec;
use tcsparse::gpu::spamm::{SpammBlock, SpammPrecision};
use tcsparse::spamm::{DenseRef, DeviceSet, SpammOptions, TauTarget};
use tcsparse::{Backend, Engine, Precision};

/// Arguments of `tcsparse spamm`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "A tile product A(i,k)·B(k,j) of 32×32 tiles is computed iff ‖A(i,k)‖F·‖B(k,j)‖F ≥ τ. \
τ comes from --tau, --valid-ratio (share of tile products computed) or --target-error (bound on \
‖E‖F/‖C‖F from the skipped norm products; default 1e-5).\n\n\
Inputs: --gen algebraic:n=N | exponential:n=N,rate=R (A = B = that matrix), or A.npy [B.npy] \
(2-D float32/float64 C-order arrays; B defaults to A).\n\n\
Example: tcsparse spamm --gen exponential:n=16384,rate=0.1 --target-error 1e-5 --precision 3xtf32"
)]
pub struct Args {
    /// A (.npy); B defaults to A.
    #[arg(value_name = "A.npy")]
    pub a: Option<PathBuf>,
    /// B (.npy).
    #[arg(value_name = "B.npy")]
    pub b: Option<PathBuf>,
    /// Generated decay matrix used as A and B (algebraic:n=N or exponential:n=N,rate=R).
    #[arg(long = "gen", value_name = "SPEC", conflicts_with = "a")]
    pub generator: Option<String>,
    /// Bound on ‖E‖F/‖C‖F to choose τ for, in (0, 1].
    #[arg(long, conflicts_with_all = ["valid_ratio", "tau"], value_parser = crate::args::rel_error)]
    pub target_error: Option<f64>,
    /// Share of tile products to compute (cuSpAMM's valid ratio), in (0, 1].
    #[arg(long, conflicts_with = "tau", value_parser = crate::args::ratio)]
    pub valid_ratio: Option<f64>,
    /// This τ (finite, ≥ 0; 0 computes every tile product).
    #[arg(long, value_parser = crate::args::tau)]
    pub tau: Option<f32>,
    /// Arithmetic on the GPU: f32, tf32, 3xtf32, f16.
    #[arg(long, default_value = "3xtf32", value_parser = ["f32", "tf32", "3xtf32", "f16"])]
    pub precision: String,
    /// C block edge on the GPU: 64 or 128.
    #[arg(long, default_value = "64", value_parser = ["64", "128"])]
    pub block: String,
    /// Strided balance parameter s (1 to 1024).
    #[arg(long, default_value_t = 1, value_parser = crate::args::stride)]
    pub s: usize,
    /// Split C's rows over the first N GPUs (same as --devices 0,…,N-1; hidden, kept for old
    /// scripts).
    #[arg(long, hide = true, conflicts_with_all = ["devices", "cpu"], value_parser = crate::args::gpu_count)]
    pub gpus: Option<usize>,
    /// Split C's rows over these GPUs, e.g. 0,1,2,3 (B broadcast through NCCL). Default: 0.
    #[arg(long, conflicts_with = "cpu")]
    pub devices: Option<String>,
    /// Run on the CPU reference path even with a GPU.
    #[arg(long)]
    pub cpu: bool,
    /// Measure ‖E‖F/‖C‖F against an f64 product on this many sampled rows (0: skip).
    #[arg(long, default_value_t = 64)]
    pub check_rows: usize,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
    /// One process per GPU, started once per rank by a launcher (as `spmm --distributed`); each
    /// rank computes a slice of C's block rows, rank 0 prints the result.
    #[arg(long, conflicts_with_all = ["cpu", "devices", "gpus", "json"])]
    pub distributed: bool,
}

/// A dense row-major f32 matrix from a .npy file (float32 or float64, 2-D, C order).
pub fn read_npy(path: &Path) -> anyhow::Result<(Vec<f32>, usize, usize)> {
    crate::input::check_regular(path)?;
    let len = std::fs::metadata(path)
        .with_context(|| path.display().to_string())?
        .len();
    tcsparse::formats::Limits::global().check(|| format!("reading {}", path.display()), len)?;
    let b = std::fs::read(path).with_context(|| path.display().to_string())?;
    if b.get(..6) != Some(b"\x93NUMPY") {
        bail!("{}: not a .npy file", path.display());
    }
    let major = *b.get(6).context("truncated .npy header")?;
    let (hlen, start) = match major {
        1 => (
            u16::from_le_bytes([
                *b.get(8).context("truncated")?,
                *b.get(9).context("truncated")?,
            ]) as usize,
            10,
        ),
        _ => {
            let x = b.get(8..12).context("truncated .npy header")?;
            (u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize, 12)
        }
    };
    let header = b
        .get(start..start + hlen)
        .context("truncated .npy header")?;
    let header = String::from_utf8_lossy(header);
    let body = &b[start + hlen..];
    let size = if header.contains("'<f4'") || header.contains("\"<f4\"") {
        4
    } else if header.contains("'<f8'") || header.contains("\"<f8\"") {
        8
    } else {
        bail!(
            "{}: only little-endian float32/float64 arrays",
            path.display()
        );
    };
    if header.contains("'fortran_order': True") {
        bail!("{}: Fortran-order arrays are not supported", path.display());
    }
    let shape = header
        .split("'shape':")
        .nth(1)
        .and_then(|s| s.split('(').nth(1))
        .and_then(|s| s.split(')').next())
        .context("no shape in .npy header")?;
    let dims: Vec<usize> = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<_, _>>()
        .context("bad shape in .npy header")?;
    let [rows, cols] = dims[..] else {
        bail!("{}: need a 2-D array, shape ({shape})", path.display());
    };
    let count = rows.checked_mul(cols).context("shape overflows")?;
    if body.len() < count.checked_mul(size).context("shape overflows")? {
        bail!("{}: data shorter than its shape", path.display());
    }
    let data = if size == 4 {
        body.chunks_exact(4)
            .take(count)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else {
        body.chunks_exact(8)
            .take(count)
            .map(|c| {
                let mut x = [0u8; 8];
                x.copy_from_slice(c);
                f64::from_le_bytes(x) as f32
            })
            .collect()
    };
    Ok((data, rows, cols))
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::out::json_only(args.json);
    let precision = SpammPrecision::parse(&args.precision).with_context(|| {
        format!(
            "unknown precision `{}` (f32, tf32, 3xtf32, f16)",
            args.precision
        )
    })?;
    let block = match args.block.as_str() {
        "128" => SpammBlock::B128,
        _ => SpammBlock::B64,
    };
    let target = match (args.tau, args.valid_ratio, args.target_error) {
        (Some(t), _, _) => TauTarget::Tau(t),
        (_, Some(r), _) => TauTarget::ValidRatio(r),
        (_, _, e) => TauTarget::RelError(e.unwrap_or(1e-5)),
    };
    let start = Instant::now();
    // `b` is None when B is A (one copy in memory).
    let (a, b, m, k, n, what) = match (&args.generator, &args.a) {
        (Some(spec), _) => {
            let spec: GeneratorSpec = spec.parse()?;
            let n = match spec {
                GeneratorSpec::Algebraic { n } | GeneratorSpec::Exponential { n, .. } => n,
                other => bail!("--gen takes algebraic: or exponential:, not {other}"),
            };
            // A (B is A, not a copy) and C under the memory budget before either is allocated;
            // the generator checks A's bytes again itself.
            super::checks::check_dense(&format!("--gen {spec}"), Some(n), n, n)?;
            let (data, n) =
                tracing::info_span!("generate").in_scope(|| spec.build_dense(&Limits::global()))?;
            (data, None, n, n, n, spec.to_string())
        }
        (None, Some(pa)) => {
            let (a, m, k) = read_npy(pa)?;
            let (b, kb, n) = match &args.b {
                Some(pb) => {
                    let (b, kb, n) = read_npy(pb)?;
                    (Some(b), kb, n)
                }
                None => (None, m, k),
            };
            if kb != k {
                bail!("A is {m}×{k} but B is {kb}×{n}");
            }
            let what = pa.display().to_string();
            super::checks::check_dense(&what, None, m, n)?;
            (a, b, m, k, n, what)
        }
        (None, None) => bail!("give A.npy [B.npy] or --gen SPEC"),
    };
    let b = b.as_deref().unwrap_or(&a);
    let input_s = start.elapsed().as_secs_f64();
    if args.distributed {
        let cfg = tcsparse::gpu::spamm::SpammConfig {
            precision,
            block,
            s: args.s,
            target,
        };
        return super::distributed::run_spamm(&a, b, (m, n, k), &cfg, &what, args.check_rows);
    }
    let explicit_devices = args.devices.is_some() || args.gpus.is_some();
    let opts = SpammOptions::builder()
        .target(target)
        .precision(Precision::parse(&args.precision)?)
        .block(block)
        .s(args.s)
        .devices(match (&args.devices, args.gpus) {
            (Some(list), _) => DeviceSet::parse(list)?,
            (None, Some(g)) => DeviceSet::first(g),
            (None, None) => DeviceSet::default(),
        })
        .measure_error(args.check_rows > 0, args.check_rows)
        .build();
    let engine = if args.cpu {
        Engine::cpu("--cpu")
    } else {
        Engine::new()
    };
    // An explicit device list asks for GPUs: an error without them, not the CPU path.
    if explicit_devices && engine.backend() == Backend::Cpu {
        bail!("--devices/--gpus asked for GPUs: {}", engine.message());
    }
    let t = Instant::now();
    let a_ref = DenseRef::new(&a, m, k);
    let b_ref = DenseRef::new(b, k, n);
    let mut prepared =
        tracing::info_span!("spamm_prepare").in_scope(|| engine.prepare_spamm(a_ref, &opts))?;
    let (_, r) = tracing::info_span!("spamm_product").in_scope(|| prepared.spamm(b_ref))?;
    let secs = t.elapsed().as_secs_f64();
    outln!("spamm {what}: {m}×{k} · {k}×{n}")?;
    outln!("backend {} ({}), target {target:?}", r.backend, r.precision)?;
    let rounding = precision.rounding_bound();
    outln!(
        "tau {:.4e}, valid ratio {:.4}%, bound ‖E‖F/‖C‖F ≤ {:.3e} (skipped products; attempts {}) + {rounding:.0e} ({} rounding)",
        r.tau,
        100.0 * r.valid_ratio,
        r.rel_bound,
        r.attempts,
        r.precision
    )?;
    if let TauTarget::RelError(t) = target
        && rounding > t
    {
        outln!(
            "note      {} rounding alone may exceed the target error {t:.0e}: use --precision f32 or 3xtf32 for that accuracy",
            r.precision
        )?;
    }
    if r.row_ranges.len() > 1 {
        let parts: Vec<String> = r
            .row_ranges
            .iter()
            .map(|(a, b)| format!("{a}..{b}"))
            .collect();
        outln!("devices   rows {} (B: {})", parts.join(", "), r.transport)?;
    }
    if let Some(e) = r.measured_error {
        outln!(
            "measured ‖E‖F/‖C‖F {e:.3e} ({} rows)",
            args.check_rows.min(m)
        )?;
    }
    outln!(
        "input {:.3} ms, spamm (with uploads and τ search) {:.3} ms",
        input_s * 1e3,
        secs * 1e3
    )?;
    if args.json {
        use crate::json::{kind, kind_with};
        let doc = crate::json::Spamm {
            input: what,
            m,
            k,
            n,
            backend: kind(r.backend),
            precision: kind(&args.precision),
            target: match target {
                TauTarget::Tau(t) => kind_with("tau", "value", f64::from(t)),
                TauTarget::ValidRatio(v) => kind_with("valid_ratio", "value", v),
                TauTarget::RelError(e) => kind_with("rel_error", "value", e),
            },
            tau: f64::from(r.tau),
            valid_ratio: r.valid_ratio,
            rel_bound: r.rel_bound,
            rounding_bound: rounding,
            attempts: r.attempts,
            row_ranges: r.row_ranges.clone(),
            transport: r.transport.clone(),
            measured_error: r.measured_error,
            measured_rows: if r.measured_error.is_some() {
                args.check_rows.min(m)
            } else {
                0
            },
            input_ms: input_s * 1e3,
            spamm_ms: secs * 1e3,
        };
        crate::json::emit("spamm", &doc)?;
    }
    Ok(())
}
