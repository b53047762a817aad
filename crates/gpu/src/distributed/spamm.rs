//! SpAMM with one rank per GPU ([`spamm_rank`]): each rank computes one contiguous slice of C's
//! block rows, the same split as the one-process mode ([`crate::spamm::spamm_block_rows`], balancing
//! valid tile products at τ).
//!
//! Rank 0 computes the norm maps of the whole A and B and broadcasts them (NCCL, `4·(tm·tk +
//! tk·tn)` bytes), so every rank chooses the same τ and the same split from the same numbers;
//! B is broadcast from rank 0; each rank uploads only its rows of A (every rank passes the whole
//! host A). With a relative-error target, the ranks all-gather their partial ‖C‖F² and valid
//! counts after each product and refine τ together, exactly as the one-process loop does. C stays
//! on the ranks ([`RankSpamm::block`]) or is gathered to rank 0 ([`RankSpamm::gather_to_root`]).

use cudarc::driver::CudaSlice;
use tcsparse_planner::spamm::tau_retry_norm;

use super::{DistributedError, RankComm};
use crate::GpuError;
use crate::spamm::{
    SpammConfig, SpammKernel, SpammOperands, SpammRun, SpammSchedule, TILE, TauTarget, choose_tau,
    norm_maps, rel_bound, spamm_block_rows,
};

/// One rank's result: its C rows on its device and the run's report (the same on every rank).
pub struct RankSpamm {
    gpu: crate::Gpu,
    /// This rank's operands, kernel and schedule at the final τ (none for an empty slice).
    part: Option<(SpammOperands, SpammKernel, SpammSchedule)>,
    rows: (usize, usize),
    ranges: Vec<(usize, usize)>,
    n: usize,
    c: Option<CudaSlice<f32>>,
    run: SpammRun,
}

impl_debug!(RankSpamm, |s| rows: s.rows, run: s.run);

/// Every rank's `ok` all-gathered: this rank's own error first, else an error naming a rank
/// that failed, so that every rank leaves before a collective that would wait on it.
fn agree(
    comm: &RankComm,
    what: &str,
    local: Result<(), DistributedError>,
) -> Result<(), DistributedError> {
    let all = comm.all_gather_u64(u64::from(local.is_ok()))?;
    local?;
    match all.iter().position(|&v| v == 0) {
        Some(r) => Err(DistributedError::Mismatch(format!(
            "{what}: rank {r} failed before the collective (its own error says why)"
        ))),
        None => Ok(()),
    }
}

/// Broadcasts host `x` (rank 0's; `len` elements on every rank) and returns it on every rank.
fn broadcast_host(
    comm: &RankComm,
    x: Option<&[f32]>,
    len: usize,
) -> Result<Vec<f32>, DistributedError> {
    let g = comm.gpu();
    let mut d = match x {
        Some(x) if comm.rank() == 0 => g.upload(&x[..len])?,
        _ => g.alloc_zeros::<f32>(len.max(1))?,
    };
    comm.broadcast(&mut d, 0)?;
    let mut h = g.download(&d)?;
    h.truncate(len);
    Ok(h)
}

/// SpAMM `C = Ã·B` of host A (`m × k`, every rank passes all of it) and B (`k × n`, read on
/// rank 0 only: the others pass `None`) with C's block rows split over the ranks. Every rank
/// passes the same shape and `cfg` (checked). Waited for.
#[allow(clippy::too_many_arguments)]
pub fn spamm_rank(
    comm: &RankComm,
    a: &[f32],
    b: Option<&[f32]>,
    m: usize,
    n: usize,
    k: usize,
    cfg: &SpammConfig,
) -> Result<RankSpamm, DistributedError> {
    let g = comm.gpu().clone();
    let rank = comm.rank();
    // Shape and configuration: one digest, all ranks.
    let mut digest = 0xcbf2_9ce4_8422_2325u64;
    let target = match cfg.target {
        TauTarget::Tau(t) => (1u64, u64::from(t.to_bits())),
        TauTarget::ValidRatio(r) => (2, r.to_bits()),
        TauTarget::RelError(r) => (3, r.to_bits()),
    };
    for x in [
        m as u64,
        n as u64,
        k as u64,
        cfg.precision as u64,
        cfg.block.tiles() as u64,
        cfg.s as u64,
        target.0,
        target.1,
    ] {
        digest = (digest ^ x).wrapping_mul(0x0000_0100_0000_01b3);
    }
    comm.check_same("SpAMM shape and configuration", digest)?;
    let (tm, tk, tn) = (m.div_ceil(TILE), k.div_ceil(TILE), n.div_ceil(TILE));
    let tiles = (tm, tk, tn);
    // Everything that can fail on one rank alone, then the agreement.
    let mut norms = None;
    let local = (|| -> Result<(), DistributedError> {
        let (Some(mk), Some(kn)) = (m.checked_mul(k), k.checked_mul(n)) else {
            return Err(GpuError::Invalid("m·k or k·n overflows".into()).into());
        };
        if a.len() < mk {
            return Err(GpuError::Invalid(format!("A has {} values, needs {mk}", a.len())).into());
        }
        if rank == 0 {
            let Some(b) = b.filter(|b| b.len() >= kn) else {
                return Err(GpuError::Invalid(format!(
                    "rank 0 holds B ({k}×{n}): pass Some(b) with {kn} values"
                ))
                .into());
            };
            if tm > 0 && tk > 0 && tn > 0 {
                let full = SpammOperands::upload(&g, &a[..mk], &b[..kn], m, n, k, cfg.precision)?;
                norms = Some(full.norms_host()?);
            }
        }
        Ok(())
    })();
    agree(comm, "SpAMM operands", local)?;
    let ranges_empty = vec![(0, m); 1];
    if tm == 0 || tk == 0 || tn == 0 {
        return Ok(RankSpamm {
            gpu: g,
            part: None,
            rows: if rank == 0 { (0, m) } else { (m, m) },
            ranges: ranges_empty,
            n,
            c: None,
            run: SpammRun::empty(m),
        });
    }
    let (na0, nb0) = norms.unzip();
    let na = broadcast_host(comm, na0.as_deref(), tm * tk)?;
    let nb = broadcast_host(comm, nb0.as_deref(), tk * tn)?;
    // B from rank 0.
    let mut bd = match b {
        Some(b) if rank == 0 => g.upload(&b[..k * n])?,
        _ => g.alloc_zeros::<f32>(k * n)?,
    };
    comm.broadcast(&mut bd, 0)?;
    let maps = norm_maps(&na, &nb, tiles)?;
    let mut c_norm = match cfg.target {
        TauTarget::RelError(_) => maps.skipped_bound(f32::INFINITY),
        _ => 0.0,
    };
    let mut attempts = 0u32;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut part: Option<(SpammOperands, SpammKernel)> = None;
    let mut last_sched: Option<SpammSchedule> = None;
    let mut c: Option<CudaSlice<f32>> = None;
    let mut bd = Some(bd);
    let run = loop {
        attempts += 1;
        let tau = choose_tau(&maps, cfg.target, c_norm)?;
        if c.is_none() {
            ranges = spamm_block_rows(&maps, tau, m, cfg.block, comm.world_size())?;
            let Some(&(r0, r1)) = ranges.get(rank) else {
                return Err(DistributedError::Mismatch(format!(
                    "{} row ranges for {} ranks",
                    ranges.len(),
                    comm.world_size()
                )));
            };
            let pm = r1 - r0;
            let Some(b_dev) = bd.take() else {
                return Err(GpuError::Invalid("B placed twice".into()).into());
            };
            if pm > 0 {
                let a_dev = g.upload(&a[r0 * k..r1 * k])?;
                let ops = SpammOperands::from_device(&g, a_dev, b_dev, pm, n, k, cfg.precision)?;
                let kern = SpammKernel::new(&g, pm, n, cfg.precision, cfg.block, cfg.s)?;
                part = Some((ops, kern));
            }
            c = Some(g.alloc_zeros((pm * n).max(1))?);
        }
        let Some(cd) = c.as_mut() else {
            return Err(GpuError::Invalid("no C block".into()).into());
        };
        let (r0, r1) = ranges[rank];
        let (sum_sq, valid) = match &part {
            Some((ops, kern)) => {
                let (pa, pb) = ops.norms_host()?;
                let sched = SpammSchedule::new(&g, &pa, &pb, ops.tiles(), kern.block(), tau)?;
                let mut st = g.alloc_zeros::<u64>(1)?;
                kern.run(ops, &sched, 1.0, 0.0, cd, Some(&mut st))?;
                last_sched = Some(sched);
                let host = g.download(cd)?;
                let sum_sq: f64 = host[..(r1 - r0) * n]
                    .iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum();
                (sum_sq, g.download(&st)?[0])
            }
            None => (0.0, 0),
        };
        let sums = comm.all_gather_u64(sum_sq.to_bits())?;
        let valids = comm.all_gather_u64(valid)?;
        let result_norm = sums.into_iter().map(f64::from_bits).sum::<f64>().sqrt();
        let valid: u64 = valids.into_iter().sum();
        let abs = maps.skipped_bound(tau);
        let rel = rel_bound(abs, result_norm);
        let run = SpammRun {
            tau,
            valid_ratio: valid as f64 / (tm * tk * tn) as f64,
            valid_products: valid,
            abs_bound: abs,
            result_norm,
            rel_bound: rel,
            row_ranges: ranges.clone(),
            attempts,
        };
        // The same decision on every rank: it depends only on gathered and broadcast numbers.
        let retry = match cfg.target {
            TauTarget::RelError(r) => tau_retry_norm(r, rel, attempts, tau, result_norm, c_norm),
            _ => None,
        };
        match retry {
            Some(next) => c_norm = next,
            None => break run,
        }
    };
    let part = match (part, last_sched) {
        (Some((ops, kern)), Some(sched)) => Some((ops, kern, sched)),
        _ => None,
    };
    Ok(RankSpamm {
        gpu: g,
        part,
        rows: ranges[rank],
        ranges,
        n,
        c,
        run,
    })
}

impl RankSpamm {
    /// This rank's C rows `r0..r1`.
    pub fn rows(&self) -> (usize, usize) {
        self.rows
    }

    /// Every rank's C rows.
    pub fn row_ranges(&self) -> &[(usize, usize)] {
        &self.ranges
    }

    /// τ, valid products (all ranks), bounds and ‖C‖F (all ranks): the same on every rank.
    pub fn run(&self) -> &SpammRun {
        &self.run
    }

    /// This rank's C block (`(r1 − r0) × n` row-major; may hold one extra element when empty).
    pub fn block(&self) -> Option<&CudaSlice<f32>> {
        self.c.as_ref()
    }

    /// Queues this rank's product again at the same τ into its C block (no collective: the
    /// timed part of a product once τ, the split and B are in place).
    pub fn rerun(&mut self) -> Result<(), DistributedError> {
        if let (Some((ops, kern, sched)), Some(c)) = (&self.part, &mut self.c) {
            kern.run(ops, sched, 1.0, 0.0, c, None)?;
        }
        Ok(())
    }

    /// Waits for this rank's device.
    pub fn synchronize(&self) -> Result<(), DistributedError> {
        Ok(self.gpu.synchronize()?)
    }

    /// This rank's C rows on the host.
    pub fn download_block(&self, comm: &RankComm) -> Result<Vec<f32>, DistributedError> {
        let (r0, r1) = self.rows;
        let Some(c) = &self.c else {
            return Ok(Vec::new());
        };
        let mut h = comm.gpu().download(c)?;
        h.truncate((r1 - r0) * self.n);
        Ok(h)
    }

    /// Gathers C (`m × n`, row-major) to rank 0's host: rank 0 passes `Some(c)`, the others
    /// `None`. Every rank calls it. Waited for.
    pub fn gather_to_root(
        &self,
        comm: &RankComm,
        c: Option<&mut [f32]>,
    ) -> Result<(), DistributedError> {
        let n = self.n;
        let m = self.ranges.last().map_or(0, |r| r.1);
        let root = comm.rank() == 0;
        let local = match (&c, root) {
            (Some(c), true) if c.len() < m * n => {
                Err(GpuError::Invalid(format!("C needs {} values, has {}", m * n, c.len())).into())
            }
            (None, true) => Err(GpuError::Invalid("rank 0 receives C: pass Some(c)".into()).into()),
            _ => Ok(()),
        };
        agree(comm, "SpAMM C gathered to rank 0", local)?;
        let Some(block) = &self.c else {
            // No product ran (an empty problem): nothing to move.
            if let Some(c) = c {
                c[..m * n].fill(0.0);
            }
            return Ok(());
        };
        let mut offsets: Vec<usize> = self.ranges.iter().map(|&(r0, _)| r0 * n).collect();
        offsets.push(m * n);
        let g = comm.gpu();
        if !root {
            comm.gather_blocks_to_root(block, None, &offsets)?;
            return comm.synchronize();
        }
        let Some(c) = c else {
            return Err(GpuError::Invalid("rank 0 receives C: pass Some(c)".into()).into());
        };
        let mut full = g.alloc_zeros::<f32>((m * n).max(1))?;
        comm.place_own_block(block, &mut full, self.rows, n)?;
        comm.gather_blocks_to_root(block, Some(&mut full), &offsets)?;
        let h = g.download(&full)?;
        c[..m * n].copy_from_slice(&h[..m * n]);
        Ok(())
    }
}
