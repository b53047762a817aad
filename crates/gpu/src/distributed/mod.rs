//! One rank per GPU, the way clusters run it (torchrun, Slurm, MPI launchers): each process owns
//! one device, and an NCCL communicator over all of them is built from a unique id that rank 0
//! makes (`ncclGetUniqueId`) and hands out through the [`rendezvous`] (a small TCP store on rank
//! 0, found through torch.distributed's variables). [`RankComm`] is that communicator with the
//! collectives tcsparse needs: a broadcast (B), an all-gather of small checks, and the gathers of
//! C's row blocks (to every rank, or to rank 0 only).
//!
//! NCCL is opened at run time (`libnccl.so` on the library path): a missing or too old library is
//! a typed error ([`DistributedError::NcclMissing`], [`DistributedError::NcclTooOld`]) before any
//! NCCL call. NVLink multicast stays off: a communicator is made only with `NCCL_NVLS_ENABLE=0` in
//! the environment (binaries set it first thing in `main`, see
//! [`crate::multi::disable_nvls_at_startup`]); nothing here calls cuMulticastCreate.
//!
//! `ncclCommInitRank` waits for every rank; the rendezvous before it makes sure every rank is
//! alive and agrees on the world, so that wait is bounded by NCCL's own bootstrap timeouts even
//! when a rank dies in between.

pub mod rendezvous;
pub mod spamm;

use cudarc::driver::{CudaSlice, CudaViewMut, DeviceRepr};
use cudarc::nccl::result::{NcclError, NcclStatus};
use cudarc::nccl::{Comm, Id, NcclType};

pub use rendezvous::{Launcher, RankEnv, RendezvousError};

use crate::multi::{nccl_available, nvls_disabled};
use crate::{Gpu, GpuError};

/// Oldest NCCL accepted: 2.7 brought `ncclSend`/`ncclRecv`, which the gather to rank 0 uses.
pub const MIN_NCCL: NcclVersion = NcclVersion {
    major: 2,
    minor: 7,
    patch: 0,
};

/// An NCCL release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NcclVersion {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl NcclVersion {
    /// Decodes `ncclGetVersion`'s code: `major·10000 + minor·100 + patch` from 2.9 on,
    /// `major·1000 + minor·100 + patch` before.
    pub fn from_code(code: i32) -> Option<Self> {
        let c = u32::try_from(code).ok()?;
        let v = if c >= 10_000 {
            Self {
                major: c / 10_000,
                minor: (c % 10_000) / 100,
                patch: c % 100,
            }
        } else {
            Self {
                major: c / 1000,
                minor: (c % 1000) / 100,
                patch: c % 100,
            }
        };
        (v.major > 0).then_some(v)
    }
}

impl std::fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Errors of the one-rank-per-GPU mode.
#[derive(Debug, thiserror::Error)]
pub enum DistributedError {
    /// The launcher environment or the rendezvous failed.
    #[error(transparent)]
    Rendezvous(#[from] RendezvousError),
    /// `libnccl.so` could not be opened.
    #[error(
        "libnccl.so not found on the library path (the distributed mode needs NCCL ≥ {MIN_NCCL}; \
         e.g. pip install nvidia-nccl-cu12 and put its lib folder on LD_LIBRARY_PATH)"
    )]
    NcclMissing,
    /// The NCCL library is older than [`MIN_NCCL`] (or reports a version that cannot be read).
    #[error("libnccl reports version {found}; the distributed mode needs ≥ {MIN_NCCL}")]
    NcclTooOld {
        /// What the library reported.
        found: String,
    },
    /// NVLink multicast is not switched off.
    #[error(
        "NCCL_NVLS_ENABLE is not 0: NVLink multicast must stay off (set NCCL_NVLS_ENABLE=0, or call \
         tcsparse_gpu::multi::disable_nvls_at_startup first thing in main)"
    )]
    NvlsEnabled,
    /// This rank's device is not there.
    #[error(
        "rank {rank} (local rank {local_rank}) needs CUDA device {local_rank}; {present} present on this host"
    )]
    NoDevice {
        /// Global rank.
        rank: usize,
        /// Local rank (= device ordinal).
        local_rank: usize,
        /// Devices present.
        present: usize,
    },
    /// An NCCL call failed.
    #[error("NCCL {call} failed on rank {rank}: {status}")]
    Nccl {
        /// Which call.
        call: &'static str,
        /// This rank.
        rank: usize,
        /// The NCCL status name.
        status: String,
    },
    /// The ranks disagree about something every rank must share (the matrix, N, …).
    #[error("ranks disagree: {0}")]
    Mismatch(String),
    /// The GPU runtime failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// The NCCL library's version, or why it cannot be used ([`MIN_NCCL`]).
pub fn nccl_version() -> Result<NcclVersion, DistributedError> {
    if !nccl_available() {
        return Err(DistributedError::NcclMissing);
    }
    let code =
        cudarc::nccl::result::get_nccl_version().map_err(|e| DistributedError::NcclTooOld {
            found: format!("none (ncclGetVersion failed: {:?})", e.0),
        })?;
    check_nccl_version(code)
}

/// Accepts `ncclGetVersion`'s `code` when it is at least [`MIN_NCCL`].
pub fn check_nccl_version(code: i32) -> Result<NcclVersion, DistributedError> {
    match NcclVersion::from_code(code) {
        Some(v) if v >= MIN_NCCL => Ok(v),
        Some(v) => Err(DistributedError::NcclTooOld {
            found: v.to_string(),
        }),
        None => Err(DistributedError::NcclTooOld {
            found: format!("code {code}"),
        }),
    }
}

/// One rank's device and its NCCL communicator over the whole job.
pub struct RankComm {
    gpu: Gpu,
    comm: Comm,
    env: RankEnv,
    nccl: NcclVersion,
}

impl_debug!(RankComm, |s|
    rank: s.env.rank, world_size: s.env.world_size, device: s.env.local_rank, nccl: s.nccl);

impl RankComm {
    /// Joins the job described by the launcher's environment ([`RankEnv::from_env`]).
    pub fn from_env() -> Result<Self, DistributedError> {
        Self::init(RankEnv::from_env()?)
    }

    /// Opens device `env.local_rank`, runs the rendezvous (rank 0 makes the unique id) and builds
    /// the communicator with `ncclCommInitRank`. Checks NCCL (present, ≥ [`MIN_NCCL`]) and
    /// `NCCL_NVLS_ENABLE=0` first.
    pub fn init(env: RankEnv) -> Result<Self, DistributedError> {
        let nccl = nccl_version()?;
        if !nvls_disabled() {
            return Err(DistributedError::NvlsEnabled);
        }
        let present = Gpu::device_count();
        if env.local_rank >= present {
            return Err(DistributedError::NoDevice {
                rank: env.rank,
                local_rank: env.local_rank,
                present,
            });
        }
        let gpu = Gpu::open_device(env.local_rank)?;
        let rank = env.rank;
        let id_bytes = env.rendezvous(|| -> Result<_, DistributedError> {
            let id = Id::new().map_err(|e| nccl_err("ncclGetUniqueId", rank, e))?;
            Ok((*id.internal()).map(|c| c as u8))
        })?;
        let id = Id::uninit(id_bytes.map(|b| b as std::ffi::c_char));
        // ncclCommInitRank takes the calling thread's current device: this rank's.
        gpu.context().bind_to_thread().map_err(GpuError::from)?;
        let comm = Comm::from_rank(gpu.stream().clone(), env.rank, env.world_size, id)
            .map_err(|e| nccl_err("ncclCommInitRank", rank, e))?;
        tracing::info!(
            "rank {rank}/{}: device {}, NCCL {nccl}",
            env.world_size,
            env.local_rank
        );
        Ok(Self {
            gpu,
            comm,
            env,
            nccl,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.env.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.env.world_size
    }

    /// The launcher's description of this rank.
    pub fn env(&self) -> &RankEnv {
        &self.env
    }

    /// This rank's device (context + stream; every collective is queued on its stream).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The NCCL library in use.
    pub fn nccl(&self) -> NcclVersion {
        self.nccl
    }

    fn err(
        &self,
        call: &'static str,
    ) -> impl FnOnce(cudarc::nccl::result::NcclError) -> DistributedError {
        let rank = self.env.rank;
        move |e| nccl_err(call, rank, e)
    }

    /// Broadcasts `buf` from `root` to every rank, in place (every rank passes a buffer of the
    /// same length; the root's holds the data). Queued on this rank's stream.
    pub fn broadcast<T: DeviceRepr + NcclType>(
        &self,
        buf: &mut CudaSlice<T>,
        root: usize,
    ) -> Result<(), DistributedError> {
        if buf.is_empty() {
            return Ok(());
        }
        self.comm
            .broadcast_in_place(buf, root_i32(root, self.world_size())?)
            .map_err(self.err("ncclBroadcast"))?;
        Ok(())
    }

    /// Every rank's `value`, in rank order (a small all-gather, waited for): how ranks check that
    /// they hold the same matrix and the same N.
    pub fn all_gather_u64(&self, value: u64) -> Result<Vec<u64>, DistributedError> {
        let send = self.gpu.upload(&[value])?;
        let mut recv = self.gpu.alloc_zeros::<u64>(self.world_size())?;
        self.comm
            .all_gather(&send, &mut recv)
            .map_err(self.err("ncclAllGather"))?;
        Ok(self.gpu.download(&recv)?)
    }

    /// Fails unless every rank passed the same `value` (`what` names it in the error).
    pub fn check_same(&self, what: &str, value: u64) -> Result<(), DistributedError> {
        let all = self.all_gather_u64(value)?;
        match all.iter().position(|&v| v != all[0]) {
            None => Ok(()),
            Some(r) => Err(DistributedError::Mismatch(format!(
                "{what}: rank 0 has {}, rank {r} has {} (every rank: {all:?})",
                all[0], all[r]
            ))),
        }
    }

    /// All-gather of unequal blocks: `full` holds every rank's block, rank r's at elements
    /// `offsets[r]..offsets[r + 1]`, and on entry this rank's block is already in place. On
    /// return (queued) every rank's `full` holds every block. One grouped broadcast per rank.
    pub fn all_gather_blocks<T: DeviceRepr + NcclType>(
        &self,
        full: &mut CudaSlice<T>,
        offsets: &[usize],
    ) -> Result<(), DistributedError> {
        self.check_offsets(full.len(), offsets)?;
        self.each_block_grouped(full, offsets, 0, "ncclBroadcast", |c, view, root| {
            c.broadcast_in_place(view, root)
        })
    }

    /// Copies `block` (this rank's rows `r0..r1` of a row-major matrix with `n` columns) into
    /// those rows of `full` on this rank's stream: its own block in place before
    /// [`RankComm::all_gather_blocks`] or, on rank 0, [`RankComm::gather_blocks_to_root`].
    pub fn place_own_block<T: DeviceRepr>(
        &self,
        block: &CudaSlice<T>,
        full: &mut CudaSlice<T>,
        (r0, r1): (usize, usize),
        n: usize,
    ) -> Result<(), GpuError> {
        if r1 > r0 {
            self.gpu
                .stream()
                .memcpy_dtod(
                    &block.slice(..(r1 - r0) * n),
                    &mut full.slice_mut(r0 * n..r1 * n),
                )
                .map_err(GpuError::from)?;
        }
        Ok(())
    }

    /// Gather of unequal blocks to rank 0: rank 0 passes `Some(full)` (its own block already in
    /// place at `offsets[0]..offsets[1]`), the others `None`; every rank passes its `block`
    /// (`offsets[r + 1] − offsets[r]` elements). Queued.
    pub fn gather_blocks_to_root<T: DeviceRepr + NcclType>(
        &self,
        block: &CudaSlice<T>,
        full: Option<&mut CudaSlice<T>>,
        offsets: &[usize],
    ) -> Result<(), DistributedError> {
        let rank = self.rank();
        let world = self.world_size();
        let mine = offsets.get(rank + 1).zip(offsets.get(rank));
        let Some((&hi, &lo)) = mine else {
            return Err(bad_offsets(offsets, world));
        };
        if block.len() < hi - lo {
            return Err(DistributedError::Gpu(GpuError::Invalid(format!(
                "rank {rank}'s block holds {} elements, its rows need {}",
                block.len(),
                hi - lo
            ))));
        }
        if rank == 0 {
            let Some(full) = full else {
                return Err(DistributedError::Gpu(GpuError::Invalid(
                    "rank 0 gathers into a buffer: pass Some(full)".into(),
                )));
            };
            self.check_offsets(full.len(), offsets)?;
            self.each_block_grouped(full, offsets, 1, "ncclRecv", |c, view, peer| {
                c.recv(view, peer)
            })?;
        } else if hi > lo {
            self.comm
                .send(&block.slice(..hi - lo), 0)
                .map_err(self.err("ncclSend"))?;
        }
        Ok(())
    }

    /// `op(comm, block, r)` on every nonempty block `r ≥ first` of `full` (elements
    /// `offsets[r]..offsets[r + 1]`, checked by the caller) inside one NCCL group, stopping at the
    /// first failure (`call` names `op` in its error); the group is closed also then.
    fn each_block_grouped<T: DeviceRepr + NcclType>(
        &self,
        full: &mut CudaSlice<T>,
        offsets: &[usize],
        first: usize,
        call: &'static str,
        op: impl Fn(&Comm, &mut CudaViewMut<'_, T>, i32) -> Result<NcclStatus, NcclError>,
    ) -> Result<(), DistributedError> {
        cudarc::nccl::result::group_start().map_err(self.err("ncclGroupStart"))?;
        let mut result = Ok(());
        for (r, w) in offsets.windows(2).enumerate().skip(first) {
            if w[1] > w[0] {
                let mut view = full.slice_mut(w[0]..w[1]);
                if let Err(e) = op(&self.comm, &mut view, r as i32) {
                    result = Err(self.err(call)(e));
                    break;
                }
            }
        }
        let end = cudarc::nccl::result::group_end().map_err(self.err("ncclGroupEnd"));
        result?;
        end?;
        Ok(())
    }

    fn check_offsets(&self, len: usize, offsets: &[usize]) -> Result<(), DistributedError> {
        let world = self.world_size();
        if offsets.len() != world + 1
            || offsets.windows(2).any(|w| w[0] > w[1])
            || offsets.last().is_some_and(|&l| l > len)
        {
            return Err(bad_offsets(offsets, world));
        }
        Ok(())
    }

    /// Waits for this rank's stream.
    pub fn synchronize(&self) -> Result<(), DistributedError> {
        Ok(self.gpu.synchronize()?)
    }
}

fn bad_offsets(offsets: &[usize], world: usize) -> DistributedError {
    DistributedError::Gpu(GpuError::Invalid(format!(
        "block offsets {offsets:?}: need {} increasing offsets within the buffer",
        world + 1
    )))
}

fn root_i32(root: usize, world: usize) -> Result<i32, DistributedError> {
    if root >= world {
        return Err(DistributedError::Gpu(GpuError::Invalid(format!(
            "root {root} in a world of {world}"
        ))));
    }
    Ok(root as i32)
}

fn nccl_err(
    call: &'static str,
    rank: usize,
    e: cudarc::nccl::result::NcclError,
) -> DistributedError {
    DistributedError::Nccl {
        call,
        rank,
        status: format!("{:?}", e.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_versions_decode_and_old_ones_are_refused() {
        let v = |major, minor, patch| NcclVersion {
            major,
            minor,
            patch,
        };
        assert_eq!(NcclVersion::from_code(22_603), Some(v(2, 26, 3)));
        assert_eq!(NcclVersion::from_code(2708), Some(v(2, 7, 8)));
        assert_eq!(NcclVersion::from_code(2604), Some(v(2, 6, 4)));
        assert_eq!(NcclVersion::from_code(0), None);
        assert_eq!(NcclVersion::from_code(-5), None);
        assert_eq!(check_nccl_version(22_603).unwrap(), v(2, 26, 3));
        assert_eq!(check_nccl_version(2708).unwrap().to_string(), "2.7.8");
        for code in [2604, 0, -1, 999] {
            let e = check_nccl_version(code).unwrap_err();
            assert!(
                matches!(e, DistributedError::NcclTooOld { .. }),
                "{code}: {e}"
            );
            assert!(e.to_string().contains("2.7.0"), "{e}");
        }
    }

    #[test]
    fn init_without_a_launcher_or_nccl_is_a_typed_error() {
        // No GPU, no NCCL here (CI) or the GPU machine (with both): either way, an environment
        // without launcher variables is refused before any device or NCCL work starts.
        let e = RankEnv::from_lookup(|_| None).unwrap_err();
        assert!(matches!(e, RendezvousError::Env(_)), "{e}");
        if !nccl_available() {
            assert!(matches!(nccl_version(), Err(DistributedError::NcclMissing)));
            let one = RankEnv::from_lookup(|k| match k {
                "RANK" => Some("0".into()),
                "WORLD_SIZE" => Some("1".into()),
                _ => None,
            })
            .unwrap();
            assert!(matches!(
                RankComm::init(one),
                Err(DistributedError::NcclMissing)
            ));
        }
    }
}
