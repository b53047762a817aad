//! Opening input files: regular files only, read with a size limit. Every reader of files in this
//! crate (Matrix Market, `.npz`, the layout cache) and the facade's plan cache opens through
//! [`open_regular`], so that a FIFO, a device node (a symlink to `/dev/zero`), a socket or a
//! directory at an input path is a typed error instead of a hang or an endless read.
//!
//! On Unix the file is opened with `O_NONBLOCK` (opening a FIFO without a writer would otherwise
//! block forever) and its type is checked on the open descriptor (`fstat`), so a path swapped
//! between a check and the open cannot slip through; the flag has no effect on reads of a regular
//! file. Symbolic links are followed: a link to a regular file is read, a link to a device is not.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why an input file was not read.
#[derive(Debug, Error)]
pub enum FileError {
    /// The path names something other than a regular file.
    #[error("{}: is {kind}, not a regular file", path.display())]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is (`a FIFO`, `a character device`, `a directory`, …).
        kind: &'static str,
    },
    /// The file holds more bytes than the reader accepts.
    #[error("{}: {len} bytes, more than the {limit} accepted here", path.display())]
    TooLarge {
        /// The path given.
        path: PathBuf,
        /// Its length (at least; a file that grows while read reports what was seen).
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// Opening or reading failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl From<FileError> for io::Error {
    /// An [`io::Error`] carrying the [`FileError`] (`get_ref()` gives it back): `NotFound`,
    /// `PermissionDenied` … as opened; `InvalidInput` for something not a regular file;
    /// `FileTooLarge` for a file over its limit.
    fn from(e: FileError) -> Self {
        let kind = match &e {
            FileError::NotRegular { .. } => io::ErrorKind::InvalidInput,
            FileError::TooLarge { .. } => io::ErrorKind::FileTooLarge,
            FileError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// A regular file opened for reading, and its length when opened.
#[derive(Debug)]
pub struct RegularFile {
    /// The open file.
    pub file: File,
    /// Its length in bytes when it was opened.
    pub len: u64,
}

/// Opens `path` for reading if it is a regular file (following symbolic links); anything else is a
/// [`FileError::NotRegular`], found without blocking or reading.
pub fn open_regular(path: &Path) -> Result<RegularFile, FileError> {
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&ft),
        });
    }
    Ok(RegularFile {
        file,
        len: meta.len(),
    })
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

/// Reads the whole of the regular file `path` if it holds at most `max_bytes` bytes: the length
/// is checked before anything is read or reserved, and the read stops one byte past the limit (a
/// file that grows meanwhile is refused, not read on).
pub fn read_regular(path: &Path, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let f = open_regular(path)?;
    let too_large = |len| FileError::TooLarge {
        path: path.to_path_buf(),
        len,
        limit: max_bytes,
    };
    if f.len > max_bytes {
        return Err(too_large(f.len));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(f.len as usize)
        .map_err(|e| FileError::Io {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::OutOfMemory, e),
        })?;
    (&f.file)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if out.len() as u64 > max_bytes {
        return Err(too_large(out.len() as u64));
    }
    Ok(out)
}

/// Reads exactly `len` bytes from `reader` into a new vector (reserved up front: check `len`
/// against the file's length and the budget first). A shorter stream is an `UnexpectedEof` error.
pub fn read_exact_vec(reader: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(len).map_err(io::Error::other)?)
        .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e))?;
    reader.take(len).read_to_end(&mut out)?;
    if (out.len() as u64) < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{} of {len} bytes", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("tcsparse-file-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_read_within_their_limit() {
        let p = dir().join("ten.bin");
        std::fs::write(&p, [7u8; 10]).unwrap();
        assert_eq!(read_regular(&p, 10).unwrap(), vec![7u8; 10]);
        let e = read_regular(&p, 9).unwrap_err();
        assert!(
            matches!(
                e,
                FileError::TooLarge {
                    len: 10,
                    limit: 9,
                    ..
                }
            ),
            "{e}"
        );
        let e = read_regular(&dir().join("missing"), 9).unwrap_err();
        assert!(
            matches!(e, FileError::Io { ref source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        let e = read_regular(&dir(), 9).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        // The io::Error form keeps the typed error.
        let io: io::Error = read_regular(&dir(), 9).unwrap_err().into();
        assert_eq!(io.kind(), io::ErrorKind::InvalidInput);
        assert!(io.get_ref().unwrap().is::<FileError>());
    }

    #[test]
    fn read_exact_vec_refuses_a_short_stream() {
        let mut r: &[u8] = b"abc";
        assert_eq!(read_exact_vec(&mut r, 2).unwrap(), b"ab");
        let mut r: &[u8] = b"abc";
        let e = read_exact_vec(&mut r, 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
