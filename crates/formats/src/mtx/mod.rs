//! Matrix Market input and output.
//!
//! Reads the `coordinate` format, plain or gzip (detected by the magic bytes `1f 8b`, not by the file
//! name), with field `real` (or `double`), `integer` or `pattern` (every value 1.0) and storage
//! `general`, `symmetric` or `skew-symmetric`. Symmetric storage is expanded to both triangles (the
//! diagonal is not duplicated; skew-symmetric mirrors as `a_ji = -a_ij`). Duplicate entries are
//! summed (in file order) and rows sorted, giving a [`Csr`] with the usual invariants.
//!
//! The body is read in blocks and parsed on every core (see [`read_matrix_market`]); indices go
//! through a hand-rolled parser, values through `fast-float2`, correctly rounded like the standard
//! library's parser, so a file written by [`write_matrix_market`] reads back bit-exact.
//! Subnormal values are kept exactly; `inf`, `-inf` and `nan` are read as such (see
//! [`Csr::non_finite`]). A *finite* value beyond the f32 range (`1e39`, which would round to
//! infinity) is refused with an [`MtxError::Parse`] naming the line and the value: the matrix is
//! never silently changed. Every malformed input gives an [`MtxError`] naming the 1-based line,
//! the same line a line-by-line reader would name; none panics. [`read_matrix_with_report`] also
//! returns the bytes read and the seconds taken ([`ReadReport`]).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::csr::{BucketedRun, Csr, CsrError, RowBuckets, check_csr_budget, csr_from_runs};
use crate::limits::{BudgetError, Limits};

mod blocks;
mod body;
mod header;

use blocks::*;
use body::*;
pub use header::MAX_LINE_BYTES;
use header::*;

/// Errors reading or writing Matrix Market files. `line` is 1-based (line 1 is the banner).
#[derive(Debug, Error)]
pub enum MtxError {
    /// Reading or writing failed, including a truncated or corrupt gzip stream.
    #[error("I/O error at line {line}: {source}")]
    Io {
        /// Line being read when the error happened (0 when opening or writing).
        line: u64,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The first line is not a valid `%%MatrixMarket matrix coordinate <field> <symmetry>` banner.
    #[error("line {line}: bad Matrix Market banner: {message}")]
    Banner {
        /// Line of the banner (always 1).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A valid Matrix Market variant this reader does not handle (array, complex, hermitian, ...).
    #[error("line {line}: unsupported Matrix Market variant: {what}")]
    Unsupported {
        /// Line of the banner.
        line: u64,
        /// The unsupported feature.
        what: String,
    },
    /// The size line (`rows cols nnz`) is missing or malformed.
    #[error("line {line}: bad size line: {message}")]
    SizeLine {
        /// Line of the size line (or of the end of the file when it is missing).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// A token of an entry is not a number of the expected kind, or extra tokens follow the entry.
    #[error("line {line}: {message}")]
    Parse {
        /// Line of the entry.
        line: u64,
        /// What is wrong, with the offending token.
        message: String,
    },
    /// An entry of a `real` or `integer` file has no value.
    #[error("line {line}: entry has no value (the field is not `pattern`)")]
    MissingValue {
        /// Line of the entry.
        line: u64,
    },
    /// A row or column index is 0 (Matrix Market is 1-based) or larger than the declared size.
    #[error(
        "line {line}: index ({row}, {col}) is outside the 1-based {rows}×{cols} matrix{}",
        if *row == 0 || *col == 0 { " (indices are 1-based; this looks zero-based)" } else { "" }
    )]
    IndexOutOfRange {
        /// Line of the entry.
        line: u64,
        /// 1-based row index as written in the file.
        row: u64,
        /// 1-based column index as written in the file.
        col: u64,
        /// Declared rows.
        rows: u64,
        /// Declared columns.
        cols: u64,
    },
    /// The file ended before the declared number of entries (for example a truncated file).
    #[error("line {line}: file ends after {found} of {expected} declared entries (truncated?)")]
    TooFewEntries {
        /// Last line of the file.
        line: u64,
        /// Entries declared in the size line.
        expected: u64,
        /// Entries found.
        found: u64,
    },
    /// The file holds more entries than the size line declares.
    #[error("line {line}: more entries than the {expected} declared in the size line")]
    TooManyEntries {
        /// Line of the first surplus entry.
        line: u64,
        /// Entries declared in the size line.
        expected: u64,
    },
    /// The matrix does not fit u32 indices.
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// What the size line declares would need more memory than the budget.
    #[error("line {line}: {source}")]
    Budget {
        /// Line of the size line.
        line: u64,
        /// How much would be needed, and the budget.
        #[source]
        source: BudgetError,
    },
    /// Reading a `.npz` file failed.
    #[error(transparent)]
    Npz(#[from] crate::npz::NpzError),
    /// [`read_matrix`] does not know the file extension.
    #[error("{}: unknown matrix file extension (expected .mtx, .mtx.gz or .npz)", path.display())]
    UnknownExtension {
        /// The path given.
        path: PathBuf,
    },
}

/// Field of a Matrix Market file (the kind of values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `real` or `double`: floating-point values.
    Real,
    /// `integer`: integer values (stored as f32).
    Integer,
    /// `pattern`: no values; every entry is 1.0.
    Pattern,
}

/// Storage scheme of a Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symmetry {
    /// Every entry stored.
    General,
    /// One triangle stored; `a_ji = a_ij`.
    Symmetric,
    /// One triangle stored; `a_ji = -a_ij`.
    SkewSymmetric,
}

/// The parsed banner and size line of a coordinate Matrix Market file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Kind of values.
    pub field: Field,
    /// Storage scheme.
    pub symmetry: Symmetry,
    /// Declared rows.
    pub rows: u64,
    /// Declared columns.
    pub cols: u64,
    /// Declared stored entries (before symmetric expansion).
    pub entries: u64,
}

/// What a read of a matrix file did: the bytes it read and the time it took (`tcsparse info`
/// prints the rate).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadReport {
    /// Bytes of the file (compressed bytes for a gzip file).
    pub file_bytes: u64,
    /// Bytes decoded: the Matrix Market text parsed (the decompressed text of a gzip file), or the
    /// file's bytes for `.npz`.
    pub text_bytes: u64,
    /// Whether the file was gzip-compressed.
    pub gzip: bool,
    /// Seconds from opening the file to the finished CSR.
    pub seconds: f64,
}

impl ReadReport {
    /// Bytes of the file read per second.
    pub fn file_bytes_per_second(&self) -> f64 {
        self.file_bytes as f64 / self.seconds.max(1e-9)
    }

    /// Bytes of text parsed per second (for a plain file the same as
    /// [`file_bytes_per_second`](Self::file_bytes_per_second)).
    pub fn text_bytes_per_second(&self) -> f64 {
        self.text_bytes as f64 / self.seconds.max(1e-9)
    }
}

/// Reads a matrix file, choosing the reader by extension: `.mtx` and `.mtx.gz` (any `.gz`) go to
/// [`read_matrix_market`], `.npz` to [`crate::npz::read_npz`].
pub fn read_matrix(path: impl AsRef<Path>) -> Result<Csr, MtxError> {
    read_matrix_with_report(path).map(|(m, _)| m)
}

/// [`read_matrix`], with what the read did.
pub fn read_matrix_with_report(path: impl AsRef<Path>) -> Result<(Csr, ReadReport), MtxError> {
    let path = path.as_ref();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".mtx") || name.ends_with(".mtx.gz") || name.ends_with(".gz") {
        read_matrix_market_with_report(path)
    } else if name.ends_with(".npz") {
        let start = Instant::now();
        let (m, bytes) = crate::npz::read_npz_counted(path)?;
        let report = ReadReport {
            file_bytes: bytes,
            text_bytes: bytes,
            gzip: false,
            seconds: start.elapsed().as_secs_f64(),
        };
        Ok((m, report))
    } else {
        Err(MtxError::UnknownExtension {
            path: path.to_path_buf(),
        })
    }
}

/// Reads a Matrix Market file, plain or gzip (detected by magic bytes), under
/// [`Limits::global`]. The path must name a regular file (or a link to one): a FIFO, a device or
/// a directory is an [`MtxError::Io`] at line 0 carrying a [`FileError`](crate::file::FileError),
/// found without blocking.
///
/// The text is read in blocks of 32 MiB by a thread of its own (a plain file's block by
/// positional reads of 1 MiB parts on every core; a gzip stream inflated on that thread) while
/// the lines of the block before are parsed on every core, in pieces of about 1 MiB cut at line
/// ends; the CSR is then built in parallel by row buckets
/// ([`crate::csr::csr_from_runs`]). The result, and every error with its line, is the same as a
/// line-by-line read's, on any thread count.
pub fn read_matrix_market(path: impl AsRef<Path>) -> Result<Csr, MtxError> {
    read_matrix_market_with_report(path).map(|(m, _)| m)
}

/// [`read_matrix_market`], with what the read did.
#[tracing::instrument(name = "read", level = "info", skip_all, fields(path = %path.as_ref().display()))]
pub fn read_matrix_market_with_report(
    path: impl AsRef<Path>,
) -> Result<(Csr, ReadReport), MtxError> {
    let path = path.as_ref();
    let start = Instant::now();
    let f = crate::file::open_regular(path).map_err(|e| MtxError::Io {
        line: 0,
        source: e.into(),
    })?;
    let file_bytes = f.len;
    tracing::info!(path = %path.display(), bytes = file_bytes, "reading Matrix Market file");
    let limits = Limits::global();
    let mut reader = BufReader::with_capacity(1 << 20, f.file);
    let head = reader
        .fill_buf()
        .map_err(|source| MtxError::Io { line: 1, source })?;
    let gzip = is_gzip(head);
    let (csr, text_bytes) = if gzip {
        let gz = flate2::bufread::MultiGzDecoder::new(reader);
        parse_text(
            BufReader::with_capacity(1 << 20, gz),
            &limits,
            CHUNKING,
            prefetched,
        )?
    } else {
        #[cfg(unix)]
        {
            parse_file(reader.get_ref(), file_bytes, &limits, CHUNKING)?
        }
        #[cfg(not(unix))]
        {
            parse_text(reader, &limits, CHUNKING, prefetched)?
        }
    };
    let report = ReadReport {
        file_bytes,
        text_bytes,
        gzip,
        seconds: start.elapsed().as_secs_f64(),
    };
    tracing::info!(
        path = %path.display(),
        rows = csr.rows(),
        cols = csr.cols(),
        nnz = csr.nnz(),
        seconds = report.seconds,
        mb_per_s = report.text_bytes_per_second() / 1e6,
        "read Matrix Market file"
    );
    Ok((csr, report))
}

fn is_gzip(head: &[u8]) -> bool {
    head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b
}

/// Reads Matrix Market text from any buffered reader; a gzip stream (magic bytes `1f 8b`) is
/// decompressed transparently. Uses [`Limits::global`].
pub fn read_matrix_market_from(reader: impl BufRead) -> Result<Csr, MtxError> {
    read_matrix_market_from_with(reader, &Limits::global())
}

/// [`read_matrix_market_from`] under an explicit memory budget. Memory is proportional to the
/// entries the file really holds ([`BYTES_PER_ENTRY`](crate::csr::BYTES_PER_ENTRY) each, a symmetric one twice) plus the row
/// offsets of the declared row count, which are checked against `limits` first, plus a few
/// blocks of text. The lines are parsed on every core as [`read_matrix_market`] does; the reader
/// itself is read on the calling thread.
#[tracing::instrument(name = "read", level = "info", skip_all)]
pub fn read_matrix_market_from_with(
    mut reader: impl BufRead,
    limits: &Limits,
) -> Result<Csr, MtxError> {
    let head = reader
        .fill_buf()
        .map_err(|source| MtxError::Io { line: 1, source })?;
    if is_gzip(head) {
        let gz = flate2::bufread::MultiGzDecoder::new(reader);
        Ok(parse_text(
            BufReader::with_capacity(1 << 20, gz),
            limits,
            CHUNKING,
            inline,
        )?
        .0)
    } else {
        Ok(parse_text(reader, limits, CHUNKING, inline)?.0)
    }
}

/// Reads the header and checks what it declares against the budget.
fn parse_start<R: BufRead>(reader: R, limits: &Limits) -> Result<(Header, Lines<R>), MtxError> {
    let mut lines = Lines {
        reader,
        buf: Vec::with_capacity(256),
        line: 0,
        bytes: 0,
    };
    let h = parse_header(&mut lines)?;
    tracing::debug!(?h, "Matrix Market header");
    let expanded = if h.symmetry == Symmetry::General {
        h.entries
    } else {
        h.entries.saturating_mul(2)
    };
    // The row offsets scale with the declared rows: check them (and the declared entries, which
    // the file must then hold) against the budget before reading on.
    check_csr_budget(h.rows as usize, expanded, limits).map_err(|source| MtxError::Budget {
        line: lines.line,
        source,
    })?;
    Ok((h, lines))
}

/// Parses Matrix Market text: the header here, the body in blocks by `body` ([`inline`] or
/// [`prefetched`]). Returns the CSR and the text's bytes.
fn parse_text<R: BufRead>(
    reader: R,
    limits: &Limits,
    chunking: Chunking,
    body: impl FnOnce(&Header, u64, Blocks<Stream<R>>, Chunking) -> Result<(Csr, u64), MtxError>,
) -> Result<(Csr, u64), MtxError> {
    let (h, lines) = parse_start(reader, limits)?;
    let blocks = Blocks::new(Stream(lines.reader), chunking);
    let (csr, body) = body(&h, lines.line, blocks, chunking)?;
    Ok((csr, lines.bytes + body))
}

/// Parses the body blocks on this thread, reading them as it goes. Returns the CSR and the body's
/// bytes.
fn inline<S: Fill>(
    h: &Header,
    line: u64,
    blocks: Blocks<S>,
    chunking: Chunking,
) -> Result<(Csr, u64), MtxError> {
    parse_body(h, line, blocks, chunking.piece, None)
}

/// Parses a plain Matrix Market file of `len` bytes: the header through a buffered reader, the
/// body in blocks read with positional reads on every core by a thread of their own.
#[cfg(unix)]
fn parse_file(
    file: &File,
    len: u64,
    limits: &Limits,
    chunking: Chunking,
) -> Result<(Csr, u64), MtxError> {
    // The gzip check read ahead through the file's cursor: the header starts at byte 0.
    let mut at_start = file;
    io::Seek::seek(&mut at_start, io::SeekFrom::Start(0))
        .map_err(|source| MtxError::Io { line: 1, source })?;
    let (h, lines) = parse_start(BufReader::with_capacity(64 << 10, at_start), limits)?;
    let source = Positional {
        file,
        offset: lines.bytes,
        end: len,
    };
    let (csr, body) = prefetched(&h, lines.line, Blocks::new(source, chunking), chunking)?;
    Ok((csr, lines.bytes + body))
}

/// [`parse_body`] with the blocks produced by a thread of their own, one block ahead.
fn prefetched<S: Fill + Send>(
    h: &Header,
    line: u64,
    mut blocks: Blocks<S>,
    chunking: Chunking,
) -> Result<(Csr, u64), MtxError> {
    let (back, recycled) = std::sync::mpsc::sync_channel(2);
    blocks.recycled = Some(recycled);
    std::thread::scope(|s| {
        // One block in the channel, one being read, one being parsed.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        s.spawn(move || {
            for b in blocks {
                if tx.send(b).is_err() {
                    break;
                }
            }
        });
        parse_body(h, line, rx.into_iter(), chunking.piece, Some(back))
    })
}

/// [`read_matrix_market_from_with`] with the body cut into blocks of `block_bytes` read at a time
/// and pieces of `piece_bytes` parsed by one task (both at least 1), read on this thread or,
/// with `prefetch`, by a thread of its own. For tests that the result and every error do not
/// depend on the cut; not a stable interface.
#[doc(hidden)]
pub fn read_matrix_market_chunked(
    mut reader: impl BufRead + Send,
    limits: &Limits,
    block_bytes: usize,
    piece_bytes: usize,
    prefetch: bool,
) -> Result<Csr, MtxError> {
    let chunking = Chunking {
        block: block_bytes.max(1),
        piece: piece_bytes.max(1),
    };
    let head = reader
        .fill_buf()
        .map_err(|source| MtxError::Io { line: 1, source })?;
    let gz = is_gzip(head);
    let run = |r: Box<dyn BufRead + Send + '_>| {
        if prefetch {
            parse_text(r, limits, chunking, prefetched)
        } else {
            parse_text(r, limits, chunking, inline)
        }
    };
    let out = if gz {
        run(Box::new(BufReader::new(
            flate2::bufread::MultiGzDecoder::new(reader),
        )))
    } else {
        run(Box::new(reader))
    };
    Ok(out?.0)
}

/// Writes `csr` as a `coordinate real general` Matrix Market file (1-based, rows in order). Values use
/// Rust's shortest round-trip formatting, so [`read_matrix_market`] reads them back bit-exact,
/// `±inf` and `nan`/`-nan` included (text has no way to carry a NaN's payload bits: a NaN reads
/// back as the quiet NaN of the same sign). A path ending in `.gz` is gzip-compressed.
pub fn write_matrix_market(path: impl AsRef<Path>, csr: &Csr) -> Result<(), MtxError> {
    let path = path.as_ref();
    let io = |source| MtxError::Io { line: 0, source };
    let file = File::create(path).map_err(io)?;
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    if gz {
        let enc = flate2::write::GzEncoder::new(
            BufWriter::with_capacity(1 << 20, file),
            flate2::Compression::new(6),
        );
        let mut w = BufWriter::with_capacity(1 << 20, enc);
        write_matrix_market_to(&mut w, csr).map_err(io)?;
        let enc = w.into_inner().map_err(|e| io(e.into_error()))?;
        enc.finish().map_err(io)?.flush().map_err(io)?;
    } else {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write_matrix_market_to(&mut w, csr).map_err(io)?;
        w.flush().map_err(io)?;
    }
    tracing::info!(path = %path.display(), nnz = csr.nnz(), "wrote Matrix Market file");
    Ok(())
}

/// Writes `csr` as `coordinate real general` Matrix Market text to any writer (formatted in parallel
/// blocks of rows, written in order).
pub fn write_matrix_market_to(w: &mut impl Write, csr: &Csr) -> io::Result<()> {
    writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(w, "% written by tcsparse")?;
    writeln!(w, "{} {} {}", csr.rows(), csr.cols(), csr.nnz())?;
    let indptr = csr.indptr();
    let offsets = indptr.raw_storage();
    let (indices, data) = (csr.indices(), csr.data());
    // Blocks of roughly 256k entries; a group of blocks is formatted in parallel, then written.
    let mut blocks = Vec::new();
    let mut start = 0usize;
    while start < csr.rows() {
        let mut end = start + 1;
        while end < csr.rows() && (offsets[end] - offsets[start]) < (1 << 18) {
            end += 1;
        }
        blocks.push((start, end));
        start = end;
    }
    for group in blocks.chunks(64) {
        let texts: Vec<Vec<u8>> = group
            .par_iter()
            .map(|&(r0, r1)| {
                let mut out = Vec::with_capacity((offsets[r1] - offsets[r0]) as usize * 24);
                for r in r0..r1 {
                    for k in offsets[r] as usize..offsets[r + 1] as usize {
                        // Writing into a Vec cannot fail.
                        let v = data[k];
                        let _ = if v.is_nan() {
                            // `{:?}` drops a NaN's sign; the reader maps `-nan` back to 0xffc00000.
                            let sign = if v.is_sign_negative() { "-" } else { "" };
                            writeln!(out, "{} {} {sign}nan", r + 1, indices[k] + 1)
                        } else {
                            writeln!(out, "{} {} {:?}", r + 1, indices[k] + 1, v)
                        };
                    }
                }
                out
            })
            .collect();
        for t in texts {
            w.write_all(&t)?;
        }
    }
    Ok(())
}

/// Reads only the banner and size line of a Matrix Market file (plain or gzip).
pub fn read_header(path: impl AsRef<Path>) -> Result<Header, MtxError> {
    let f = crate::file::open_regular(path.as_ref()).map_err(|e| MtxError::Io {
        line: 0,
        source: e.into(),
    })?;
    let mut reader = BufReader::new(f.file);
    let head = reader
        .fill_buf()
        .map_err(|source| MtxError::Io { line: 1, source })?;
    let gz = head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b;
    let inner: Box<dyn Read> = if gz {
        Box::new(flate2::bufread::MultiGzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    parse_header(&mut Lines {
        reader: BufReader::new(inner),
        buf: Vec::new(),
        line: 0,
        bytes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_strictly() {
        assert_eq!(parse_u64(b"123"), Some(123));
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1.0"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"99999999999999999999999"), None);
        assert_eq!(parse_integer_value(b"-12"), Some(-12.0));
        assert_eq!(parse_integer_value(b"1e3"), None);
    }

    #[test]
    fn tokens_split_on_any_whitespace() {
        let mut rest: &[u8] = b"  1\t2  3.5\r";
        assert_eq!(next_token(&mut rest), Some(&b"1"[..]));
        assert_eq!(next_token(&mut rest), Some(&b"2"[..]));
        assert_eq!(next_token(&mut rest), Some(&b"3.5"[..]));
        assert_eq!(next_token(&mut rest), None);
    }
}
