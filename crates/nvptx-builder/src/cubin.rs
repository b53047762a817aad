//! Machine code (cubin) for [`CUBIN_ARCH`] beside each kernel's PTX, so that a process on that GPU
//! loads its kernels without the driver's JIT compilation of the PTX (seconds per module on a cold
//! driver cache).
//!
//! A cubin is `<stem>.sm_90.cubin.gz`: the compiler's cubin, gzip-compressed (level 9, no file name,
//! modification time 0, so the same cubin always gives the same bytes), with its stamp in the gzip
//! header's comment field: the PTX stamp's lines ([`Stamp::render`], flags [`CUBIN_FLAGS`]) plus
//! `// cubin-sha256: <hex>` over the uncompressed cubin. Freshness ([`check_cubins_fresh`]) needs
//! no compiler: the stamp's source hash must match the sources and the cubin must hash to its stamp.

use std::io::{Read, Write};
use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};

use crate::{BuildError, Compiler, KernelSource, Stamp};

/// The real architecture the cubins are built for (the H100/H200's compute capability 9.0).
pub const CUBIN_ARCH: &str = "sm_90";
/// Compiler flags, in order, for the cubins: [`crate::FLAGS`] with the real architecture.
pub const CUBIN_FLAGS: &[&str] = &["--gpu-architecture=sm_90", "-std=c++17"];
/// Largest cubin [`read_cubin_gz`] inflates (the largest module's is under 1 MiB).
pub const MAX_CUBIN_BYTES: u64 = 64 << 20;

const SHA_LINE: &str = "// cubin-sha256: ";

/// File name of a kernel's compressed cubin, `<stem>.sm_90.cubin.gz`.
pub fn cubin_name(src: &KernelSource) -> String {
    let stem = src.name.strip_suffix(".cu").unwrap_or(&src.name);
    format!("{stem}.{CUBIN_ARCH}.cubin.gz")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A cubin and the stamp read from its gzip header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StampedCubin {
    /// Provenance, as in a PTX stamp.
    pub stamp: Stamp,
    /// Hex sha256 the stamp records for the cubin.
    pub cubin_sha256: String,
    /// The uncompressed cubin.
    pub cubin: Vec<u8>,
}

/// Compresses `cubin` with its stamp in the gzip comment (deterministic bytes).
pub fn write_cubin_gz(stamp: &Stamp, cubin: &[u8]) -> std::io::Result<Vec<u8>> {
    let comment = format!("{}{SHA_LINE}{}\n", stamp.render(), sha256_hex(cubin));
    let mut enc = flate2::GzBuilder::new()
        .mtime(0)
        .comment(comment.into_bytes())
        .write(Vec::new(), Compression::best());
    enc.write_all(cubin)?;
    enc.finish()
}

/// Reads a compressed cubin: its stamp, its recorded hash and the cubin (at most
/// [`MAX_CUBIN_BYTES`]). `None` when the bytes are not such a file (no gzip, no stamp, no hash line,
/// too large); the hash is not checked here ([`StampedCubin::intact`]).
pub fn read_cubin_gz(bytes: &[u8]) -> Option<StampedCubin> {
    let mut dec = GzDecoder::new(bytes);
    let mut cubin = Vec::new();
    (&mut dec)
        .take(MAX_CUBIN_BYTES + 1)
        .read_to_end(&mut cubin)
        .ok()?;
    if cubin.len() as u64 > MAX_CUBIN_BYTES {
        return None;
    }
    let comment = String::from_utf8(dec.header()?.comment()?.to_vec()).ok()?;
    let stamp = Stamp::parse(&comment)?;
    let cubin_sha256 = comment
        .lines()
        .find_map(|l| l.strip_prefix(SHA_LINE))?
        .trim()
        .to_string();
    Some(StampedCubin {
        stamp,
        cubin_sha256,
        cubin,
    })
}

impl StampedCubin {
    /// Whether the cubin hashes to the value its stamp records.
    pub fn intact(&self) -> bool {
        sha256_hex(&self.cubin) == self.cubin_sha256
    }
}

/// Compiles one kernel to a cubin and returns the compressed, stamped file's bytes.
pub fn build_cubin(
    compiler: &Compiler,
    dir: &Path,
    src: &KernelSource,
) -> Result<Vec<u8>, BuildError> {
    let cubin = compiler.compile_cubin(dir, src)?;
    let stamp = Stamp::new(src, compiler, CUBIN_FLAGS);
    write_cubin_gz(&stamp, &cubin).map_err(|e| BuildError::io(Path::new(&src.name), e))
}

/// Checks, without a compiler, that every `.cu` in `dir` has a cubin whose stamp matches the current
/// sources and the cubin flags and whose cubin hashes to its stamp, and that every cubin has a `.cu`.
pub fn check_cubins_fresh(dir: &Path) -> Result<(), BuildError> {
    crate::check_generated(
        dir,
        |src| {
            let name = cubin_name(src);
            let Ok(bytes) = std::fs::read(dir.join(&name)) else {
                return Some(format!("{name}: missing (source {})", src.name));
            };
            match read_cubin_gz(&bytes) {
                None => Some(format!("{name}: not a stamped gzip cubin")),
                Some(c) if !c.intact() => {
                    Some(format!("{name}: cubin does not match its stamp's sha256"))
                }
                Some(c) if c.stamp.source_sha256 != src.sha256 => Some(format!(
                    "{name}: stale (stamp sha256 {}, sources now hash to {})",
                    c.stamp.source_sha256, src.sha256
                )),
                Some(c) if c.stamp.flags != CUBIN_FLAGS => {
                    Some(format!("{name}: flags {:?}", c.stamp.flags))
                }
                Some(_) => None,
            }
        },
        |p, sources| {
            p.file_name().and_then(|s| s.to_str()).is_some_and(|file| {
                file.ends_with(".cubin.gz") && !sources.iter().any(|s| cubin_name(s) == file)
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> Stamp {
        Stamp {
            source: "k.cu".into(),
            includes: vec!["c.cuh".into()],
            source_sha256: "ab".repeat(32),
            compiler: "test".into(),
            flags: CUBIN_FLAGS.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn compressed_cubins_round_trip_with_their_stamp_and_are_deterministic() {
        let cubin: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        let a = write_cubin_gz(&stamp(), &cubin).unwrap();
        assert_eq!(
            a,
            write_cubin_gz(&stamp(), &cubin).unwrap(),
            "same input, same bytes"
        );
        let back = read_cubin_gz(&a).expect("readable");
        assert_eq!(back.stamp, stamp());
        assert_eq!(back.cubin, cubin);
        assert!(back.intact());
    }

    #[test]
    fn damaged_cubins_are_refused_or_fail_their_hash() {
        let cubin = vec![1u8; 300];
        let good = write_cubin_gz(&stamp(), &cubin).unwrap();
        assert!(read_cubin_gz(b"not gzip").is_none());
        assert!(
            read_cubin_gz(&good[..good.len() / 2]).is_none(),
            "truncated"
        );
        // A stamp whose hash line names another cubin.
        let other = write_cubin_gz(&stamp(), &[2u8; 300]).unwrap();
        let mut forged = read_cubin_gz(&other).unwrap();
        forged.cubin = cubin;
        assert!(!forged.intact());
        // No stamp at all.
        let mut plain = flate2::write::GzEncoder::new(Vec::new(), Compression::fast());
        plain.write_all(&[0u8; 10]).unwrap();
        assert!(read_cubin_gz(&plain.finish().unwrap()).is_none());
    }
}
