//! Files the CLI writes (`gen -o`, `reorder -o`, `convert -o`): one writer for all of them.
//!
//! - A new path, or an existing regular file, is written to a temporary file in the same
//!   directory and renamed over the target, so a reader never sees half a file and a failed
//!   write leaves the old file as it was. An existing file keeps its permissions.
//! - A symbolic link is followed (every level) and its final target written as above: the link
//!   stays a link.
//! - An existing file that is not a regular file (a device such as `/dev/null`, a FIFO) is
//!   written in place, opened for writing without creating or truncating it, as a shell's `>`
//!   would; renaming over it would replace the node with a regular file. A FIFO blocks until
//!   something reads it, as it does for any writer.
//! - A directory is refused.
//!
//! Matrix Market output is gzip-compressed when the path ends in `.gz`.

use std::fs::{self, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use tcsparse::formats::Csr;

/// Writing an output file failed.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path names a directory.
    #[error("{}: is a directory, not a file to write", path.display())]
    IsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The path is a chain of symbolic links too long to follow (or a loop).
    #[error("{}: too many levels of symbolic links", path.display())]
    SymlinkLoop {
        /// The path given.
        path: PathBuf,
    },
    /// Creating, writing or renaming failed.
    #[error("writing {}", path.display())]
    Io {
        /// The file concerned (the link's target when the path is a link).
        path: PathBuf,
        /// What failed.
        #[source]
        source: io::Error,
    },
}

/// Symbolic links followed before giving up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Follows `path` through symbolic links to the path that is finally written: an existing
/// non-link, or the place a dangling link points at.
fn resolve(path: &Path) -> Result<PathBuf, OutputError> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let io = |source| OutputError::Io {
                    path: p.clone(),
                    source,
                };
                let target = fs::read_link(&p).map_err(io)?;
                p = match p.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(OutputError::SymlinkLoop {
        path: path.to_path_buf(),
    })
}

/// Writes what `fill` writes into `path` (see the module docs for how each kind of path is
/// treated). `fill` gets a buffered writer; it is flushed (and, for a regular file, synced and
/// renamed into place) after `fill` returns.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), OutputError> {
    let target = resolve(path)?;
    let io = |source| OutputError::Io {
        path: target.clone(),
        source,
    };
    let existing = match fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    match existing {
        Some(m) if m.is_dir() => Err(OutputError::IsDirectory {
            path: path.to_path_buf(),
        }),
        Some(m) if !m.is_file() => {
            let file = OpenOptions::new().write(true).open(&target).map_err(io)?;
            let mut w = BufWriter::new(file);
            fill(&mut w).and_then(|()| w.flush()).map_err(io)
        }
        _ => {
            let dir = match target.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let prefix = format!(".{name}.");
            let mut builder = tempfile::Builder::new();
            builder.prefix(&prefix).suffix(".tmp");
            let perms = existing.map_or_else(
                || {
                    use std::os::unix::fs::PermissionsExt;
                    // As `File::create` would: 0666 less the umask.
                    fs::Permissions::from_mode(0o666)
                },
                |m| m.permissions(),
            );
            builder.permissions(perms);
            // The temporary file is removed when dropped before `persist`.
            let tmp = builder.tempfile_in(dir).map_err(io)?;
            let mut w = BufWriter::new(tmp);
            fill(&mut w).and_then(|()| w.flush()).map_err(io)?;
            let tmp = w.into_inner().map_err(|e| io(e.into_error()))?;
            tmp.as_file().sync_all().map_err(io)?;
            tmp.persist(&target).map_err(|e| io(e.error))?;
            Ok(())
        }
    }
}

/// Writes `bytes` to `path` ([`write_with`]).
pub fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    write_with(path, |w| w.write_all(bytes))
}

/// Whether `path` names a gzip output (ends in `.gz`, any case).
pub fn is_gz(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// Writes `csr` as Matrix Market to `path` ([`write_with`]), gzip-compressed when the path ends
/// in `.gz`.
pub fn write_matrix(path: &Path, csr: &Csr) -> Result<(), OutputError> {
    use tcsparse::formats::mtx::write_matrix_market_to;
    write_with(path, |mut w| {
        if is_gz(path) {
            let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::new(6));
            write_matrix_market_to(&mut gz, csr)?;
            gz.finish().map(|_| ())
        } else {
            write_matrix_market_to(&mut w, csr)
        }
    })
}
