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

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

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

/// Where the launcher variables came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// torch.distributed's variables (torchrun, `torch.distributed.launch`, or set by hand).
    Torch,
    /// Slurm's (srun).
    Slurm,
}

/// One rank's place in the job, from the launcher's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankEnv {
    /// Global rank, `0..world_size`.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// Rank on this host: the CUDA device this rank uses.
    pub local_rank: usize,
    /// Host of rank 0.
    pub master_addr: String,
    /// The port rank 0's store listens on ([`RankEnv::from_lookup`] says how it is chosen).
    pub store_port: u16,
    /// How long the rendezvous may take.
    pub timeout: Duration,
    /// Which variables were read.
    pub launcher: Launcher,
}

fn parse_var<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<T>, RendezvousError> {
    match get(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
            RendezvousError::Env(format!("{name}={v:?} is not a valid non-negative number"))
        }),
    }
}

impl RankEnv {
    /// Reads the process environment ([`RankEnv::from_lookup`]).
    pub fn from_env() -> Result<Self, RendezvousError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the launcher variables through `get`:
    /// `RANK` + `WORLD_SIZE` (+ `LOCAL_RANK`) when `RANK` is set, else `SLURM_PROCID` +
    /// `SLURM_NTASKS` (+ `SLURM_LOCALID`). `LOCAL_RANK` may be left out only with one rank.
    /// `MASTER_ADDR` is needed with two or more ranks (Slurm does not set it: the job script
    /// exports the first host of the allocation). The store listens on `TCSPARSE_STORE_PORT`
    /// when set; else on `MASTER_PORT` (default 29500), or on `MASTER_PORT + 1` when torchrun's
    /// agent already holds `MASTER_PORT` with its own store (`TORCHELASTIC_USE_AGENT_STORE=True`).
    /// `TCSPARSE_DIST_TIMEOUT` (seconds, > 0) sets the timeout (default 300 s).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, RendezvousError> {
        let (launcher, rank_var, world_var, local_var) = if get("RANK").is_some() {
            (Launcher::Torch, "RANK", "WORLD_SIZE", "LOCAL_RANK")
        } else if get("SLURM_PROCID").is_some() {
            (
                Launcher::Slurm,
                "SLURM_PROCID",
                "SLURM_NTASKS",
                "SLURM_LOCALID",
            )
        } else {
            return Err(RendezvousError::Env(
                "neither RANK/WORLD_SIZE (torchrun) nor SLURM_PROCID/SLURM_NTASKS (srun) is set: \
                 start one process per GPU with a launcher, or set them by hand"
                    .into(),
            ));
        };
        let rank: usize = parse_var(&get, rank_var)?.unwrap_or(0);
        let world_size: usize = parse_var(&get, world_var)?.ok_or_else(|| {
            RendezvousError::Env(format!("{rank_var} is set but {world_var} is not"))
        })?;
        if world_size == 0 || world_size > MAX_WORLD_SIZE {
            return Err(RendezvousError::Env(format!(
                "{world_var}={world_size}: must be 1..={MAX_WORLD_SIZE}"
            )));
        }
        if rank >= world_size {
            return Err(RendezvousError::Env(format!(
                "{rank_var}={rank} is not below {world_var}={world_size}"
            )));
        }
        let local_rank = match parse_var::<usize>(&get, local_var)? {
            Some(l) => l,
            None if world_size == 1 => 0,
            None => {
                return Err(RendezvousError::Env(format!(
                    "{local_var} is not set (it picks this rank's GPU on its host)"
                )));
            }
        };
        let master_addr = match get("MASTER_ADDR") {
            Some(a) if !a.trim().is_empty() => a.trim().to_string(),
            _ if world_size == 1 => "127.0.0.1".to_string(),
            _ => {
                return Err(RendezvousError::Env(
                    "MASTER_ADDR is not set (the host of rank 0; under Slurm export the first \
                     host of the allocation)"
                        .into(),
                ));
            }
        };
        let master_port: u16 = parse_var(&get, "MASTER_PORT")?.unwrap_or(DEFAULT_MASTER_PORT);
        let agent_store = get("TORCHELASTIC_USE_AGENT_STORE")
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let store_port = match parse_var::<u16>(&get, "TCSPARSE_STORE_PORT")? {
            Some(p) => p,
            None if agent_store => master_port.checked_add(1).ok_or_else(|| {
                RendezvousError::Env("MASTER_PORT=65535 leaves no port for the store".into())
            })?,
            None => master_port,
        };
        let timeout = match parse_var::<f64>(&get, "TCSPARSE_DIST_TIMEOUT")? {
            None => DEFAULT_TIMEOUT,
            Some(s) if s > 0.0 && s <= 86_400.0 => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(RendezvousError::Env(format!(
                    "TCSPARSE_DIST_TIMEOUT={s}: must be in (0, 86400] seconds"
                )));
            }
        };
        Ok(Self {
            rank,
            world_size,
            local_rank,
            master_addr,
            store_port,
            timeout,
            launcher,
        })
    }

    /// `MASTER_ADDR:store_port`.
    pub fn store_addr(&self) -> String {
        if self.master_addr.contains(':') && !self.master_addr.starts_with('[') {
            format!("[{}]:{}", self.master_addr, self.store_port)
        } else {
            format!("{}:{}", self.master_addr, self.store_port)
        }
    }

    /// The whole rendezvous for this rank: rank 0 listens on every interface at the store port
    /// and hands out `make_payload()`'s bytes (called once the port is bound); the others join.
    /// Every rank returns the same payload, or an error within the timeout (+ [`REPLY_GRACE`]).
    /// One rank needs no network: it returns `make_payload()`'s bytes.
    pub fn rendezvous<E>(
        &self,
        make_payload: impl FnOnce() -> Result<[u8; PAYLOAD_BYTES], E>,
    ) -> Result<[u8; PAYLOAD_BYTES], E>
    where
        E: From<RendezvousError>,
    {
        if self.world_size == 1 {
            return make_payload();
        }
        if self.rank == 0 {
            let master = Master::bind(
                &format!("0.0.0.0:{}", self.store_port),
                self.world_size,
                self.timeout,
            )?;
            let payload = make_payload()?;
            master.serve(&payload)?;
            Ok(payload)
        } else {
            Ok(join(
                &self.store_addr(),
                self.rank,
                self.world_size,
                self.timeout,
            )?)
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RendezvousError {
    let what = what.into();
    move |source| RendezvousError::Io { what, source }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Rank 0's store: bound at creation (so that the others can connect while rank 0 makes the
/// payload), serving one rendezvous.
#[derive(Debug)]
pub struct Master {
    listener: TcpListener,
    world_size: usize,
    deadline: Instant,
    timeout: Duration,
}

fn reject(stream: &mut TcpStream, kind: RejectKind, reason: &str) {
    let mut r = reason.as_bytes();
    if r.len() > MAX_REASON {
        r = &r[..MAX_REASON];
        // Cut on a character boundary.
        while std::str::from_utf8(r).is_err() {
            r = &r[..r.len() - 1];
        }
    }
    let mut msg = vec![1u8, kind as u8];
    msg.extend_from_slice(&(r.len() as u16).to_le_bytes());
    msg.extend_from_slice(r);
    // Best effort: the peer may be gone; the master's own error is what matters.
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(&msg);
    let _ = stream.flush();
}

impl Master {
    /// Listens on `addr` (e.g. `0.0.0.0:29500`, or `127.0.0.1:0` for a free port) for a world of
    /// `world_size` ranks; the deadline is `timeout` from now.
    pub fn bind(addr: &str, world_size: usize, timeout: Duration) -> Result<Self, RendezvousError> {
        if world_size == 0 || world_size > MAX_WORLD_SIZE {
            return Err(RendezvousError::Env(format!(
                "world size {world_size}: must be 1..={MAX_WORLD_SIZE}"
            )));
        }
        let listener = TcpListener::bind(addr).map_err(|source| RendezvousError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(io("making the listener non-blocking"))?;
        Ok(Self {
            listener,
            world_size,
            deadline: Instant::now() + timeout,
            timeout,
        })
    }

    /// The address actually bound (the port, when bound to port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, RendezvousError> {
        self.listener
            .local_addr()
            .map_err(io("reading the bound address"))
    }

    /// Waits for ranks `1..world_size` to check in, then sends each the payload. On a failed
    /// check (wrong world size, duplicate or out-of-range rank) or at the deadline, every rank
    /// waiting is told why and the error is returned. A connection that is not a check-in of this
    /// protocol is refused ([`RejectKind::Malformed`]) and the wait goes on.
    pub fn serve(self, payload: &[u8; PAYLOAD_BYTES]) -> Result<(), RendezvousError> {
        let world = self.world_size;
        let mut waiting: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
        let mut arrived = 1usize; // rank 0 is this process
        let abort_all = |waiting: &mut [Option<TcpStream>], why: &str| {
            for s in waiting.iter_mut().flatten() {
                reject(s, RejectKind::Aborted, why);
            }
        };
        while arrived < world {
            let now = Instant::now();
            if now >= self.deadline {
                let missing: Vec<usize> = (1..world).filter(|&r| waiting[r].is_none()).collect();
                let e = RendezvousError::MissingRanks {
                    missing,
                    world_size: world,
                    waited: self.timeout,
                };
                abort_all(&mut waiting, &e.to_string());
                return Err(e);
            }
            let (mut stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if is_timeout(&e) || e.kind() == ErrorKind::Interrupted => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    let e = io("accepting a rank")(e);
                    abort_all(&mut waiting, &e.to_string());
                    return Err(e);
                }
            };
            let remaining = self.deadline.saturating_duration_since(Instant::now());
            let hello = read_hello(
                &mut stream,
                remaining.clamp(Duration::from_millis(10), Duration::from_secs(5)),
            );
            let (rank, theirs) = match hello {
                Ok(x) => x,
                Err(why) => {
                    // A stray connection (a port scanner, another service's client) must not end
                    // the rendezvous: refuse it and keep waiting.
                    tracing::warn!("rendezvous: refused {peer}: {why}");
                    reject(&mut stream, RejectKind::Malformed, &why);
                    continue;
                }
            };
            let fail = if theirs != world {
                Some((
                    RejectKind::WorldSize,
                    RendezvousError::WorldSizeMismatch {
                        rank,
                        theirs,
                        ours: world,
                    },
                ))
            } else if rank >= world {
                Some((
                    RejectKind::RankOutOfRange,
                    RendezvousError::RankOutOfRange {
                        rank,
                        world_size: world,
                    },
                ))
            } else if rank == 0 || waiting[rank].is_some() {
                Some((
                    RejectKind::DuplicateRank,
                    RendezvousError::DuplicateRank { rank },
                ))
            } else {
                None
            };
            if let Some((kind, e)) = fail {
                let why = e.to_string();
                reject(&mut stream, kind, &why);
                abort_all(&mut waiting, &why);
                return Err(e);
            }
            waiting[rank] = Some(stream);
            arrived += 1;
        }
        let mut msg = Vec::with_capacity(1 + PAYLOAD_BYTES);
        msg.push(0u8);
        msg.extend_from_slice(payload);
        for (rank, s) in waiting.iter_mut().enumerate() {
            if let Some(s) = s {
                s.set_write_timeout(Some(Duration::from_secs(5)))
                    .and_then(|()| s.write_all(&msg))
                    .and_then(|()| s.flush())
                    .map_err(io(format!("sending the unique id to rank {rank}")))?;
            }
        }
        Ok(())
    }
}

/// Reads a check-in: (rank, world size), or why it is not one.
fn read_hello(stream: &mut TcpStream, wait: Duration) -> Result<(usize, usize), String> {
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(wait)))
        .map_err(|e| format!("configuring the socket: {e}"))?;
    let mut buf = [0u8; HELLO_BYTES];
    stream.read_exact(&mut buf).map_err(|e| {
        if is_timeout(&e) {
            format!("no complete check-in within {wait:?}")
        } else {
            format!("reading the check-in: {e}")
        }
    })?;
    if &buf[0..4] != MAGIC {
        return Err(format!(
            "not a tcsparse check-in (starts {:02x?})",
            &buf[0..4]
        ));
    }
    let version = u16::from_le_bytes([buf[4], buf[5]]);
    if version != VERSION {
        return Err(format!(
            "protocol version {version}, this build speaks {VERSION}"
        ));
    }
    let rank = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let world = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]) as usize;
    Ok((rank, world))
}

/// The check-in message of `rank` in a world of `world_size`.
fn hello(rank: usize, world_size: usize) -> [u8; HELLO_BYTES] {
    let mut m = [0u8; HELLO_BYTES];
    m[0..4].copy_from_slice(MAGIC);
    m[4..6].copy_from_slice(&VERSION.to_le_bytes());
    m[8..12].copy_from_slice(&(rank as u32).to_le_bytes());
    m[12..16].copy_from_slice(&(world_size as u32).to_le_bytes());
    m
}

/// Joins the rendezvous at `addr` (`host:port`) as `rank` of `world_size`: connects (retrying
/// while the master is not up yet, until `timeout`), checks in and waits for the payload (until
/// `timeout` + [`REPLY_GRACE`] from the call).
pub fn join(
    addr: &str,
    rank: usize,
    world_size: usize,
    timeout: Duration,
) -> Result<[u8; PAYLOAD_BYTES], RendezvousError> {
    join_with_grace(addr, rank, world_size, timeout, REPLY_GRACE)
}

fn join_with_grace(
    addr: &str,
    rank: usize,
    world_size: usize,
    timeout: Duration,
    grace: Duration,
) -> Result<[u8; PAYLOAD_BYTES], RendezvousError> {
    if rank == 0 || rank >= world_size || world_size > MAX_WORLD_SIZE {
        return Err(RendezvousError::Env(format!(
            "rank {rank} of {world_size} cannot join (rank 0 is the master; ranks are below the world size ≤ {MAX_WORLD_SIZE})"
        )));
    }
    let start = Instant::now();
    let deadline = start + timeout;
    let mut pause = Duration::from_millis(20);
    let mut stream = loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let attempt = addr
            .to_socket_addrs()
            .map_err(|e| format!("resolving {addr}: {e}"))
            .and_then(|mut addrs| {
                addrs
                    .next()
                    .ok_or_else(|| format!("{addr} resolves to no address"))
            })
            .and_then(|sa| {
                TcpStream::connect_timeout(
                    &sa,
                    remaining.clamp(Duration::from_millis(1), Duration::from_secs(2)),
                )
                .map_err(|e| format!("connecting to {sa}: {e}"))
            });
        match attempt {
            Ok(s) => break s,
            Err(last) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(RendezvousError::MasterUnreachable {
                        addr: addr.to_string(),
                        waited: now - start,
                        last,
                    });
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    };
    let _ = stream.set_nodelay(true);
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .and_then(|()| stream.write_all(&hello(rank, world_size)))
        .and_then(|()| stream.flush())
        .map_err(io(format!("checking in at {addr}")))?;
    let reply_deadline = deadline + grace;
    let malformed = |why: String| RendezvousError::Malformed {
        from: addr.to_string(),
        why,
    };
    let mut read = |buf: &mut [u8]| -> Result<(), RendezvousError> {
        let remaining = reply_deadline.saturating_duration_since(Instant::now());
        stream
            .set_read_timeout(Some(remaining.max(Duration::from_millis(1))))
            .map_err(io("setting the read timeout"))?;
        stream.read_exact(buf).map_err(|e| {
            if is_timeout(&e) {
                RendezvousError::NoReply {
                    addr: addr.to_string(),
                    waited: start.elapsed(),
                }
            } else if e.kind() == ErrorKind::UnexpectedEof {
                malformed("the master closed the connection before replying".into())
            } else {
                RendezvousError::Io {
                    what: format!("reading the reply of {addr}"),
                    source: e,
                }
            }
        })
    };
    let mut status = [0u8; 1];
    read(&mut status)?;
    match status[0] {
        0 => {
            let mut payload = [0u8; PAYLOAD_BYTES];
            read(&mut payload)?;
            Ok(payload)
        }
        1 => {
            let mut head = [0u8; 3];
            read(&mut head)?;
            let kind = RejectKind::from_byte(head[0])
                .ok_or_else(|| malformed(format!("unknown refusal code {}", head[0])))?;
            let len = usize::from(u16::from_le_bytes([head[1], head[2]]));
            if len > MAX_REASON {
                return Err(malformed(format!("a refusal reason of {len} bytes")));
            }
            let mut reason = vec![0u8; len];
            read(&mut reason)?;
            Err(RendezvousError::Rejected {
                rank,
                kind,
                reason: String::from_utf8_lossy(&reason).into_owned(),
            })
        }
        other => Err(malformed(format!("reply status byte {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::thread;

    fn payload() -> [u8; PAYLOAD_BYTES] {
        std::array::from_fn(|i| (i * 7 + 3) as u8)
    }

    fn master(world: usize, timeout: Duration) -> (Master, String) {
        let m = Master::bind("127.0.0.1:0", world, timeout).unwrap();
        let addr = m.local_addr().unwrap().to_string();
        (m, addr)
    }

    fn spawn_join(
        addr: &str,
        rank: usize,
        world: usize,
        timeout: Duration,
    ) -> thread::JoinHandle<Result<[u8; PAYLOAD_BYTES], RendezvousError>> {
        let addr = addr.to_string();
        thread::spawn(move || join_with_grace(&addr, rank, world, timeout, Duration::from_secs(2)))
    }

    #[test]
    fn every_rank_gets_rank_zeros_payload() {
        let (m, addr) = master(4, Duration::from_secs(20));
        let joins: Vec<_> = (1..4)
            .map(|r| spawn_join(&addr, r, 4, Duration::from_secs(20)))
            .collect();
        m.serve(&payload()).unwrap();
        for j in joins {
            assert_eq!(j.join().unwrap().unwrap(), payload());
        }
    }

    #[test]
    fn a_rank_may_start_before_the_master() {
        // A free port, released, then bound by the master a little after the rank starts.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let j = spawn_join(&addr, 1, 2, Duration::from_secs(20));
        thread::sleep(Duration::from_millis(300));
        let m = Master::bind(&addr, 2, Duration::from_secs(20)).unwrap();
        m.serve(&payload()).unwrap();
        assert_eq!(j.join().unwrap().unwrap(), payload());
    }

    #[test]
    fn a_rank_that_never_arrives_ends_everyone_within_the_timeout() {
        let t = Duration::from_millis(600);
        let start = Instant::now();
        let (m, addr) = master(3, t);
        let j = spawn_join(&addr, 1, 3, t);
        let e = m.serve(&payload()).unwrap_err();
        assert!(
            matches!(&e, RendezvousError::MissingRanks { missing, world_size: 3, .. } if missing == &[2]),
            "{e}"
        );
        let e1 = j.join().unwrap().unwrap_err();
        assert!(
            matches!(&e1, RendezvousError::Rejected { rank: 1, kind: RejectKind::Aborted, reason } if reason.contains("[2]")),
            "{e1}"
        );
        assert!(
            start.elapsed() < t + Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_wrong_world_size_is_refused_on_both_sides() {
        let (m, addr) = master(2, Duration::from_secs(20));
        let j = spawn_join(&addr, 1, 3, Duration::from_secs(20));
        let e = m.serve(&payload()).unwrap_err();
        assert!(
            matches!(
                e,
                RendezvousError::WorldSizeMismatch {
                    rank: 1,
                    theirs: 3,
                    ours: 2
                }
            ),
            "{e}"
        );
        let e1 = j.join().unwrap().unwrap_err();
        assert!(
            matches!(&e1, RendezvousError::Rejected { kind: RejectKind::WorldSize, reason, .. } if reason.contains("world size 3")),
            "{e1}"
        );
    }

    #[test]
    fn a_duplicate_rank_is_refused_and_the_others_are_told() {
        let (m, addr) = master(3, Duration::from_secs(20));
        let first = spawn_join(&addr, 1, 3, Duration::from_secs(20));
        // Let the first check in before the second arrives.
        thread::sleep(Duration::from_millis(200));
        let second = spawn_join(&addr, 1, 3, Duration::from_secs(20));
        let e = m.serve(&payload()).unwrap_err();
        assert!(
            matches!(e, RendezvousError::DuplicateRank { rank: 1 }),
            "{e}"
        );
        let kinds: HashMap<_, _> = [first, second]
            .into_iter()
            .map(|j| match j.join().unwrap() {
                Err(RendezvousError::Rejected { kind, .. }) => (kind, ()),
                other => panic!("expected a refusal, got {other:?}"),
            })
            .collect();
        assert!(kinds.contains_key(&RejectKind::DuplicateRank), "{kinds:?}");
        assert!(kinds.contains_key(&RejectKind::Aborted), "{kinds:?}");
    }

    #[test]
    fn rank_zero_or_out_of_range_is_refused() {
        let (m, addr) = master(2, Duration::from_secs(20));
        let h = thread::spawn({
            let addr = addr.clone();
            move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.write_all(&hello(5, 2)).unwrap();
                let mut r = Vec::new();
                let _ = s.read_to_end(&mut r);
                r
            }
        });
        let e = m.serve(&payload()).unwrap_err();
        assert!(
            matches!(
                e,
                RendezvousError::RankOutOfRange {
                    rank: 5,
                    world_size: 2
                }
            ),
            "{e}"
        );
        let r = h.join().unwrap();
        assert_eq!(r[..2], [1, RejectKind::RankOutOfRange as u8]);
        // The client side refuses to claim rank 0 or a rank past the world.
        assert!(matches!(
            join(&addr, 0, 2, Duration::from_millis(10)),
            Err(RendezvousError::Env(_))
        ));
        assert!(matches!(
            join(&addr, 2, 2, Duration::from_millis(10)),
            Err(RendezvousError::Env(_))
        ));
    }

    #[test]
    fn a_malformed_check_in_is_refused_and_the_rendezvous_goes_on() {
        let (m, addr) = master(2, Duration::from_secs(20));
        // 16 bytes that are not a check-in (exactly the check-in's size: nothing left unread).
        let mut stray = TcpStream::connect(&addr).unwrap();
        stray.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        // A short write (4 bytes, then the peer closes) is refused the same way.
        let mut short = TcpStream::connect(&addr).unwrap();
        short.write_all(MAGIC).unwrap();
        drop(short);
        let j = spawn_join(&addr, 1, 2, Duration::from_secs(20));
        m.serve(&payload()).unwrap();
        assert_eq!(j.join().unwrap().unwrap(), payload());
        stray
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut r = Vec::new();
        let _ = stray.read_to_end(&mut r);
        assert_eq!(r[..2], [1, RejectKind::Malformed as u8]);
    }

    /// A server that is not a tcsparse master: answers each connection with `reply` and closes.
    fn fake_master(reply: &'static [u8]) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut hello = [0u8; HELLO_BYTES];
                let _ = s.read_exact(&mut hello);
                let _ = s.write_all(reply);
            }
        });
        addr
    }

    #[test]
    fn a_reply_that_is_not_the_protocol_is_a_malformed_error() {
        for reply in [
            &b"HTTP/1.1 400 Bad Request\r\n"[..],
            &[1u8, 99, 0, 0][..],
            &[1u8, 1, 255, 255][..],
            &[0u8, 1, 2][..],
        ] {
            let addr = fake_master(reply);
            let e = join_with_grace(&addr, 1, 2, Duration::from_secs(5), Duration::from_secs(1))
                .unwrap_err();
            assert!(
                matches!(e, RendezvousError::Malformed { .. }),
                "{reply:?}: {e}"
            );
        }
    }

    #[test]
    fn a_silent_master_is_a_timeout_not_a_hang() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        // Accepted by the kernel's backlog, never answered.
        let start = Instant::now();
        let e = join_with_grace(
            &addr,
            1,
            2,
            Duration::from_millis(300),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(e, RendezvousError::NoReply { .. }), "{e}");
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
        drop(l);
    }

    #[test]
    fn an_unreachable_master_is_an_error_within_the_timeout() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let start = Instant::now();
        let e = join(
            &format!("127.0.0.1:{port}"),
            1,
            2,
            Duration::from_millis(400),
        )
        .unwrap_err();
        assert!(
            matches!(e, RendezvousError::MasterUnreachable { .. }),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_port_in_use_is_a_bind_error() {
        let (_m, addr) = master(2, Duration::from_secs(1));
        let e = Master::bind(&addr, 2, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, RendezvousError::Bind { .. }), "{e}");
        assert!(e.to_string().contains("TCSPARSE_STORE_PORT"), "{e}");
    }

    fn env(vars: &[(&str, &str)]) -> Result<RankEnv, RendezvousError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RankEnv::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn torchrun_and_slurm_variables_are_read() {
        let t = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node17"),
            ("MASTER_PORT", "29600"),
            ("SLURM_PROCID", "5"),
        ])
        .unwrap();
        assert_eq!(
            t,
            RankEnv {
                rank: 3,
                world_size: 8,
                local_rank: 1,
                master_addr: "node17".into(),
                store_port: 29600,
                timeout: DEFAULT_TIMEOUT,
                launcher: Launcher::Torch,
            }
        );
        assert_eq!(t.store_addr(), "node17:29600");
        let s = env(&[
            ("SLURM_PROCID", "2"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "2"),
            ("MASTER_ADDR", "::1"),
            ("TCSPARSE_DIST_TIMEOUT", "2.5"),
        ])
        .unwrap();
        assert_eq!(
            (s.rank, s.world_size, s.local_rank, s.launcher),
            (2, 4, 2, Launcher::Slurm)
        );
        assert_eq!(s.store_port, DEFAULT_MASTER_PORT);
        assert_eq!(s.timeout, Duration::from_millis(2500));
        assert_eq!(s.store_addr(), "[::1]:29500");
        // torchrun's agent holds MASTER_PORT: the store takes the next one, or the one given.
        let a = [
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "0"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "1234"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ];
        assert_eq!(env(&a).unwrap().store_port, 1235);
        let mut b = a.to_vec();
        b.push(("TCSPARSE_STORE_PORT", "4000"));
        assert_eq!(env(&b).unwrap().store_port, 4000);
        // One rank needs neither LOCAL_RANK nor MASTER_ADDR.
        let one = env(&[("RANK", "0"), ("WORLD_SIZE", "1")]).unwrap();
        assert_eq!((one.local_rank, one.master_addr.as_str()), (0, "127.0.0.1"));
    }

    #[test]
    fn bad_launcher_variables_are_typed_errors() {
        let ok = [
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "h"),
        ];
        assert!(env(&ok).is_ok());
        let with = |k: &'static str, v: &'static str| {
            let mut x: Vec<(&str, &str)> = ok.iter().copied().filter(|(n, _)| *n != k).collect();
            if !v.is_empty() {
                x.push((k, v));
            }
            env(&x)
        };
        for (k, v, says) in [
            ("RANK", "2", "not below"),
            ("RANK", "-1", "RANK"),
            ("WORLD_SIZE", "", "WORLD_SIZE is not"),
            ("WORLD_SIZE", "0", "must be"),
            ("WORLD_SIZE", "99999999", "must be"),
            ("LOCAL_RANK", "", "LOCAL_RANK is not set"),
            ("LOCAL_RANK", "x", "LOCAL_RANK"),
            ("MASTER_ADDR", "", "MASTER_ADDR"),
            ("MASTER_PORT", "70000", "MASTER_PORT"),
            ("TCSPARSE_DIST_TIMEOUT", "0", "TCSPARSE_DIST_TIMEOUT"),
            ("TCSPARSE_DIST_TIMEOUT", "NaN", "TCSPARSE_DIST_TIMEOUT"),
        ] {
            match with(k, v) {
                Err(RendezvousError::Env(m)) => assert!(m.contains(says), "{k}={v}: {m}"),
                other => panic!("{k}={v:?}: {other:?}"),
            }
        }
        assert!(matches!(env(&[]), Err(RendezvousError::Env(_))));
    }

    #[test]
    fn one_rank_needs_no_network() {
        let one = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("TCSPARSE_STORE_PORT", "0"),
        ])
        .unwrap();
        let got = one
            .rendezvous(|| Ok::<_, RendezvousError>(payload()))
            .unwrap();
        assert_eq!(got, payload());
    }
}
