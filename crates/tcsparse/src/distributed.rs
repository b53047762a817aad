//! SpMM with one rank per GPU ([`DistributedSpmm`]): each process of the job (started by
//! torchrun, srun or by hand with torch.distributed's variables) owns one device and one
//! contiguous block of A's rows, the same nonzero-balanced split as the one-process mode
//! ([`tcsparse_planner::split::nonzero_rows`]). B is broadcast from rank 0 by NCCL; each rank writes its
//! block of C, which stays on its device ([`DistributedSpmm::local_c`]) or is gathered on request:
//! to every rank ([`DistributedSpmm::all_gather_c`]) or to rank 0's host
//! ([`DistributedSpmm::gather_c_to_root`]).
//!
//! Every rank reads the whole A and computes the whole split (cheap next to the preparation),
//! then prepares only its block; ranks check that they hold the same pattern and shape before
//! anything else. The communicator is [`RankComm`] (rendezvous + `ncclCommInitRank`). SpAMM in
//! this mode is [`spamm_rank`] (each rank a slice of C's block rows).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tcsparse::distributed::{DistributedSpmm, RankComm};
//! let comm = RankComm::from_env()?; // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//! let a = tcsparse::formats::mtx::read_matrix_market("A.mtx")?;
//! let mut d = DistributedSpmm::prepare(comm, &a, &tcsparse::PrepareOptions::default())?;
//! let n = 64;
//! let b = (d.rank() == 0).then(|| vec![1.0f32; a.cols() * n]); // only rank 0's B is read
//! d.place_b(b.as_deref(), n, n)?;
//! d.run(1.0)?;
//! let mut c = vec![0f32; if d.rank() == 0 { a.rows() * n } else { 0 }];
//! d.gather_c_to_root((d.rank() == 0).then_some(&mut c[..]), n)?;
//! # Ok(()) }
//! ```

use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_gpu::GpuError;
/// SpAMM with one rank per GPU: each rank a slice of C's block rows.
pub use tcsparse_gpu::distributed::spamm::{RankSpamm, spamm_rank};
pub use tcsparse_gpu::distributed::{
    DistributedError, Launcher, MIN_NCCL, NcclVersion, RankComm, RankEnv, RendezvousError,
};

use crate::spmm::row_block;
use crate::{Engine, Error, PrepareOptions, Prepared, RowOrder, pattern_checksum};

/// A free TCP port on this host's loopback address (bound and released at once): the
/// `MASTER_PORT` of a job whose ranks all run here ([`local_rank_env`]).
pub fn free_local_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Sets on `cmd` the environment of rank `rank` of a `world`-rank job whose ranks all run on this
/// host, as torchrun would: `RANK`, `WORLD_SIZE`, `LOCAL_RANK` (= `rank`, one GPU each),
/// `MASTER_ADDR` 127.0.0.1 and `MASTER_PORT` `port`; an inherited `TCSPARSE_STORE_PORT` or
/// torchelastic agent store removed, and NVLink multicast off (`NCCL_NVLS_ENABLE=0`).
pub fn local_rank_env<'a>(
    cmd: &'a mut std::process::Command,
    rank: usize,
    world: usize,
    port: &str,
) -> &'a mut std::process::Command {
    cmd.env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port)
        .env_remove("TCSPARSE_STORE_PORT")
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .env("NCCL_NVLS_ENABLE", "0")
}

/// One rank's share of a distributed SpMM.
pub struct DistributedSpmm {
    comm: RankComm,
    prepared: Prepared,
    ranges: Vec<(usize, usize)>,
    rows: usize,
    cols: usize,
    /// Columns of the B placed by [`DistributedSpmm::place_b`] (0 before).
    n: usize,
    b: Option<CudaSlice<f32>>,
    c: Option<CudaSlice<f32>>,
    full: Option<CudaSlice<f32>>,
}

impl std::fmt::Debug for DistributedSpmm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedSpmm")
            .field("comm", &self.comm)
            .field("rows", &self.rows())
            .field("kernel", &self.prepared.kernel())
            .finish()
    }
}

/// A 64-bit digest of `a`'s shape and pattern, the same on every rank that read the same matrix.
fn matrix_digest(a: &Csr) -> u64 {
    let p = pattern_checksum(a);
    let mut d = u64::from_le_bytes(p[..8].try_into().unwrap_or_default());
    for x in [a.rows() as u64, a.cols() as u64, a.nnz() as u64] {
        d = d.rotate_left(21) ^ x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    d
}

impl DistributedSpmm {
    /// Prepares this rank's block of `a` (every rank passes the same matrix: checked) with
    /// `opts` (its device order forced to [`RowOrder::Original`], so the block's C rows are A's
    /// rows as they are) on the communicator's device.
    pub fn prepare(comm: RankComm, a: &Csr, opts: &PrepareOptions) -> Result<Self, Error> {
        comm.check_same("matrix (shape and pattern digest)", matrix_digest(a))?;
        let ranges = crate::spmm::row_split(a, comm.world_size())?;
        let Some(&(r0, r1)) = ranges.get(comm.rank()) else {
            return Err(Error::InvalidArgs(format!(
                "rank {} of a split into {} blocks",
                comm.rank(),
                ranges.len()
            )));
        };
        let block = row_block(a, r0, r1)?;
        let mut o = opts.clone();
        o.device_order = RowOrder::Original;
        let prepared = Engine::with_gpu(comm.gpu().clone()).prepare_spmm(&block, &o)?;
        Ok(Self {
            comm,
            prepared,
            ranges,
            rows: a.rows(),
            cols: a.cols(),
            n: 0,
            b: None,
            c: None,
            full: None,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.comm.world_size()
    }

    /// The communicator.
    pub fn comm(&self) -> &RankComm {
        &self.comm
    }

    /// This rank's C rows `r0..r1`.
    pub fn rows(&self) -> (usize, usize) {
        self.ranges[self.comm.rank()]
    }

    /// Every rank's C rows, in rank order.
    pub fn row_ranges(&self) -> &[(usize, usize)] {
        &self.ranges
    }

    /// This rank's preparation (kernel, report).
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// Places B (`cols × n`, row-major, leading dimension `ldb`) on every rank: rank 0 passes
    /// `Some(b)`, which is uploaded and broadcast by NCCL; the others' argument is not read
    /// (pass `None`). Every rank passes the same `n` (checked). Allocates this rank's C block.
    /// Queued, not waited for.
    ///
    /// Whatever can fail on one rank alone (rank 0's B missing or too short, an allocation) is
    /// done first and the ranks agree before the broadcast, so that either every rank enters it or
    /// every rank returns an error.
    pub fn place_b(&mut self, b: Option<&[f32]>, n: usize, ldb: usize) -> Result<(), Error> {
        let local = self.stage_b(b, n, ldb);
        self.agree("N (columns of B)", local, n as u64)?;
        let Some(bd) = self.b.as_mut() else {
            return Err(Error::InvalidArgs("no B buffer after staging".into()));
        };
        self.comm.broadcast(bd, 0)?;
        self.n = n;
        Ok(())
    }

    /// Every rank's `token` (`u64::MAX` where `local` failed) all-gathered: this rank's own error,
    /// else an error naming a rank that failed or disagrees, else `Ok`.
    fn agree(&self, what: &str, local: Result<(), Error>, token: u64) -> Result<(), Error> {
        let mine = if local.is_ok() { token } else { u64::MAX };
        let all = self.comm.all_gather_u64(mine)?;
        local?;
        if let Some(r) = all.iter().position(|&v| v == u64::MAX) {
            return Err(DistributedError::Mismatch(format!(
                "{what}: rank {r} failed before the collective (its own error says why)"
            ))
            .into());
        }
        if let Some(r) = all.iter().position(|&v| v != all[0]) {
            return Err(DistributedError::Mismatch(format!(
                "{what}: rank 0 has {}, rank {r} has {} (every rank: {all:?})",
                all[0], all[r]
            ))
            .into());
        }
        Ok(())
    }

    /// This rank's part of [`DistributedSpmm::place_b`] before the broadcast: buffers, and on rank
    /// 0 the checked upload of B.
    fn stage_b(&mut self, b: Option<&[f32]>, n: usize, ldb: usize) -> Result<(), Error> {
        if n == 0 {
            return Err(Error::InvalidArgs("B needs at least one column".into()));
        }
        let gpu = self.comm.gpu().clone();
        let (r0, r1) = self.rows();
        let (need, c_len) = match (self.cols.checked_mul(n), (r1 - r0).checked_mul(n)) {
            (Some(x), Some(y)) => (x, y.max(1)),
            _ => {
                return Err(Error::InvalidArgs(format!(
                    "B or C of {n} columns overflows the address space"
                )));
            }
        };
        if self.b.as_ref().is_none_or(|x| x.len() != need.max(1)) {
            self.b = None;
            self.b = Some(gpu.alloc_zeros::<f32>(need.max(1))?);
        }
        if self.c.as_ref().is_none_or(|c| c.len() < c_len) {
            self.c = None;
            self.c = Some(gpu.alloc_zeros(c_len)?);
        }
        if self.comm.rank() != 0 {
            return Ok(());
        }
        let Some(b) = b else {
            return Err(Error::InvalidArgs(
                "rank 0 holds B: pass Some(b) there".into(),
            ));
        };
        if ldb < n
            || b.len()
                < self
                    .cols
                    .saturating_sub(1)
                    .saturating_mul(ldb)
                    .saturating_add(n)
        {
            return Err(Error::InvalidArgs(format!(
                "B must be {}×{n} with leading dimension ≥ {n} (ldb = {ldb}, {} values)",
                self.cols,
                b.len()
            )));
        }
        let Some(bd) = self.b.as_mut() else {
            return Err(Error::InvalidArgs("no B buffer".into()));
        };
        if need > 0 {
            let stream = gpu.stream();
            if ldb == n {
                stream
                    .memcpy_htod(&b[..need], &mut bd.slice_mut(..need))
                    .map_err(GpuError::from)?;
            } else {
                let compact: Vec<f32> = (0..self.cols)
                    .flat_map(|r| b[r * ldb..r * ldb + n].iter().copied())
                    .collect();
                stream
                    .memcpy_htod(&compact[..], &mut bd.slice_mut(..need))
                    .map_err(GpuError::from)?;
            }
        }
        Ok(())
    }

    /// Queues this rank's `C_r = α·A_r·B` (β = 0; B from [`DistributedSpmm::place_b`]).
    pub fn run(&mut self, alpha: f32) -> Result<(), Error> {
        let n = self.n;
        let (r0, r1) = self.rows();
        let (Some(b), Some(c)) = (&self.b, &mut self.c) else {
            return Err(Error::InvalidArgs(
                "DistributedSpmm::run before place_b".into(),
            ));
        };
        if r1 > r0 {
            self.prepared.spmm_device_at(alpha, b, n, n, 0.0, c, n)?;
        }
        Ok(())
    }

    /// Waits for this rank's device.
    pub fn synchronize(&self) -> Result<(), Error> {
        Ok(self.comm.synchronize()?)
    }

    /// This rank's C block (rows [`DistributedSpmm::rows`], `× n`, row-major), after
    /// [`DistributedSpmm::place_b`].
    pub fn local_c(&self) -> Option<&CudaSlice<f32>> {
        self.c.as_ref()
    }

    /// This rank's C block on the host (`(r1 − r0) × n`), waited for.
    pub fn download_local_c(&self) -> Result<Vec<f32>, Error> {
        let (r0, r1) = self.rows();
        let len = (r1 - r0) * self.n;
        let Some(c) = &self.c else {
            return Err(Error::InvalidArgs("no C before place_b".into()));
        };
        let mut out = vec![0f32; len];
        if len > 0 {
            self.comm.gpu().download_into(c, &mut out)?;
        }
        self.synchronize()?;
        Ok(out)
    }

    fn element_offsets(&self) -> Vec<usize> {
        let mut o: Vec<usize> = self.ranges.iter().map(|&(r0, _)| r0 * self.n).collect();
        o.push(self.rows * self.n);
        o
    }

    /// Copies this rank's block into a full `rows × n` buffer on its device (kept between
    /// calls).
    fn own_block_into_full(&mut self) -> Result<(), Error> {
        let (rows, len) = (self.rows(), (self.rows * self.n).max(1));
        if self.full.as_ref().is_none_or(|f| f.len() != len) {
            self.full = Some(self.comm.gpu().alloc_zeros(len)?);
        }
        let (Some(c), Some(full)) = (&self.c, &mut self.full) else {
            return Err(Error::InvalidArgs("no C before place_b".into()));
        };
        self.comm.place_own_block(c, full, rows, self.n)?;
        Ok(())
    }

    /// Gathers C on every rank (NCCL, one grouped broadcast per rank's block) and returns this
    /// rank's copy of the whole `rows × n` C (queued; synchronize before reading on the host).
    pub fn all_gather_c(&mut self) -> Result<&CudaSlice<f32>, Error> {
        if self.n == 0 {
            return Err(Error::InvalidArgs("all_gather_c before place_b".into()));
        }
        let local = self.own_block_into_full();
        self.agree("C gathered to every rank", local, 1)?;
        let offsets = self.element_offsets();
        let Some(full) = self.full.as_mut() else {
            return Err(Error::InvalidArgs("no C before place_b".into()));
        };
        self.comm.all_gather_blocks(full, &offsets)?;
        Ok(&*full)
    }

    /// Gathers C to rank 0's host (`rows × n`, leading dimension `ldc`): rank 0 passes
    /// `Some(c)`, the others `None` (they send their block). Waited for. Rank 0 checks `c` and
    /// the ranks agree before any block moves (as in [`DistributedSpmm::place_b`]).
    pub fn gather_c_to_root(&mut self, c: Option<&mut [f32]>, ldc: usize) -> Result<(), Error> {
        let n = self.n;
        if n == 0 {
            // The same on every rank: no collective has started.
            return Err(Error::InvalidArgs("gather_c_to_root before place_b".into()));
        }
        let root = self.comm.rank() == 0;
        let local = if !root {
            Ok(())
        } else {
            match &c {
                None => Err(Error::InvalidArgs(
                    "rank 0 receives C: pass Some(c) there".into(),
                )),
                Some(c)
                    if ldc < n
                        || c.len()
                            < self
                                .rows
                                .saturating_sub(1)
                                .saturating_mul(ldc)
                                .saturating_add(n) =>
                {
                    Err(Error::InvalidArgs(format!(
                        "C must be {}×{n} with leading dimension ≥ {n} (ldc = {ldc}, {} values)",
                        self.rows,
                        c.len()
                    )))
                }
                Some(_) => self.own_block_into_full(),
            }
        };
        self.agree("C gathered to rank 0", local, 1)?;
        let offsets = self.element_offsets();
        let Some(block) = &self.c else {
            return Err(Error::InvalidArgs("no C before place_b".into()));
        };
        if !root {
            self.comm.gather_blocks_to_root(block, None, &offsets)?;
            return self.synchronize();
        }
        let (Some(c), Some(full)) = (c, &mut self.full) else {
            return Err(Error::InvalidArgs(
                "rank 0 receives C: pass Some(c) there".into(),
            ));
        };
        self.comm
            .gather_blocks_to_root(block, Some(full), &offsets)?;
        let host = self.comm.gpu().download(full)?;
        if self.rows > 0 {
            for (r, row) in host[..self.rows * n].chunks_exact(n).enumerate() {
                c[r * ldc..r * ldc + n].copy_from_slice(row);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcsparse_formats::csr::csr_from_triplets;

    #[test]
    fn the_matrix_digest_tells_patterns_and_shapes_apart() {
        let t = [(0, 0, 1.0), (1, 2, 2.0), (2, 1, 3.0)];
        let a = csr_from_triplets(3, 3, &t).unwrap();
        // Same pattern, other values: the same digest (ranks check the pattern and the shape).
        let same = csr_from_triplets(3, 3, &[(0, 0, 5.0), (1, 2, 6.0), (2, 1, 7.0)]).unwrap();
        assert_eq!(matrix_digest(&a), matrix_digest(&same));
        let moved = csr_from_triplets(3, 3, &[(0, 0, 1.0), (1, 1, 2.0), (2, 1, 3.0)]).unwrap();
        let wider = csr_from_triplets(3, 4, &t).unwrap();
        let taller = csr_from_triplets(4, 3, &t).unwrap();
        for other in [&moved, &wider, &taller] {
            assert_ne!(matrix_digest(&a), matrix_digest(other));
        }
    }

    #[test]
    fn a_local_rank_command_reads_back_as_that_rank() {
        let mut cmd = std::process::Command::new("rank");
        cmd.env("TCSPARSE_STORE_PORT", "1")
            .env("NCCL_NVLS_ENABLE", "1");
        local_rank_env(&mut cmd, 2, 3, "29600");
        let envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                let s = |x: &std::ffi::OsStr| x.to_string_lossy().into_owned();
                (s(k), v.map(s))
            })
            .collect();
        // The command's own variables only (removed ones read as unset): not this process's.
        let get = |name: &str| {
            envs.iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.clone())
        };
        let env = RankEnv::from_lookup(get).unwrap();
        assert_eq!((env.rank, env.world_size, env.local_rank), (2, 3, 2));
        assert_eq!(
            (env.master_addr.as_str(), env.store_port),
            ("127.0.0.1", 29600)
        );
        assert_eq!(get("NCCL_NVLS_ENABLE").as_deref(), Some("0"));
        assert_eq!(get("TCSPARSE_STORE_PORT"), None);
        assert!(free_local_port().unwrap() > 0);
    }
}
