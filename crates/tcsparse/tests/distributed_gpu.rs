//! GPU tests of SpMM with one rank per GPU (ignored by default; they FAIL without a GPU, never
//! pass vacuously). As a cluster runs it: `ranks_as_processes_match_one_gpu` starts this test
//! binary once per rank (1 rank, then 2 and 4 where that many devices are present), each child
//! running `one_rank_of_a_distributed_product` with torch.distributed's variables (RANK,
//! WORLD_SIZE, LOCAL_RANK = its device, MASTER_ADDR = 127.0.0.1, a free MASTER_PORT). Every rank
//! checks its own C rows, C gathered to every rank and C gathered to rank 0 against the f64
//! reference and against the one-GPU product of the whole matrix on its device, and its slice of a
//! SpAMM product (exp decay, N = 1024) against the one-GPU SpAMM bit for bit.
//!
//! Run by hand on a GPU machine: `tcsparse-distributed_gpu --include-ignored --test-threads=1
//! --nocapture` (the bundle's run.sh does; `NCCL_NVLS_ENABLE=0`, libnccl.so on the library path).
//! With `TCSPARSE_REQUIRE_NCCL=1` a missing libnccl.so fails instead of skipping.

#[path = "../../gpu/tests/nccl_support/mod.rs"]
mod nccl_support;
mod split_support;

use nccl_support::want_nccl;
use split_support::{Reference, hub_matrix};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tcsparse::distributed::{
    DistributedError, DistributedSpmm, Launcher, RankComm, RankEnv, free_local_port, local_rank_env,
};
use tcsparse::formats::Csr;
use tcsparse::formats::generate::exponential_decay_dense;
use tcsparse::formats::reference::max_scaled_error;
use tcsparse::gpu::Gpu;
use tcsparse::gpu::distributed::spamm::spamm_rank;
use tcsparse::gpu::spamm::{SpammBlock, SpammConfig, SpammPrecision, TauTarget};
use tcsparse::spamm::{DenseRef, spamm_on_group};
use tcsparse::{PrepareOptions, RowOrder};

/// Set in a child started by [`ranks_as_processes_match_one_gpu`].
const ROLE_ENV: &str = "TCSPARSE_DIST_TEST_ROLE";
const RANK_TEST: &str = "one_rank_of_a_distributed_product";

/// Fails without a GPU. Opens no context (each rank opens only its own device).
fn require_gpu() {
    assert!(Gpu::device_count() > 0, "this test needs a CUDA GPU");
}

/// 3000 × 2000 with hub rows ([`hub_matrix`]).
fn matrix() -> Csr {
    hub_matrix(3000, 2000)
}

/// The environment of this process: a child's (from the parent), or a one-rank job.
fn rank_env() -> RankEnv {
    if std::env::var_os(ROLE_ENV).is_some() {
        RankEnv::from_env().expect("launcher variables from the parent test")
    } else {
        RankEnv::from_lookup(|k| match k {
            "RANK" => Some("0".into()),
            "WORLD_SIZE" => Some("1".into()),
            _ => None,
        })
        .unwrap()
    }
}

/// One rank's whole check. In a child: the rank the parent gave it; alone: a one-rank job.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_rank_of_a_distributed_product() {
    require_gpu();
    if !want_nccl() {
        eprintln!("libnccl.so not found: the distributed mode needs it; skipped");
        return;
    }
    let env = rank_env();
    assert_eq!(env.launcher, Launcher::Torch);
    let (rank, world) = (env.rank, env.world_size);
    let comm = RankComm::init(env).unwrap();
    assert_eq!((comm.rank(), comm.world_size()), (rank, world));
    let gpu = comm.gpu().clone();
    assert_eq!(gpu.context().ordinal(), comm.env().local_rank);

    let a = matrix();
    let n = 96;
    let r = Reference::new(&a, n);
    let (b, want, scale) = (&r.b, &r.want, &r.scale);
    let opts = PrepareOptions::builder().n(n).build();

    // The one-GPU product of the whole matrix on this rank's device.
    let mut one_opts = opts.clone();
    one_opts.device_order = RowOrder::Original;
    let (c1, bound1) = r.one_gpu(&gpu, &a, &one_opts, &format!("rank {rank}"));

    let mut d = DistributedSpmm::prepare(comm, &a, &opts).unwrap();
    let ranges = d.row_ranges().to_vec();
    assert_eq!(ranges.len(), world);
    assert_eq!(ranges.first().map(|r| r.0), Some(0));
    assert_eq!(ranges.last().map(|r| r.1), Some(a.rows()));
    assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "{ranges:?}");
    assert_eq!(
        ranges,
        tcsparse::planner::split::nonzero_rows(&a, world).unwrap()
    );
    // Each rank tunes its own block and may keep a TF32 kernel where another kept an f32 one:
    // the whole C is held to the loosest bound of the kernels run on every rank.
    let own_bound = d.prepared().error_bound().max(bound1);
    let bound = d
        .comm()
        .all_gather_u64(own_bound.to_bits())
        .unwrap()
        .into_iter()
        .map(f64::from_bits)
        .fold(own_bound, f64::max);

    // Only rank 0's B is read: the others pass garbage of the wrong size, or nothing.
    let junk = [f32::NAN; 3];
    let mine = if rank == 0 {
        Some(&b[..])
    } else if rank % 2 == 1 {
        Some(&junk[..])
    } else {
        None
    };
    // Rank 0 without B, then without C: every rank returns an error (rank 0 its own, the others
    // naming it) and none waits in a collective; the job goes on afterwards.
    let expect_refusal = |e: tcsparse::Error| {
        if rank == 0 {
            assert!(matches!(e, tcsparse::Error::InvalidArgs(_)), "rank 0: {e}");
        } else {
            assert!(
                matches!(&e, tcsparse::Error::Distributed(DistributedError::Mismatch(m)) if m.contains("rank 0 failed")),
                "rank {rank}: {e}"
            );
        }
    };
    expect_refusal(
        d.place_b(if rank == 0 { None } else { mine }, n, n)
            .unwrap_err(),
    );
    d.place_b(mine, n, n).unwrap();
    d.run(1.0).unwrap();
    expect_refusal(d.gather_c_to_root(None, n).unwrap_err());
    for round in 0..2 {
        d.place_b(mine, n, n).unwrap();
        d.run(1.0).unwrap();
        let local = d.download_local_c().unwrap();
        let (r0, r1) = d.rows();
        assert_eq!(local.len(), (r1 - r0) * n);
        let rows = r0 * n..r1 * n;
        let err = max_scaled_error(&local, &want[rows.clone()], &scale[rows.clone()]);
        assert!(
            err <= bound,
            "rank {rank} round {round}: own rows {err:.3e} > {bound:.3e}"
        );
        let diff = max_scaled_error(
            &local,
            &c1[rows.clone()]
                .iter()
                .map(|&x| f64::from(x))
                .collect::<Vec<_>>(),
            &scale[rows],
        );
        assert!(
            diff <= 2.0 * bound,
            "rank {rank}: against one GPU {diff:.3e} > 2·{bound:.3e}"
        );

        // Gathered to every rank.
        let host = {
            let full = d.all_gather_c().unwrap();
            gpu.download(full).unwrap()
        };
        let err = max_scaled_error(&host[..a.rows() * n], want, scale);
        assert!(
            err <= bound,
            "rank {rank}: all-gathered C {err:.3e} > {bound:.3e}"
        );

        // Gathered to rank 0's host (leading dimension n + 3: padding untouched).
        let ldc = n + 3;
        let mut c = vec![f32::NAN; a.rows() * ldc];
        d.gather_c_to_root((rank == 0).then_some(&mut c[..]), ldc)
            .unwrap();
        if rank == 0 {
            let packed: Vec<f32> = c
                .chunks_exact(ldc)
                .flat_map(|r| r[..n].iter().copied())
                .collect();
            let err = max_scaled_error(&packed, want, scale);
            assert!(err <= bound, "rank 0: gathered C {err:.3e} > {bound:.3e}");
            assert!(
                c.chunks_exact(ldc)
                    .all(|r| r[n..].iter().all(|x| x.is_nan()))
            );
        }
    }
    eprintln!(
        "rank {rank}/{world}: rows {:?}, {}, ok",
        d.rows(),
        d.prepared().kernel()
    );

    // SpAMM with each rank a slice of C's block rows: bit for bit the one-GPU product (the same τ
    // from the same norm maps, each C block computed by the same kernel code), on the rank and
    // gathered to rank 0.
    let sn = 1024;
    let sa = exponential_decay_dense(sn, 0.02);
    let cfg = SpammConfig {
        precision: SpammPrecision::Tf32x3,
        block: SpammBlock::B64,
        s: 1,
        target: TauTarget::ValidRatio(0.3),
    };
    let one = tcsparse::DeviceGroup::host_staged(vec![gpu.clone()], "one handle").unwrap();
    let (c1, run1) = spamm_on_group(
        &one,
        DenseRef::new(&sa, sn, sn),
        DenseRef::new(&sa, sn, sn),
        &cfg,
    )
    .unwrap();
    let sb = (rank == 0).then_some(&sa[..]);
    let mut r = spamm_rank(d.comm(), &sa, sb, sn, sn, sn, &cfg).unwrap();
    assert_eq!(r.run().tau, run1.tau, "rank {rank}");
    assert_eq!(r.run().valid_products, run1.valid_products, "rank {rank}");
    assert_eq!(r.row_ranges().len(), world);
    let (s0, s1) = r.rows();
    assert!(
        r.download_block(d.comm()).unwrap() == c1[s0 * sn..s1 * sn],
        "rank {rank}: SpAMM rows {s0}..{s1} differ from one GPU"
    );
    // Again at the same τ (the bench's timed call): the same bits.
    r.rerun().unwrap();
    r.synchronize().unwrap();
    assert!(
        r.download_block(d.comm()).unwrap() == c1[s0 * sn..s1 * sn],
        "rank {rank}: SpAMM rerun differs"
    );
    let mut cg = vec![f32::NAN; if rank == 0 { sn * sn } else { 0 }];
    r.gather_to_root(d.comm(), (rank == 0).then_some(&mut cg[..]))
        .unwrap();
    if rank == 0 {
        assert!(cg == c1, "gathered SpAMM C differs from one GPU");
    }
    // A relative-error target: τ refined by every rank together, the bound met.
    let target = 1e-4;
    let cfg_e = SpammConfig {
        target: TauTarget::RelError(target),
        ..cfg
    };
    let re = spamm_rank(d.comm(), &sa, sb, sn, sn, sn, &cfg_e).unwrap();
    assert!(re.run().rel_bound <= target, "rank {rank}: {:?}", re.run());
    eprintln!(
        "rank {rank}/{world}: SpAMM rows {s0}..{s1}, τ {}, ok",
        r.run().tau
    );
}

/// Starts `world` children of this test binary, one per device, and waits (bounded) for all.
fn run_ranks(world: usize) {
    let exe = std::env::current_exe().unwrap();
    let port = free_local_port().unwrap().to_string();
    let mut children = Vec::new();
    for rank in 0..world {
        let child = local_rank_env(&mut Command::new(&exe), rank, world, &port)
            .args([
                RANK_TEST,
                "--exact",
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE_ENV, "rank")
            .env("TCSPARSE_DIST_TIMEOUT", "120")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.push(child);
    }
    // Bounded wait: the rendezvous ends by itself after 120 s (+ grace); past 300 s the children
    // are killed and the test fails.
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut pending: Vec<usize> = (0..world).collect();
    while !pending.is_empty() && Instant::now() < deadline {
        pending.retain(|&r| matches!(children[r].try_wait(), Ok(None)));
        std::thread::sleep(Duration::from_millis(100));
    }
    let timed_out = !pending.is_empty();
    for &r in &pending {
        let _ = children[r].kill();
    }
    let mut failures = Vec::new();
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!(
            "--- rank {rank}/{world} ({}):\n{stdout}{stderr}",
            out.status
        );
        // The filter must have matched and the test run (not 0 tests passing).
        if !out.status.success() || !stdout.contains("1 passed") {
            failures.push(rank);
        }
    }
    assert!(
        !timed_out,
        "ranks {pending:?} of {world} still running after 300 s (killed)"
    );
    assert!(
        failures.is_empty(),
        "ranks {failures:?} of {world} failed (output above)"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ranks_as_processes_match_one_gpu() {
    require_gpu();
    if std::env::var_os(ROLE_ENV).is_some() {
        // A child runs only its rank (it is started with --exact); nothing to do here.
        return;
    }
    if !want_nccl() {
        eprintln!("libnccl.so not found: the distributed mode needs it; skipped");
        return;
    }
    let present = Gpu::device_count();
    for world in [1, 2, 4] {
        if world > present {
            eprintln!("{world} ranks: {present} device(s) present, not run");
            continue;
        }
        run_ranks(world);
    }
}
