//! Special files at input paths (issue 39): a FIFO, a link to `/dev/zero`, a directory or an
//! oversized (sparse) file given to any reader of files — Matrix Market, its header, `.npz`, the
//! layout cache — is a typed error found from the file's type or header, without blocking or
//! reading on. Unix only (FIFOs and device nodes).
#![cfg(unix)]

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::cache::{self, CacheError, HEADER_LEN};
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::file::FileError;
use tcsparse_formats::mtx::{self, MtxError};
use tcsparse_formats::npz::{self, NpzError};
use tcsparse_formats::{Csr, Limits};

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("io_special_files")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A FIFO (no writer), a link to `/dev/zero`, a link to `/dev/null`, a directory, each with the
/// kind the error must name.
fn specials(d: &Path, ext: &str) -> Vec<(PathBuf, &'static str)> {
    let fifo = d.join(format!("fifo.{ext}"));
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let zero = d.join(format!("zero.{ext}"));
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let null = d.join(format!("null.{ext}"));
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let sub = d.join(format!("dir.{ext}"));
    std::fs::create_dir(&sub).unwrap();
    vec![
        (fifo, "a FIFO"),
        (zero, "a character device"),
        (null, "a character device"),
        (sub, "a directory"),
    ]
}

/// The [`FileError`] inside an I/O error.
fn file_error(e: &std::io::Error) -> &FileError {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<FileError>())
        .unwrap_or_else(|| panic!("not a FileError: {e}"))
}

fn quick<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "{what} took {:?}",
        t.elapsed()
    );
    out
}

#[test]
fn matrix_market_readers_refuse_special_files() {
    let d = dir("mtx");
    for (path, kind) in specials(&d, "mtx") {
        for (what, e) in [
            (
                "read_matrix_market",
                quick("mtx", || mtx::read_matrix_market(&path)).unwrap_err(),
            ),
            (
                "read_matrix",
                quick("mtx", || mtx::read_matrix(&path)).unwrap_err(),
            ),
        ] {
            match &e {
                MtxError::Io { line: 0, source } => {
                    assert!(
                        matches!(file_error(source), FileError::NotRegular { kind: k, .. } if *k == kind),
                        "{what} {}: {e}",
                        path.display()
                    );
                }
                other => panic!("{what} {}: {other}", path.display()),
            }
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let e = quick("header", || mtx::read_header(&path)).unwrap_err();
        assert!(matches!(e, MtxError::Io { line: 0, .. }), "{e}");
    }
    // A link to a regular file is read.
    let real = d.join("real.mtx");
    std::fs::write(
        &real,
        "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 2.5\n",
    )
    .unwrap();
    let link = d.join("link.mtx");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert_eq!(mtx::read_matrix(&link).unwrap().data(), &[2.5]);
}

#[test]
fn npz_reader_refuses_special_and_oversized_files() {
    let d = dir("npz");
    for (path, kind) in specials(&d, "npz") {
        let e = quick("npz", || npz::read_npz(&path)).unwrap_err();
        match &e {
            NpzError::Io(source) => assert!(
                matches!(file_error(source), FileError::NotRegular { kind: k, .. } if *k == kind),
                "{e}"
            ),
            other => panic!("{}: {other}", path.display()),
        }
    }
    // A 3 GiB sparse file: over any budget these tests run under, refused before it is read.
    Limits::set_global(Limits::new(1 << 30));
    let big = d.join("big.npz");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let e = quick("big npz", || npz::read_npz(&big)).unwrap_err();
    assert!(
        matches!(e, NpzError::Budget(ref b) if b.needed == 3 << 30),
        "{e}"
    );
}

fn sample() -> Csr {
    let t: Vec<_> = (0..30u32)
        .map(|i| (i % 11, (i * 5) % 13, i as f32 - 7.0))
        .collect();
    csr_from_triplets(11, 13, &t).unwrap()
}

#[test]
fn cache_load_refuses_special_files_and_reads_the_header_first() {
    let d = dir("cache");
    for (path, kind) in specials(&d, "bin") {
        let e = quick("cache", || cache::load::<BitTcf>(&path, None)).unwrap_err();
        match &e {
            CacheError::Io { source, .. } => assert!(
                matches!(file_error(source), FileError::NotRegular { kind: k, .. } if *k == kind),
                "{e}"
            ),
            other => panic!("{}: {other}", path.display()),
        }
    }
    let a = sample();
    let layout = BitTcf::from_csr(&a).unwrap();
    let p = d.join("entry.bin");
    cache::save(&p, &layout, &a).unwrap();
    let limits = Limits::new(1 << 30);
    assert_eq!(
        cache::load_with::<BitTcf>(&p, Some(&a), &limits).unwrap(),
        layout
    );
    let len = std::fs::metadata(&p).unwrap().len();
    // Grown to 3 GiB (sparse): the header's length disagrees, found without reading the rest.
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(3 << 30).unwrap();
    let e = quick("trailing", || {
        cache::load_with::<BitTcf>(&p, Some(&a), &limits)
    })
    .unwrap_err();
    assert!(
        matches!(e, CacheError::TrailingBytes(n) if n == (3 << 30) - len),
        "{e}"
    );
    // A header declaring the 3 GiB as its payload: refused by the budget before it is read.
    let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.seek(SeekFrom::Start(45)).unwrap();
    f.write_all(&((3u64 << 30) - HEADER_LEN as u64).to_le_bytes())
        .unwrap();
    drop(f);
    let e = quick("oversized", || {
        cache::load_with::<BitTcf>(&p, Some(&a), &limits)
    })
    .unwrap_err();
    assert!(
        matches!(e, CacheError::Budget(ref b) if b.needed == (3 << 30) - HEADER_LEN as u64),
        "{e}"
    );
    // A header cut short, and a wrong magic, are found from the header alone.
    std::fs::write(&p, &b"TCSPARSE\x01\x00"[..]).unwrap();
    assert!(matches!(
        cache::load::<BitTcf>(&p, None),
        Err(CacheError::Truncated { got: 10, .. })
    ));
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(3 << 30).unwrap();
    let e = quick("zeros", || cache::load_with::<BitTcf>(&p, None, &limits)).unwrap_err();
    assert!(matches!(e, CacheError::BadMagic), "{e}");
}
