//! `--op distributed`: SpAMM (exp decay r = 0.02, N = `--multi-spamm-n`) and SpMM with one rank
//! per GPU beside the one-process split, on 1, 2 and 4 GPUs (the counts present), same problems,
//! same τ, same N. The bench starts itself once per rank
//! (`--op distributed-rank`, torch.distributed's variables, MASTER_ADDR = 127.0.0.1), exactly as
//! a launcher would on one host.
//!
//! Times, both modes, B resident: one process — the wall time from queueing every device's
//! product to the last one finishing; one rank per GPU — every rank starts a product right after a
//! small NCCL all-gather (the ranks' common start line), times it to its own completion, and a
//! product's time is the slowest rank's; median of `iters` products. Scaling = the 1-GPU time /
//! the G-GPU time of the same mode.
//!
//! Writes `multi-gpu-ranks-<device>.json` and `.md` (outside the regression gate, like
//! `multi-gpu-*`), whose lines `scaling (G GPUs): X.XX×` are the per-rank scaling of the worst
//! problem.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tcsparse::distributed::{DistributedSpmm, RankComm, local_rank_env, spamm_rank};
use tcsparse::formats::generate::exponential_decay_dense;
use tcsparse::gpu::Gpu;
use tcsparse::gpu::multi::{DeviceGroup, DeviceSet};
use tcsparse::gpu::spamm::{
    SpammBlock, SpammConfig, SpammOperands, SpammPrecision, TauTarget, norm_maps, spamm_block_rows,
};
use tcsparse::spamm::{DenseRef, SpammSplit, measured_error, spamm_on_group};
use tcsparse::{PrepareOptions, prepare_split};

use crate::{Args, backends, matrices};

/// One matrix on one GPU count, both modes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RanksCase {
    /// Matrix name, N and nonzeros.
    pub problem: String,
    /// GPUs (= ranks).
    pub gpus: usize,
    /// One process over `gpus` devices: median wall ms per product.
    pub one_process_ms: f64,
    /// One rank per GPU: median over products of the slowest rank's ms.
    pub ranks_ms: f64,
    /// Each rank's median ms (rank order).
    pub per_rank_ms: Vec<f64>,
    /// C rows per rank.
    pub row_ranges: Vec<(usize, usize)>,
    /// Relative error of the gathered C against f64 (sampled rows).
    pub rel_err: f64,
}

/// The results of one `--op distributed` run.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RanksReport {
    /// Exact command line.
    pub command: String,
    /// Device description.
    pub device: String,
    /// CUDA devices present.
    pub devices_present: usize,
    /// Every case.
    pub cases: Vec<RanksCase>,
}

/// What a rank reports to the parent (one `RANKS-RESULT {json}` line on rank 0's stdout).
#[derive(Serialize, Deserialize, Debug)]
struct RankResult {
    ranks_ms: f64,
    per_rank_ms: Vec<f64>,
    row_ranges: Vec<(usize, usize)>,
    rel_err: f64,
}

const RESULT_TAG: &str = "RANKS-RESULT ";
/// `--only` value of a rank running the SpAMM problem.
const SPAMM_NAME: &str = "spamm-exp-r0.02";
/// τ of the SpAMM problem, from the parent's one-process run to its ranks.
const SPAMM_TAU_ENV: &str = "TCSPARSE_BENCH_SPAMM_TAU";

fn spamm_cfg(target: TauTarget) -> SpammConfig {
    SpammConfig {
        precision: SpammPrecision::Tf32x3,
        block: SpammBlock::B64,
        s: 1,
        target,
    }
}

/// Rows sampled for SpAMM's measured error (of `limit` rows from 0).
fn spamm_rows(limit: usize) -> Vec<usize> {
    let k = 64.min(limit);
    (0..k).map(|i| i * limit / k.max(1)).collect()
}

/// The median wall time in ms of `iters` calls of `call`, after 3 untimed ones.
fn median_of_calls(iters: usize, mut call: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..3 {
        call()?;
    }
    let mut t = Vec::with_capacity(iters);
    for _ in 0..iters {
        let s = Instant::now();
        call()?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(t))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The matrices of `--only` (default: the two largest generated ones, as `--op multi`).
fn matrix_names(args: &Args) -> Vec<String> {
    args.only
        .clone()
        .unwrap_or_else(|| vec!["banded2m-hb32".into(), "reddit-like".into()])
}

fn generate(name: &str) -> Result<matrices::Matrix> {
    let specs: Vec<_> = matrices::generated_specs(false)
        .into_iter()
        .filter(|(n, _)| n == name)
        .collect();
    anyhow::ensure!(specs.len() == 1, "no generated matrix named {name}");
    matrices::generate(&specs)?
        .pop()
        .context("generating the matrix")
}

/// `--op distributed` (the parent) or `--op distributed-rank` (one rank, started by the parent).
pub fn run(args: &Args, command: String) -> Result<()> {
    if args.op == "distributed-rank" {
        return rank_main(args);
    }
    let gpu = Gpu::require().context("--op distributed needs a CUDA GPU")?;
    let present = Gpu::device_count();
    let n = args.multi_spmm_n;
    let iters = args.iters.clamp(1, 50);
    let mut cases = Vec::new();
    // SpAMM: τ for ‖E‖F/‖C‖F ≤ 1e-5 from the one-GPU run, then the same τ everywhere.
    {
        let sn = args.multi_spamm_n;
        eprintln!("distributed: generating exp decay {sn}×{sn}");
        let a = exponential_decay_dense(sn, 0.02);
        let cfg = spamm_cfg(TauTarget::RelError(1e-5));
        let ad = DenseRef::new(&a, sn, sn);
        let (_, run1) = spamm_on_group(&DeviceGroup::open(DeviceSet::default())?, ad, ad, &cfg)?;
        let full = SpammOperands::upload(&gpu, &a, &a, sn, sn, sn, cfg.precision)?;
        let (na, nb) = full.norms_host()?;
        let tiles = full.tiles();
        drop(full);
        let problem = format!("spamm exp-r0.02 N={sn} (τ {:.3e})", run1.tau);
        for g in crate::multi::counts(present) {
            let group = DeviceGroup::open(DeviceSet::first(g))?;
            let ranges =
                spamm_block_rows(&norm_maps(&na, &nb, tiles)?, run1.tau, sn, cfg.block, g)?;
            let mut split = SpammSplit::new(&group, ad, ad, &cfg, &ranges)?;
            split.schedule(run1.tau)?;
            let one_process_ms = median_of_calls(iters, || {
                split.run()?;
                Ok(split.synchronize()?)
            })?;
            drop(split);
            drop(group);
            let ranks = spawn_ranks(args, SPAMM_NAME, g, Some(run1.tau))?;
            cases.push(ranks_case(&problem, g, one_process_ms, ranks));
        }
    }
    for name in matrix_names(args) {
        let m = generate(&name)?;
        let problem = format!("spmm {name} N={n} ({} nnz)", m.csr.nnz());
        let b = backends::random_b(m.csr.cols(), n, 1);
        for g in crate::multi::counts(present) {
            let opts = PrepareOptions::builder().n(n).build();
            let mut split = prepare_split(DeviceSet::first(g), &m.csr, &opts)?;
            split.place_b(&b, n)?;
            let one_process_ms = median_of_calls(iters, || {
                split.run(1.0)?;
                Ok(split.synchronize()?)
            })?;
            drop(split);
            let ranks = spawn_ranks(args, &name, g, None)?;
            cases.push(ranks_case(&problem, g, one_process_ms, ranks));
        }
    }
    let report = RanksReport {
        command,
        device: backends::describe(&gpu),
        devices_present: present,
        cases,
    };
    print!("{}", markdown(&report));
    if let Some(out) = &args.out {
        for p in write(out, &report)? {
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// Starts `world` ranks of this binary on matrix `name`, waits (bounded), returns rank 0's result.
/// The case of `problem` on `gpus` GPUs: one process's median against the ranks' run (printed
/// on standard error too).
fn ranks_case(problem: &str, gpus: usize, one_process_ms: f64, r: RankResult) -> RanksCase {
    eprintln!(
        "distributed: {problem} on {gpus} GPU(s): one process {one_process_ms:.3} ms, one rank per GPU {:.3} ms (ranks {:?}), rel err {:.1e}",
        r.ranks_ms, r.per_rank_ms, r.rel_err
    );
    RanksCase {
        problem: problem.to_owned(),
        gpus,
        one_process_ms,
        ranks_ms: r.ranks_ms,
        per_rank_ms: r.per_rank_ms,
        row_ranges: r.row_ranges,
        rel_err: r.rel_err,
    }
}

fn spawn_ranks(args: &Args, name: &str, world: usize, tau: Option<f32>) -> Result<RankResult> {
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let port = tcsparse::distributed::free_local_port()?.to_string();
    let mut children = Vec::new();
    for rank in 0..world {
        let child = local_rank_env(&mut Command::new(&exe), rank, world, &port)
            .args(["--op", "distributed-rank", "--only", name])
            .args(["--multi-spmm-n", &args.multi_spmm_n.to_string()])
            .args(["--multi-spamm-n", &args.multi_spamm_n.to_string()])
            .env(
                SPAMM_TAU_ENV,
                tau.map_or(String::new(), |t| t.to_bits().to_string()),
            )
            .args(["--iters", &args.iters.clamp(1, 50).to_string()])
            .stdout(if rank == 0 {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting a rank")?;
        children.push(child);
    }
    // Generation and preparation of a large matrix take a while; past 20 minutes the ranks are
    // stopped.
    let deadline = Instant::now() + Duration::from_secs(1200);
    loop {
        let mut running = false;
        for c in &mut children {
            running |= matches!(c.try_wait(), Ok(None));
        }
        if !running {
            break;
        }
        if Instant::now() > deadline {
            for c in &mut children {
                let _ = c.kill();
            }
            anyhow::bail!("{world} ranks on {name}: still running after 20 minutes (killed)");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut result = None;
    for (rank, mut c) in children.into_iter().enumerate() {
        if rank == 0
            && let Some(out) = c.stdout.take()
        {
            for line in BufReader::new(out).lines() {
                let line = line?;
                if let Some(j) = line.strip_prefix(RESULT_TAG) {
                    result = Some(serde_json::from_str::<RankResult>(j)?);
                }
            }
        }
        let status = c.wait()?;
        anyhow::ensure!(
            status.success(),
            "rank {rank} of {world} on {name}: {status}"
        );
    }
    result.with_context(|| format!("rank 0 of {world} on {name} printed no result"))
}

/// One rank: joins the job, prepares its block, times `iters` products from a common start.
fn rank_main(args: &Args) -> Result<()> {
    let comm = RankComm::from_env()?;
    let names = matrix_names(args);
    anyhow::ensure!(names.len() == 1, "a rank runs one matrix (--only NAME)");
    if names[0] == SPAMM_NAME {
        return rank_spamm(args, &comm);
    }
    let m = generate(&names[0])?;
    let n = args.multi_spmm_n;
    let iters = args.iters.clamp(1, 50);
    let root = comm.rank() == 0;
    let b = root.then(|| backends::random_b(m.csr.cols(), n, 1));
    let opts = PrepareOptions::builder().n(n).build();
    let mut d = DistributedSpmm::prepare(comm, &m.csr, &opts)?;
    d.place_b(b.as_deref(), n, n)?;
    for _ in 0..3 {
        d.run(1.0)?;
        d.synchronize()?;
    }
    let mut mine = Vec::with_capacity(iters);
    let mut slowest = Vec::with_capacity(iters);
    for _ in 0..iters {
        // The common start line: a small all-gather every rank waits for.
        d.comm().all_gather_u64(0)?;
        let s = Instant::now();
        d.run(1.0)?;
        d.synchronize()?;
        let ms = s.elapsed().as_secs_f64() * 1e3;
        mine.push(ms);
        let all = d.comm().all_gather_u64(ms.to_bits())?;
        slowest.push(all.into_iter().map(f64::from_bits).fold(0.0, f64::max));
    }
    let per_rank: Vec<f64> = d
        .comm()
        .all_gather_u64(median(mine).to_bits())?
        .into_iter()
        .map(f64::from_bits)
        .collect();
    let ldc = n;
    let mut c = vec![0f32; if root { m.csr.rows() * n } else { 0 }];
    d.gather_c_to_root(root.then_some(&mut c[..]), ldc)?;
    if root {
        let rows = backends::sample_rows(&m.csr, 4096);
        let b = b.as_deref().unwrap_or(&[]);
        let (want, _) = backends::reference_rows(&m.csr, b, n, &rows);
        let got: Vec<f32> = rows
            .iter()
            .flat_map(|&r| c[r * n..r * n + n].iter().copied())
            .collect();
        let r = RankResult {
            ranks_ms: median(slowest),
            per_rank_ms: per_rank,
            row_ranges: d.row_ranges().to_vec(),
            rel_err: tcsparse::formats::reference::relative_error(&got, &want),
        };
        println!("{RESULT_TAG}{}", serde_json::to_string(&r)?);
    }
    Ok(())
}

/// Every rank's product times from a common start: (median of the slowest rank per product,
/// each rank's median).
fn timed_from_common_start(
    comm: &RankComm,
    iters: usize,
    mut product: impl FnMut() -> Result<()>,
) -> Result<(f64, Vec<f64>)> {
    for _ in 0..3 {
        product()?;
    }
    let mut mine = Vec::with_capacity(iters);
    let mut slowest = Vec::with_capacity(iters);
    for _ in 0..iters {
        comm.all_gather_u64(0)?;
        let s = Instant::now();
        product()?;
        let ms = s.elapsed().as_secs_f64() * 1e3;
        mine.push(ms);
        let all = comm.all_gather_u64(ms.to_bits())?;
        slowest.push(all.into_iter().map(f64::from_bits).fold(0.0, f64::max));
    }
    let per_rank = comm
        .all_gather_u64(median(mine).to_bits())?
        .into_iter()
        .map(f64::from_bits)
        .collect();
    Ok((median(slowest), per_rank))
}

/// One rank of the SpAMM problem at the parent's τ.
fn rank_spamm(args: &Args, comm: &RankComm) -> Result<()> {
    let sn = args.multi_spamm_n;
    let tau = std::env::var(SPAMM_TAU_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map(f32::from_bits)
        .with_context(|| format!("{SPAMM_TAU_ENV} (τ bits from the parent) not set"))?;
    let a = exponential_decay_dense(sn, 0.02);
    let root = comm.rank() == 0;
    let cfg = spamm_cfg(TauTarget::Tau(tau));
    let mut r = spamm_rank(comm, &a, root.then_some(&a[..]), sn, sn, sn, &cfg)?;
    let (ranks_ms, per_rank_ms) = timed_from_common_start(comm, args.iters.clamp(1, 50), || {
        r.rerun()?;
        r.synchronize()?;
        Ok(())
    })?;
    if root {
        // Rank 0's own rows: rows 0..r1 of C, sampled.
        let block = r.download_block(comm)?;
        let rows = spamm_rows(r.rows().1);
        let res = RankResult {
            ranks_ms,
            per_rank_ms,
            row_ranges: r.row_ranges().to_vec(),
            rel_err: measured_error(&a, &a, &block, sn, sn, &rows),
        };
        println!("{RESULT_TAG}{}", serde_json::to_string(&res)?);
    }
    Ok(())
}

/// The summary line of `g` GPUs: the worst matrix's per-rank scaling, with the one-process
/// scaling of the same matrix beside it.
pub fn scaling_line(r: &RanksReport, g: usize) -> String {
    let mut worst: Option<(f64, f64, &str)> = None;
    for c in r.cases.iter().filter(|c| c.gpus == g) {
        let Some(one) = r
            .cases
            .iter()
            .find(|o| o.gpus == 1 && o.problem == c.problem)
        else {
            continue;
        };
        let ranks = one.ranks_ms / c.ranks_ms;
        let process = one.one_process_ms / c.one_process_ms;
        if worst.is_none_or(|w| ranks < w.0) {
            worst = Some((ranks, process, &c.problem));
        }
    }
    match worst {
        Some((ranks, process, p)) => format!(
            "scaling ({g} GPUs): {ranks:.2}× (one rank per GPU, slowest rank, {p}; one process: {process:.2}×)"
        ),
        None => crate::multi::not_measured(g, r.devices_present),
    }
}

/// The report as Markdown (deterministic from the report alone).
pub fn markdown(r: &RanksReport) -> String {
    let mut s = format!(
        "# SpAMM and SpMM with one rank per GPU beside one process over several GPUs — {}\n\nCommand: `{}`\n\n\
         Times: median ms per product, B resident. One process: wall time from queueing every \
         device's product to the last one finishing. One rank per GPU (separate processes, NCCL \
         communicator from a unique id): the slowest rank's time from a common start. Scaling = \
         1-GPU time / G-GPU time of the same mode.\n\n",
        r.device, r.command
    );
    s.push_str("| problem | GPUs | one process ms | scaling | one rank per GPU ms | scaling | per-rank / one-process | ranks' ms | rows per rank | rel err |\n");
    s.push_str("|---|---:|---:|---:|---:|---:|---:|---|---|---:|\n");
    for c in &r.cases {
        let one = r
            .cases
            .iter()
            .find(|o| o.gpus == 1 && o.problem == c.problem);
        let sp = one.map_or("—".into(), |o| {
            format!("{:.2}×", o.one_process_ms / c.one_process_ms)
        });
        let sr = one.map_or("—".into(), |o| format!("{:.2}×", o.ranks_ms / c.ranks_ms));
        let ranks: Vec<String> = c.per_rank_ms.iter().map(|x| format!("{x:.3}")).collect();
        let rows: Vec<String> = c
            .row_ranges
            .iter()
            .map(|(a, b)| (b - a).to_string())
            .collect();
        s.push_str(&format!(
            "| {} | {} | {:.3} | {sp} | {:.3} | {sr} | {:.3} | {} | {} | {:.1e} |\n",
            c.problem,
            c.gpus,
            c.one_process_ms,
            c.ranks_ms,
            c.ranks_ms / c.one_process_ms,
            ranks.join(" / "),
            rows.join(" / "),
            c.rel_err
        ));
    }
    s.push('\n');
    for g in [2, 4] {
        s.push_str(&format!("- {}\n", scaling_line(r, g)));
    }
    s
}

/// Writes `multi-gpu-ranks-<device>.json` / `.md` into `out`.
pub fn write(out: &Path, r: &RanksReport) -> Result<Vec<PathBuf>> {
    crate::multi::write_pair(out, "multi-gpu-ranks", &r.device, r, &markdown(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(problem: &str, gpus: usize, one_process_ms: f64, ranks_ms: f64) -> RanksCase {
        RanksCase {
            problem: problem.into(),
            gpus,
            one_process_ms,
            ranks_ms,
            per_rank_ms: vec![ranks_ms; gpus],
            row_ranges: vec![(0, 10); gpus],
            rel_err: 1e-6,
        }
    }

    #[test]
    fn the_scaling_line_is_the_worst_matrix_per_rank() {
        let r = RanksReport {
            command: "tcsparse-bench --op distributed".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            devices_present: 2,
            cases: vec![
                case("banded", 1, 4.0, 4.2),
                case("banded", 2, 2.1, 2.4),
                case("reddit", 1, 8.0, 8.0),
                case("reddit", 2, 4.0, 4.2),
            ],
        };
        assert_eq!(
            scaling_line(&r, 2),
            "scaling (2 GPUs): 1.75× (one rank per GPU, slowest rank, banded; one process: 1.90×)"
        );
        // A count not run: the line every multi-GPU report prints (tested in `multi`).
        assert_eq!(scaling_line(&r, 4), crate::multi::not_measured(4, 2));
        let md = markdown(&r);
        assert!(
            md.contains("| banded | 2 | 2.100 | 1.90× | 2.400 | 1.75× | 1.143 | 2.400 / 2.400 | 10 / 10 | 1.0e-6 |"),
            "{md}"
        );
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
