//! Tuned preparation: time the candidate kernels and schedules on the device and keep the fastest.

use std::time::Instant;

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::spmm::csr::CsrSpmm;
use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit, HrpbSpmm};
use tcsparse_gpu::spmm::row_tile::{
    KERNELS as ROW_TILE_KERNELS, RowTileDevice, RowTileKernel, RowTileSchedule,
    dense_slots_per_nnz, dense_tiles_worth_trying, split_caps,
};
use tcsparse_gpu::{Gpu, GpuError};

use super::prepare::Reordered;
use super::{DeviceState, Prepared};
use crate::{
    Balance, Engine, Error, ExecKernel, KernelRequest, Precision, PrepareOptions, ScheduleKind,
    TuneSample,
};

/// Schedules a tuned preparation tries besides the planner's (when `balance` is Auto). The B-row
/// cache kinds ([`ScheduleKind::PackedCached`]) are not tried: on the H200 they were 1.4–3.2×
/// slower than the same packing without the cache on every matrix measured
/// (docs/kernels/acc-spmm.md, v4).
pub const TUNED_SCHEDULES: [ScheduleKind; 4] = [
    ScheduleKind::Unbalanced,
    ScheduleKind::Balanced,
    ScheduleKind::Packed(4),
    ScheduleKind::Packed(16),
];

/// Windows per thread block of the packed row-tile candidates a tuned preparation times, in this
/// order (stopping once a larger pack is slower), before the two split schedules of
/// `split_caps` (wave-aware block caps).
const ROW_TILE_TUNED_WINDOWS: [u32; 3] = [1, 4, 16];

/// A tuning candidate on the tensor cores.
#[derive(Debug)]
enum Candidate {
    /// Acc-SpMM (BitTCF) under this schedule.
    Acc(ScheduleKind),
    /// A row-tile kernel: its device, set to its fastest schedule.
    RowTile(Box<RowTileDevice>),
    /// The HRPB kernel: its device, set to its fastest shape and split.
    Hrpb(Box<HrpbSpmm>),
}

/// HRPB candidates a tuned preparation times (both MMA shapes, panels whole or wave-split).
const HRPB_TUNED: [(HrpbMma, HrpbSplit); 4] = [
    (HrpbMma::K8, HrpbSplit::Wave),
    (HrpbMma::K8, HrpbSplit::None),
    (HrpbMma::K4, HrpbSplit::Wave),
    (HrpbMma::K4, HrpbSplit::None),
];

/// Times the HRPB candidates ([`HRPB_TUNED`], then k8 split at [`HrpbSpmm::fill_cap`]: pieces for
/// about two waves, which also cuts the panels of small matrices the wave split leaves whole) on
/// `a`, recording every sample in `tuning`; returns the device set to the fastest (`None` when HRPB
/// cannot be built for `a`).
fn tune_hrpb(
    gpu: &Gpu,
    a: &Csr,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
    order: &str,
    tuning: &mut Vec<TuneSample>,
) -> Result<Option<(f64, Box<HrpbSpmm>)>, Error> {
    let Ok(h) = Hrpb::from_csr(a) else {
        return Ok(None);
    };
    let (mma0, split0) = HRPB_TUNED[0];
    let mut dev = Box::new(HrpbSpmm::from_hrpb(gpu, &h, mma0, split0)?);
    let mut fastest: Option<(f64, HrpbMma, HrpbSplit)> = None;
    let fill = (HrpbMma::K8, HrpbSplit::Cap(dev.fill_cap(n)?));
    for (mma, split) in HRPB_TUNED.into_iter().chain([fill]) {
        if mma != dev.mma() {
            dev.set_mma(mma)?;
        }
        dev.set_split(split);
        let ms = time_median(gpu, || Ok(dev.run(1.0, b, 0.0, c, n)?))?;
        tuning.push(TuneSample {
            candidate: format!("{} ({order})", ExecKernel::Hrpb { mma, split }),
            ms,
        });
        if fastest.is_none_or(|(f, _, _)| ms < f) {
            fastest = Some((ms, mma, split));
        }
    }
    let Some((ms, mma, split)) = fastest else {
        return Ok(None);
    };
    if mma != dev.mma() {
        dev.set_mma(mma)?;
    }
    dev.set_split(split);
    Ok(Some((ms, dev)))
}

/// Times row-tile kernel `rt` on `m` (B and C of width `n`) at 1/4/16 windows per thread block,
/// stopping once a larger pack is slower, then split at the two `split_caps`; records every
/// sample in `tuning` (the matrix's `order` in its name) and returns the device set to its fastest
/// schedule.
#[allow(clippy::too_many_arguments)]
fn tune_row_tile(
    gpu: &Gpu,
    m: &RowTileTcf,
    rt: RowTileKernel,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
    order: &str,
    tuning: &mut Vec<TuneSample>,
    bound: f64,
) -> Result<Option<(f64, Box<RowTileDevice>)>, Error> {
    let first = RowTileSchedule::Packed(ROW_TILE_TUNED_WINDOWS[0]);
    let mut dev = Box::new(RowTileDevice::upload(gpu, m, rt.dense_tiles, first)?);
    let mut time = |dev: &mut RowTileDevice, schedule, bound: f64| -> Result<f64, Error> {
        dev.set_schedule(gpu, schedule)?;
        let (ms, probe) =
            time_bounded(gpu, bound, || Ok(dev.launch(gpu, 1.0, b, n, 0.0, c, n, n)?))?;
        let kernel = ExecKernel::RowTile {
            kernel: rt,
            schedule,
        };
        tuning.push(TuneSample {
            candidate: format!("{kernel} ({order}){}", probe_mark(probe)),
            ms,
        });
        Ok(ms)
    };
    // A kernel this much slower than the best so far under its first schedule is not timed
    // under the others (they moved row-tile times by well under 2× on every matrix measured).
    let first_ms = time(&mut dev, first, bound)?;
    if first_ms > ROW_TILE_GIVE_UP * bound {
        return Ok(Some((first_ms, dev)));
    }
    let mut fastest: Option<(f64, RowTileSchedule)> = None;
    let mut keep = |ms: f64, schedule| {
        if fastest.is_none_or(|(f, _)| ms < f) {
            fastest = Some((ms, schedule));
        }
    };
    keep(first_ms, first);
    let mut previous = first_ms;
    let mut bound = bound.min(first_ms);
    for k in ROW_TILE_TUNED_WINDOWS.into_iter().skip(1) {
        let schedule = RowTileSchedule::Packed(k);
        let ms = time(&mut dev, schedule, bound)?;
        bound = bound.min(ms);
        keep(ms, schedule);
        // More windows per thread block only help while they keep helping.
        if ms > previous {
            break;
        }
        previous = ms;
    }
    for max_blocks in split_caps(m.num_blocks(), n, gpu.info().sm_count) {
        let schedule = RowTileSchedule::Split { max_blocks };
        let ms = time(&mut dev, schedule, bound)?;
        bound = bound.min(ms);
        keep(ms, schedule);
    }
    let Some((ms, schedule)) = fastest else {
        return Ok(None);
    };
    dev.set_schedule(gpu, schedule)?;
    Ok(Some((ms, dev)))
}

/// Nonzero budgets per warp item a tuned preparation times for the CSR kernel.
pub const CSR_TUNED_CHUNKS: [u32; 3] = [64, 256, 1024];

/// Times the CUDA-core CSR kernel on `a` at each of [`CSR_TUNED_CHUNKS`], recording every sample
/// in `tuning`; returns the kernel set to its fastest budget (`None` when `a` has no rows).
fn tune_csr(
    gpu: &Gpu,
    a: &Csr,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
    tuning: &mut Vec<TuneSample>,
    bound: f64,
) -> Result<Option<(f64, CsrSpmm)>, Error> {
    let mut bound = bound;
    if a.rows() == 0 {
        return Ok(None);
    }
    let mut dev = CsrSpmm::with_chunk(gpu, a, CSR_TUNED_CHUNKS[0])?;
    let mut fastest: Option<(f64, u32)> = None;
    for chunk in CSR_TUNED_CHUNKS {
        if chunk != dev.chunk_nnz() {
            dev.set_chunk(chunk)?;
        }
        let (ms, probe) = time_bounded(gpu, bound, || Ok(dev.run(1.0, b, 0.0, c, n)?))?;
        bound = bound.min(ms);
        tuning.push(TuneSample {
            candidate: format!(
                "{}{}",
                ExecKernel::CsrCuda { chunk_nnz: chunk },
                probe_mark(probe)
            ),
            ms,
        });
        if fastest.is_none_or(|(f, _)| ms < f) {
            fastest = Some((ms, chunk));
        }
    }
    let Some((ms, chunk)) = fastest else {
        return Ok(None);
    };
    if chunk != dev.chunk_nnz() {
        dev.set_chunk(chunk)?;
    }
    Ok(Some((ms, dev)))
}

/// Launches per candidate when tuning: untimed, then timed (median kept).
const TUNE_WARMUP: usize = 2;
const TUNE_ITERS: usize = 9;

/// Deterministic B for tuning (values in [-1, 1); timing does not depend on them).
fn tuning_b(rows: usize, n: usize) -> Vec<f32> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..rows * n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Median ms of `p`'s product on (b, c) at width n.
fn time_prepared(
    gpu: &Gpu,
    p: &mut Prepared,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
) -> Result<f64, Error> {
    time_median(gpu, || p.launch_prepared(1.0, b, n, n, 0.0, c, n))
}

/// A candidate whose short probe is this many times slower than the best so far is not timed in
/// full: its probe time is recorded and it is out of the running.
const PROBE_REJECT: f64 = 1.25;
/// Launches of the probe: untimed, then timed (median kept).
const PROBE_WARMUP: usize = 1;
const PROBE_ITERS: usize = 3;
/// A row-tile kernel this many times slower than the best so far under its first schedule is not
/// timed under its other schedules.
const ROW_TILE_GIVE_UP: f64 = 2.0;

/// " [probe]" for a candidate only probed, else "".
fn probe_mark(probe: bool) -> &'static str {
    if probe { " [probe]" } else { "" }
}

/// Median ms of `launch`, and whether only the probe ran: a short probe first (when there is a
/// finite `bound`, the best time so far), which settles candidates that clearly cannot win; the
/// others are timed in full ([`time_median`]).
fn time_bounded(
    gpu: &Gpu,
    bound: f64,
    mut launch: impl FnMut() -> Result<(), Error>,
) -> Result<(f64, bool), Error> {
    if bound.is_finite() {
        let probe = time_launches(gpu, PROBE_WARMUP, PROBE_ITERS, &mut launch)?;
        if probe > PROBE_REJECT * bound {
            return Ok((probe, true));
        }
    }
    Ok((time_median(gpu, launch)?, false))
}

/// Median ms of `launch` over the tuning launches; its own error is returned as it is.
fn time_median(gpu: &Gpu, mut launch: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    time_launches(gpu, TUNE_WARMUP, TUNE_ITERS, &mut launch)
}

/// Median ms of `launch` over `warmup` untimed and `iters` timed launches.
fn time_launches(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    mut launch: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    let mut err = None;
    let timing = gpu.time_launches(warmup, iters, || {
        launch().map_err(|e| {
            let msg = e.to_string();
            err = Some(e);
            GpuError::Invalid(msg)
        })
    });
    match (timing, err) {
        (_, Some(e)) => Err(e),
        (Ok(t), None) => Ok(t.median_ms),
        (Err(e), None) => Err(e.into()),
    }
}

impl Engine {
    /// [`Engine::prepare`] with tuning: reorder once, prepare Acc-SpMM (reordered as asked) and
    /// cuSPARSE (original order unless the reordering was forced), time cuSPARSE, each Acc-SpMM
    /// schedule and (with `Balance::Auto`) each row-tile kernel on the Acc-SpMM candidate's matrix
    /// at width `opts.n`, keep the fastest. An Acc-SpMM candidate that cannot be prepared (too large
    /// for the u32 layout, …) leaves cuSPARSE, without timing the row-tile kernels.
    pub(super) fn prepare_tuned(
        &self,
        gpu: &Gpu,
        a: &Csr,
        opts: &PrepareOptions,
    ) -> Result<Prepared, Error> {
        let n = opts.n.max(1);
        let stage = self.reorder_stage(a, opts)?;
        let t = Instant::now();
        let fixed = |kernel, balance| PrepareOptions {
            kernel,
            balance,
            tune: false,
            ..opts.clone()
        };
        let cus_stage = if stage.forced || stage.perm.is_none() {
            stage.clone()
        } else {
            Reordered {
                a_re: a.clone(),
                perm: None,
                ..stage.clone()
            }
        };
        let mut cus =
            self.prepare_reordered(a, cus_stage, &fixed(KernelRequest::Cusparse, Balance::Auto))?;
        // F32 precision: only the f32 kernels (cuSPARSE, ours on CSR) are candidates.
        let acc = (opts.precision == Precision::Tf32).then(|| {
            self.prepare_reordered(a, stage, &fixed(KernelRequest::AccSpmm, opts.balance))
        });
        let b = gpu.upload(&tuning_b(a.cols(), n))?;
        let mut c = gpu.alloc_zeros::<f32>(a.rows() * n)?;
        let mut tuning = Vec::new();
        let cus_name = if cus.perm.is_some() {
            "cuSPARSE (reordered)"
        } else {
            "cuSPARSE (original order)"
        };
        let cus_ms = time_prepared(gpu, &mut cus, &b, &mut c, n)?;
        tuning.push(TuneSample {
            candidate: cus_name.into(),
            ms: cus_ms,
        });
        // Our CUDA-core CSR kernel on the same (original-order) matrix as cuSPARSE, at each
        // nonzero budget per warp.
        let csr_best = tune_csr(gpu, &cus.a, &b, &mut c, n, &mut tuning, cus_ms)?;
        // The best time so far, which later candidates must approach to be timed in full.
        let mut bound = csr_best.as_ref().map_or(cus_ms, |(ms, _)| ms.min(cus_ms));
        let mut best: Option<(f64, Candidate)> = None;
        let beats =
            |best: &Option<(f64, Candidate)>, ms: f64| best.as_ref().is_none_or(|b| ms < b.0);
        let mut acc_err = None;
        let mut acc = match acc {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => {
                acc_err = Some(e.to_string());
                None
            }
            None => None,
        };
        if let Some(p) = acc.as_mut() {
            let ExecKernel::AccSpmm { schedule: planned } = p.report.kernel else {
                unreachable!("prepared with KernelRequest::AccSpmm on a GPU engine");
            };
            let mut kinds = vec![planned];
            if opts.balance == Balance::Auto {
                for k in TUNED_SCHEDULES {
                    if !kinds.contains(&k) {
                        kinds.push(k);
                    }
                }
            }
            let order = if p.perm.is_some() {
                "reordered"
            } else {
                "original order"
            };
            for (i, &kind) in kinds.iter().enumerate() {
                if i > 0 {
                    let sched = self.schedule(p.bittcf.row_window_offset(), kind, n);
                    p.set_schedule(&sched, kind)?;
                }
                // A candidate the device cannot launch at this N (a row cache larger than its
                // shared memory) is skipped, not fatal.
                if let Some(why) = p.launch_refusal(n) {
                    tracing::debug!("tuning: skipping Acc-SpMM ({kind}): {why}");
                    continue;
                }
                let (ms, probe) =
                    time_bounded(gpu, bound, || p.spmm_device(1.0, &b, n, n, 0.0, &mut c, n))?;
                bound = bound.min(ms);
                tuning.push(TuneSample {
                    candidate: format!("Acc-SpMM ({order}, {kind}){}", probe_mark(probe)),
                    ms,
                });
                if beats(&best, ms) {
                    best = Some((ms, Candidate::Acc(kind)));
                }
            }
            // The row-tile kernels on the same (reordered) matrix, each layout built once per
            // window height; a candidate keeps its device only while it is the fastest so far.
            // Dense-tile kernels are skipped where their tile copy would be too large
            // (dense_tiles_worth_trying).
            if opts.balance == Balance::Auto {
                for same_height in ROW_TILE_KERNELS.chunk_by(|x, y| x.window_rows == y.window_rows)
                {
                    let m = RowTileTcf::from_csr(&p.a, same_height[0].window_rows as usize)
                        .map_err(|e| Error::Format(e.to_string()))?;
                    for &rt in same_height {
                        if rt.dense_tiles && !dense_tiles_worth_trying(&m) {
                            tracing::debug!(
                                "tuning: skipping {}: {:.1} tile slots per nonzero",
                                rt.name(),
                                dense_slots_per_nnz(&m)
                            );
                            continue;
                        }
                        if let Some((ms, dev)) =
                            tune_row_tile(gpu, &m, rt, &b, &mut c, n, order, &mut tuning, bound)?
                        {
                            bound = bound.min(ms);
                            if beats(&best, ms) {
                                best = Some((ms, Candidate::RowTile(dev)));
                            }
                        }
                    }
                }
                if let Some((ms, dev)) = tune_hrpb(gpu, &p.a, &b, &mut c, n, order, &mut tuning)?
                    && beats(&best, ms)
                {
                    best = Some((ms, Candidate::Hrpb(dev)));
                }
            }
        }
        let tune_s = t.elapsed().as_secs_f64();
        let summary = tuning
            .iter()
            .map(|s| format!("{} {:.3} ms", s.candidate, s.ms))
            .collect::<Vec<_>>()
            .join(", ");
        let csr_best = csr_best.filter(|(ms, _)| *ms < cus_ms && beats(&best, *ms));
        let mut chosen = match (csr_best, acc, best) {
            (Some((_, dev)), _, _) => {
                cus.report.kernel = ExecKernel::CsrCuda {
                    chunk_nnz: dev.chunk_nnz(),
                };
                cus.report.kernel_note = format!(
                    "tuned at N = {n}: {} fastest ({summary}); planner: {}",
                    cus.report.kernel, cus.plan.reason
                );
                cus.dev = DeviceState::Csr(Box::new(dev));
                cus
            }
            (None, Some(mut p), Some((ms, Candidate::Acc(kind)))) if ms < cus_ms => {
                if p.report.kernel != (ExecKernel::AccSpmm { schedule: kind }) {
                    let sched = self.schedule(p.bittcf.row_window_offset(), kind, n);
                    p.set_schedule(&sched, kind)?;
                }
                p.report.kernel_note = format!(
                    "tuned at N = {n}: Acc-SpMM ({kind}) fastest ({summary}); planner: {}",
                    p.plan.reason
                );
                p
            }
            (None, Some(mut p), Some((ms, Candidate::RowTile(d)))) if ms < cus_ms => {
                p.report.thread_blocks = d.num_tbs();
                p.report.split_windows = d.num_split_windows();
                p.report.kernel = ExecKernel::RowTile {
                    kernel: d.kernel(),
                    schedule: d.schedule(),
                };
                p.dev = DeviceState::RowTile(d);
                p.report.kernel_note = format!(
                    "tuned at N = {n}: {} fastest ({summary}); planner: {}",
                    p.report.kernel, p.plan.reason
                );
                p
            }
            (None, Some(mut p), Some((ms, Candidate::Hrpb(d)))) if ms < cus_ms => {
                p.report.thread_blocks = d.wave_split(n)?.panels.len();
                p.report.split_windows = 0;
                p.report.kernel = ExecKernel::Hrpb {
                    mma: d.mma(),
                    split: d.split(),
                };
                p.dev = DeviceState::Hrpb(d);
                p.report.kernel_note = format!(
                    "tuned at N = {n}: {} fastest ({summary}); planner: {}",
                    p.report.kernel, p.plan.reason
                );
                p
            }
            _ => {
                let why = acc_err.map_or_else(
                    || format!("fastest ({summary})"),
                    |e| format!("Acc-SpMM could not be prepared: {e}"),
                );
                cus.report.kernel_note = format!(
                    "tuned at N = {n}: cuSPARSE {why}; planner: {}",
                    cus.plan.reason
                );
                cus
            }
        };
        chosen.report.tuning = tuning;
        chosen.report.tune_s = tune_s;
        Ok(chosen)
    }
}
