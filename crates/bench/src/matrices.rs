//! The benchmark's matrices: shipped (`datasets/`), shared real datasets and large generated ones.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use rayon::prelude::*;
use tcsparse::formats::Csr;
use tcsparse::formats::generate::GeneratorSpec;

use crate::report::Group;

/// A matrix ready to benchmark.
pub struct Matrix {
    /// Name used in the report.
    pub name: String,
    /// Group for the summary.
    pub group: Group,
    /// The matrix, loaded once and shared with the preparations that run it as loaded
    /// (`Engine::prepare_spmm_shared`, as a user holding it in an `Arc` calls it).
    pub csr: Arc<Csr>,
}

impl Matrix {
    /// Says on standard error that `cases` cases of this matrix took `elapsed` (the name padded
    /// to `width` characters): the bench's progress line per matrix.
    pub fn log_cases(&self, width: usize, cases: usize, elapsed: std::time::Duration) {
        eprintln!(
            "{:<width$} {:>9} rows {:>11} nnz: {cases} cases in {elapsed:.1?}",
            self.name,
            self.csr.rows(),
            self.csr.nnz()
        );
    }
}

/// R-MAT with Graph500 parameters (0.57, 0.19, 0.19, 0.05) at `scale`, `edge_factor` edges per
/// vertex, seed 20.
fn rmat_g500(scale: u32, edge_factor: u32) -> GeneratorSpec {
    GeneratorSpec::Rmat {
        scale,
        edge_factor,
        a: 0.57,
        b: 0.19,
        c: 0.19,
        d: 0.05,
        seed: 20,
    }
}

/// R-MAT, Graph500 parameters: ~11.5M edges before de-duplication.
pub fn rmat20_ef11() -> (String, GeneratorSpec) {
    ("rmat20-ef11".into(), rmat_g500(20, 11))
}

/// Banded: 2M rows, |i-j| ≤ 32 kept with p = 0.25 (~17 nnz/row, ~35M nnz).
pub fn banded2m_hb32() -> (String, GeneratorSpec) {
    (
        "banded2m-hb32".into(),
        GeneratorSpec::Banded {
            n: 1 << 21,
            half_bandwidth: 32,
            fill: 0.25,
            seed: 5,
        },
    )
}

/// Clustered block diagonal: 1M rows, 64-blocks at 25% + 2 random entries per row (~18M nnz).
pub fn clustered1m_b64() -> (String, GeneratorSpec) {
    (
        "clustered1m-b64".into(),
        GeneratorSpec::Clustered {
            n: 1 << 20,
            block_size: 64,
            intra_density: 0.25,
            inter_nnz_per_row: 2.0,
            seed: 7,
        },
    )
}

/// Dense-block structure with ≥ 100 nnz per row: 256K rows, 256-blocks at 45% + 2 random
/// entries per row (~118 nnz/row, ~31M nnz).
pub fn clustered256k_b256() -> (String, GeneratorSpec) {
    (
        "clustered256k-b256".into(),
        GeneratorSpec::Clustered {
            n: 1 << 18,
            block_size: 256,
            intra_density: 0.45,
            inter_nnz_per_row: 2.0,
            seed: 17,
        },
    )
}

/// The large generated set (5–100M nonzeros), or a small stand-in per kind with `quick`.
pub fn generated_specs(quick: bool) -> Vec<(String, GeneratorSpec)> {
    if quick {
        return vec![
            ("rmat16".into(), rmat_g500(16, 11)),
            (
                "uniform200k-3".into(),
                GeneratorSpec::Uniform {
                    rows: 200_000,
                    cols: 200_000,
                    nnz_per_row: 3.0,
                    seed: 3,
                },
            ),
        ];
    }
    vec![
        rmat20_ef11(),
        banded2m_hb32(),
        clustered1m_b64(),
        // Reddit-like: 232,965 rows with ~490 random nonzeros each (~114M nnz).
        (
            "reddit-like".into(),
            GeneratorSpec::Uniform {
                rows: 232_965,
                cols: 232_965,
                nnz_per_row: 490.0,
                seed: 11,
            },
        ),
        // The "≥ 3×" class.
        clustered256k_b256(),
        // 2M rows, 3 nnz per row, uniform.
        (
            "uniform2m-3".into(),
            GeneratorSpec::Uniform {
                rows: 2_000_000,
                cols: 2_000_000,
                nnz_per_row: 3.0,
                seed: 13,
            },
        ),
    ]
}

/// Generates `specs` in parallel.
pub fn generate(specs: &[(String, GeneratorSpec)]) -> Result<Vec<Matrix>> {
    specs
        .par_iter()
        .map(|(name, spec)| {
            let csr = spec.build().with_context(|| format!("generating {name}"))?;
            Ok(Matrix {
                name: name.clone(),
                group: Group::Large,
                csr: Arc::new(csr),
            })
        })
        .collect()
}

/// The shared dataset folder: `explicit`, else `$TCSPARSE_SHARED_DATASETS`, else `../shared/datasets`
/// or `shared/datasets` from the working directory, else the one next to this checkout.
pub fn shared_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TCSPARSE_SHARED_DATASETS") {
        return Some(PathBuf::from(p));
    }
    let candidates = [
        PathBuf::from("../shared/datasets"),
        PathBuf::from("shared/datasets"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets"),
    ];
    candidates.into_iter().find(|p| p.is_dir())
}

/// The shipped `datasets/` folder (working directory first, then this checkout).
pub fn shipped_dir() -> Option<PathBuf> {
    [
        PathBuf::from("datasets"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets"),
    ]
    .into_iter()
    .find(|p| p.join("manifest.toml").is_file())
}

/// Lists `*.mtx`, `*.mtx.gz` in `dir`, sorted by name, optionally filtered by stem.
pub fn list_mtx(dir: &Path, only: Option<&[&str]>) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e?.path();
        let Some(file) = p.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let Some(stem) = file
            .strip_suffix(".mtx.gz")
            .or_else(|| file.strip_suffix(".mtx"))
        else {
            continue;
        };
        if only.is_none_or(|o| o.contains(&stem)) {
            out.push((stem.to_string(), p.clone()));
        }
    }
    out.sort();
    Ok(out)
}

/// Reads the listed files in parallel.
pub fn read_all(files: &[(String, PathBuf)], group: Group) -> Result<Vec<Matrix>> {
    files
        .par_iter()
        .map(|(name, path)| {
            let csr = read_matrix(path).with_context(|| format!("reading {}", path.display()))?;
            Ok(Matrix {
                name: name.clone(),
                group,
                csr: Arc::new(csr),
            })
        })
        .collect()
}

/// Reads a Matrix Market file (`.mtx` or `.mtx.gz`; symmetric storage expanded).
pub fn read_matrix(path: &Path) -> Result<Csr> {
    Ok(tcsparse::formats::mtx::read_matrix(path)?)
}
