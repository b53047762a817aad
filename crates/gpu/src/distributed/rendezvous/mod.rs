//! The rendezvous of one-rank-per-GPU runs: where a rank finds its place and the NCCL unique id.
//!
//! [`RankEnv`] reads torch.distributed's launcher variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `MASTER_ADDR`, `MASTER_PORT`, as torchrun sets them) or, without them, Slurm's
//! (`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, as srun sets them). Rank 0 then runs a small
//! TCP store ([`Master`]) on the store port; every other rank [`join`]s it, saying its rank and
//! the world size it was started with. Once every rank has checked in (no rank twice, every
//! world size equal), the master sends each one the 128-byte payload (the `ncclUniqueId`); if a
//! rank never arrives or a check fails, every waiting rank gets the reason instead. Nothing waits
//! past its timeout: the master stops at its deadline, a joining rank stops at its deadline plus
//! [`REPLY_GRACE`] (time for the master's own verdict to reach it).
//!
//! The wire format (little-endian): a check-in is 16 bytes, `b"TCSR"`, protocol version `u16`,
//! zero `u16`, rank `u32`, world size `u32`; the reply is `0` followed by the 128-byte payload,
//! or `1`, a [`RejectKind`] byte, a `u16` length and that many bytes of UTF-8 reason (≤ 1024).

use std::time::Duration;

mod env;
mod store;
#[cfg(test)]
mod tests;

pub use env::{Launcher, RankEnv};
pub use store::{Master, join};

/// Bytes of the payload the master hands out (`NCCL_UNIQUE_ID_BYTES`).
pub const PAYLOAD_BYTES: usize = 128;

/// Port used when `MASTER_PORT` is not set (torchrun's default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// Rendezvous timeout when `TCSPARSE_DIST_TIMEOUT` (seconds) is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a joining rank waits for the master's reply beyond its own timeout, so that the
/// master's verdict (e.g. "rank 3 never arrived") reaches it rather than a bare timeout.
pub const REPLY_GRACE: Duration = Duration::from_secs(5);

/// Largest world size accepted (a guard against a garbled variable, not a limit of NCCL's).
pub const MAX_WORLD_SIZE: usize = 1 << 16;

const MAGIC: &[u8; 4] = b"TCSR";
const VERSION: u16 = 1;
const HELLO_BYTES: usize = 16;
const MAX_REASON: usize = 1024;

/// Why the master refused a rank (sent on the wire as one byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectKind {
    /// The check-in was not a tcsparse check-in of this protocol version.
    Malformed = 1,
    /// The rank's world size differs from the master's.
    WorldSize = 2,
    /// Another process already checked in with this rank.
    DuplicateRank = 3,
    /// The rank is not below the world size.
    RankOutOfRange = 4,
    /// The rendezvous failed elsewhere (a rank never arrived, another rank's check failed).
    Aborted = 5,
}

impl RejectKind {
    fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => Self::Malformed,
            2 => Self::WorldSize,
            3 => Self::DuplicateRank,
            4 => Self::RankOutOfRange,
            5 => Self::Aborted,
            _ => return None,
        })
    }
}

/// Errors of the launcher environment and the rendezvous.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    /// A launcher variable is missing or not valid.
    #[error("launcher environment: {0}")]
    Env(String),
    /// The master's port could not be bound (in use, or not allowed).
    #[error(
        "rank 0 could not listen on {addr}: {source} (set TCSPARSE_STORE_PORT to a free port, the same on every rank)"
    )]
    Bind {
        /// Address asked for.
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Ranks that had not checked in by the deadline (seen by the master).
    #[error("rank(s) {missing:?} never arrived within {waited:?} (world size {world_size})")]
    MissingRanks {
        /// The ranks not seen.
        missing: Vec<usize>,
        /// World size.
        world_size: usize,
        /// How long the master waited.
        waited: Duration,
    },
    /// The master could not be reached before the deadline.
    #[error("master {addr} unreachable within {waited:?}: {last}")]
    MasterUnreachable {
        /// `host:port` tried.
        addr: String,
        /// How long this rank tried.
        waited: Duration,
        /// The last connection error.
        last: String,
    },
    /// The master accepted the check-in but sent no reply in time.
    #[error("no reply from master {addr} within {waited:?} after checking in")]
    NoReply {
        /// `host:port`.
        addr: String,
        /// How long this rank waited.
        waited: Duration,
    },
    /// A rank started with a world size other than the master's.
    #[error("rank {rank} was started with world size {theirs}, rank 0 with {ours}")]
    WorldSizeMismatch {
        /// The rank.
        rank: usize,
        /// Its world size.
        theirs: usize,
        /// The master's.
        ours: usize,
    },
    /// Two processes checked in with the same rank.
    #[error("rank {rank} checked in twice (two processes were given the same RANK)")]
    DuplicateRank {
        /// The rank.
        rank: usize,
    },
    /// A rank not below the world size checked in.
    #[error("rank {rank} checked in, but the world size is {world_size}")]
    RankOutOfRange {
        /// The rank.
        rank: usize,
        /// World size.
        world_size: usize,
    },
    /// A message that is not this protocol's (another service on the port, a truncated write).
    #[error("malformed rendezvous message from {from}: {why}")]
    Malformed {
        /// Peer address.
        from: String,
        /// What was wrong.
        why: String,
    },
    /// The master refused this rank; the reason it gave.
    #[error("rank 0 refused rank {rank} ({kind:?}): {reason}")]
    Rejected {
        /// This rank.
        rank: usize,
        /// The refusal.
        kind: RejectKind,
        /// The master's message.
        reason: String,
    },
    /// A socket operation failed.
    #[error("rendezvous I/O ({what}): {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}
