//! Rank 0's TCP store ([`Master`]) and the other ranks' check-in ([`join`]), with the wire format
//! of the module docs.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{
    HELLO_BYTES, MAGIC, MAX_REASON, MAX_WORLD_SIZE, PAYLOAD_BYTES, REPLY_GRACE, RejectKind,
    RendezvousError, VERSION,
};

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
pub(super) fn hello(rank: usize, world_size: usize) -> [u8; HELLO_BYTES] {
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

pub(super) fn join_with_grace(
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
