//! Matrix Market input and output.
//!
//! Reads the `coordinate` format, plain or gzip (detected by the magic bytes `1f 8b`, not by the file
//! name), with field `real` (or `double`), `integer` or `pattern` (every value 1.0) and storage
//! `general`, `symmetric` or `skew-symmetric`. Symmetric storage is expanded to both triangles (the
//! diagonal is not duplicated; skew-symmetric mirrors as `a_ji = -a_ij`). Duplicate entries are
//! summed and rows sorted, giving a [`Csr`] with the usual invariants.
//!
//! The reader streams through a buffered reader with hand-rolled index parsing; values go through
//! the standard library's correctly rounded `f32` parser, so a file written by
//! [`write_matrix_market`] reads back bit-exact. Every malformed input gives an [`MtxError`] naming
//! the 1-based line; none panics.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::csr::{Csr, CsrError, check_csr_budget, csr_from_triplets_with};
use crate::limits::{BudgetError, Limits};

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

/// Reads a matrix file, choosing the reader by extension: `.mtx` and `.mtx.gz` (any `.gz`) go to
/// [`read_matrix_market`], `.npz` to [`crate::npz::read_npz`].
pub fn read_matrix(path: impl AsRef<Path>) -> Result<Csr, MtxError> {
    let path = path.as_ref();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".mtx") || name.ends_with(".mtx.gz") || name.ends_with(".gz") {
        read_matrix_market(path)
    } else if name.ends_with(".npz") {
        Ok(crate::npz::read_npz(path)?)
    } else {
        Err(MtxError::UnknownExtension {
            path: path.to_path_buf(),
        })
    }
}

/// Reads a Matrix Market file, plain or gzip (detected by magic bytes).
pub fn read_matrix_market(path: impl AsRef<Path>) -> Result<Csr, MtxError> {
    let path = path.as_ref();
    let start = Instant::now();
    let file = File::open(path).map_err(|source| MtxError::Io { line: 0, source })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    tracing::info!(path = %path.display(), bytes, "reading Matrix Market file");
    let csr = read_matrix_market_from(BufReader::with_capacity(1 << 20, file))?;
    let secs = start.elapsed().as_secs_f64();
    tracing::info!(
        path = %path.display(),
        rows = csr.rows(),
        cols = csr.cols(),
        nnz = csr.nnz(),
        seconds = secs,
        "read Matrix Market file"
    );
    Ok(csr)
}

/// Reads Matrix Market text from any buffered reader; a gzip stream (magic bytes `1f 8b`) is
/// decompressed transparently. Uses [`Limits::global`].
pub fn read_matrix_market_from(reader: impl BufRead) -> Result<Csr, MtxError> {
    read_matrix_market_from_with(reader, &Limits::global())
}

/// [`read_matrix_market_from`] under an explicit memory budget. Memory is proportional to the
/// entries the file really holds (16 bytes each while reading, a symmetric one twice) plus the row
/// offsets of the declared row count, which are checked against `limits` first.
pub fn read_matrix_market_from_with(
    mut reader: impl BufRead,
    limits: &Limits,
) -> Result<Csr, MtxError> {
    let head = reader
        .fill_buf()
        .map_err(|source| MtxError::Io { line: 1, source })?;
    if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
        let gz = flate2::bufread::MultiGzDecoder::new(reader);
        parse(BufReader::with_capacity(1 << 20, gz), limits)
    } else {
        parse(reader, limits)
    }
}

/// Line reader that tracks the 1-based line number of the line last returned.
struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    line: u64,
}

/// Longest line read (the Matrix Market spec allows 1024 characters): a line without an end, a
/// gzip bomb of spaces for example, is an error instead of a buffer as large as the stream.
pub const MAX_LINE_BYTES: u64 = 1 << 20;

impl<R: BufRead> Lines<R> {
    /// Reads the next line (without the newline); `Ok(false)` at the end of input.
    fn next(&mut self) -> Result<bool, MtxError> {
        self.buf.clear();
        let n = (&mut self.reader)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| MtxError::Io {
                line: self.line + 1,
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        self.line += 1;
        if n as u64 > MAX_LINE_BYTES && self.buf.last() != Some(&b'\n') {
            return Err(MtxError::Parse {
                line: self.line,
                message: format!("line longer than {MAX_LINE_BYTES} bytes"),
            });
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        Ok(true)
    }
}

/// True for lines that carry no data: blank or whitespace-only.
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

fn parse_header<R: BufRead>(lines: &mut Lines<R>) -> Result<Header, MtxError> {
    if !lines.next()? {
        return Err(MtxError::Banner {
            line: 1,
            message: "the file is empty".into(),
        });
    }
    let banner = String::from_utf8_lossy(&lines.buf).to_ascii_lowercase();
    let tokens: Vec<&str> = banner.split_ascii_whitespace().collect();
    let bad = |message: String| MtxError::Banner { line: 1, message };
    if tokens.first() != Some(&"%%matrixmarket") {
        return Err(bad(format!(
            "expected `%%MatrixMarket matrix coordinate <field> <symmetry>`, found `{}`",
            truncate(&banner, 80)
        )));
    }
    if tokens.len() != 5 {
        return Err(bad(format!("expected 5 words, found {}", tokens.len())));
    }
    let unsupported = |what: String| MtxError::Unsupported { line: 1, what };
    match tokens[1] {
        "matrix" => {}
        "vector" => {
            return Err(unsupported(
                "object `vector` (only `matrix` is read)".into(),
            ));
        }
        other => return Err(bad(format!("unknown object `{other}`"))),
    }
    match tokens[2] {
        "coordinate" => {}
        "array" => {
            return Err(unsupported(
                "dense `array` format (only `coordinate` is read)".into(),
            ));
        }
        other => return Err(bad(format!("unknown format `{other}`"))),
    }
    let field = match tokens[3] {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        "complex" => return Err(unsupported("field `complex` (values are real f32)".into())),
        other => return Err(bad(format!("unknown field `{other}`"))),
    };
    let symmetry = match tokens[4] {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::SkewSymmetric,
        "hermitian" => {
            return Err(unsupported(
                "symmetry `hermitian` (complex matrices)".into(),
            ));
        }
        other => return Err(bad(format!("unknown symmetry `{other}`"))),
    };
    if field == Field::Pattern && symmetry == Symmetry::SkewSymmetric {
        return Err(unsupported(
            "`pattern skew-symmetric` (a pattern has no sign)".into(),
        ));
    }
    // Comments and blank lines, then the size line.
    loop {
        if !lines.next()? {
            return Err(MtxError::SizeLine {
                line: lines.line,
                message: "the file ends before the size line".into(),
            });
        }
        if lines.buf.first() != Some(&b'%') && !is_blank(&lines.buf) {
            break;
        }
    }
    let line = lines.line;
    let text = String::from_utf8_lossy(&lines.buf);
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    if words.len() != 3 {
        return Err(MtxError::SizeLine {
            line,
            message: format!(
                "expected `rows cols entries`, found `{}`",
                truncate(&text, 80)
            ),
        });
    }
    let mut nums = [0u64; 3];
    for (slot, w) in nums.iter_mut().zip(&words) {
        *slot = parse_u64(w.as_bytes()).ok_or_else(|| MtxError::SizeLine {
            line,
            message: format!("`{}` is not a non-negative integer", truncate(w, 40)),
        })?;
    }
    let [rows, cols, entries] = nums;
    for (what, value) in [("rows", rows), ("cols", cols)] {
        if value > u32::MAX as u64 {
            return Err(CsrError::TooLarge { what, value }.into());
        }
    }
    if symmetry != Symmetry::General && rows != cols {
        return Err(MtxError::SizeLine {
            line,
            message: format!("a symmetric matrix must be square, found {rows}×{cols}"),
        });
    }
    Ok(Header {
        field,
        symmetry,
        rows,
        cols,
        entries,
    })
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Parses a decimal unsigned integer (optional leading `+`); `None` on anything else or overflow.
#[inline]
fn parse_u64(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"+").unwrap_or(s);
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parses a decimal signed integer into f32 (rounded to nearest when above 2^24).
fn parse_integer_value(s: &[u8]) -> Option<f32> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let v = parse_u64(digits)?;
    // i64 range check keeps `integer` honest; the value itself goes through f64 (exact up to 2^53).
    if v > i64::MAX as u64 + neg as u64 {
        return None;
    }
    let f = v as f64 as f32;
    Some(if neg { -f } else { f })
}

/// Parses a real value with the standard library's correctly rounded parser.
#[inline]
fn parse_real_value(s: &[u8]) -> Option<f32> {
    std::str::from_utf8(s).ok()?.parse::<f32>().ok()
}

/// Splits the next whitespace-separated token off `rest`.
#[inline]
fn next_token<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let s = *rest;
    let start = s.iter().position(|b| !b.is_ascii_whitespace())?;
    let s = &s[start..];
    let end = s
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(s.len());
    *rest = &s[end..];
    Some(&s[..end])
}

fn token_text(t: &[u8]) -> String {
    truncate(&String::from_utf8_lossy(t), 40).to_string()
}

fn parse<R: BufRead>(reader: R, limits: &Limits) -> Result<Csr, MtxError> {
    let mut lines = Lines {
        reader,
        buf: Vec::with_capacity(256),
        line: 0,
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
    // Never trust the header with a large reservation: start small, let the vector grow with the
    // entries the file really holds.
    let mut triplets: Vec<(u32, u32, f32)> = Vec::with_capacity(expanded.min(1 << 16) as usize);
    let mut found: u64 = 0;
    let progress_every: u64 = 10_000_000;
    while lines.next()? {
        let line = lines.line;
        let buf = lines.buf.as_slice();
        if buf.first() == Some(&b'%') || is_blank(buf) {
            continue;
        }
        if found == h.entries {
            return Err(MtxError::TooManyEntries {
                line,
                expected: h.entries,
            });
        }
        let mut rest = buf;
        let (Some(rt), Some(ct)) = (next_token(&mut rest), next_token(&mut rest)) else {
            return Err(MtxError::Parse {
                line,
                message: "expected `row col [value]`, found fewer than two tokens".into(),
            });
        };
        let row = parse_u64(rt).ok_or_else(|| MtxError::Parse {
            line,
            message: format!("row index `{}` is not a positive integer", token_text(rt)),
        })?;
        let col = parse_u64(ct).ok_or_else(|| MtxError::Parse {
            line,
            message: format!(
                "column index `{}` is not a positive integer",
                token_text(ct)
            ),
        })?;
        if row == 0 || col == 0 || row > h.rows || col > h.cols {
            return Err(MtxError::IndexOutOfRange {
                line,
                row,
                col,
                rows: h.rows,
                cols: h.cols,
            });
        }
        let value = match h.field {
            Field::Pattern => 1.0,
            Field::Real | Field::Integer => {
                let Some(vt) = next_token(&mut rest) else {
                    return Err(MtxError::MissingValue { line });
                };
                let v = if h.field == Field::Real {
                    parse_real_value(vt)
                } else {
                    parse_integer_value(vt)
                };
                v.ok_or_else(|| MtxError::Parse {
                    line,
                    message: format!(
                        "value `{}` is not {}",
                        token_text(vt),
                        if h.field == Field::Real {
                            "a real number"
                        } else {
                            "an integer"
                        }
                    ),
                })?
            }
        };
        if let Some(extra) = next_token(&mut rest) {
            return Err(MtxError::Parse {
                line,
                message: format!(
                    "unexpected extra token `{}` after the entry",
                    token_text(extra)
                ),
            });
        }
        let (r, c) = ((row - 1) as u32, (col - 1) as u32);
        triplets.push((r, c, value));
        if r != c {
            match h.symmetry {
                Symmetry::General => {}
                Symmetry::Symmetric => triplets.push((c, r, value)),
                Symmetry::SkewSymmetric => triplets.push((c, r, -value)),
            }
        }
        found += 1;
        if found.is_multiple_of(progress_every) {
            tracing::debug!(entries = found, of = h.entries, line, "reading entries");
        }
    }
    if found < h.entries {
        return Err(MtxError::TooFewEntries {
            line: lines.line,
            expected: h.entries,
            found,
        });
    }
    Ok(csr_from_triplets_with(
        h.rows as usize,
        h.cols as usize,
        &triplets,
        limits,
    )?)
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
    let file = File::open(path.as_ref()).map_err(|source| MtxError::Io { line: 0, source })?;
    let mut reader = BufReader::new(file);
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
