//! The header and the text around it: the line reader that counts lines and bytes, the banner
//! and size line, and the tokens and numbers every line is made of.

use super::*;

/// Line reader that tracks the 1-based line number of the line last returned.
pub(super) struct Lines<R> {
    pub(super) reader: R,
    pub(super) buf: Vec<u8>,
    pub(super) line: u64,
    /// Bytes read so far.
    pub(super) bytes: u64,
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
        self.bytes += n as u64;
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
pub(super) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

pub(super) fn parse_header<R: BufRead>(lines: &mut Lines<R>) -> Result<Header, MtxError> {
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
    // Word `i` (the `kind`) must be `want`; `known` is the one other value the format defines,
    // refused as unsupported for `why`.
    let expect = |i: usize, kind: &str, want: &str, (known, why): (&str, &str)| match tokens[i] {
        w if w == want => Ok(()),
        w if w == known => Err(unsupported(why.into())),
        other => Err(bad(format!("unknown {kind} `{other}`"))),
    };
    expect(
        1,
        "object",
        "matrix",
        ("vector", "object `vector` (only `matrix` is read)"),
    )?;
    expect(
        2,
        "format",
        "coordinate",
        ("array", "dense `array` format (only `coordinate` is read)"),
    )?;
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

pub(super) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Parses a decimal unsigned integer (optional leading `+`); `None` on anything else or overflow.
#[inline]
pub(super) fn parse_u64(s: &[u8]) -> Option<u64> {
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
pub(super) fn parse_integer_value(s: &[u8]) -> Option<f32> {
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

/// Parses a real value, correctly rounded (`fast-float2`; it accepts what `str::parse::<f32>`
/// accepts: decimal and exponent forms, `inf`, `infinity` and `nan` in any case, with a sign).
#[inline]
pub(super) fn parse_real_value(s: &[u8]) -> Option<f32> {
    fast_float2::parse::<f32, _>(s).ok()
}

/// Splits the next whitespace-separated token off `rest`.
#[inline]
pub(super) fn next_token<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
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

pub(super) fn token_text(t: &[u8]) -> String {
    truncate(&String::from_utf8_lossy(t), 40).to_string()
}
