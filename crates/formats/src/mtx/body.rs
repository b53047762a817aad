//! The body parsed on every core: blocks cut into pieces at line ends, each piece's entries
//! parsed into row buckets, errors named by the line a sequential read would name.

use super::*;

/// Why an entry line is not an entry (the line number is added by the caller).
pub(super) enum EntryError {
    Parse(String),
    MissingValue,
    Index { row: u64, col: u64 },
}

impl EntryError {
    fn at(self, line: u64, h: &Header) -> MtxError {
        match self {
            EntryError::Parse(message) => MtxError::Parse { line, message },
            EntryError::MissingValue => MtxError::MissingValue { line },
            EntryError::Index { row, col } => MtxError::IndexOutOfRange {
                line,
                row,
                col,
                rows: h.rows,
                cols: h.cols,
            },
        }
    }
}

/// Parses one entry line (not a comment, not blank) into zero-based row, column and value.
#[inline]
pub(super) fn parse_entry(buf: &[u8], h: &Header) -> Result<(u32, u32, f32), EntryError> {
    let mut rest = buf;
    let (Some(rt), Some(ct)) = (next_token(&mut rest), next_token(&mut rest)) else {
        return Err(EntryError::Parse(
            "expected `row col [value]`, found fewer than two tokens".into(),
        ));
    };
    let row = parse_u64(rt).ok_or_else(|| {
        EntryError::Parse(format!(
            "row index `{}` is not a positive integer",
            token_text(rt)
        ))
    })?;
    let col = parse_u64(ct).ok_or_else(|| {
        EntryError::Parse(format!(
            "column index `{}` is not a positive integer",
            token_text(ct)
        ))
    })?;
    if row == 0 || col == 0 || row > h.rows || col > h.cols {
        return Err(EntryError::Index { row, col });
    }
    let value = match h.field {
        Field::Pattern => 1.0,
        Field::Real | Field::Integer => {
            let Some(vt) = next_token(&mut rest) else {
                return Err(EntryError::MissingValue);
            };
            let v = if h.field == Field::Real {
                parse_real_value(vt)
            } else {
                parse_integer_value(vt)
            };
            let v = v.ok_or_else(|| {
                EntryError::Parse(format!(
                    "value `{}` is not {}",
                    token_text(vt),
                    if h.field == Field::Real {
                        "a real number"
                    } else {
                        "an integer"
                    }
                ))
            })?;
            // A finite number too large for f32 rounds to ±inf; `inf` and `infinity` are the
            // only spellings of an infinity, and only they hold an `n`.
            if v.is_infinite() && !vt.iter().any(|&b| b | 0x20 == b'n') {
                return Err(EntryError::Parse(format!(
                    "value `{}` is beyond the f32 range (largest finite value {:e})",
                    token_text(vt),
                    f32::MAX
                )));
            }
            v
        }
    };
    if let Some(extra) = next_token(&mut rest) {
        return Err(EntryError::Parse(format!(
            "unexpected extra token `{}` after the entry",
            token_text(extra)
        )));
    }
    Ok(((row - 1) as u32, (col - 1) as u32, value))
}

/// The next line of `rest` (without its `\n`), or `None` at the end.
#[inline]
pub(super) fn next_line<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    if rest.is_empty() {
        return None;
    }
    let s = *rest;
    match memchr::memchr(b'\n', s) {
        Some(i) => {
            *rest = &s[i + 1..];
            Some(&s[..i])
        }
        None => {
            *rest = &[];
            Some(s)
        }
    }
}

/// What one piece of whole lines gave.
pub(super) struct Piece {
    /// Its entries, expanded and grouped by row bucket.
    pub(super) run: BucketedRun,
    /// Entry lines parsed.
    pub(super) entries: u64,
    /// Lines in the piece.
    pub(super) lines: u64,
    /// A line failed; the exact error comes from [`rescan`].
    pub(super) failed: bool,
}

pub(super) fn parse_piece(bytes: &[u8], h: &Header, buckets: &RowBuckets) -> Piece {
    thread_local! {
        /// Triplets of the piece being parsed, reused by the thread's next piece (a fresh vector
        /// per piece faults in fresh pages; the run keeps an exact copy).
        static SCRATCH: std::cell::RefCell<Vec<(u32, u32, f32)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut t) => {
            t.clear();
            parse_piece_into(bytes, h, buckets, &mut t)
        }
        Err(_) => parse_piece_into(bytes, h, buckets, &mut Vec::new()),
    })
}

pub(super) fn parse_piece_into(
    bytes: &[u8],
    h: &Header,
    buckets: &RowBuckets,
    t: &mut Vec<(u32, u32, f32)>,
) -> Piece {
    let (mut entries, mut lines, mut failed) = (0u64, 0u64, false);
    let mut rest = bytes;
    while let Some(line) = next_line(&mut rest) {
        lines += 1;
        if line.len() as u64 > MAX_LINE_BYTES {
            failed = true;
            break;
        }
        if line.first() == Some(&b'%') || is_blank(line) {
            continue;
        }
        let Ok((r, c, v)) = parse_entry(line, h) else {
            failed = true;
            break;
        };
        t.push((r, c, v));
        if r != c {
            match h.symmetry {
                Symmetry::General => {}
                Symmetry::Symmetric => t.push((c, r, v)),
                Symmetry::SkewSymmetric => t.push((c, r, -v)),
            }
        }
        entries += 1;
    }
    Piece {
        run: if failed {
            BucketedRun::default()
        } else {
            BucketedRun::new(t, buckets)
        },
        entries,
        lines,
        failed,
    }
}

/// The error of a piece that failed or holds the first surplus entry, found line by line exactly
/// as a sequential reader finds it: `line` lines and `found` entries precede the piece.
pub(super) fn rescan(bytes: &[u8], h: &Header, mut line: u64, mut found: u64) -> MtxError {
    let mut rest = bytes;
    while let Some(l) = next_line(&mut rest) {
        line += 1;
        if l.len() as u64 > MAX_LINE_BYTES {
            return long_line(line);
        }
        if l.first() == Some(&b'%') || is_blank(l) {
            continue;
        }
        if found == h.entries {
            return MtxError::TooManyEntries {
                line,
                expected: h.entries,
            };
        }
        if let Err(e) = parse_entry(l, h) {
            return e.at(line, h);
        }
        found += 1;
    }
    // Not reached: a piece is rescanned only when one of its lines fails or is surplus.
    MtxError::Parse {
        line,
        message: "inconsistent piece (please report)".into(),
    }
}

pub(super) fn long_line(line: u64) -> MtxError {
    MtxError::Parse {
        line,
        message: format!("line longer than {MAX_LINE_BYTES} bytes"),
    }
}

/// Cuts a block of whole lines into pieces of about `piece` bytes at line ends.
pub(super) fn pieces(block: &[u8], piece: usize) -> Vec<&[u8]> {
    let piece = piece.max(1);
    let mut out = Vec::with_capacity(block.len() / piece + 1);
    let mut s = 0;
    while s < block.len() {
        let target = s + piece;
        if target >= block.len() {
            out.push(&block[s..]);
            break;
        }
        let cut = memchr::memchr(b'\n', &block[target..]).map_or(block.len(), |i| target + i + 1);
        out.push(&block[s..cut]);
        s = cut;
    }
    out
}

/// Parses the blocks of the body after the header `h` (whose last line is `line`), then builds
/// the CSR. Returns it and the body's bytes.
pub(super) fn parse_body(
    h: &Header,
    mut line: u64,
    blocks: impl Iterator<Item = Block>,
    piece: usize,
    recycle: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
) -> Result<(Csr, u64), MtxError> {
    let buckets = RowBuckets::new(h.rows as usize);
    let mut runs: Vec<BucketedRun> = Vec::new();
    let (mut found, mut bytes) = (0u64, 0u64);
    for block in blocks {
        let text = match block {
            Block::Lines(text) => text,
            Block::LongLine => return Err(long_line(line + 1)),
            Block::Failed(source) => {
                return Err(MtxError::Io {
                    line: line + 1,
                    source,
                });
            }
        };
        bytes += text.len() as u64;
        let cut = pieces(&text, piece);
        let parsed: Vec<Piece> = cut
            .par_iter()
            .map(|p| parse_piece(p, h, &buckets))
            .collect();
        for (p, piece) in cut.iter().zip(parsed) {
            if piece.failed || found + piece.entries > h.entries {
                return Err(rescan(p, h, line, found));
            }
            found += piece.entries;
            line += piece.lines;
            if !piece.run.is_empty() {
                runs.push(piece.run);
            }
        }
        drop(cut);
        if let Some(r) = &recycle {
            let _ = r.try_send(text);
        }
        tracing::debug!(entries = found, of = h.entries, line, "reading entries");
    }
    if found < h.entries {
        return Err(MtxError::TooFewEntries {
            line,
            expected: h.entries,
            found,
        });
    }
    Ok((
        csr_from_runs(h.rows as usize, h.cols as usize, runs, &buckets)?,
        bytes,
    ))
}
