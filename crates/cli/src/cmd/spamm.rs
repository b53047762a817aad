//! `tcsparse spamm`: approximate dense product C ≈ A·B of decay matrices (cuSpAMM) on the GPU, or
//! on the CPU reference path (small sizes) without one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use tcsparse::formats::Limits;
use tcsparse::formats::generate::GeneratorSpec;
use tcsparse::gpu::spamm::SpammBlock;
use tcsparse::spamm::{
    DenseRef, DeviceSet, SpammDevice, SpammOptions, SpammPrecision, TauTarget, spamm,
};

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
    /// Bound on ‖E‖F/‖C‖F to choose τ for.
    #[arg(long, conflicts_with_all = ["valid_ratio", "tau"])]
    pub target_error: Option<f64>,
    /// Share of tile products to compute (cuSpAMM's valid ratio).
    #[arg(long, conflicts_with = "tau")]
    pub valid_ratio: Option<f64>,
    /// This τ.
    #[arg(long)]
    pub tau: Option<f32>,
    /// Arithmetic on the GPU: f32, tf32, 3xtf32, f16.
    #[arg(long, default_value = "3xtf32")]
    pub precision: String,
    /// C block edge on the GPU: 64 or 128.
    #[arg(long, default_value_t = 64)]
    pub block: usize,
    /// Strided balance parameter s.
    #[arg(long, default_value_t = 1)]
    pub s: usize,
    /// Split C's rows over the first N GPUs (same as --devices 0,…,N-1).
    #[arg(long, conflicts_with_all = ["devices", "cpu"])]
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
}

/// A dense row-major f32 matrix from a .npy file (float32 or float64, 2-D, C order).
pub fn read_npy(path: &Path) -> anyhow::Result<(Vec<f32>, usize, usize)> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
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
    let precision = SpammPrecision::parse(&args.precision).with_context(|| {
        format!(
            "unknown precision `{}` (f32, tf32, 3xtf32, f16)",
            args.precision
        )
    })?;
    let block = match args.block {
        64 => SpammBlock::B64,
        128 => SpammBlock::B128,
        b => bail!("--block must be 64 or 128, not {b}"),
    };
    let target = match (args.tau, args.valid_ratio, args.target_error) {
        (Some(t), _, _) => TauTarget::Tau(t),
        (_, Some(r), _) => TauTarget::ValidRatio(r),
        (_, _, e) => TauTarget::RelError(e.unwrap_or(1e-5)),
    };
    let start = Instant::now();
    let (a, b, m, k, n, what) = match (&args.generator, &args.a) {
        (Some(spec), _) => {
            let spec: GeneratorSpec = spec.parse()?;
            // A and B (a copy of A) each get half of the memory budget, checked before either
            // is allocated.
            let half = Limits::new((Limits::global().max_bytes() / 2).max(1));
            let (data, n) = match spec {
                GeneratorSpec::Algebraic { .. } | GeneratorSpec::Exponential { .. } => {
                    spec.build_dense(&half)?
                }
                other => bail!("--gen takes algebraic: or exponential:, not {other}"),
            };
            (data.clone(), data, n, n, n, spec.to_string())
        }
        (None, Some(pa)) => {
            let (a, m, k) = read_npy(pa)?;
            let (b, kb, n) = match &args.b {
                Some(pb) => read_npy(pb)?,
                None => (a.clone(), m, k),
            };
            if kb != k {
                bail!("A is {m}×{k} but B is {kb}×{n}");
            }
            (a, b, m, k, n, pa.display().to_string())
        }
        (None, None) => bail!("give A.npy [B.npy] or --gen SPEC"),
    };
    let input_s = start.elapsed().as_secs_f64();
    let opts = SpammOptions {
        target,
        precision,
        block,
        s: args.s,
        devices: match (&args.devices, args.gpus) {
            (Some(list), _) => DeviceSet::parse(list)?,
            (None, Some(0)) => bail!("--gpus 0: give at least one GPU (or --cpu)"),
            (None, Some(g)) => DeviceSet::first(g),
            (None, None) => DeviceSet::default(),
        },
        device: if args.cpu {
            SpammDevice::Cpu
        } else if args.devices.is_some() || args.gpus.is_some() {
            // An explicit device list asks for GPUs: an error without them, not the CPU path.
            SpammDevice::Gpu
        } else {
            SpammDevice::Auto
        },
        measure_error: args.check_rows > 0,
        measure_rows: args.check_rows,
    };
    let t = Instant::now();
    let (_, r) = spamm(
        DenseRef {
            data: &a,
            rows: m,
            cols: k,
        },
        DenseRef {
            data: &b,
            rows: k,
            cols: n,
        },
        &opts,
    )?;
    let secs = t.elapsed().as_secs_f64();
    println!("spamm {what}: {m}×{k} · {k}×{n}");
    println!("backend {} ({}), target {target:?}", r.backend, r.precision);
    let rounding = precision.rounding_bound();
    println!(
        "tau {:.4e}, valid ratio {:.4}%, bound ‖E‖F/‖C‖F ≤ {:.3e} (skipped products; attempts {}) + {rounding:.0e} ({} rounding)",
        r.tau,
        100.0 * r.valid_ratio,
        r.rel_bound,
        r.attempts,
        r.precision
    );
    if let TauTarget::RelError(t) = target
        && rounding > t
    {
        println!(
            "note      {} rounding alone may exceed the target error {t:.0e}: use --precision f32 or 3xtf32 for that accuracy",
            r.precision
        );
    }
    if r.row_ranges.len() > 1 {
        let parts: Vec<String> = r
            .row_ranges
            .iter()
            .map(|(a, b)| format!("{a}..{b}"))
            .collect();
        println!("devices   rows {} (B: {})", parts.join(", "), r.transport);
    }
    if let Some(e) = r.measured_error {
        println!(
            "measured ‖E‖F/‖C‖F {e:.3e} ({} rows)",
            args.check_rows.min(m)
        );
    }
    println!(
        "input {:.3} ms, spamm (with uploads and τ search) {:.3} ms",
        input_s * 1e3,
        secs * 1e3
    );
    Ok(())
}
