//! `tcsparse spmm FILE --distributed` and `tcsparse spamm … --distributed`: one process per GPU,
//! started by a launcher (torchrun, srun, or by hand with RANK / WORLD_SIZE / LOCAL_RANK /
//! MASTER_ADDR / MASTER_PORT). SpMM: every rank reads the matrix, prepares its block of rows on
//! device LOCAL_RANK and runs its products; rank 0 prints the split, the time of the slowest rank
//! per product and the error of C gathered to it. SpAMM: every rank computes its slice of C's
//! block rows; rank 0 prints τ, the bound, the slowest rank's time and the measured error.

use crate::out::outln;
use tcsparse::PrepareOptions;
use tcsparse::distributed::{DistributedSpmm, RankComm, spamm_rank};
use tcsparse::formats::Csr;
use tcsparse::gpu::spamm::SpammConfig;

use super::demo;

/// Median of `iters` (≥ 1) timings of `f` after 3 untimed calls, in ms.
fn median_ms(iters: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let mut samples = Vec::new();
    for i in 0..iters.max(1) + 3 {
        let t = std::time::Instant::now();
        f()?;
        if i >= 3 {
            samples.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// Every rank's `x`, in rank order.
fn gather_f64(comm: &RankComm, x: f64) -> anyhow::Result<Vec<f64>> {
    Ok(comm
        .all_gather_u64(x.to_bits())?
        .into_iter()
        .map(f64::from_bits)
        .collect())
}

/// Joins the job (before reading the matrix, so a bad launcher environment fails at once), reads
/// `read()`'s matrix and runs the distributed product.
pub fn run_spmm(
    read: impl FnOnce() -> anyhow::Result<Csr>,
    opts: &PrepareOptions,
    n: usize,
    seed: u64,
    iters: usize,
) -> anyhow::Result<()> {
    let comm = RankComm::from_env()?;
    let (rank, world) = (comm.rank(), comm.world_size());
    let root = rank == 0;
    if root {
        let e = comm.env();
        outln!(
            "ranks     {world} ({:?} launcher; store {}), NCCL {}; rank 0 on device {}",
            e.launcher,
            e.store_addr(),
            comm.nccl(),
            e.local_rank
        )?;
    }
    let a = read()?;
    let t = std::time::Instant::now();
    let mut d = DistributedSpmm::prepare(comm, &a, opts)?;
    let prep = gather_f64(d.comm(), t.elapsed().as_secs_f64() * 1e3)?;
    let kernel = d.prepared().kernel().to_string();
    let bounds = gather_f64(d.comm(), d.prepared().error_bound())?;
    let b = root.then(|| demo::random_b(a.cols(), n, seed));
    // B broadcast, then the product on resident B (the hot path), then broadcast + product.
    d.place_b(b.as_deref(), n, n)?;
    let product = median_ms(iters, || {
        d.run(1.0)?;
        d.synchronize()?;
        Ok(())
    })?;
    let with_b = median_ms(iters, || {
        d.place_b(b.as_deref(), n, n)?;
        d.run(1.0)?;
        d.synchronize()?;
        Ok(())
    })?;
    let products = gather_f64(d.comm(), product)?;
    let with_bs = gather_f64(d.comm(), with_b)?;
    d.run(1.0)?;
    let mut c = vec![0f32; if root { a.rows() * n } else { 0 }];
    d.gather_c_to_root(root.then_some(&mut c[..]), n)?;
    if !root {
        return Ok(());
    }
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    outln!(
        "prepare   {:>10.1} ms  slowest rank (rank 0 kept {kernel})",
        max(&prep)
    )?;
    for (r, &(r0, r1)) in d.row_ranges().iter().enumerate() {
        outln!(
            "rank {r:<4} rows {r0}..{r1}: {} nonzeros, product {:.3} ms, with B broadcast {:.3} ms",
            a.row_offsets()[r1] - a.row_offsets()[r0],
            products[r],
            with_bs[r]
        )?;
    }
    let error = demo::error_vs_reference(&a, b.as_deref().unwrap_or(&[]), n, &c);
    let ms = max(&products);
    let m = demo::Measured {
        ms,
        gflops: 2.0 * a.nnz() as f64 * n as f64 / (ms * 1e-3) / 1e9,
        error,
        device_time: false,
        first_ms: None,
    };
    demo::print_measured(
        &format!(
            "{world} ranks, slowest rank's product (B resident; {:.3} ms with its broadcast)",
            max(&with_bs)
        ),
        n,
        max(&bounds),
        &m,
    )?;
    Ok(())
}

/// SpAMM of `a` (`m × k`) by `b` (`k × n`), every rank holding both (read or generated alike;
/// only rank 0's B is used), C's block rows split over the ranks.
pub fn run_spamm(
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
    cfg: &SpammConfig,
    what: &str,
    check_rows: usize,
) -> anyhow::Result<()> {
    let comm = RankComm::from_env()?;
    let (rank, world) = (comm.rank(), comm.world_size());
    let root = rank == 0;
    let t = std::time::Instant::now();
    let r = spamm_rank(&comm, a, root.then_some(b), m, n, k, cfg)?;
    let ms = gather_f64(&comm, t.elapsed().as_secs_f64() * 1e3)?;
    let mut c = vec![0f32; if root { m * n } else { 0 }];
    r.gather_to_root(&comm, root.then_some(&mut c[..]))?;
    if !root {
        return Ok(());
    }
    let run = r.run();
    outln!(
        "spamm {what}: {m}×{k} · {k}×{n}, {world} ranks (NCCL {})",
        comm.nccl()
    )?;
    outln!(
        "tau {:.4e}, valid ratio {:.4}%, bound ‖E‖F/‖C‖F ≤ {:.3e} (skipped products; attempts {}) + {:.0e} ({} rounding)",
        run.tau,
        100.0 * run.valid_ratio,
        run.rel_bound,
        run.attempts,
        cfg.precision.rounding_bound(),
        cfg.precision.name()
    )?;
    for (i, &(r0, r1)) in r.row_ranges().iter().enumerate() {
        outln!("rank {i:<4} rows {r0}..{r1}: {:.3} ms", ms[i])?;
    }
    let rows: Vec<usize> = {
        let cr = check_rows.min(m);
        (0..cr).map(|i| i * m / cr.max(1)).collect()
    };
    if !rows.is_empty() {
        let e = tcsparse::spamm::measured_error(a, b, &c, n, k, &rows);
        outln!("measured ‖E‖F/‖C‖F {e:.3e} ({} rows)", rows.len())?;
    }
    outln!(
        "spamm (norms, broadcasts, τ, product on every rank) {:.3} ms, slowest rank",
        ms.iter().copied().fold(0.0, f64::max)
    )?;
    Ok(())
}
