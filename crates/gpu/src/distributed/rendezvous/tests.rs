//! The rendezvous on loopback: the store, the check-ins and the launcher variables.

use super::store::{hello, join_with_grace};
use super::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

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
