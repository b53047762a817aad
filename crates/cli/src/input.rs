//! Matrix files the CLI reads, for every subcommand: Matrix Market (`.mtx`, `.mtx.gz`), SciPy
//! `.npz`, and the layout files `tcsparse convert` writes (recognised by their `TCSPARSE` magic,
//! whatever their name; checked in full by `formats::cache` and converted back to CSR exactly).
//!
//! The path is checked before anything is read: a missing path, a directory or a file that is not
//! a regular file (a FIFO would block, a device could read forever) is refused with the path and
//! that reason, once.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use tcsparse::formats::Csr;
use tcsparse::formats::bitbsr::BitBsr;
use tcsparse::formats::bittcf::BitTcf;
use tcsparse::formats::cache::{self, CacheError, CachedFormat, FormatKind};
use tcsparse::formats::hrpb::Hrpb;
use tcsparse::formats::layout::Layout;
use tcsparse::formats::metcf::MeTcf;
use tcsparse::formats::mtx::{self, MtxError};

/// Reading an input file failed.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// Nothing at the path.
    #[error("{}: no such file", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The path is a directory.
    #[error("{}: is a directory, not a matrix file", path.display())]
    IsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The path is a FIFO, a device or a socket.
    #[error("{}: not a regular file (a FIFO, device or socket); give a file", path.display())]
    NotRegular {
        /// The path given.
        path: PathBuf,
    },
    /// Opening or reading the file failed.
    #[error("{}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// What failed.
        #[source]
        source: io::Error,
    },
    /// The name has no extension a reader knows and the file is not a layout file.
    #[error(
        "{}: unknown matrix file (expected .mtx, .mtx.gz, .npz, or a layout file written by `tcsparse convert`)",
        path.display()
    )]
    UnknownKind {
        /// The path given.
        path: PathBuf,
    },
    /// The Matrix Market or `.npz` reader refused the file.
    #[error("{}", path.display())]
    Matrix {
        /// The path given.
        path: PathBuf,
        /// What the reader found.
        #[source]
        source: MtxError,
    },
    /// The layout file is damaged, of another version or kind, or over the memory budget.
    #[error("{}: layout file", path.display())]
    Layout {
        /// The path given.
        path: PathBuf,
        /// What the cache reader found.
        #[source]
        source: CacheError,
    },
    /// A layout file whose kind byte names no layout.
    #[error("{}: layout file of unknown kind {kind}", path.display())]
    UnknownLayout {
        /// The path given.
        path: PathBuf,
        /// The kind byte.
        kind: u8,
    },
}

/// Checks that `path` is an existing regular file (symbolic links followed).
pub fn check_regular(path: &Path) -> Result<(), InputError> {
    let p = || path.to_path_buf();
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(InputError::IsDirectory { path: p() }),
        Ok(m) if !m.is_file() => Err(InputError::NotRegular { path: p() }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(InputError::NotFound { path: p() }),
        Err(source) => Err(InputError::Io { path: p(), source }),
    }
}

/// The layout kind byte when `path` starts with a layout file's magic.
fn layout_kind(path: &Path) -> Result<Option<u8>, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut head = Vec::with_capacity(cache::MAGIC.len() + 5);
    File::open(path)
        .map_err(io)?
        .take(cache::MAGIC.len() as u64 + 5)
        .read_to_end(&mut head)
        .map_err(io)?;
    Ok(head
        .starts_with(cache::MAGIC)
        .then(|| head.get(cache::MAGIC.len() + 4).copied().unwrap_or(0)))
}

/// Reads the matrix at `path` (see the module docs).
pub fn read_matrix(path: &Path) -> Result<Csr, InputError> {
    read_matrix_with_report(path).map(|(m, _)| m)
}

/// The CSR of the layout file `path` (a layout of type `L`, checked as it is loaded).
fn load_layout<L: CachedFormat + Layout>(path: &Path) -> Result<Csr, InputError> {
    cache::load::<L>(path, None)
        .map(|l| l.to_csr())
        .map_err(|source| InputError::Layout {
            path: path.to_path_buf(),
            source,
        })
}

/// [`read_matrix`], with the reader's report (bytes and seconds) for a Matrix Market or `.npz`
/// file; `None` for a layout file.
pub fn read_matrix_with_report(path: &Path) -> Result<(Csr, Option<mtx::ReadReport>), InputError> {
    check_regular(path)?;
    if let Some(kind) = layout_kind(path)? {
        let csr = match kind {
            k if k == FormatKind::BitTcf as u8 => load_layout::<BitTcf>(path),
            k if k == FormatKind::MeTcf as u8 => load_layout::<MeTcf>(path),
            k if k == FormatKind::Hrpb as u8 => load_layout::<Hrpb>(path),
            k if k == FormatKind::BitBsr as u8 => load_layout::<BitBsr>(path),
            kind => Err(InputError::UnknownLayout {
                path: path.to_path_buf(),
                kind,
            }),
        };
        return Ok((csr?, None));
    }
    let (m, report) = mtx::read_matrix_with_report(path).map_err(|source| match source {
        MtxError::UnknownExtension { .. } => InputError::UnknownKind {
            path: path.to_path_buf(),
        },
        source => InputError::Matrix {
            path: path.to_path_buf(),
            source,
        },
    })?;
    Ok((m, Some(report)))
}

/// The matrix `tcsparse demo` runs on without `INPUT`: the shipped `datasets/cora.mtx.gz`, embedded
/// in the binary so that an installed `tcsparse` needs no source tree.
pub const DEMO_MATRIX_NAME: &str = "cora.mtx.gz";

const DEMO_MATRIX: &[u8] = include_bytes!("../data/cora.mtx.gz");

/// Reads the embedded demo matrix ([`DEMO_MATRIX_NAME`]).
pub fn demo_matrix() -> Result<Csr, InputError> {
    mtx::read_matrix_market_from(DEMO_MATRIX).map_err(|source| InputError::Matrix {
        path: PathBuf::from(DEMO_MATRIX_NAME),
        source,
    })
}
