//! Cache round trips and every corruption case: a bad file gives a typed error, never a panic.

#[path = "support/bittcf_mirror.rs"]
mod bittcf_mirror;
use bittcf_mirror::Mirror;
use std::path::PathBuf;
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::cache::{self, CacheError, HEADER_LEN};
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::metcf::MeTcf;

fn sample() -> Csr {
    let t: Vec<_> = (0..40u32)
        .map(|i| (i % 19, (i * 7) % 23, i as f32 - 3.0))
        .collect();
    csr_from_triplets(19, 23, &t).unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcsparse-fmt-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn every_layout_round_trips_through_the_cache() {
    let a = sample();
    let p = tmp("rt").join("rt.bin");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let f = BitTcf::from_csr(&a).unwrap();
    cache::save(&p, &f, &a).unwrap();
    assert_eq!(cache::load::<BitTcf>(&p, Some(&a)).unwrap(), f);
    let f = MeTcf::from_csr(&a).unwrap();
    cache::save(&p, &f, &a).unwrap();
    assert_eq!(cache::load::<MeTcf>(&p, Some(&a)).unwrap(), f);
    let f = Hrpb::from_csr(&a).unwrap();
    cache::save(&p, &f, &a).unwrap();
    assert_eq!(cache::load::<Hrpb>(&p, None).unwrap(), f);
    let f = BitBsr::from_csr(&a).unwrap();
    cache::save(&p, &f, &a).unwrap();
    assert_eq!(cache::load::<BitBsr>(&p, Some(&a)).unwrap(), f);
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
    assert_eq!(left.len(), 1);
}

fn file_bytes() -> (Csr, Vec<u8>) {
    let a = sample();
    let p = tmp("bytes.bin");
    cache::save(&p, &BitTcf::from_csr(&a).unwrap(), &a).unwrap();
    (a, std::fs::read(&p).unwrap())
}

#[test]
fn flipped_payload_byte_is_detected_at_every_position() {
    let (a, bytes) = file_bytes();
    for i in HEADER_LEN..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x40;
        assert!(
            matches!(
                cache::decode::<BitTcf>(&b, Some(&a)),
                Err(CacheError::Corrupted)
            ),
            "byte {i}"
        );
    }
}

#[test]
fn flipped_header_bytes_give_typed_errors() {
    let (a, bytes) = file_bytes();
    for i in 0..HEADER_LEN {
        let mut b = bytes.clone();
        b[i] ^= 0x01;
        let e = cache::decode::<BitTcf>(&b, Some(&a)).unwrap_err();
        let ok = match i {
            0..8 => matches!(e, CacheError::BadMagic),
            8..12 => matches!(e, CacheError::WrongVersion { .. }),
            12 => matches!(e, CacheError::WrongKind { .. }),
            13..45 => matches!(e, CacheError::WrongSource),
            45..53 => matches!(
                e,
                CacheError::Truncated { .. } | CacheError::TrailingBytes(_)
            ),
            _ => matches!(e, CacheError::Corrupted),
        };
        assert!(ok, "byte {i}: {e}");
    }
}

#[test]
fn truncation_at_every_length_is_an_error() {
    let (a, bytes) = file_bytes();
    for len in 0..bytes.len() {
        let e = cache::decode::<BitTcf>(&bytes[..len], Some(&a)).unwrap_err();
        assert!(matches!(e, CacheError::Truncated { .. }), "len {len}: {e}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        cache::decode::<BitTcf>(&longer, Some(&a)),
        Err(CacheError::TrailingBytes(1))
    ));
}

#[test]
fn wrong_kind_version_and_source() {
    let (a, bytes) = file_bytes();
    assert!(matches!(
        cache::decode::<MeTcf>(&bytes, Some(&a)),
        Err(CacheError::WrongKind {
            found: 1,
            expected: 2
        })
    ));
    let mut v = bytes.clone();
    v[8..12].copy_from_slice(&99u32.to_le_bytes());
    assert!(matches!(
        cache::decode::<BitTcf>(&v, None),
        Err(CacheError::WrongVersion { found: 99, .. })
    ));
    let other = csr_from_triplets(19, 23, &[(0, 0, 1.0)]).unwrap();
    assert!(matches!(
        cache::decode::<BitTcf>(&bytes, Some(&other)),
        Err(CacheError::WrongSource)
    ));
    // Same pattern, one value changed: still another source.
    let mut t: Vec<_> = a.iter().map(|(v, (r, c))| (r, c, *v)).collect();
    t[0].2 += 1.0;
    let changed = csr_from_triplets(19, 23, &t).unwrap();
    assert!(matches!(
        cache::decode::<BitTcf>(&bytes, Some(&changed)),
        Err(CacheError::WrongSource)
    ));
    assert!(matches!(
        cache::load::<BitTcf>(&tmp("missing.bin"), None),
        Err(CacheError::Io { .. })
    ));
}

#[test]
fn valid_checksum_but_invalid_layout_is_rejected() {
    // Re-sign a tampered payload so only validation can catch it.
    use sha2::{Digest, Sha256};
    let (a, bytes) = file_bytes();
    let payload = &bytes[HEADER_LEN..];
    let (mut f, _): (Mirror, usize) =
        bincode::serde::decode_from_slice(payload, bincode::config::standard()).unwrap();
    f.sparse_a_to_b[0] = 1000; // column beyond the matrix
    let new = bincode::serde::encode_to_vec(&f, bincode::config::standard()).unwrap();
    let mut b = bytes[..HEADER_LEN].to_vec();
    b[45..53].copy_from_slice(&(new.len() as u64).to_le_bytes());
    b[53..85].copy_from_slice(&Sha256::digest(&new));
    b.extend_from_slice(&new);
    let e = cache::decode::<BitTcf>(&b, Some(&a)).unwrap_err();
    assert!(
        matches!(e, CacheError::Codec(ref m) if m.contains("invalid BitTCF")),
        "{e}"
    );
}
