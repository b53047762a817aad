//! Running SpAMM products: on the CPU ([`spamm_cpu`]), on a device group with C's rows split
//! over its members ([`spamm_on_group`], [`SpammSplit`]) and on operands already on one device
//! ([`spamm_device`]). τ comes from the one retry loop of [`super::tune`].

use cudarc::driver::CudaSlice;
use tcsparse_formats::normmap::{NormMap, spamm_cpu as normmap_spamm_cpu};
use tcsparse_gpu::multi::DeviceGroup;
use tcsparse_gpu::spamm::{
    DeviceBound, SkippedBound, SpammConfig, SpammKernel, SpammOperands, SpammRun, SpammSchedule,
    TILE, choose_tau_with, rel_bound, spamm_block_rows,
};
use tcsparse_planner::spamm::NormMaps;

use super::tune::{Product, choose_and_run, plan_error};
use super::{DenseRef, SpammOptions, SpammReport, check};
use crate::Error;

fn layout_error(e: tcsparse_formats::tcf::FormatError) -> Error {
    Error::InvalidArgs(e.to_string())
}

/// The CPU reference path: norm maps and the norm-gated product in f32 on the host.
pub(crate) fn spamm_cpu(
    a: DenseRef<'_>,
    b: DenseRef<'_>,
    opts: &SpammOptions,
) -> Result<(Vec<f32>, SpammRun), Error> {
    let (m, n, k) = check(&a, &b)?;
    let na = NormMap::from_dense(a.data, m, k, TILE).map_err(layout_error)?;
    let nb = NormMap::from_dense(b.data, k, n, TILE).map_err(layout_error)?;
    let tiles = (m.div_ceil(TILE), k.div_ceil(TILE), n.div_ceil(TILE));
    if tiles.0 == 0 || tiles.1 == 0 || tiles.2 == 0 {
        return Ok((vec![0.0; m * n], SpammRun::empty(m)));
    }
    let total = (tiles.0 * tiles.1 * tiles.2) as f64;
    let maps = NormMaps::new(na.norms(), nb.norms(), tiles).map_err(plan_error)?;
    let chosen = choose_and_run(&maps, &mut SkippedBound::host(), opts.target, |tau| {
        let (c, ratio) = normmap_spamm_cpu(a.data, &na, b.data, &nb, m, k, n, TILE, tau)
            .map_err(layout_error)?;
        Ok(Product {
            c,
            valid: (ratio * total).round() as u64,
        })
    })?;
    Ok(chosen.into_run(vec![(0, m)]))
}

/// SpAMM of host matrices `a` (`m × k`) and `b` (`k × n`) on a device group: norms on the first
/// member, τ by `cfg.target` (the retry loop of `spamm/tune.rs`), C's rows split over the members
/// ([`tcsparse_planner::split::spamm_block_rows`], balancing valid products at the first τ) and
/// computed at the same time ([`SpammSplit`]); one member runs on the whole operands. Returns C
/// (`m × n`, row-major) and the run's report.
pub fn spamm_on_group(
    group: &DeviceGroup,
    a: DenseRef<'_>,
    b: DenseRef<'_>,
    cfg: &SpammConfig,
) -> Result<(Vec<f32>, SpammRun), Error> {
    let (c, run, _) = spamm_on_group_keeping_operands(group, a, b, cfg)?;
    Ok((c, run))
}

/// [`spamm_on_group`] that also returns the whole operands it placed on the first member (A, B
/// and their norm maps; `None` for an empty product), for the accuracy check to read B there
/// ([`super::measured_error_device`]). The split's buffers are freed before it returns.
pub(crate) fn spamm_on_group_keeping_operands(
    group: &DeviceGroup,
    a: DenseRef<'_>,
    b: DenseRef<'_>,
    cfg: &SpammConfig,
) -> Result<(Vec<f32>, SpammRun, Option<SpammOperands>), Error> {
    let Some(g0) = group.gpus().first() else {
        return Err(Error::InvalidArgs("no GPU handles".into()));
    };
    let (m, n, k) = check(&a, &b)?;
    let tiles = (m.div_ceil(TILE), k.div_ceil(TILE), n.div_ceil(TILE));
    if tiles.0 == 0 || tiles.1 == 0 || tiles.2 == 0 {
        return Ok((vec![0.0; m * n], SpammRun::empty(m), None));
    }
    let full = tracing::info_span!("spamm_upload", m, n, k)
        .in_scope(|| SpammOperands::upload(g0, a.data, b.data, m, n, k, cfg.precision))?;
    let (na, nb) = tracing::info_span!("spamm_norms").in_scope(|| full.norms_host())?;
    let mut split: Option<SpammSplit> = None;
    let mut part_rows = vec![(0, m)];
    let maps = NormMaps::new(&na, &nb, tiles).map_err(plan_error)?;
    let mut bound = SkippedBound::device(DeviceBound::new(&full)?);
    let chosen = choose_and_run(&maps, &mut bound, cfg.target, |tau| {
        let _attempt = tracing::info_span!("spamm_attempt", tau).entered();
        let mut c = vec![0f32; m * n];
        let valid = if group.len() == 1 {
            let kern = SpammKernel::new(g0, m, n, cfg.precision, cfg.block, cfg.s)?;
            let sched = SpammSchedule::new(g0, &na, &nb, tiles, cfg.block, tau)?;
            let mut dc = g0.alloc_zeros::<f32>(m * n)?;
            let mut st = g0.alloc_zeros::<u64>(1)?;
            kern.run(&full, &sched, 1.0, 0.0, &mut dc, Some(&mut st))?;
            g0.download_into(&dc, &mut c)?;
            let v = g0.download(&st)?[0];
            g0.synchronize()?;
            v
        } else {
            let s = match &mut split {
                Some(s) => s,
                None => {
                    let ranges = spamm_block_rows(&maps, tau, m, cfg.block, group.len())?;
                    part_rows = ranges.clone();
                    let _split =
                        tracing::info_span!("spamm_split", devices = group.len()).entered();
                    split.insert(SpammSplit::new(group, a, b, cfg, &ranges)?)
                }
            };
            tracing::info_span!("spamm_schedule").in_scope(|| s.schedule(tau))?;
            tracing::info_span!("spamm_run").in_scope(|| s.run())?;
            tracing::info_span!("spamm_gather").in_scope(|| s.gather(&mut c))?
        };
        Ok(Product { c, valid })
    })?;
    drop((split, bound));
    let (c, run) = chosen.into_run(part_rows);
    Ok((c, run, Some(full)))
}

/// One member's share of a split product: its C rows, operands, schedule and C block.
struct SplitPart {
    rows: (usize, usize),
    ops: SpammOperands,
    kern: SpammKernel,
    sched: Option<SpammSchedule>,
    c: CudaSlice<f32>,
    valid: CudaSlice<u64>,
}

/// SpAMM with C's rows split over the members of a [`DeviceGroup`], everything resident: member
/// d holds its A rows (uploaded from the host, every member at the same time), B (uploaded once
/// to member 0 and broadcast, NCCL where the group has it), its own norm maps, its schedule at τ
/// and its block of C. Launches on every member are queued before any is waited for, so the
/// members run at the same time.
pub struct SpammSplit {
    parts: Vec<SplitPart>,
    m: usize,
    n: usize,
}

impl std::fmt::Debug for SpammSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpammSplit")
            .field("row_ranges", &self.row_ranges())
            .finish()
    }
}

/// `x`, or one zero where it is empty (a device buffer is never empty).
fn nonempty(x: &[f32]) -> &[f32] {
    if x.is_empty() { &[0.0] } else { x }
}

impl SpammSplit {
    /// Places row-major host A (`m × k`) by `ranges` (one `(r0, r1)` per member, covering
    /// `0..m` in order) and B (`k × n`) on the group's members.
    pub fn new(
        group: &DeviceGroup,
        a: DenseRef<'_>,
        b: DenseRef<'_>,
        cfg: &SpammConfig,
        ranges: &[(usize, usize)],
    ) -> Result<Self, Error> {
        let (m, n, k) = check(&a, &b)?;
        let (a, b) = (a.data, b.data);
        if ranges.len() != group.len() {
            return Err(Error::InvalidArgs(format!(
                "{} row ranges for {} devices",
                ranges.len(),
                group.len()
            )));
        }
        let mut next = 0;
        for &(r0, r1) in ranges {
            if r0 != next || r1 < r0 || r1 > m {
                return Err(Error::InvalidArgs(format!(
                    "row ranges {ranges:?} do not cover 0..{m} in order"
                )));
            }
            next = r1;
        }
        if next != m {
            return Err(Error::InvalidArgs(format!(
                "row ranges {ranges:?} do not cover 0..{m}"
            )));
        }
        let root = &group.gpus()[0];
        // Every member's rows of A go up on a thread of their own, beside B's upload to the first
        // member and its broadcast: the copies to the devices run at the same time.
        let (a_devs, bs) = std::thread::scope(|s| {
            let uploads: Vec<_> = group
                .gpus()
                .iter()
                .zip(ranges)
                .map(|(g, &(r0, r1))| s.spawn(move || g.upload(nonempty(&a[r0 * k..r1 * k]))))
                .collect();
            let bs = root.upload(nonempty(b)).and_then(|b0| group.broadcast(b0));
            let a_devs: Result<Vec<_>, _> = uploads
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect();
            (a_devs, bs)
        });
        let (a_devs, bs) = (a_devs?, bs?);
        let mut parts = Vec::with_capacity(ranges.len());
        for (((g, &(r0, r1)), b_dev), a_dev) in group.gpus().iter().zip(ranges).zip(bs).zip(a_devs)
        {
            let pm = r1 - r0;
            let ops = SpammOperands::from_device(g, a_dev, b_dev, pm, n, k, cfg.precision)?;
            let kern = SpammKernel::new(g, pm, n, cfg.precision, cfg.block, cfg.s)?;
            parts.push(SplitPart {
                rows: (r0, r1),
                ops,
                kern,
                sched: None,
                c: g.alloc_zeros((pm * n).max(1))?,
                valid: g.alloc_zeros(1)?,
            });
        }
        Ok(Self { parts, m, n })
    }

    /// C rows per member.
    pub fn row_ranges(&self) -> Vec<(usize, usize)> {
        self.parts.iter().map(|p| p.rows).collect()
    }

    /// Builds every member's schedule at threshold τ (from its own norm maps).
    pub fn schedule(&mut self, tau: f32) -> Result<(), Error> {
        for p in &mut self.parts {
            let (pa, pb) = p.ops.norms_host()?;
            p.sched = Some(SpammSchedule::new(
                p.ops.gpu(),
                &pa,
                &pb,
                p.ops.tiles(),
                p.kern.block(),
                tau,
            )?);
        }
        Ok(())
    }

    /// Queues every member's product (β = 0) and returns without waiting.
    pub fn run(&mut self) -> Result<(), Error> {
        for p in &mut self.parts {
            let Some(sched) = &p.sched else {
                return Err(Error::InvalidArgs("SpammSplit::run before schedule".into()));
            };
            if p.rows.1 == p.rows.0 {
                continue;
            }
            p.ops
                .gpu()
                .stream()
                .memset_zeros(&mut p.valid)
                .map_err(tcsparse_gpu::GpuError::from)?;
            p.kern
                .run(&p.ops, sched, 1.0, 0.0, &mut p.c, Some(&mut p.valid))?;
        }
        Ok(())
    }

    /// Waits for every member.
    pub fn synchronize(&self) -> Result<(), Error> {
        for p in &self.parts {
            p.ops.gpu().synchronize()?;
        }
        Ok(())
    }

    /// Copies every member's C rows into `c` (`m × n`, row-major) and returns the computed tile
    /// products counted by the kernels.
    pub fn gather(&self, c: &mut [f32]) -> Result<u64, Error> {
        if c.len() != self.m * self.n {
            return Err(Error::InvalidArgs(format!(
                "C needs {} elements, has {}",
                self.m * self.n,
                c.len()
            )));
        }
        // Every member copies its rows on a thread of its own: the copies, and the first touch of
        // the host pages, run side by side.
        let mut blocks = Vec::with_capacity(self.parts.len());
        let mut rest = c;
        for p in &self.parts {
            let (r0, r1) = p.rows;
            let (block, tail) = rest.split_at_mut((r1 - r0) * self.n);
            blocks.push((p, block));
            rest = tail;
        }
        let valid = std::thread::scope(|s| {
            let copies: Vec<_> = blocks
                .into_iter()
                .filter(|(_, block)| !block.is_empty())
                .map(|(p, block)| {
                    s.spawn(move || -> Result<u64, Error> {
                        let g = p.ops.gpu();
                        g.download_into(&p.c, block)?;
                        Ok(g.download(&p.valid)?[0])
                    })
                })
                .collect();
            copies.into_iter().try_fold(0u64, |sum, h| {
                let v = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
                Ok::<u64, Error>(sum + v)
            })
        })?;
        self.synchronize()?;
        Ok(valid)
    }

    /// The result left on the devices: each member's (rows, C block `rows × n` row-major).
    pub fn blocks(&self) -> Vec<((usize, usize), &CudaSlice<f32>)> {
        self.parts.iter().map(|p| (p.rows, &p.c)).collect()
    }
}

/// SpAMM of operands already on one device: `C = Ã·B` into `c` (`m × n`; β = 0, C not read).
/// τ from `opts.target` on the device's norm maps (an error target uses the norm-product
/// estimate of ‖C‖F, without a retry: the operands' product runs once; the report's bound uses
/// the result's norm only when `measure_error` is set, else the estimate).
pub fn spamm_device(
    ops: &SpammOperands,
    c: &mut CudaSlice<f32>,
    opts: &SpammOptions,
) -> Result<SpammReport, Error> {
    let (m, n, _) = ops.shape();
    let tiles = ops.tiles();
    let (na, nb) = ops.norms_host()?;
    if tiles.0 == 0 || tiles.1 == 0 || tiles.2 == 0 {
        return Err(Error::InvalidArgs("empty operand".into()));
    }
    let maps = NormMaps::new(&na, &nb, tiles).map_err(plan_error)?;
    let mut bound = SkippedBound::device(DeviceBound::new(ops)?);
    let c_norm = bound.at(&maps, f32::INFINITY)?;
    let tau = choose_tau_with(&maps, &mut bound, opts.target, c_norm)?;
    let g = ops.gpu();
    let kern = SpammKernel::new(g, m, n, ops.precision(), opts.block, opts.s.max(1))?;
    let sched = SpammSchedule::new(g, &na, &nb, tiles, opts.block, tau)?;
    let mut st = g.alloc_zeros::<u64>(1)?;
    kern.run(ops, &sched, 1.0, 0.0, c, Some(&mut st))?;
    let valid = g.download(&st)?[0];
    let abs = bound.at(&maps, tau)?;
    let norm = if opts.measure_error {
        let h = g.download(c)?;
        super::tune::frobenius(&h[..m * n])
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
