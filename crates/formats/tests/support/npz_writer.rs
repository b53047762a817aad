//! A tiny `.npy`/`.npz` writer for tests (no numpy on CI machines): arrays in any dtype and byte
//! order, zip members stored or deflated, optionally with a zip64 end record.
#![allow(dead_code)]

use std::io::Write;

/// A `.npy` array: header dict + raw body.
pub fn npy(descr: &str, shape: &str, body: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
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

/// Integer array with the given item size (1, 2, 4, 8), signedness and byte order.
pub fn ints(values: &[i64], size: usize, signed: bool, big: bool) -> Vec<u8> {
    ints_shaped(values, size, signed, big, &format!("({},)", values.len()))
}

/// [`ints`] with an explicit shape (C order).
pub fn ints_shaped(values: &[i64], size: usize, signed: bool, big: bool, shape: &str) -> Vec<u8> {
    let descr = format!(
        "{}{}{size}",
        if big { '>' } else { '<' },
        if signed { 'i' } else { 'u' }
    );
    let mut body = Vec::new();
    for &v in values {
        let le = v.to_le_bytes();
        let mut item = le[..size].to_vec();
        if big {
            item.reverse();
        }
        body.extend_from_slice(&item);
    }
    npy(&descr, shape, &body)
}

/// Float array (4 or 8 bytes) in the given byte order.
pub fn floats(values: &[f64], size: usize, big: bool) -> Vec<u8> {
    let descr = format!("{}f{size}", if big { '>' } else { '<' });
    let mut body = Vec::new();
    for &v in values {
        let mut item = if size == 4 {
            (v as f32).to_le_bytes().to_vec()
        } else {
            v.to_le_bytes().to_vec()
        };
        if big {
            item.reverse();
        }
        body.extend_from_slice(&item);
    }
    npy(&descr, &format!("({},)", values.len()), &body)
}

/// A 0-d string array: `|S<n>` bytes (what save_npz writes) or `<U<n>`/`>U<n>` unicode (np.savez).
pub fn text(s: &str, unicode: bool, big: bool) -> Vec<u8> {
    if unicode {
        let mut body = Vec::new();
        for c in s.chars() {
            let u = c as u32;
            body.extend_from_slice(&if big {
                u.to_be_bytes()
            } else {
                u.to_le_bytes()
            });
        }
        let order = if big { '>' } else { '<' };
        npy(&format!("{order}U{}", s.chars().count()), "()", &body)
    } else {
        npy(&format!("|S{}", s.len()), "()", s.as_bytes())
    }
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// One zip member: name, bytes, deflated or stored, and the uncompressed size to claim (None:
/// the true size).
pub struct Member {
    pub name: String,
    pub data: Vec<u8>,
    pub deflate: bool,
    pub claim: Option<u32>,
}

pub fn member(name: &str, data: Vec<u8>) -> Member {
    Member {
        name: name.into(),
        data,
        deflate: false,
        claim: None,
    }
}

/// A zip with the given members, as Python's zipfile writes it (CRC left 0: not checked). With
/// `zip64_cd_offset`, the end record saturates its fields and a zip64 end record carries that
/// central-directory offset (and `zip64_locator`, if given, replaces the locator's pointer).
pub fn zip(
    members: &[Member],
    zip64_cd_offset: Option<u64>,
    zip64_locator: Option<u64>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cd = Vec::new();
    for m in members {
        let stored = if m.deflate {
            deflate(&m.data)
        } else {
            m.data.clone()
        };
        let method: u16 = if m.deflate { 8 } else { 0 };
        let usize_ = m.claim.unwrap_or(m.data.len() as u32);
        let off = out.len() as u32;
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&[20, 0, 0, 0]);
        out.extend_from_slice(&method.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        out.extend_from_slice(&usize_.to_le_bytes());
        out.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(m.name.as_bytes());
        out.extend_from_slice(&stored);
        cd.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        cd.extend_from_slice(&[20, 0, 20, 0, 0, 0]);
        cd.extend_from_slice(&method.to_le_bytes());
        cd.extend_from_slice(&[0; 8]);
        cd.extend_from_slice(&(stored.len() as u32).to_le_bytes());
        cd.extend_from_slice(&usize_.to_le_bytes());
        cd.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
        cd.extend_from_slice(&[0; 12]);
        cd.extend_from_slice(&off.to_le_bytes());
        cd.extend_from_slice(m.name.as_bytes());
    }
    let cd_off = out.len() as u64;
    out.extend_from_slice(&cd);
    let n = members.len() as u64;
    if let Some(z_cd) = zip64_cd_offset {
        let z = out.len() as u64;
        out.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&(cd.len() as u64).to_le_bytes());
        out.extend_from_slice(&z_cd.to_le_bytes());
        out.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&zip64_locator.unwrap_or(z).to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
    }
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    let (cnt, off) = if zip64_cd_offset.is_some() {
        (0xFFFFu16, 0xFFFF_FFFFu32)
    } else {
        (n as u16, cd_off as u32)
    };
    out.extend_from_slice(&cnt.to_le_bytes());
    out.extend_from_slice(&cnt.to_le_bytes());
    out.extend_from_slice(&(cd.len() as u32).to_le_bytes());
    out.extend_from_slice(&off.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// A scipy-style csr/csc npz (`save_npz` layout: |S format, int32 index arrays, f64 data).
pub fn compressed(
    format: &str,
    shape: (i64, i64),
    indptr: &[i64],
    indices: &[i64],
    data: &[f64],
) -> Vec<u8> {
    zip(
        &[
            member("indices.npy", ints(indices, 4, true, false)),
            member("indptr.npy", ints(indptr, 4, true, false)),
            member("format.npy", text(format, false, false)),
            member("shape.npy", ints(&[shape.0, shape.1], 8, true, false)),
            member("data.npy", floats(data, 8, false)),
        ],
        None,
        None,
    )
}
