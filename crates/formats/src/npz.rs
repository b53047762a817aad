//! scipy sparse `.npz` input (`scipy.sparse.save_npz`): a zip of `.npy` arrays `data`, `indices`,
//! `indptr` (or `row`, `col` for coo), `shape` and `format`.
//!
//! Formats `csr`, `csc` (converted) and `coo` (`row`/`col`, or a 2 × nnz `coords`; duplicates summed,
//! as scipy's `tocsr` does) are read;
//! `bsr`, `dia` and others give [`NpzError::UnsupportedFormat`]. The zip members may be stored or
//! deflated (zip64 size and offset fields are understood, with checked arithmetic). Indices may be
//! int8…int64 or unsigned, values float32/float64/integer/bool, little- or big-endian; `format` may be
//! bytes (`|S3`, what `save_npz` writes) or unicode (`<U3`, what `np.savez(..., format='csr')`
//! writes). Unsorted or duplicate column indices are accepted: rows are sorted and duplicates summed,
//! as for Matrix Market input. An indptr that does not start at 0 is refused (scipy refuses it too).
//!
//! A zip with two members of the same name is refused ([`NpzError::DuplicateMember`]): NumPy and
//! SciPy take the last, a naive reader the first, so the file means two different matrices.
//! [`read_npz`] opens regular files only ([`crate::file::open_regular`]).
//!
//! Memory stays proportional to what the file holds: a member's declared size is checked against the
//! [`Limits`] budget before it is inflated and the inflater never reads past it, and the CSR's row
//! offsets (what scales with the declared shape) are checked against the budget before allocation.
//!
//! The container and `.npy` parsing are hand-written (about 200 lines) rather than taken from the
//! `npyz` crate: every size read from the file has to pass our budget and checked arithmetic before
//! anything is reserved, which a general-purpose zip reader does not promise, and it keeps the
//! `zip` crate's dependency tree out of a 2-core CI build.

use std::io::Read;
use std::path::Path;

use thiserror::Error;

use crate::csr::{Csr, CsrError, check_csr_budget, csr_from_triplets_with};
use crate::limits::{BudgetError, Limits};

/// Errors reading a `.npz` file.
#[derive(Debug, Error)]
pub enum NpzError {
    /// The file could not be read.
    #[error("I/O error reading npz: {0}")]
    Io(#[from] std::io::Error),
    /// The zip container is malformed or uses an unsupported feature.
    #[error("bad zip container: {0}")]
    Zip(String),
    /// A `.npy` member is malformed or has an unsupported dtype.
    #[error("array `{name}`: {message}")]
    Npy {
        /// Array name (member name without `.npy`).
        name: String,
        /// What is wrong.
        message: String,
    },
    /// Two members of the zip have the same name: NumPy and SciPy read the last one, a reader
    /// that takes the first would silently read another matrix, so the file is refused.
    #[error(
        "the npz file has two members named `{0}` (refused: readers disagree on which to take)"
    )]
    DuplicateMember(String),
    /// A required array is missing.
    #[error("the npz file has no `{0}` array (not written by scipy.sparse.save_npz?)")]
    MissingArray(String),
    /// The sparse format stored is not csr, csc or coo.
    #[error("unsupported sparse format `{0}` (only csr, csc and coo are read)")]
    UnsupportedFormat(String),
    /// The arrays are inconsistent (offsets not monotone, index out of range, ...).
    #[error("invalid sparse matrix: {0}")]
    Invalid(String),
    /// The matrix does not fit u32 indices.
    #[error(transparent)]
    Csr(#[from] CsrError),
    /// Something the file declares would need more memory than the budget.
    #[error(transparent)]
    Budget(#[from] BudgetError),
}

/// Reads a scipy `.npz` sparse matrix into a [`Csr`] under [`Limits::global`].
pub fn read_npz(path: impl AsRef<Path>) -> Result<Csr, NpzError> {
    read_npz_counted(path.as_ref()).map(|(m, _)| m)
}

/// [`read_npz`], also returning the bytes of the file.
#[tracing::instrument(name = "read", level = "info", skip_all, fields(path = %path.display()))]
pub(crate) fn read_npz_counted(path: &Path) -> Result<(Csr, u64), NpzError> {
    let limits = Limits::global();
    // A regular file only (a FIFO or a device is refused without blocking), its length checked
    // against the budget before it is read, and read in one piece: members are parsed in place.
    let f = crate::file::open_regular(path).map_err(std::io::Error::from)?;
    limits.check(|| format!("reading {}", path.display()), f.len)?;
    let bytes = crate::file::read_exact_vec(&mut std::io::Read::take(&f.file, f.len), f.len)?;
    Ok((read_npz_bytes_with(&bytes, &limits)?, f.len))
}

/// Reads a scipy `.npz` sparse matrix held in memory under [`Limits::global`].
pub fn read_npz_bytes(bytes: &[u8]) -> Result<Csr, NpzError> {
    read_npz_bytes_with(bytes, &Limits::global())
}

/// Reads a scipy `.npz` sparse matrix held in memory under an explicit budget.
pub fn read_npz_bytes_with(bytes: &[u8], limits: &Limits) -> Result<Csr, NpzError> {
    let members = zip_members(bytes)?;
    let has = |name: &str| members.iter().any(|m| m.name == format!("{name}.npy"));
    let get_shaped = |name: &str| -> Result<(Array, Layout), NpzError> {
        let m = members
            .iter()
            .find(|m| m.name == format!("{name}.npy"))
            .ok_or_else(|| NpzError::MissingArray(name.into()))?;
        let raw = m.extract(bytes, limits)?;
        parse_npy(name, &raw)
    };
    let get = |name: &str| -> Result<Array, NpzError> {
        match get_shaped(name)? {
            (a, Layout { dims, .. }) if dims.len() <= 1 => Ok(a),
            _ => Err(NpzError::Npy {
                name: name.into(),
                message: "expected a 1-D array".into(),
            }),
        }
    };
    let format = match get("format")? {
        Array::Text(s) => s,
        _ => return Err(NpzError::Invalid("`format` is not a string".into())),
    };
    #[derive(PartialEq)]
    enum Kind {
        Csr,
        Csc,
        Coo,
    }
    let kind = match format.as_str() {
        "csr" => Kind::Csr,
        "csc" => Kind::Csc,
        "coo" => Kind::Coo,
        other => return Err(NpzError::UnsupportedFormat(other.into())),
    };
    let shape = get("shape")?.into_u64("shape")?;
    if shape.len() != 2 {
        return Err(NpzError::Invalid(format!(
            "shape has {} entries, expected 2",
            shape.len()
        )));
    }
    let (rows, cols) = (shape[0], shape[1]);
    for (what, value) in [("rows", rows), ("cols", cols)] {
        if value > u32::MAX as u64 {
            return Err(CsrError::TooLarge { what, value }.into());
        }
    }
    let data = get("data")?.into_f32("data")?;
    // What scales with the declared shape (the row offsets) is checked before anything is built.
    check_csr_budget(rows as usize, data.len() as u64, limits)?;
    let mut triplets = Vec::with_capacity(data.len());
    if kind == Kind::Coo {
        // scipy writes `row` and `col` for 2-D coo; `coords` (2 × nnz) is its announced future.
        let (row, col) = if !has("row") && has("coords") {
            let (a, layout) = get_shaped("coords")?;
            let v = a.into_u64("coords")?;
            let nnz = data.len();
            if layout.dims != [2, nnz] {
                return Err(NpzError::Invalid(format!(
                    "coords has shape {:?}, expected [2, {nnz}]",
                    layout.dims
                )));
            }
            if layout.fortran {
                (
                    v.iter().step_by(2).copied().collect(),
                    v.iter().skip(1).step_by(2).copied().collect(),
                )
            } else {
                (v[..nnz].to_vec(), v[nnz..].to_vec())
            }
        } else {
            (get("row")?.into_u64("row")?, get("col")?.into_u64("col")?)
        };
        if row.len() != data.len() || col.len() != data.len() {
            return Err(NpzError::Invalid(format!(
                "row ({}), col ({}) and data ({}) lengths disagree",
                row.len(),
                col.len(),
                data.len()
            )));
        }
        for (k, ((&r, &c), &v)) in row.iter().zip(&col).zip(&data).enumerate() {
            if r >= rows || c >= cols {
                return Err(NpzError::Invalid(format!(
                    "entry {k} at ({r}, {c}) is outside the {rows}×{cols} shape"
                )));
            }
            triplets.push((r as u32, c as u32, v));
        }
    } else {
        let csc = kind == Kind::Csc;
        let indptr = get("indptr")?.into_u64("indptr")?;
        let indices = get("indices")?.into_u64("indices")?;
        let (major, minor) = if csc { (cols, rows) } else { (rows, cols) };
        if indptr.len() as u64 != major + 1 {
            return Err(NpzError::Invalid(format!(
                "indptr has {} entries, expected {}",
                indptr.len(),
                major + 1
            )));
        }
        if indptr[0] != 0 {
            return Err(NpzError::Invalid(format!(
                "indptr[0] is {}, expected 0 (scipy refuses it too)",
                indptr[0]
            )));
        }
        if indices.len() != data.len() || indptr.last().copied() != Some(indices.len() as u64) {
            return Err(NpzError::Invalid(format!(
                "indices ({}), data ({}) and indptr[-1] ({:?}) disagree",
                indices.len(),
                data.len(),
                indptr.last()
            )));
        }
        for m in 0..major as usize {
            let (a, b) = (indptr[m], indptr[m + 1]);
            if a > b || b > indices.len() as u64 {
                return Err(NpzError::Invalid(format!("indptr is not monotone at {m}")));
            }
            for k in a as usize..b as usize {
                let i = indices[k];
                if i >= minor {
                    return Err(NpzError::Invalid(format!(
                        "index {i} out of range {minor} at {k}"
                    )));
                }
                let (r, c) = if csc {
                    (i as u32, m as u32)
                } else {
                    (m as u32, i as u32)
                };
                triplets.push((r, c, data[k]));
            }
        }
    }
    Ok(csr_from_triplets_with(
        rows as usize,
        cols as usize,
        &triplets,
        limits,
    )?)
}

struct Member {
    name: String,
    method: u16,
    compressed: u64,
    uncompressed: u64,
    offset: u64,
}

/// `b[base + off ..][..N]`, with every addition checked.
fn bytes_at<const N: usize>(b: &[u8], base: usize, off: usize) -> Option<[u8; N]> {
    let at = base.checked_add(off)?;
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}
fn le16(b: &[u8], base: usize, off: usize) -> Option<u16> {
    bytes_at(b, base, off).map(u16::from_le_bytes)
}
fn le32(b: &[u8], base: usize, off: usize) -> Option<u32> {
    bytes_at(b, base, off).map(u32::from_le_bytes)
}
fn le64(b: &[u8], base: usize, off: usize) -> Option<u64> {
    bytes_at(b, base, off).map(u64::from_le_bytes)
}
/// `b[base + off .. base + off + len]`, checked.
fn slice_at(b: &[u8], base: usize, off: usize, len: usize) -> Option<&[u8]> {
    let at = base.checked_add(off)?;
    b.get(at..at.checked_add(len)?)
}

fn zip_err(msg: &str) -> NpzError {
    NpzError::Zip(msg.into())
}

fn zip_members(b: &[u8]) -> Result<Vec<Member>, NpzError> {
    // End of central directory: scan back over at most a 64 KiB comment.
    let lo = b.len().saturating_sub(22 + 65535);
    let eocd = (lo..=b.len().saturating_sub(22))
        .rev()
        .find(|&i| le32(b, i, 0) == Some(0x0605_4b50))
        .ok_or_else(|| zip_err("no end-of-central-directory record (not a zip file?)"))?;
    let short = || zip_err("truncated central directory");
    let mut count = le16(b, eocd, 10).ok_or_else(short)? as u64;
    let mut cd = le32(b, eocd, 16).ok_or_else(short)? as u64;
    if count == 0xFFFF || cd == 0xFFFF_FFFF {
        // Zip64: the locator sits just before the EOCD and points at the zip64 EOCD record.
        let loc = eocd.checked_sub(20).ok_or_else(short)?;
        if le32(b, loc, 0) != Some(0x0706_4b50) {
            return Err(zip_err("zip64 locator missing"));
        }
        let z = usize::try_from(le64(b, loc, 8).ok_or_else(short)?)
            .map_err(|_| zip_err("zip64 end record offset out of range"))?;
        if le32(b, z, 0) != Some(0x0606_4b50) {
            return Err(zip_err("zip64 end record missing"));
        }
        count = le64(b, z, 32).ok_or_else(short)?;
        cd = le64(b, z, 48).ok_or_else(short)?;
    }
    // Every entry takes at least 46 bytes: a count the file cannot hold is refused, not reserved.
    if count > (b.len() / 46) as u64 {
        return Err(zip_err(
            "central directory claims more entries than the file holds",
        ));
    }
    let mut members = Vec::with_capacity(count as usize);
    let mut p = usize::try_from(cd).map_err(|_| short())?;
    for _ in 0..count {
        if le32(b, p, 0) != Some(0x0201_4b50) {
            return Err(zip_err("bad central directory entry"));
        }
        let method = le16(b, p, 10).ok_or_else(short)?;
        let mut compressed = le32(b, p, 20).ok_or_else(short)? as u64;
        let mut uncompressed = le32(b, p, 24).ok_or_else(short)? as u64;
        let name_len = le16(b, p, 28).ok_or_else(short)? as usize;
        let extra_len = le16(b, p, 30).ok_or_else(short)? as usize;
        let comment_len = le16(b, p, 32).ok_or_else(short)? as usize;
        let mut offset = le32(b, p, 42).ok_or_else(short)? as u64;
        let name = slice_at(b, p, 46, name_len).ok_or_else(short)?;
        let name = String::from_utf8_lossy(name).into_owned();
        let extra = slice_at(b, p, 46 + name_len, extra_len).ok_or_else(short)?;
        // Zip64 extra field: only the fields saturated in the fixed header are present, in order.
        let mut e = 0;
        while e + 4 <= extra.len() {
            let id = le16(extra, e, 0).ok_or_else(short)?;
            let len = le16(extra, e, 2).ok_or_else(short)? as usize;
            if id == 1 {
                let mut q = e + 4;
                for field in [&mut uncompressed, &mut compressed, &mut offset] {
                    if *field == 0xFFFF_FFFF {
                        *field = le64(extra, q, 0).ok_or_else(short)?;
                        q += 8;
                    }
                }
            }
            e += 4 + len;
        }
        members.push(Member {
            name,
            method,
            compressed,
            uncompressed,
            offset,
        });
        p = p
            .checked_add(46 + name_len + extra_len + comment_len)
            .ok_or_else(short)?;
    }
    // Any repeated name is refused, whether or not it is an array this reader uses.
    let mut names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(NpzError::DuplicateMember(w[0].to_string()));
    }
    Ok(members)
}

impl Member {
    fn extract(&self, b: &[u8], limits: &Limits) -> Result<Vec<u8>, NpzError> {
        let short = || NpzError::Zip(format!("member `{}` is truncated", self.name));
        let h = usize::try_from(self.offset).map_err(|_| short())?;
        if le32(b, h, 0) != Some(0x0403_4b50) {
            return Err(NpzError::Zip(format!(
                "bad local header for `{}`",
                self.name
            )));
        }
        let name_len = le16(b, h, 26).ok_or_else(short)? as usize;
        let extra_len = le16(b, h, 28).ok_or_else(short)? as usize;
        let len = usize::try_from(self.compressed).map_err(|_| short())?;
        let raw = slice_at(b, h, 30 + name_len + extra_len, len).ok_or_else(short)?;
        match self.method {
            0 => {
                if self.uncompressed != self.compressed {
                    return Err(short());
                }
                Ok(raw.to_vec())
            }
            8 => {
                limits.check(
                    || format!("inflating npz member `{}`", self.name),
                    self.uncompressed,
                )?;
                // Reserve only what the compressed bytes can possibly inflate to (deflate expands
                // at most ~1032:1), never the bare claim; read at most one byte past the claim.
                let cap = self
                    .uncompressed
                    .min(self.compressed.saturating_mul(1032))
                    .min(1 << 26);
                let mut out = Vec::with_capacity(cap as usize);
                flate2::read::DeflateDecoder::new(raw)
                    .take(self.uncompressed.saturating_add(1))
                    .read_to_end(&mut out)?;
                if out.len() as u64 != self.uncompressed {
                    return Err(NpzError::Zip(format!(
                        "member `{}` inflates to {} bytes, its header says {}",
                        self.name,
                        out.len(),
                        self.uncompressed
                    )));
                }
                Ok(out)
            }
            m => Err(NpzError::Zip(format!(
                "member `{}` uses compression method {m}",
                self.name
            ))),
        }
    }
}

/// A decoded `.npy` array.
enum Array {
    /// Integers (and bools), widened.
    Ints(Vec<i64>),
    /// Unsigned integers wider than i64 can hold.
    Uints(Vec<u64>),
    Floats(Vec<f64>),
    Text(String),
}

impl Array {
    fn into_u64(self, name: &str) -> Result<Vec<u64>, NpzError> {
        let bad = |message: String| NpzError::Npy {
            name: name.into(),
            message,
        };
        match self {
            Array::Ints(v) => v
                .into_iter()
                .enumerate()
                .map(|(k, x)| {
                    u64::try_from(x).map_err(|_| bad(format!("negative value {x} at {k}")))
                })
                .collect(),
            Array::Uints(v) => Ok(v),
            _ => Err(bad("expected an integer array".into())),
        }
    }
    fn into_f32(self, name: &str) -> Result<Vec<f32>, NpzError> {
        match self {
            Array::Ints(v) => Ok(v.into_iter().map(|x| x as f32).collect()),
            Array::Uints(v) => Ok(v.into_iter().map(|x| x as f32).collect()),
            Array::Floats(v) => v
                .into_iter()
                .enumerate()
                .map(|(k, x)| {
                    let f = x as f32;
                    if x.is_finite() && !f.is_finite() {
                        Err(NpzError::Npy {
                            name: name.into(),
                            message: format!("value {x} at {k} does not fit f32"),
                        })
                    } else {
                        Ok(f)
                    }
                })
                .collect(),
            Array::Text(_) => Err(NpzError::Npy {
                name: name.into(),
                message: "expected a numeric array".into(),
            }),
        }
    }
}

/// Shape and order of a decoded `.npy` array.
struct Layout {
    dims: Vec<usize>,
    fortran: bool,
}

fn parse_npy(name: &str, b: &[u8]) -> Result<(Array, Layout), NpzError> {
    let bad = |message: &str| NpzError::Npy {
        name: name.into(),
        message: message.into(),
    };
    if b.get(..6) != Some(b"\x93NUMPY") {
        return Err(bad("not a .npy array (bad magic)"));
    }
    let major = *b.get(6).ok_or_else(|| bad("truncated header"))?;
    let (hlen, hstart) = match major {
        1 => (
            le16(b, 8, 0).ok_or_else(|| bad("truncated header"))? as usize,
            10,
        ),
        2 | 3 => (
            le32(b, 8, 0).ok_or_else(|| bad("truncated header"))? as usize,
            12,
        ),
        _ => return Err(bad("unsupported .npy version")),
    };
    let header = slice_at(b, hstart, 0, hlen).ok_or_else(|| bad("truncated header"))?;
    let header = String::from_utf8_lossy(header);
    let body = &b[hstart + hlen..];
    let descr = dict_value(&header, "descr").ok_or_else(|| bad("header has no descr"))?;
    let quote = descr
        .chars()
        .next()
        .filter(|&c| c == '\'' || c == '"')
        .ok_or_else(|| bad("bad descr"))?;
    let descr = descr[1..].split(quote).next().unwrap_or_default();
    let fortran = dict_value(&header, "fortran_order").is_some_and(|v| v.starts_with("True"));
    let shape = dict_value(&header, "shape").ok_or_else(|| bad("header has no shape"))?;
    let shape = shape.strip_prefix('(').ok_or_else(|| bad("bad shape"))?;
    let shape = &shape[..shape.find(')').ok_or_else(|| bad("bad shape"))?];
    let mut count: usize = 1;
    let mut dims = Vec::new();
    for dim in shape.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let d: usize = dim.parse().map_err(|_| bad("bad shape"))?;
        count = count.checked_mul(d).ok_or_else(|| bad("shape overflows"))?;
        dims.push(d);
    }
    if dims.len() > 2 {
        return Err(bad("expected a 1-D or 2-D array"));
    }
    let layout = Layout { dims, fortran };
    let mut chars = descr.chars();
    let order = chars.next().ok_or_else(|| bad("empty descr"))?;
    let kind = chars.next().ok_or_else(|| bad("bad descr"))?;
    let n: usize = chars.as_str().parse().map_err(|_| bad("bad descr"))?;
    let big = match order {
        '<' | '|' | '=' => false,
        '>' => true,
        _ => return Err(bad(&format!("bad byte order in descr `{descr}`"))),
    };
    // Item size in bytes: a unicode item of n characters takes 4·n bytes.
    let item = if kind == 'U' {
        n.checked_mul(4).ok_or_else(|| bad("bad descr"))?
    } else {
        n
    };
    let need = count
        .checked_mul(item)
        .ok_or_else(|| bad("shape overflows"))?;
    let body = body.get(..need).ok_or_else(|| bad("truncated data"))?;
    let word = |c: &[u8]| -> [u8; 8] {
        // The item's bytes as a little-endian u64 (sign extension is done by the caller).
        let mut w = [0u8; 8];
        if big {
            for (i, &x) in c.iter().rev().enumerate() {
                w[i] = x;
            }
        } else {
            w[..c.len()].copy_from_slice(c);
        }
        w
    };
    let chunks = body.chunks_exact(item.max(1));
    let array = match (kind, n) {
        ('f', 4) => Array::Floats(
            chunks
                .map(|c| f32::from_bits(u64::from_le_bytes(word(c)) as u32) as f64)
                .collect(),
        ),
        ('f', 8) => Array::Floats(
            chunks
                .map(|c| f64::from_bits(u64::from_le_bytes(word(c))))
                .collect(),
        ),
        ('i', 1 | 2 | 4 | 8) => {
            let shift = 64 - 8 * n as u32;
            Array::Ints(
                chunks
                    .map(|c| (u64::from_le_bytes(word(c)) << shift) as i64 >> shift)
                    .collect(),
            )
        }
        ('u' | 'b', 1 | 2 | 4) => {
            Array::Ints(chunks.map(|c| u64::from_le_bytes(word(c)) as i64).collect())
        }
        ('u', 8) => Array::Uints(chunks.map(|c| u64::from_le_bytes(word(c))).collect()),
        ('S', _) => Array::Text(
            String::from_utf8_lossy(body)
                .trim_end_matches('\0')
                .to_string(),
        ),
        ('U', _) => Array::Text(
            body.chunks_exact(4)
                .map(|c| {
                    let u = u32::from_le_bytes(c.try_into().unwrap_or_default());
                    if big { u.swap_bytes() } else { u }
                })
                .filter(|&u| u != 0)
                .filter_map(char::from_u32)
                .collect(),
        ),
        _ => return Err(bad(&format!("unsupported dtype `{descr}`"))),
    };
    Ok((array, layout))
}

/// The raw text after `'key':` in a numpy header dict.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = &header[at + key.len() + 2..];
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

/// The integration tests' `.npy`/`.npz` writer, for the unit tests.
#[cfg(test)]
#[path = "../tests/support/npz_writer.rs"]
mod npz_writer;

#[cfg(test)]
mod tests {
    use super::*;

    use super::npz_writer;
    use npz_writer::npy;

    /// A stored (method 0) zip with the given members.
    fn zip(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let members: Vec<_> = members
            .iter()
            .map(|(name, data)| npz_writer::member(name, data.clone()))
            .collect();
        npz_writer::zip(&members, None, None)
    }

    fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }

    #[test]
    fn reads_scipy_csr_with_unsorted_rows() {
        // [[0, 2, 1], [0, 0, 0]] with row 0 stored unsorted.
        let file = zip(&[
            (
                "indices.npy",
                npy("<i4", "(2,)", &le(&[2i32, 1], i32::to_le_bytes)),
            ),
            (
                "indptr.npy",
                npy("<i4", "(3,)", &le(&[0i32, 2, 2], i32::to_le_bytes)),
            ),
            ("format.npy", npy("|S3", "()", b"csr")),
            (
                "shape.npy",
                npy("<i8", "(2,)", &le(&[2i64, 3], i64::to_le_bytes)),
            ),
            (
                "data.npy",
                npy("<f8", "(2,)", &le(&[1.0f64, 2.0], f64::to_le_bytes)),
            ),
        ]);
        let m = read_npz_bytes(&file).unwrap();
        assert_eq!(m.shape(), (2, 3));
        assert_eq!(m.indptr().raw_storage(), &[0, 2, 2]);
        assert_eq!(m.indices(), &[1, 2]);
        assert_eq!(m.data(), &[2.0, 1.0]);
    }

    #[test]
    fn reads_csc_and_rejects_bsr() {
        // csc of [[1, 0], [3, 4]]: columns [1,3], [4].
        let members = |fmt: &[u8]| {
            zip(&[
                (
                    "indices.npy",
                    npy("<i8", "(3,)", &le(&[0i64, 1, 1], i64::to_le_bytes)),
                ),
                (
                    "indptr.npy",
                    npy("<i8", "(3,)", &le(&[0i64, 2, 3], i64::to_le_bytes)),
                ),
                ("format.npy", npy(&format!("|S{}", fmt.len()), "()", fmt)),
                (
                    "shape.npy",
                    npy("<i8", "(2,)", &le(&[2i64, 2], i64::to_le_bytes)),
                ),
                (
                    "data.npy",
                    npy("<f4", "(3,)", &le(&[1.0f32, 3.0, 4.0], f32::to_le_bytes)),
                ),
            ])
        };
        let m = read_npz_bytes(&members(b"csc")).unwrap();
        assert_eq!(m.indptr().raw_storage(), &[0, 1, 3]);
        assert_eq!(m.indices(), &[0, 0, 1]);
        assert_eq!(m.data(), &[1.0, 3.0, 4.0]);
        assert!(
            matches!(read_npz_bytes(&members(b"bsr")), Err(NpzError::UnsupportedFormat(f)) if f == "bsr")
        );
    }

    #[test]
    fn reads_coo_with_coords() {
        // [[1, 0, 2], [0, 3, 0]] as a 2 × 3 coords array (row indices, then column indices).
        let file = zip(&[
            (
                "coords.npy",
                npy(
                    "<i8",
                    "(2, 3)",
                    &le(&[0i64, 0, 1, 0, 2, 1], i64::to_le_bytes),
                ),
            ),
            ("format.npy", npy("|S3", "()", b"coo")),
            (
                "shape.npy",
                npy("<i8", "(2,)", &le(&[2i64, 3], i64::to_le_bytes)),
            ),
            (
                "data.npy",
                npy("<f8", "(3,)", &le(&[1.0f64, 2.0, 3.0], f64::to_le_bytes)),
            ),
        ]);
        let m = read_npz_bytes(&file).unwrap();
        assert_eq!(m.row_offsets(), &[0, 2, 3]);
        assert_eq!(m.indices(), &[0, 2, 1]);
        assert_eq!(m.data(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn two_members_of_one_name_are_refused() {
        // [[1]] twice over, with the second `data` saying 2: NumPy would read 2.
        let data = |v: f64| ("data.npy", npy("<f8", "(1,)", &le(&[v], f64::to_le_bytes)));
        let members = |dup: bool| {
            let mut m = vec![
                (
                    "indices.npy",
                    npy("<i4", "(1,)", &le(&[0i32], i32::to_le_bytes)),
                ),
                (
                    "indptr.npy",
                    npy("<i4", "(2,)", &le(&[0i32, 1], i32::to_le_bytes)),
                ),
                ("format.npy", npy("|S3", "()", b"csr")),
                (
                    "shape.npy",
                    npy("<i8", "(2,)", &le(&[1i64, 1], i64::to_le_bytes)),
                ),
                data(1.0),
            ];
            if dup {
                m.push(data(2.0));
            }
            zip(&m)
        };
        assert_eq!(read_npz_bytes(&members(false)).unwrap().data(), &[1.0]);
        let e = read_npz_bytes(&members(true)).unwrap_err();
        assert!(
            matches!(e, NpzError::DuplicateMember(ref n) if n == "data.npy"),
            "{e}"
        );
        // A repeated member the reader never uses is refused too.
        let mut m = vec![("extra.txt", b"a".to_vec()), ("extra.txt", b"b".to_vec())];
        m.push(("format.npy", npy("|S3", "()", b"csr")));
        assert!(matches!(
            read_npz_bytes(&zip(&m)),
            Err(NpzError::DuplicateMember(_))
        ));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            read_npz_bytes(b"not a zip"),
            Err(NpzError::Zip(_))
        ));
        let file = zip(&[("format.npy", npy("|S3", "()", b"csr"))]);
        assert!(matches!(read_npz_bytes(&file), Err(NpzError::MissingArray(n)) if n == "shape"));
    }
}
