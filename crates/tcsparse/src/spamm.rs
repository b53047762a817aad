//! SpAMM room of the facade: `spamm(a, b, &SpammOptions) -> (C, SpammReport)`, the approximate
//! dense product of decay matrices (cuSpAMM) on the GPU when there is one, else on the CPU
//! (`formats::normmap::spamm_cpu`, small sizes).
//!
//! A tile product A(i,k)·B(k,j) of 32 × 32 tiles is computed iff ‖A(i,k)‖F·‖B(k,j)‖F ≥ τ. τ is
//! given, or chosen for a valid ratio, or for a bound on the relative error ‖E‖F/‖C‖F (from the
//! skipped norm products: ‖E‖F ≤ sqrt(Σ_ij (Σ_skipped ‖A_ik‖‖B_kj‖)²), divided by ‖C̃‖F − that).

use tcsparse_formats::normmap::{NormMap, spamm_cpu};
use tcsparse_gpu::Gpu;
use tcsparse_gpu::multi::DeviceGroup;
pub use tcsparse_gpu::multi::DeviceSet;
use tcsparse_gpu::spamm::{
    SpammBlock, SpammConfig, SpammKernel, SpammOperands, SpammSchedule, TILE, choose_tau,
    rel_bound, spamm_group,
};
use tcsparse_planner::spamm::skipped_bound;

use crate::Error;
pub use tcsparse_gpu::spamm::{SpammPrecision, TauTarget};

/// A dense row-major host matrix.
#[derive(Clone, Copy, Debug)]
pub struct DenseRef<'a> {
    /// `rows · cols` values, row-major.
    pub data: &'a [f32],
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
}

/// Where [`spamm`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpammDevice {
    /// The GPU(s) when there is one, else the CPU.
    #[default]
    Auto,
    /// The CPU reference path (f32 accumulation; precision is ignored).
    Cpu,
    /// The GPU(s); an error without one.
    Gpu,
}

/// Options of [`spamm`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpammOptions {
    /// How τ is chosen.
    pub target: TauTarget,
    /// Arithmetic of the tile products on the GPU.
    pub precision: SpammPrecision,
    /// GPU C block (64 × 64 or 128 × 128 made of 32 × 32 norm tiles).
    pub block: SpammBlock,
    /// Strided balance parameter s (≥ 1).
    pub s: usize,
    /// GPUs to split C's rows over (default: device 0 alone). Two or more: C's rows are split
    /// by valid tile products and computed on every device at once, B broadcast through NCCL
    /// ([`tcsparse_gpu::multi::DeviceGroup`]). Every listed device must be present.
    pub devices: DeviceSet,
    /// Where to run.
    pub device: SpammDevice,
    /// Also compute the exact error ‖C − C̃‖F/‖C‖F against an f64 product (O(m·n·k) on the host:
    /// small sizes, or use `measure_rows` to sample).
    pub measure_error: bool,
    /// With `measure_error`: at most this many evenly spaced rows are checked (0 = all).
    pub measure_rows: usize,
}

impl Default for SpammOptions {
    fn default() -> Self {
        Self {
            target: TauTarget::RelError(1e-5),
            precision: SpammPrecision::Tf32x3,
            block: SpammBlock::B64,
            s: 1,
            devices: DeviceSet::default(),
            device: SpammDevice::Auto,
            measure_error: false,
            measure_rows: 0,
        }
    }
}

/// What [`spamm`] did.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SpammReport {
    /// `gpu` or `cpu`.
    pub backend: &'static str,
    /// Precision name (`cpu-f32` on the CPU).
    pub precision: String,
    /// Threshold used.
    pub tau: f32,
    /// Computed tile products / all.
    pub valid_ratio: f64,
    /// Bound on ‖E‖F (absolute).
    pub abs_bound: f64,
    /// Bound on ‖E‖F/‖C‖F (skipped products only; the arithmetic's own rounding comes on top).
    pub rel_bound: f64,
    /// Measured ‖C − C̃‖F/‖C‖F (f64 reference) when asked.
    pub measured_error: Option<f64>,
    /// Products run to meet an error target.
    pub attempts: u32,
    /// C rows per GPU.
    pub row_ranges: Vec<(usize, usize)>,
    /// How B reached the devices: `single`, `nccl`, or `host-staged (why)`; `cpu` on the CPU.
    pub transport: String,
}

fn check(a: &DenseRef<'_>, b: &DenseRef<'_>) -> Result<(usize, usize, usize), Error> {
    if a.cols != b.rows {
        return Err(Error::InvalidArgs(format!(
            "A is {}×{}, B is {}×{}: inner dimensions differ",
            a.rows, a.cols, b.rows, b.cols
        )));
    }
    let need = |x: &DenseRef<'_>| x.rows.checked_mul(x.cols);
    match (need(a), need(b)) {
        (Some(na), Some(nb)) if a.data.len() == na && b.data.len() == nb => {}
        _ => {
            return Err(Error::InvalidArgs(format!(
                "A needs {}×{} values (has {}), B {}×{} (has {})",
                a.rows,
                a.cols,
                a.data.len(),
                b.rows,
                b.cols,
                b.data.len()
            )));
        }
    }
    Ok((a.rows, b.cols, a.cols))
}

/// ‖C − C̃‖F/‖C‖F on `rows` (f64 reference).
pub fn measured_error(a: &[f32], b: &[f32], c: &[f32], n: usize, k: usize, rows: &[usize]) -> f64 {
    use rayon::prelude::*;
    let (e, r) = rows
        .par_iter()
        .map(|&i| {
            let mut acc = vec![0f64; n];
            for t in 0..k {
                let av = a[i * k + t] as f64;
                if av != 0.0 {
                    for (x, &bv) in acc.iter_mut().zip(&b[t * n..(t + 1) * n]) {
                        *x += av * bv as f64;
                    }
                }
            }
            acc.iter()
                .zip(&c[i * n..(i + 1) * n])
                .fold((0f64, 0f64), |(e, r), (&x, &y)| {
                    (e + (y as f64 - x).powi(2), r + x * x)
                })
        })
        .reduce(|| (0.0, 0.0), |p, q| (p.0 + q.0, p.1 + q.1));
    if r == 0.0 { e.sqrt() } else { (e / r).sqrt() }
}

fn sample_rows(m: usize, max: usize) -> Vec<usize> {
    if max == 0 || max >= m {
        (0..m).collect()
    } else {
        (0..max).map(|i| i * m / max + (m / max) / 2).collect()
    }
}

/// C ≈ A·B (SpAMM). Returns C (`a.rows × b.cols`, row-major) and the report.
pub fn spamm(
    a: DenseRef<'_>,
    b: DenseRef<'_>,
    opts: &SpammOptions,
) -> Result<(Vec<f32>, SpammReport), Error> {
    let (m, n, k) = check(&a, &b)?;
    let group = match opts.device {
        SpammDevice::Cpu => None,
        SpammDevice::Auto if Gpu::device_count() == 0 => None,
        SpammDevice::Auto | SpammDevice::Gpu => Some(DeviceGroup::open(opts.devices)?),
    };
    let (c, mut report) = if let Some(group) = group {
        let cfg = SpammConfig {
            precision: opts.precision,
            block: opts.block,
            s: opts.s.max(1),
            target: opts.target,
        };
        let (c, run) = spamm_group(&group, a.data, b.data, m, n, k, &cfg)?;
        (
            c,
            SpammReport {
                backend: "gpu",
                precision: opts.precision.name().into(),
                tau: run.tau,
                valid_ratio: run.valid_ratio,
                abs_bound: run.abs_bound,
                rel_bound: run.rel_bound,
                measured_error: None,
                attempts: run.attempts,
                row_ranges: run.row_ranges,
                transport: group.transport().to_string(),
            },
        )
    } else {
        spamm_on_cpu(a, b, m, n, k, opts)?
    };
    if opts.measure_error {
        let rows = sample_rows(m, opts.measure_rows);
        report.measured_error = Some(measured_error(a.data, b.data, &c, n, k, &rows));
    }
    Ok((c, report))
}

fn spamm_on_cpu(
    a: DenseRef<'_>,
    b: DenseRef<'_>,
    m: usize,
    n: usize,
    k: usize,
    opts: &SpammOptions,
) -> Result<(Vec<f32>, SpammReport), Error> {
    let fe = |e: tcsparse_formats::tcf::FormatError| Error::InvalidArgs(e.to_string());
    let na = NormMap::from_dense(a.data, m, k, TILE).map_err(fe)?;
    let nb = NormMap::from_dense(b.data, k, n, TILE).map_err(fe)?;
    let tiles = (m.div_ceil(TILE), k.div_ceil(TILE), n.div_ceil(TILE));
    if tiles.0 == 0 || tiles.1 == 0 || tiles.2 == 0 {
        return Ok((
            vec![0.0; m * n],
            SpammReport {
                backend: "cpu",
                precision: "cpu-f32".into(),
                tau: 0.0,
                valid_ratio: 0.0,
                abs_bound: 0.0,
                rel_bound: 0.0,
                measured_error: None,
                attempts: 0,
                row_ranges: vec![(0, m)],
                transport: "cpu".into(),
            },
        ));
    }
    let pe = |e: tcsparse_planner::PlanError| Error::InvalidArgs(e.to_string());
    let mut c_norm = match opts.target {
        TauTarget::RelError(_) => skipped_bound(
            na.norms(),
            nb.norms(),
            tiles.0,
            tiles.1,
            tiles.2,
            f32::INFINITY,
        )
        .map_err(pe)?,
        _ => 0.0,
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        let tau = choose_tau(na.norms(), nb.norms(), tiles, opts.target, c_norm)?;
        let (c, ratio) = spamm_cpu(a.data, &na, b.data, &nb, m, k, n, TILE, tau).map_err(fe)?;
        let abs =
            skipped_bound(na.norms(), nb.norms(), tiles.0, tiles.1, tiles.2, tau).map_err(pe)?;
        let norm = c.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
        let rel = rel_bound(abs, norm);
        let report = SpammReport {
            backend: "cpu",
            precision: "cpu-f32".into(),
            tau,
            valid_ratio: ratio,
            abs_bound: abs,
            rel_bound: rel,
            measured_error: None,
            attempts,
            row_ranges: vec![(0, m)],
            transport: "cpu".into(),
        };
        match opts.target {
            TauTarget::RelError(r) if rel > r && attempts < 4 && tau > 0.0 && norm > 0.0 => {
                c_norm = if attempts > 1 {
                    norm.min(c_norm) * 0.5
                } else {
                    norm.min(c_norm)
                };
            }
            _ => return Ok((c, report)),
        }
    }
}

/// SpAMM of operands already on one device: `C = Ã·B` into `c` (`m × n`; β = 0, C not read).
/// τ from `opts.target` on the device's norm maps (an error target uses the norm-product
/// estimate of ‖C‖F, without a retry; the report's bound uses the result's norm only when
/// `measure_error` is set, else the estimate).
pub fn spamm_device(
    ops: &SpammOperands,
    c: &mut cudarc::driver::CudaSlice<f32>,
    opts: &SpammOptions,
) -> Result<SpammReport, Error> {
    let (m, n, _) = ops.shape();
    let tiles = ops.tiles();
    let (na, nb) = ops.norms_host()?;
    let pe = |e: tcsparse_planner::PlanError| Error::InvalidArgs(e.to_string());
    if tiles.0 == 0 || tiles.1 == 0 || tiles.2 == 0 {
        return Err(Error::InvalidArgs("empty operand".into()));
    }
    let c_norm = skipped_bound(&na, &nb, tiles.0, tiles.1, tiles.2, f32::INFINITY).map_err(pe)?;
    let tau = choose_tau(&na, &nb, tiles, opts.target, c_norm)?;
    let g = ops.gpu();
    let kern = SpammKernel::new(g, m, n, ops.precision(), opts.block, opts.s.max(1))?;
    let sched = SpammSchedule::new(g, &na, &nb, tiles, opts.block, tau)?;
    let mut st = g.alloc_zeros::<u64>(1)?;
    kern.run(ops, &sched, 1.0, 0.0, c, Some(&mut st))?;
    let valid = g.download(&st)?[0];
    let abs = skipped_bound(&na, &nb, tiles.0, tiles.1, tiles.2, tau).map_err(pe)?;
    let norm = if opts.measure_error {
        let h = g.download(c)?;
        h[..m * n]
            .iter()
            .map(|&x| x as f64 * x as f64)
            .sum::<f64>()
            .sqrt()
    } else {
        c_norm
    };
    Ok(SpammReport {
        backend: "gpu",
        precision: ops.precision().name().into(),
        tau,
        valid_ratio: valid as f64 / (tiles.0 * tiles.1 * tiles.2) as f64,
        abs_bound: abs,
        rel_bound: rel_bound(abs, norm),
        measured_error: None,
        attempts: 1,
        row_ranges: vec![(0, m)],
        transport: "single".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp_decay(n: usize, rate: f64) -> Vec<f32> {
        tcsparse_formats::generate::exponential_decay_dense(n, rate)
    }

    fn cpu(target: TauTarget) -> SpammOptions {
        SpammOptions {
            target,
            device: SpammDevice::Cpu,
            measure_error: true,
            ..Default::default()
        }
    }

    #[test]
    fn cpu_error_target_is_met_and_measured_error_within_bound() {
        let n = 200;
        let a = exp_decay(n, 0.08);
        let d = DenseRef {
            data: &a,
            rows: n,
            cols: n,
        };
        for target in [1e-3, 1e-5] {
            let (_, r) = spamm(d, d, &cpu(TauTarget::RelError(target))).unwrap();
            assert!(r.rel_bound <= target, "{r:?}");
            let e = r.measured_error.unwrap();
            // Skipped products within the bound, plus f32 rounding.
            assert!(e <= r.rel_bound + 1e-6, "{e} > {r:?}");
            assert!(r.valid_ratio < 1.0, "{r:?}");
        }
    }

    #[test]
    fn cpu_valid_ratio_target() {
        let n = 256;
        let a = exp_decay(n, 0.05);
        let d = DenseRef {
            data: &a,
            rows: n,
            cols: n,
        };
        let (_, r) = spamm(d, d, &cpu(TauTarget::ValidRatio(0.2))).unwrap();
        // The ratio is a step function of τ (a Toeplitz matrix has many equal tile products):
        // the search's closest step, and the product computes exactly that share.
        let na = NormMap::from_dense(&a, n, n, TILE).unwrap();
        let t = n / TILE;
        let want =
            tcsparse_planner::spamm::tau_search(na.norms(), na.norms(), t, t, t, 0.2).unwrap();
        assert_eq!(r.tau, want.tau);
        assert!(
            (r.valid_ratio - want.valid_ratio).abs() < 1e-12,
            "{r:?} vs {want:?}"
        );
        assert!((r.valid_ratio - 0.2).abs() < 0.05, "{r:?}");
        let e = r.measured_error.unwrap();
        assert!(e <= r.rel_bound + 1e-6, "{e} > {r:?}");
    }

    #[test]
    fn shape_errors() {
        let a = vec![0f32; 6];
        let x = DenseRef {
            data: &a,
            rows: 2,
            cols: 3,
        };
        assert!(spamm(x, x, &cpu(TauTarget::Tau(0.0))).is_err());
        let y = DenseRef {
            data: &a,
            rows: 3,
            cols: 3,
        };
        assert!(spamm(x, y, &cpu(TauTarget::Tau(0.0))).is_err());
    }
}
