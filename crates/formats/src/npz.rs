//! scipy sparse `.npz` input (`scipy.sparse.save_npz`): a zip of `.npy` arrays `data`, `indices`,
//! `indptr`, `shape` and `format`.
//!
//! Formats `csr` and `csc` are read (csc is converted); `coo`, `bsr` and others give
//! [`NpzError::UnsupportedFormat`]. The zip members may be stored or deflated (zip64 size fields are
//! understood). Indices may be int32/int64 (or unsigned), values float32/float64/integer/bool, all
//! little-endian and C order. Unsorted or duplicate column indices are accepted: rows are sorted and
//! duplicates summed, as for Matrix Market input.

use std::io::Read;
use std::path::Path;

use thiserror::Error;

use crate::csr::{Csr, CsrError, csr_from_triplets};

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
    /// A required array is missing.
    #[error("the npz file has no `{0}` array (not written by scipy.sparse.save_npz?)")]
    MissingArray(String),
    /// The sparse format stored is not csr or csc.
    #[error("unsupported sparse format `{0}` (only csr and csc are read)")]
    UnsupportedFormat(String),
    /// The arrays are inconsistent (offsets not monotone, index out of range, ...).
    #[error("invalid sparse matrix: {0}")]
    Invalid(String),
    /// The matrix does not fit u32 indices.
    #[error(transparent)]
    Csr(#[from] CsrError),
}

/// Reads a scipy `.npz` sparse matrix into a [`Csr`].
pub fn read_npz(path: impl AsRef<Path>) -> Result<Csr, NpzError> {
    let bytes = std::fs::read(path.as_ref())?;
    read_npz_bytes(&bytes)
}

/// Reads a scipy `.npz` sparse matrix held in memory.
pub fn read_npz_bytes(bytes: &[u8]) -> Result<Csr, NpzError> {
    let members = zip_members(bytes)?;
    let get = |name: &str| -> Result<Array, NpzError> {
        let m = members
            .iter()
            .find(|m| m.name == format!("{name}.npy"))
            .ok_or_else(|| NpzError::MissingArray(name.into()))?;
        let raw = m.extract(bytes)?;
        parse_npy(name, &raw)
    };
    let format = match get("format")? {
        Array::Text(s) => s,
        _ => return Err(NpzError::Invalid("`format` is not a string".into())),
    };
    let csc = match format.as_str() {
        "csr" => false,
        "csc" => true,
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
    let indptr = get("indptr")?.into_u64("indptr")?;
    let indices = get("indices")?.into_u64("indices")?;
    let data = get("data")?.into_f32("data")?;
    let (major, minor) = if csc { (cols, rows) } else { (rows, cols) };
    if indptr.len() as u64 != major + 1 {
        return Err(NpzError::Invalid(format!(
            "indptr has {} entries, expected {}",
            indptr.len(),
            major + 1
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
    let mut triplets = Vec::with_capacity(data.len());
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
    Ok(csr_from_triplets(rows as usize, cols as usize, &triplets)?)
}

struct Member {
    name: String,
    method: u16,
    compressed: u64,
    uncompressed: u64,
    offset: u64,
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn zip_err(msg: &str) -> NpzError {
    NpzError::Zip(msg.into())
}

fn zip_members(b: &[u8]) -> Result<Vec<Member>, NpzError> {
    // End of central directory: scan back over at most a 64 KiB comment.
    let lo = b.len().saturating_sub(22 + 65535);
    let eocd = (lo..=b.len().saturating_sub(22))
        .rev()
        .find(|&i| le32(b, i) == Some(0x0605_4b50))
        .ok_or_else(|| zip_err("no end-of-central-directory record (not a zip file?)"))?;
    let short = || zip_err("truncated central directory");
    let mut count = le16(b, eocd + 10).ok_or_else(short)? as u64;
    let mut cd = le32(b, eocd + 16).ok_or_else(short)? as u64;
    if count == 0xFFFF || cd == 0xFFFF_FFFF {
        // Zip64: the locator sits just before the EOCD and points at the zip64 EOCD record.
        let loc = eocd.checked_sub(20).ok_or_else(short)?;
        if le32(b, loc) != Some(0x0706_4b50) {
            return Err(zip_err("zip64 locator missing"));
        }
        let z = le64(b, loc + 8).ok_or_else(short)? as usize;
        if le32(b, z) != Some(0x0606_4b50) {
            return Err(zip_err("zip64 end record missing"));
        }
        count = le64(b, z + 32).ok_or_else(short)?;
        cd = le64(b, z + 48).ok_or_else(short)?;
    }
    let mut members = Vec::new();
    let mut p = usize::try_from(cd).map_err(|_| short())?;
    for _ in 0..count {
        if le32(b, p) != Some(0x0201_4b50) {
            return Err(zip_err("bad central directory entry"));
        }
        let method = le16(b, p + 10).ok_or_else(short)?;
        let mut compressed = le32(b, p + 20).ok_or_else(short)? as u64;
        let mut uncompressed = le32(b, p + 24).ok_or_else(short)? as u64;
        let name_len = le16(b, p + 28).ok_or_else(short)? as usize;
        let extra_len = le16(b, p + 30).ok_or_else(short)? as usize;
        let comment_len = le16(b, p + 32).ok_or_else(short)? as usize;
        let mut offset = le32(b, p + 42).ok_or_else(short)? as u64;
        let name = b.get(p + 46..p + 46 + name_len).ok_or_else(short)?;
        let name = String::from_utf8_lossy(name).into_owned();
        let extra = b
            .get(p + 46 + name_len..p + 46 + name_len + extra_len)
            .ok_or_else(short)?;
        // Zip64 extra field: only the fields saturated in the fixed header are present, in order.
        let mut e = 0;
        while e + 4 <= extra.len() {
            let id = le16(extra, e).ok_or_else(short)?;
            let len = le16(extra, e + 2).ok_or_else(short)? as usize;
            if id == 1 {
                let mut q = e + 4;
                for field in [&mut uncompressed, &mut compressed, &mut offset] {
                    if *field == 0xFFFF_FFFF {
                        *field = le64(extra, q).ok_or_else(short)?;
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
        p += 46 + name_len + extra_len + comment_len;
    }
    Ok(members)
}

impl Member {
    fn extract(&self, b: &[u8]) -> Result<Vec<u8>, NpzError> {
        let short = || NpzError::Zip(format!("member `{}` is truncated", self.name));
        let h = usize::try_from(self.offset).map_err(|_| short())?;
        if le32(b, h) != Some(0x0403_4b50) {
            return Err(NpzError::Zip(format!(
                "bad local header for `{}`",
                self.name
            )));
        }
        let start = h
            + 30
            + le16(b, h + 26).ok_or_else(short)? as usize
            + le16(b, h + 28).ok_or_else(short)? as usize;
        let len = usize::try_from(self.compressed).map_err(|_| short())?;
        let raw = b
            .get(start..start.checked_add(len).ok_or_else(short)?)
            .ok_or_else(short)?;
        match self.method {
            0 => Ok(raw.to_vec()),
            8 => {
                let mut out = Vec::with_capacity(self.uncompressed.min(1 << 30) as usize);
                flate2::read::DeflateDecoder::new(raw).read_to_end(&mut out)?;
                if out.len() as u64 != self.uncompressed {
                    return Err(short());
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

/// A decoded `.npy` array, widened.
enum Array {
    Ints(Vec<i128>),
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
                .map(|x| u64::try_from(x).map_err(|_| bad(format!("negative or huge value {x}"))))
                .collect(),
            _ => Err(bad("expected an integer array".into())),
        }
    }
    fn into_f32(self, name: &str) -> Result<Vec<f32>, NpzError> {
        match self {
            Array::Ints(v) => Ok(v.into_iter().map(|x| x as f32).collect()),
            Array::Floats(v) => Ok(v.into_iter().map(|x| x as f32).collect()),
            Array::Text(_) => Err(NpzError::Npy {
                name: name.into(),
                message: "expected a numeric array".into(),
            }),
        }
    }
}

fn parse_npy(name: &str, b: &[u8]) -> Result<Array, NpzError> {
    let bad = |message: &str| NpzError::Npy {
        name: name.into(),
        message: message.into(),
    };
    if b.get(..6) != Some(b"\x93NUMPY") {
        return Err(bad("not a .npy array (bad magic)"));
    }
    let major = *b.get(6).ok_or_else(|| bad("truncated header"))?;
    let (hlen, hstart) = if major == 1 {
        (
            le16(b, 8).ok_or_else(|| bad("truncated header"))? as usize,
            10,
        )
    } else {
        (
            le32(b, 8).ok_or_else(|| bad("truncated header"))? as usize,
            12,
        )
    };
    let header = b
        .get(hstart..hstart + hlen)
        .ok_or_else(|| bad("truncated header"))?;
    let header = String::from_utf8_lossy(header);
    let body = &b[hstart + hlen..];
    let descr = dict_value(&header, "descr").ok_or_else(|| bad("header has no descr"))?;
    let quote = descr
        .chars()
        .next()
        .filter(|&c| c == '\'' || c == '"')
        .ok_or_else(|| bad("bad descr"))?;
    let descr = descr[1..].split(quote).next().unwrap_or_default();
    // `fortran_order` is ignored: a sparse npz holds only 1-D arrays, for which order is moot.
    let shape = dict_value(&header, "shape").ok_or_else(|| bad("header has no shape"))?;
    let shape = shape.trim_start_matches('(');
    let shape = &shape[..shape.find(')').ok_or_else(|| bad("bad shape"))?];
    let mut count: usize = 1;
    for dim in shape.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let d: usize = dim.parse().map_err(|_| bad("bad shape"))?;
        count = count.checked_mul(d).ok_or_else(|| bad("shape overflows"))?;
    }
    let (order, kind, size) = {
        let mut chars = descr.chars();
        let order = chars.next().ok_or_else(|| bad("empty descr"))?;
        let kind = chars.next().ok_or_else(|| bad("bad descr"))?;
        let size: usize = chars.as_str().parse().map_err(|_| bad("bad descr"))?;
        (order, kind, size)
    };
    if order == '>' && size > 1 {
        return Err(bad("big-endian arrays are not supported"));
    }
    let need = count
        .checked_mul(size)
        .ok_or_else(|| bad("shape overflows"))?;
    let body = body.get(..need).ok_or_else(|| bad("truncated data"))?;
    let chunks = body.chunks_exact(size.max(1));
    Ok(match (kind, size) {
        ('f', 4) => Array::Floats(
            chunks
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
        ),
        ('f', 8) => Array::Floats(
            chunks
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
        ),
        ('i' | 'u' | 'b', 1 | 2 | 4 | 8) => {
            let signed = kind == 'i';
            Array::Ints(
                chunks
                    .map(|c| {
                        let mut w = [0u8; 16];
                        w[..size].copy_from_slice(c);
                        if signed && c[size - 1] & 0x80 != 0 {
                            w[size..].fill(0xFF);
                        }
                        i128::from_le_bytes(w)
                    })
                    .collect(),
            )
        }
        ('S', _) => Array::Text(
            String::from_utf8_lossy(body)
                .trim_end_matches('\0')
                .to_string(),
        ),
        ('U', n) => {
            let units = body
                .chunks_exact(4)
                .take(n)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()));
            Array::Text(
                units
                    .filter(|&u| u != 0)
                    .filter_map(char::from_u32)
                    .collect(),
            )
        }
        _ => return Err(bad(&format!("unsupported dtype `{descr}`"))),
    })
}

/// The raw text after `'key':` in a numpy header dict.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = &header[at + key.len() + 2..];
    Some(rest.trim_start().strip_prefix(':')?.trim_start())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, shape: &str, body: &[u8]) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(body);
        out
    }

    /// A stored (method 0) zip with the given members, as Python's zipfile writes it.
    fn zip(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut cd = Vec::new();
        for (name, data) in members {
            let off = out.len() as u32;
            out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
            out.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(data);
            cd.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
            cd.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            cd.extend_from_slice(&(data.len() as u32).to_le_bytes());
            cd.extend_from_slice(&(data.len() as u32).to_le_bytes());
            cd.extend_from_slice(&(name.len() as u16).to_le_bytes());
            cd.extend_from_slice(&[0; 12]);
            cd.extend_from_slice(&off.to_le_bytes());
            cd.extend_from_slice(name.as_bytes());
        }
        let cd_off = out.len() as u32;
        out.extend_from_slice(&cd);
        out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(members.len() as u16).to_le_bytes());
        out.extend_from_slice(&(cd.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_off.to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out
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
    fn reads_csc_and_rejects_coo() {
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
            matches!(read_npz_bytes(&members(b"coo")), Err(NpzError::UnsupportedFormat(f)) if f == "coo")
        );
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
