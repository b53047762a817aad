//! Versioned on-disk cache of built layouts.
//!
//! File = 85-byte header + payload. Header (little endian): magic `b"TCSPARSE"` (8), format
//! version u32 (4), layout kind u8 (1), source checksum (32, SHA-256 of the CSR arrays, see
//! [`source_checksum`]), payload length u64 (8), payload checksum (32, SHA-256 of the payload).
//! Payload = bincode 2.0.1 (serde API, standard config) of the layout. Files are written to a
//! temporary file in the same directory and renamed into place. [`load`] opens regular files only
//! ([`crate::file::open_regular`]: a FIFO or a link to a device is refused without blocking) and
//! reads the header first: the payload is read only once the magic, version, kind and the payload
//! length (against the file's length and the memory budget) have passed. Loading checks every
//! header field and the payload checksum before decoding, and decodes through each layout's validating shadow
//! struct, so a bad file gives a [`CacheError`], never a panic or an invalid layout. Finally the
//! decoded layout is converted back and its checksum compared with the header's source checksum, so
//! a payload re-signed for another matrix is refused even when no source is given.

use crate::Csr;
use crate::bitbsr::BitBsr;
use crate::bittcf::BitTcf;
use crate::hrpb::Hrpb;
use crate::layout::FormatError;
use crate::metcf::MeTcf;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// File magic.
pub const MAGIC: &[u8; 8] = b"TCSPARSE";
/// Version of the header and of every payload layout; bump on any change.
pub const FORMAT_VERSION: u32 = 1;
/// Header length in bytes.
pub const HEADER_LEN: usize = 8 + 4 + 1 + 32 + 8 + 32;

/// Layout kinds stored in the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FormatKind {
    /// [`BitTcf`].
    BitTcf = 1,
    /// [`MeTcf`].
    MeTcf = 2,
    /// [`Hrpb`].
    Hrpb = 3,
    /// [`BitBsr`].
    BitBsr = 4,
}

/// A layout that can be cached.
pub trait CachedFormat: Serialize + DeserializeOwned {
    /// Kind byte written in the header.
    const KIND: FormatKind;
    /// Re-checks every invariant after decoding.
    fn validate_cached(&self) -> Result<(), FormatError>;
    /// Rows, columns and stored entries of the layout.
    fn dims(&self) -> (usize, usize, usize);
    /// The matrix the layout holds, converted back exactly.
    fn source_csr(&self) -> Csr;
}

macro_rules! cached {
    ($t:ty, $k:ident) => {
        impl CachedFormat for $t {
            const KIND: FormatKind = FormatKind::$k;
            fn validate_cached(&self) -> Result<(), FormatError> {
                self.validate()
            }
            fn dims(&self) -> (usize, usize, usize) {
                (self.rows(), self.cols(), self.nnz())
            }
            fn source_csr(&self) -> Csr {
                self.to_csr()
            }
        }
    };
}
cached!(BitTcf, BitTcf);
cached!(MeTcf, MeTcf);
cached!(Hrpb, Hrpb);
cached!(BitBsr, BitBsr);

/// Errors saving or loading a cache file.
#[derive(Debug, Error)]
pub enum CacheError {
    /// File system error.
    #[error("cache i/o on {path}: {source}")]
    Io {
        /// File concerned.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file does not start with `TCSPARSE`.
    #[error("not a tcsparse cache file (bad magic)")]
    BadMagic,
    /// The file is shorter than its header says.
    #[error("truncated cache file: {got} bytes, expected {expected}")]
    Truncated {
        /// Bytes present.
        got: u64,
        /// Bytes expected.
        expected: u64,
    },
    /// The file is longer than its header says.
    #[error("cache file has {0} trailing bytes")]
    TrailingBytes(u64),
    /// Written by another format version.
    #[error("cache format version {found}, this build reads {expected}")]
    WrongVersion {
        /// Version in the file.
        found: u32,
        /// Version this build writes.
        expected: u32,
    },
    /// Holds another layout.
    #[error("cache holds layout kind {found}, expected {expected}")]
    WrongKind {
        /// Kind byte in the file.
        found: u8,
        /// Kind asked for.
        expected: u8,
    },
    /// Built from another matrix.
    #[error("cache was built from another matrix (source checksum mismatch)")]
    WrongSource,
    /// Payload bytes do not match their checksum.
    #[error("cache payload checksum mismatch (corrupted file)")]
    Corrupted,
    /// bincode could not encode or decode the payload (a decoded layout that fails validation
    /// lands here too, with the failed invariant in the message).
    #[error("cache payload codec error: {0}")]
    Codec(String),
    /// The decoded layout failed validation.
    #[error("cached layout is invalid: {0}")]
    Invalid(#[from] FormatError),
    /// The decoded layout does not hold the matrix the header's source checksum names (a payload
    /// edited and re-signed, for example a 68×67 layout under a 67×67 source's header).
    #[error(
        "cached {rows}×{cols} layout with {nnz} entries does not hold the matrix its header names (source checksum mismatch after decoding)"
    )]
    PayloadNotFromSource {
        /// Rows of the decoded layout.
        rows: usize,
        /// Columns of the decoded layout.
        cols: usize,
        /// Entries of the decoded layout.
        nnz: usize,
    },
    /// Converting the decoded layout back would need more memory than the budget.
    #[error(transparent)]
    Budget(#[from] crate::limits::BudgetError),
}

/// SHA-256 over rows, cols, nnz (u64 LE), then indptr, indices (u32 LE) and data (f32 bits LE).
pub fn source_checksum(csr: &Csr) -> [u8; 32] {
    let mut h = Sha256::new();
    for v in [csr.rows(), csr.cols(), csr.nnz()] {
        h.update((v as u64).to_le_bytes());
    }
    let mut buf = Vec::with_capacity(4096);
    let mut feed = |it: &mut dyn Iterator<Item = u32>| {
        for x in it {
            buf.extend_from_slice(&x.to_le_bytes());
            if buf.len() >= 4096 {
                h.update(&buf);
                buf.clear();
            }
        }
        h.update(&buf);
        buf.clear();
    };
    let indptr = csr.indptr();
    feed(&mut indptr.raw_storage().iter().copied());
    feed(&mut csr.indices().iter().copied());
    feed(&mut csr.data().iter().map(|v| v.to_bits()));
    h.finalize().into()
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The bytes of a cache file holding `format` (built from `source`): what [`save`] writes.
pub fn encode<T: CachedFormat>(format: &T, source: &Csr) -> Result<Vec<u8>, CacheError> {
    let payload = bincode::serde::encode_to_vec(format, config())
        .map_err(|e| CacheError::Codec(e.to_string()))?;
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.push(T::KIND as u8);
    bytes.extend_from_slice(&source_checksum(source));
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&Sha256::digest(&payload));
    bytes.extend_from_slice(&payload);
    Ok(bytes)
}

/// Writes `format` (built from `source`) to `path` atomically.
pub fn save<T: CachedFormat>(path: &Path, format: &T, source: &Csr) -> Result<(), CacheError> {
    let bytes = encode(format, source)?;

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "cache".into());
    let tmp = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io_err(path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads a layout of type `T` from `path` under [`Limits::global`](crate::limits::Limits::global).
/// With `source`, also checks that the file was built from exactly that matrix.
pub fn load<T: CachedFormat>(path: &Path, source: Option<&Csr>) -> Result<T, CacheError> {
    load_with(path, source, &crate::limits::Limits::global())
}

/// [`load`] under an explicit budget. The file must be a regular file (a FIFO or a device is a
/// [`CacheError::Io`] carrying a [`FileError`](crate::file::FileError), found without blocking or
/// reading); its header is read and checked first (magic, version, kind, and the payload length
/// against the file's length and `limits`), and only then the payload, so a damaged or oversized
/// file costs at most its 85-byte header.
#[tracing::instrument(name = "read", level = "info", skip_all, fields(path = %path.display(), layout = ?T::KIND))]
pub fn load_with<T: CachedFormat>(
    path: &Path,
    source: Option<&Csr>,
    limits: &crate::limits::Limits,
) -> Result<T, CacheError> {
    let f = crate::file::open_regular(path).map_err(|e| io_err(path)(e.into()))?;
    let mut reader = std::io::Read::take(&f.file, HEADER_LEN as u64);
    let head = crate::file::read_exact_vec(&mut reader, HEADER_LEN.min(f.len as usize) as u64)
        .map_err(io_err(path))?;
    let header = check_header::<T>(&head)?;
    let expected = (HEADER_LEN as u64).saturating_add(header.len);
    if f.len < expected {
        return Err(CacheError::Truncated {
            got: f.len,
            expected,
        });
    }
    if f.len > expected {
        return Err(CacheError::TrailingBytes(f.len - expected));
    }
    limits.check(|| format!("reading {}", path.display()), header.len)?;
    let mut reader = std::io::Read::take(&f.file, header.len);
    let payload = crate::file::read_exact_vec(&mut reader, header.len).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            // The file shrank after it was opened.
            CacheError::Truncated {
                got: HEADER_LEN as u64,
                expected,
            }
        } else {
            io_err(path)(e)
        }
    })?;
    decode_payload(&header, &payload, source, limits)
}

/// Decodes a cache file already in memory (what [`load`] does after reading the file).
pub fn decode<T: CachedFormat>(bytes: &[u8], source: Option<&Csr>) -> Result<T, CacheError> {
    let header = check_header::<T>(bytes)?;
    let expected = (HEADER_LEN as u64).saturating_add(header.len);
    let got = bytes.len() as u64;
    if got < expected {
        return Err(CacheError::Truncated { got, expected });
    }
    if got > expected {
        return Err(CacheError::TrailingBytes(got - expected));
    }
    decode_payload(
        &header,
        &bytes[HEADER_LEN..],
        source,
        &crate::limits::Limits::global(),
    )
}

/// The fields of a checked header.
struct Header {
    /// Source checksum.
    src: [u8; 32],
    /// Payload length.
    len: u64,
    /// Payload checksum.
    sum: [u8; 32],
}

/// Checks magic, version and kind of the header at the start of `bytes` (at least
/// [`HEADER_LEN`] bytes, else [`CacheError::Truncated`]).
fn check_header<T: CachedFormat>(bytes: &[u8]) -> Result<Header, CacheError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
            CacheError::Truncated {
                got: bytes.len() as u64,
                expected: HEADER_LEN as u64,
            }
        } else {
            CacheError::BadMagic
        });
    }
    if bytes.len() < HEADER_LEN {
        return Err(CacheError::Truncated {
            got: bytes.len() as u64,
            expected: HEADER_LEN as u64,
        });
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != FORMAT_VERSION {
        return Err(CacheError::WrongVersion {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let kind = bytes[12];
    if kind != T::KIND as u8 {
        return Err(CacheError::WrongKind {
            found: kind,
            expected: T::KIND as u8,
        });
    }
    let array = |at: usize| {
        let mut a = [0u8; 32];
        a.copy_from_slice(&bytes[at..at + 32]);
        a
    };
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[45..53]);
    Ok(Header {
        src: array(13),
        len: u64::from_le_bytes(len),
        sum: array(53),
    })
}

/// Checks the source and payload checksums, decodes, validates and ties the layout to its source.
fn decode_payload<T: CachedFormat>(
    header: &Header,
    payload: &[u8],
    source: Option<&Csr>,
    limits: &crate::limits::Limits,
) -> Result<T, CacheError> {
    if let Some(csr) = source
        && source_checksum(csr) != header.src
    {
        return Err(CacheError::WrongSource);
    }
    if Sha256::digest(payload).as_slice() != header.sum {
        return Err(CacheError::Corrupted);
    }
    let (value, used): (T, usize) = bincode::serde::decode_from_slice(payload, config())
        .map_err(|e| CacheError::Codec(e.to_string()))?;
    if used != payload.len() {
        return Err(CacheError::TrailingBytes((payload.len() - used) as u64));
    }
    value.validate_cached()?;
    // Tie the layout to its source: the matrix it holds must be the one the header's checksum
    // names (which `source`, when given, was checked against above). The payload checksum only
    // proves the payload is intact, not that it was built from that matrix.
    let (rows, cols, nnz) = value.dims();
    crate::csr::check_csr_budget(rows, nnz as u64, limits)?;
    if source_checksum(&value.source_csr()) != header.src {
        return Err(CacheError::PayloadNotFromSource { rows, cols, nnz });
    }
    Ok(value)
}
