//! The candidates of a tuned SpMM preparation: cuSPARSE at each of its CSR algorithms, our CSR
//! kernel at each budget, the window-staged CSR kernel at each slice and window cut, Acc-SpMM
//! under each schedule, the row-tile kernels and HRPB, each built here (through `build.rs`; a
//! kernel family's in its file in `family/`, called from here) and handed to the harness of
//! `tune.rs`, which times them; the fastest is kept.

use std::time::Instant;

use cudarc::driver::CudaSlice;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::baselines::cusparse::SpmmAlg;
use tcsparse_gpu::spmm::csr::CsrSpmm;
use tcsparse_gpu::spmm::hrpb::HrpbSpmm;
use tcsparse_gpu::spmm::row_tile::{
    KERNELS as ROW_TILE_KERNELS, RowTileDevice, RowTileKernel, RowTileSchedule,
    dense_slots_per_nnz, dense_tiles_worth_trying, split_caps,
};
use tcsparse_gpu::spmm::staged::StagedSpmm;
use tcsparse_gpu::{DeviceProduct, Gpu};
use tcsparse_planner::{AccSchedule, KernelChoice};

use super::build::{Reordered, Source, copy_csr};
use super::family::{csr, hrpb, staged};
use super::tune::{Probe, Tuning, tuning_b};
use super::{DeviceState, Prepared};
use crate::tune::Fastest;
use crate::{
    Balance, Engine, Error, ExecKernel, KernelRequest, Precision, PrepareOptions, ScheduleKind,
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

/// Windows per thread block of the packed row-tile candidates a tuned preparation probes, in this
/// order (16 only when 4 beat 1), before the two split schedules of `split_caps` (wave-aware
/// block caps).
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
    /// The window-staged CSR kernel on the reordered matrix (a row order that groups rows
    /// sharing columns stages fewer B rows: docs/kernels/staged-spmm.md).
    Staged(Box<StagedSpmm>),
}

/// Most nonzeros of a matrix on which a tuned preparation builds and times the window-staged CSR
/// kernel: it was made for the small and medium matrices (50 k – 700 k nonzeros at N = 128) where
/// every gather kernel runs at the L2's rate (docs/kernels/staged-spmm.md); above this bound its
/// build and upload are not spent (not measured there yet).
pub const STAGED_TUNED_MAX_NNZ: usize = 1 << 21;

/// A row-tile kernel this many times slower than the best so far under its first schedule is not
/// probed under its other schedules.
const ROW_TILE_GIVE_UP: f64 = 2.0;
/// Nonzeros from which the tensor-core candidates are not built when the planner's class is
/// cuSPARSE (Low TCU synergy or too few nonzeros per block) and no reordering was kept: there
/// the builds and uploads cost tens to hundreds of milliseconds and never won (H200, 836a596:
/// every such matrix of ≥ 343 k nonzeros kept a CUDA-core kernel; the three below 16 k nonzeros,
/// where everything is launch-bound and the builds take microseconds, kept a tensor-core one).
pub const PRUNE_MIN_NNZ: usize = 1 << 18;

/// Whether a tuned preparation builds and times the tensor-core candidates (Acc-SpMM, row-tile,
/// HRPB) besides cuSPARSE and our CSR kernel: not where the planner's class for the matrix as it
/// will run is cuSPARSE (`planner_cusparse`), no reordering was kept (the gate skipped it or it did
/// not raise the block density) and the matrix has at least [`PRUNE_MIN_NNZ`] nonzeros.
pub fn tensor_cores_worth_tuning(planner_cusparse: bool, reordered: bool, nnz: usize) -> bool {
    !planner_cusparse || reordered || nnz < PRUNE_MIN_NNZ
}

/// HRPB is not built for a matrix of at least [`PRUNE_MIN_NNZ`] nonzeros when the planner's
/// predicted HRPB time is this many times the best time measured so far: its build and upload
/// (6–7 ns per nonzero on the H200 host, 0.2 s on clustered256k-b256) would buy nothing. (HRPB won
/// only on matrices below 16 k nonzeros at 836a596; on the large ones it ran 2–6× behind the
/// kept kernel.)
pub const HRPB_SKIP_FACTOR: f64 = 2.0;

/// Whether the HRPB candidate is built, given the planner's predicted HRPB time (`None` when not
/// modeled), the best full time so far and the matrix's nonzeros.
pub fn hrpb_worth_tuning(predicted_ms: Option<f64>, best_ms: f64, nnz: usize) -> bool {
    match predicted_ms {
        Some(p) if nnz >= PRUNE_MIN_NNZ && best_ms.is_finite() => p <= HRPB_SKIP_FACTOR * best_ms,
        _ => true,
    }
}

/// Whether row-tile schedule `i` of [`row_tile_schedules`] is probed, given the probes so far:
/// none after the first when the first is [`ROW_TILE_GIVE_UP`] × `bound` or slower; 16 windows
/// per thread block only when 4 beat 1.
pub fn row_tile_probe_wanted(i: usize, probes: &[Option<f64>], bound: f64) -> bool {
    let first = probes.first().copied().flatten();
    match i {
        0 => true,
        _ if first.is_some_and(|f| f > ROW_TILE_GIVE_UP * bound) => false,
        2 => matches!((probes.first(), probes.get(1)), (Some(Some(a)), Some(Some(b))) if b <= a),
        _ => true,
    }
}

/// The row-tile schedules a tuned preparation probes, in this order: packed at 1, 4 and 16
/// windows per thread block, then split at the two `split_caps`.
fn row_tile_schedules(blocks: usize, n: usize, sms: u32) -> Vec<RowTileSchedule> {
    ROW_TILE_TUNED_WINDOWS
        .into_iter()
        .map(RowTileSchedule::Packed)
        .chain(
            split_caps(blocks, n, sms)
                .into_iter()
                .map(|max_blocks| RowTileSchedule::Split { max_blocks }),
        )
        .collect()
}

/// Row-tile kernel `rt` on `m` (B and C of width `n`) under [`row_tile_schedules`]
/// ([`row_tile_probe_wanted`] prunes them); returns the device set to the finalist and its full
/// time.
#[allow(clippy::too_many_arguments)]
fn tune_row_tile(
    t: &mut Tuning,
    m: &RowTileTcf,
    rt: RowTileKernel,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
    order: &str,
) -> Result<Option<(f64, Box<RowTileDevice>)>, Error> {
    let gpu = t.gpu;
    let schedules = row_tile_schedules(m.num_blocks(), n, gpu.info().sm_count);
    let mut dev = Box::new(RowTileDevice::upload_for(gpu, m, rt, schedules[0])?);
    let names: Vec<String> = schedules
        .iter()
        .map(|&schedule| {
            let kernel = ExecKernel::RowTile {
                kernel: rt,
                schedule,
            };
            format!("{kernel} ({order})")
        })
        .collect();
    let bound = t.bound;
    let mut current = schedules[0];
    let found = t.family(
        &names,
        |i, probes| row_tile_probe_wanted(i, probes, bound),
        |i| {
            if schedules[i] != current {
                dev.set_schedule(gpu, schedules[i])?;
                current = schedules[i];
            }
            Ok(dev.run(1.0, b, 0.0, c, n)?)
        },
    )?;
    let Some((i, ms)) = found else {
        return Ok(None);
    };
    if schedules[i] != current {
        dev.set_schedule(gpu, schedules[i])?;
    }
    Ok(Some((ms, dev)))
}

/// The faster of the CUDA-core finalists (our CSR kernel's, the staged kernel's) as the device
/// state that runs it, with its full time.
fn faster_cuda_core(
    csr: Option<(f64, CsrSpmm)>,
    staged: Option<(f64, StagedSpmm)>,
) -> Option<(f64, DeviceState)> {
    let csr = csr.map(|(ms, d)| (ms, DeviceState::Family(Box::new(d))));
    let staged = staged.map(|(ms, d)| (ms, DeviceState::Family(Box::new(d))));
    match (csr, staged) {
        (Some(x), Some(y)) => Some(if y.0 < x.0 { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// Sets up cuSPARSE on `p` (prepared for cuSPARSE) at each of [`SpmmAlg::TUNED`] with one
/// untimed product of width `n` (on tuning's B and C, synchronized, so that a failure is the
/// algorithm's) and returns those that worked, in that order. An algorithm whose set-up or launch
/// fails is skipped (a debug line says why) and its set-up dropped.
fn cusparse_algs(
    gpu: &Gpu,
    p: &mut Prepared,
    b: &CudaSlice<f32>,
    c: &mut CudaSlice<f32>,
    n: usize,
) -> Vec<SpmmAlg> {
    let mut working = Vec::with_capacity(SpmmAlg::TUNED.len());
    for alg in SpmmAlg::TUNED {
        if !p.set_cusparse_alg(alg) {
            tracing::debug!("tuning: prepared as {}, not cuSPARSE", p.report.kernel);
            return Vec::new();
        }
        let t0 = Instant::now();
        let tried = p
            .launch_prepared(1.0, b, n, n, 0.0, c, n)
            .and_then(|()| Ok(gpu.synchronize()?));
        match tried {
            Ok(()) => {
                tracing::debug!(
                    "tuning: cuSPARSE {} set up in {:.1} ms",
                    alg.name(),
                    t0.elapsed().as_secs_f64() * 1e3
                );
                working.push(alg);
            }
            Err(e) => {
                tracing::debug!("tuning: cuSPARSE {} skipped: {e}", alg.name());
                p.drop_cusparse_setup(n, alg);
            }
        }
    }
    working
}

impl Engine {
    /// The Acc-SpMM family on `p` (prepared for Acc-SpMM): its planned schedule and, with
    /// `Balance::Auto`, each of [`TUNED_SCHEDULES`]; `best` becomes its finalist where that is
    /// faster.
    #[allow(clippy::too_many_arguments)]
    fn tune_acc(
        &self,
        tuning: &mut Tuning,
        best: &mut Fastest<Candidate>,
        p: &mut Prepared,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        n: usize,
        balance: Balance,
    ) -> Result<(), Error> {
        // (Prepared with KernelRequest::AccSpmm on a GPU engine, so always Acc-SpMM; anything
        // else is not timed rather than a panic.)
        let ExecKernel::AccSpmm { schedule: planned } = p.report.kernel else {
            tracing::debug!(
                "tuning: Acc-SpMM family skipped: prepared as {}",
                p.report.kernel
            );
            return Ok(());
        };
        let mut kinds = vec![planned];
        if balance == Balance::Auto {
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
        // A candidate the device cannot launch at this N (a row cache larger than its
        // shared memory) is skipped, not fatal. The schedules built to find out are kept for the
        // timing (`None`: the planned one, prepared already; built again only to switch back).
        let mut launchable: Vec<(ScheduleKind, Option<AccSchedule>)> =
            Vec::with_capacity(kinds.len());
        for (i, &kind) in kinds.iter().enumerate() {
            let sched = if i > 0 {
                let sched = self.schedule(p.bittcf().row_window_offset(), kind, n);
                p.set_schedule(&sched, kind)?;
                Some(sched)
            } else {
                None
            };
            match p.launch_refusal(n) {
                Some(why) => tracing::debug!("tuning: skipping Acc-SpMM ({kind}): {why}"),
                None => launchable.push((kind, sched)),
            }
        }
        let names: Vec<String> = launchable
            .iter()
            .map(|(kind, _)| format!("Acc-SpMM ({order}, {kind})"))
            .collect();
        let mut current = kinds.last().copied();
        let found = tuning.family(
            &names,
            |_, _| true,
            |i| {
                let (kind, sched) = &mut launchable[i];
                if current != Some(*kind) {
                    let sched = sched.get_or_insert_with(|| {
                        self.schedule(p.bittcf().row_window_offset(), *kind, n)
                    });
                    p.set_schedule(sched, *kind)?;
                    current = Some(*kind);
                }
                // The kernel alone in prepared order, as every other candidate is timed
                // (whatever row order the products will use).
                p.launch_prepared(1.0, b, n, n, 0.0, &mut *c, n)
            },
        )?;
        if let Some((i, ms)) = found {
            best.offer(ms, || Candidate::Acc(launchable[i].0));
        }
        Ok(())
    }

    /// [`Engine::prepare_spmm`] with tuning: reorder once (where the gate lets it), prepare cuSPARSE
    /// (original order unless the reordering was forced), time it at each of its CSR algorithms
    /// ([`SpmmAlg::TUNED`], one family; the fastest is kept, and is the bound every other
    /// candidate must beat), then our CSR kernel on the same matrix and, unless
    /// [`tensor_cores_worth_tuning`] rules them out, Acc-SpMM (reordered as asked) under each
    /// schedule and (with `Balance::Auto`) each row-tile kernel and HRPB on the Acc-SpMM
    /// candidate's matrix, at width `opts.n`; keep the fastest. At `Precision::F32` only cuSPARSE
    /// and the CSR kernel are timed (3×TF32's bound, 2⁻²⁰ + γ_6k, exceeds F32's γ_k at every row
    /// length: it is what `Precision::Tf32x3` asks for, not a stand-in). On matrices of at least
    /// [`PRUNE_MIN_NNZ`] nonzeros with `Balance::Auto` the row-tile kernels and HRPB come first
    /// (on a host-only preparation) and Acc-SpMM is built only where its prediction is within
    /// [`HRPB_SKIP_FACTOR`] of the best measured. Each family of candidates
    /// is probed briefly and only its fastest probe, when it comes within [`PROBE_REJECT`] of the
    /// best so far, is timed in full (cuSPARSE's fastest algorithm always is, so the choice is
    /// never a kernel measured slower than cuSPARSE at its best). An Acc-SpMM candidate that
    /// cannot be prepared (too large for the u32 layout, …) leaves cuSPARSE and CSR, without
    /// timing the row-tile kernels.
    pub(super) fn prepare_tuned(
        &self,
        gpu: &Gpu,
        a: Source<'_>,
        opts: &PrepareOptions,
        device: Option<tcsparse_gpu::device_csr::DeviceCsr>,
    ) -> Result<Prepared, Error> {
        let n = opts.n.max(1);
        let stage = self.reorder_stage(&a, opts)?;
        let t = Instant::now();
        let fixed = |kernel, balance| PrepareOptions {
            kernel,
            balance,
            tune: false,
            ..opts.clone()
        };
        // cuSPARSE's stage: the stage itself when it runs in the same order (moved, not copied;
        // the tensor-core candidates, when built, copy cuSPARSE's matrix), else the original.
        let original_counts = stage.counts.clone();
        let (cus_stage, tc_stage) = if stage.forced || stage.perm.is_none() {
            (stage, None)
        } else {
            let original = Reordered {
                perm: None,
                ..stage.without_matrix()
            };
            (original, Some(stage))
        };
        // (The early upload is the original matrix's: cuSPARSE's set-up takes it when it runs in
        // the original order.)
        let mut cus_stage = cus_stage;
        cus_stage.device = device;
        let stage_reordered =
            tc_stage.as_ref().is_some_and(|s| s.perm.is_some()) || cus_stage.perm.is_some();
        let mut tuning = Tuning {
            gpu,
            samples: Vec::new(),
            bound: f64::INFINITY,
            costs: Vec::new(),
        };
        let t_family = Instant::now();
        // (Debug-level marks of where the tuning time goes: `RUST_LOG=tcsparse=debug`.)
        let mark = |what: std::fmt::Arguments<'_>| {
            tracing::debug!(
                "tuning +{:.1} ms: {what}",
                t_family.elapsed().as_secs_f64() * 1e3
            )
        };
        let mut cus =
            self.prepare_reordered(a, cus_stage, &fixed(KernelRequest::Cusparse, Balance::Auto))?;
        mark(format_args!(
            "cuSPARSE prepared (plan {:.1} ms, upload {:.1} ms)",
            cus.report.plan_s * 1e3,
            cus.report.upload_s * 1e3
        ));
        // The original matrix as cuSPARSE's preparation keeps it, shared by the candidates that
        // run in the original order (no further copies).
        let original = cus
            .perm
            .is_none()
            .then(|| std::sync::Arc::clone(cus.a.arc()));
        let a = original.as_ref().map_or(a, Source::Shared);
        let b = tuning_b(gpu, a.cols() * n)?;
        let mut c = gpu.alloc_zeros::<f32>(a.rows() * n)?;
        mark(format_args!("tuning's B and C on the device"));
        let cus_order = if cus.perm.is_some() {
            "reordered"
        } else {
            "original order"
        };
        // cuSPARSE at each of its CSR algorithms: for row-major B and C its default is CSR_ALG2,
        // and ALG1 or ALG3 ran 1.4–9.1× faster at 8 columns on the H200 (docs/kernels/spmv.md,
        // v13). Each is set up first by one untimed launch (one cuSPARSE refuses is skipped).
        let algs = cusparse_algs(gpu, &mut cus, &b, &mut c, n);
        mark(format_args!("cuSPARSE set up at {} algorithms", algs.len()));
        let no_sample = || Error::InvalidArgs("tuning: cuSPARSE's timing gave no sample".into());
        if algs.is_empty() {
            return Err(no_sample());
        }
        let cus_names: Vec<String> = algs
            .iter()
            .map(|alg| format!("cuSPARSE ({cus_order}) {}", alg.name()))
            .collect();
        // cuSPARSE is always timed in full (its fastest algorithm): every other candidate is
        // measured against it. (The first family: nothing bounds it yet, so its fastest probe is
        // always the finalist, and its full time is the bound.)
        let timed = tuning.family(
            &cus_names,
            |_, _| true,
            |i| {
                cus.set_cusparse_alg(algs[i]);
                cus.launch_prepared(1.0, &b, n, n, 0.0, &mut c, n)
            },
        )?;
        let Some((i, cus_ms)) = timed else {
            return Err(no_sample());
        };
        // The finalist's algorithm is kept; the others' set-ups (workspaces) are dropped.
        let cus_alg = algs[i];
        cus.keep_cusparse_alg(cus_alg);
        mark(format_args!("cuSPARSE timed, {} kept", cus_alg.name()));
        tuning.cost("cuSPARSE", t_family);
        // Our CUDA-core CSR kernel on the same (original-order) matrix as cuSPARSE, at each
        // nonzero budget per warp.
        let t_family = Instant::now();
        // (A's arrays copied from cuSPARSE's on the device rather than uploaded again.)
        let on_device = match &cus.dev {
            DeviceState::Cusparse { csr, .. } => Some(csr.buffers()),
            _ => None,
        };
        let csr_best = csr::tune(&mut tuning, &cus.a, on_device, &b, &mut c, n)?;
        tuning.cost("CSR", t_family);
        // The window-staged CSR kernel on the same matrix, at each slice (small and medium
        // matrices only, STAGED_TUNED_MAX_NNZ).
        let t_family = Instant::now();
        let staged_best = if cus.a.nnz() <= STAGED_TUNED_MAX_NNZ {
            let found = staged::tune(&mut tuning, Probe::new(&cus.a, &b, &mut c, n, None))?;
            tuning.cost("staged CSR", t_family);
            found
        } else {
            None
        };
        let csr_best = faster_cuda_core(csr_best, staged_best);
        // The tensor-core candidates: not built where the planner's class rules them out.
        let planner_cusparse = cus.plan.choice == KernelChoice::Cusparse;
        let tensor_cores = opts.precision == Precision::Tf32
            && tensor_cores_worth_tuning(planner_cusparse, stage_reordered, a.nnz());
        let pruned = opts.precision == Precision::Tf32 && !tensor_cores;
        let mut best: Fastest<Candidate> = Fastest::new();
        let mut acc_err = None;
        let mut skipped_hrpb = None;
        let mut skipped_acc = None;
        // The tensor-core candidates' matrix (reordered as asked): prepared for Acc-SpMM first
        // (small matrices, or no row-tile kernels to try), else host-only: the row-tile
        // kernels and HRPB are timed first and Acc-SpMM (its BitTCF build and upload) only
        // where its prediction is within HRPB_SKIP_FACTOR of the best measured (on the H200 it
        // was kept only on matrices of ≤ 9 k nonzeros, and on clustered256k-b256 its family
        // cost 200 ms against a row-tile kernel 2.5× faster).
        let acc_first = a.nnz() < PRUNE_MIN_NNZ || opts.balance != Balance::Auto;
        let t_family = Instant::now();
        let mut acc: Option<Prepared> = None;
        let mut host: Option<Prepared> = None;
        let mut acc_stage = None;
        if tensor_cores {
            let stage = match tc_stage {
                Some(stage) => stage,
                None => Reordered {
                    a_re: cus.perm.is_some().then(|| copy_csr(&cus.a)),
                    perm: cus.perm.clone(),
                    mode: cus.report.mode,
                    report: cus.report.reorder.clone(),
                    forced: true,
                    reorder_s: cus.report.reorder_s,
                    gate: cus.report.reorder_gate.clone(),
                    counts: original_counts,
                    device: None,
                },
            };
            if acc_first {
                match self.prepare_reordered(a, stage, &fixed(KernelRequest::AccSpmm, opts.balance))
                {
                    Ok(p) => acc = Some(p),
                    Err(e) => acc_err = Some(e.to_string()),
                }
            } else {
                acc_stage = Some(stage.without_matrix());
                // (Prepared as for Acc-SpMM, which keeps the reordering, but nothing built.)
                host = Some(self.prepare_host(
                    a,
                    stage,
                    &fixed(KernelRequest::AccSpmm, opts.balance),
                )?);
            }
        }
        if let Some(p) = acc.as_mut() {
            self.tune_acc(&mut tuning, &mut best, p, &b, &mut c, n, opts.balance)?;
            tuning.cost("Acc-SpMM", t_family);
        } else if tensor_cores && acc_first {
            tuning.cost("Acc-SpMM", t_family);
        }
        // The row-tile kernels on the same (reordered) matrix, each layout built once per
        // window height; a candidate keeps its device only while it is the fastest so far.
        // Dense-tile kernels are skipped where their tile copy would be too large
        // (dense_tiles_worth_trying).
        if let Some(p) = acc.as_ref().or(host.as_ref())
            && opts.balance == Balance::Auto
        {
            let order = if p.perm.is_some() {
                "reordered"
            } else {
                "original order"
            };
            let t_family = Instant::now();
            for same_height in ROW_TILE_KERNELS.chunk_by(|x, y| x.window_rows == y.window_rows) {
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
                        tune_row_tile(&mut tuning, &m, rt, &b, &mut c, n, order)?
                    {
                        best.offer(ms, || Candidate::RowTile(dev));
                    }
                }
            }
            tuning.cost("row-tile", t_family);
            let t_family = Instant::now();
            let predicted = p
                .plan
                .predictions
                .iter()
                .find(|k| k.kernel == KernelChoice::HrpbSpmm)
                .map(|k| k.ms);
            if hrpb_worth_tuning(predicted, tuning.bound, a.nnz()) {
                if let Some((ms, dev)) =
                    hrpb::tune(&mut tuning, Probe::new(&p.a, &b, &mut c, n, Some(order)))?
                {
                    best.offer(ms, || Candidate::Hrpb(dev));
                }
                tuning.cost("HRPB", t_family);
            } else {
                skipped_hrpb = predicted;
            }
            // The staged CSR kernel on the reordered matrix too (on the original order it ran
            // beside the CSR kernel above).
            if p.perm.is_some() && p.a.nnz() <= STAGED_TUNED_MAX_NNZ {
                let t_family = Instant::now();
                if let Some((ms, dev)) =
                    staged::tune(&mut tuning, Probe::new(&p.a, &b, &mut c, n, Some(order)))?
                {
                    best.offer(ms, || Candidate::Staged(Box::new(dev)));
                }
                tuning.cost("staged CSR (reordered)", t_family);
            }
        }
        // Acc-SpMM after the row-tile kernels (large matrices): only where it may still win.
        if let (Some(h), Some(stage)) = (host.as_ref(), acc_stage) {
            let t_family = Instant::now();
            let predicted = h
                .plan
                .predictions
                .iter()
                .filter(|k| matches!(k.kernel, KernelChoice::AccSpmm { .. }))
                .map(|k| k.ms)
                .min_by(f64::total_cmp);
            if hrpb_worth_tuning(predicted, tuning.bound, a.nnz()) {
                let stage = Reordered {
                    a_re: h.perm.is_some().then(|| copy_csr(&h.a)),
                    ..stage
                };
                match self.prepare_reordered(a, stage, &fixed(KernelRequest::AccSpmm, opts.balance))
                {
                    Ok(mut p) => {
                        self.tune_acc(&mut tuning, &mut best, &mut p, &b, &mut c, n, opts.balance)?;
                        acc = Some(p);
                    }
                    Err(e) => tracing::debug!("tuning: Acc-SpMM could not be prepared: {e}"),
                }
                tuning.cost("Acc-SpMM", t_family);
            } else {
                skipped_acc = predicted;
            }
        }
        // The matrix a row-tile or HRPB device is set into (Acc-SpMM's when it was built).
        let acc = acc.or(host);
        let tune_s = t.elapsed().as_secs_f64();
        let Tuning {
            samples: tuning,
            costs,
            ..
        } = tuning;
        let mut summary = tuning
            .iter()
            .map(|s| format!("{} {:.3} ms", s.candidate, s.ms))
            .collect::<Vec<_>>()
            .join(", ");
        if pruned {
            summary.push_str(
                "; tensor-core candidates not built (planner: cuSPARSE class, no reordering kept)",
            );
        }
        if let Some(p) = skipped_acc {
            summary.push_str(&format!(
                "; Acc-SpMM not built (predicted {p:.3} ms, over {HRPB_SKIP_FACTOR}× the best measured)"
            ));
        }
        if let Some(p) = skipped_hrpb {
            summary.push_str(&format!(
                "; HRPB not built (predicted {p:.3} ms, over {HRPB_SKIP_FACTOR}× the best measured)"
            ));
        }
        summary.push_str("; tuning cost");
        for (family, ms) in &costs {
            summary.push_str(&format!(" {family} {ms:.1} ms"));
        }
        let csr_best = csr_best.filter(|(ms, _)| *ms < cus_ms && best.beats(*ms));
        let mut chosen = match (csr_best, acc, best.into_inner()) {
            (Some((_, dev)), _, _) => cus.with_fastest(dev, n, &summary)?,
            (None, Some(mut p), Some((ms, Candidate::Acc(kind)))) if ms < cus_ms => {
                if p.report.kernel != (ExecKernel::AccSpmm { schedule: kind }) {
                    let sched = self.schedule(p.bittcf().row_window_offset(), kind, n);
                    p.set_schedule(&sched, kind)?;
                }
                p.report.kernel_note = format!(
                    "tuned at N = {n}: Acc-SpMM ({kind}) fastest ({summary}); planner: {}",
                    p.plan.reason
                );
                p
            }
            (None, Some(p), Some((ms, Candidate::RowTile(d)))) if ms < cus_ms => {
                p.with_fastest(DeviceState::RowTile(d), n, &summary)?
            }
            (None, Some(p), Some((ms, Candidate::Hrpb(d)))) if ms < cus_ms => {
                p.with_fastest(DeviceState::Family(d), n, &summary)?
            }
            (None, Some(p), Some((ms, Candidate::Staged(d)))) if ms < cus_ms => {
                p.with_fastest(DeviceState::Family(d), n, &summary)?
            }
            _ => {
                let why = acc_err.map_or_else(
                    || format!("fastest ({summary})"),
                    |e| format!("Acc-SpMM could not be prepared: {e}"),
                );
                cus.report.kernel_note = format!(
                    "tuned at N = {n}: cuSPARSE ({}) {why}; planner: {}",
                    cus_alg.name(),
                    cus.plan.reason
                );
                cus
            }
        };
        chosen.report.tuning = tuning;
        chosen.report.tune_s = tune_s;
        chosen.report.cusparse_ms = Some(cus_ms);
        Ok(chosen)
    }
}

impl Prepared {
    /// Runs `dev` from now on: the report names its kernel, thread blocks and split windows at
    /// width `n` (the note is the caller's).
    pub(super) fn install(&mut self, dev: DeviceState, n: usize) -> Result<(), Error> {
        if let Some(kernel) = dev.kernel() {
            self.report.kernel = kernel;
        }
        (self.report.thread_blocks, self.report.split_windows) = dev.blocks(n)?;
        self.dev = dev;
        Ok(())
    }

    /// `self` running `dev`, the tuning's fastest: the report names its kernel, thread blocks and
    /// split windows at width `n`, and the note the timings (`summary`).
    fn with_fastest(mut self, dev: DeviceState, n: usize, summary: &str) -> Result<Self, Error> {
        self.install(dev, n)?;
        self.report.kernel_note = format!(
            "tuned at N = {n}: {} fastest ({summary}); planner: {}",
            self.report.kernel, self.plan.reason
        );
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_cores_are_pruned_only_for_large_unreordered_cusparse_class_matrices() {
        // rmat20-ef11 (gate skipped the reordering, α Low): cuSPARSE and CSR only.
        assert!(!tensor_cores_worth_tuning(true, false, 11_166_427));
        // BlogCatalog (343 k, Low α) likewise.
        assert!(!tensor_cores_worth_tuning(true, false, 343_486));
        // cora, citeseer, west0067: tiny, a tensor-core kernel won there.
        assert!(tensor_cores_worth_tuning(true, false, 9_104));
        assert!(tensor_cores_worth_tuning(true, false, PRUNE_MIN_NNZ - 1));
        // A kept reordering, or a tensor-core class: everything is tried.
        assert!(tensor_cores_worth_tuning(true, true, 11_166_427));
        assert!(tensor_cores_worth_tuning(false, false, 30_863_235));
    }

    #[test]
    fn row_tile_schedules_are_probed_while_they_can_matter() {
        let bound = 0.4;
        // The first schedule is always probed.
        assert!(row_tile_probe_wanted(0, &[None; 5], bound));
        // 2× behind the best so far under its first schedule: nothing else.
        let slow = [Some(0.81), None, None, None, None];
        assert!((1..5).all(|i| !row_tile_probe_wanted(i, &slow, bound)));
        // 16 windows only when 4 beat 1; the splits in any case.
        let worse4 = [Some(0.45), Some(0.50), None, None, None];
        assert!(row_tile_probe_wanted(1, &worse4, bound));
        assert!(!row_tile_probe_wanted(2, &worse4, bound));
        assert!(row_tile_probe_wanted(3, &worse4, bound));
        assert!(row_tile_probe_wanted(4, &worse4, bound));
        let better4 = [Some(0.45), Some(0.42), None, None, None];
        assert!(row_tile_probe_wanted(2, &better4, bound));
    }

    #[test]
    fn hrpb_is_skipped_only_on_large_matrices_predicted_far_behind() {
        // clustered256k-b256: best 0.397 ms measured; a prediction of 0.9 ms is > 2× behind.
        assert!(!hrpb_worth_tuning(Some(0.9), 0.397, 30_863_235));
        assert!(hrpb_worth_tuning(Some(0.7), 0.397, 30_863_235));
        // Small matrices (where HRPB did win), no prediction, or nothing measured: built.
        assert!(hrpb_worth_tuning(Some(0.9), 0.397, 9_104));
        assert!(hrpb_worth_tuning(None, 0.397, 30_863_235));
        assert!(hrpb_worth_tuning(Some(0.9), f64::INFINITY, 30_863_235));
    }
}
