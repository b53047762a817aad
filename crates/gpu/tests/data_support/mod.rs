//! The shared datasets for the GPU tests: one lister and one reader, so every test treats a missing
//! folder the same way (a failure, unless the run allows the skip with TCSPARSE_ALLOW_MISSING_DATA=1);
//! and the random matrices and dense operands the SpMM tests draw.

#![allow(dead_code)] // not every test binary that includes this module uses every helper

#[path = "../../../formats/tests/support/data_skip.rs"]
mod data_skip;

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::mtx::{Field, read_header, read_matrix};

/// $TCSPARSE_SHARED_DATASETS, else ../../../shared/datasets from this crate, if it is a folder.
pub fn datasets_dir() -> Option<PathBuf> {
    std::env::var_os("TCSPARSE_SHARED_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets"))
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
}

/// `TCSPARSE_DATASETS_ONLY`: a comma-separated list of dataset names (`cora,west0067`) that the
/// tests keep to (the bundle's compute-sanitizer mode sets it for its slow tools); unset or empty:
/// every dataset.
pub fn datasets_only() -> Option<Vec<String>> {
    let v = std::env::var("TCSPARSE_DATASETS_ONLY").ok()?;
    let names: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The `.mtx.gz` files of at most `max_bytes` each (only those of [`datasets_only`] when set),
/// sorted. A missing folder fails the test unless the run allows the skip
/// (`TCSPARSE_ALLOW_MISSING_DATA=1`, and neither `TCSPARSE_REQUIRE_GPU=1` nor
/// `TCSPARSE_REQUIRE_DATA=1`); then it gives none, after a note and, where
/// `TCSPARSE_DATA_SKIP_LOG` names a file, a line with the test's name appended to it.
pub fn dataset_files(max_bytes: u64) -> Vec<PathBuf> {
    let Some(dir) = datasets_dir() else {
        let set = |v: &str| std::env::var(v).as_deref() == Ok("1");
        assert!(
            set("TCSPARSE_ALLOW_MISSING_DATA")
                && !set("TCSPARSE_REQUIRE_GPU")
                && !set("TCSPARSE_REQUIRE_DATA"),
            "no shared dataset folder: set TCSPARSE_SHARED_DATASETS to a folder of .mtx.gz \
             matrices, or TCSPARSE_ALLOW_MISSING_DATA=1 to skip the real matrices"
        );
        let test = data_skip::current_test();
        println!("note: no shared dataset folder; skipping the real matrices of {test}");
        data_skip::log_skip(&test);
        return Vec::new();
    };
    let only = datasets_only();
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("dataset folder readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.to_string_lossy().ends_with(".mtx.gz")
                && p.metadata().is_ok_and(|m| m.len() <= max_bytes)
        })
        .filter(|p| only.as_ref().is_none_or(|o| o.contains(&dataset_name(p))))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no .mtx.gz in {}", dir.display());
    v
}

/// A dataset's name: its file name without `.mtx.gz`.
pub fn dataset_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().replace(".mtx.gz", ""))
}

/// A shared dataset through the project's reader. Pattern matrices get random values in [-1, 1)
/// so products are not all-ones.
pub fn read_dataset(path: &Path, rng: &mut ChaCha8Rng) -> Csr {
    let mut a = read_matrix(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header = read_header(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if header.field == Field::Pattern {
        for v in a.data_mut() {
            *v = rng.random_range(-1.0f32..1.0);
        }
    }
    a
}

/// Every shared dataset (any size) read with [`read_dataset`], its file name and shape printed,
/// handed to `f` with its file name and `rng`.
pub fn for_each_dataset(seed: u64, mut f: impl FnMut(&str, &Csr, &mut ChaCha8Rng)) {
    let rng = &mut ChaCha8Rng::seed_from_u64(seed);
    for path in dataset_files(u64::MAX) {
        let a = read_dataset(&path, rng);
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        println!("{name}: {}×{} nnz {}", a.rows(), a.cols(), a.nnz());
        f(&name, &a, rng);
    }
}

/// Random m×k CSR; row lengths vary from 0 to ~2·avg (every 7th row empty), values in [-1, 1).
pub fn random_csr(rng: &mut ChaCha8Rng, m: usize, k: usize, avg: usize) -> Csr {
    let mut t = Vec::new();
    for r in 0..m {
        let len = if r % 7 == 3 {
            0
        } else {
            rng.random_range(0..=2 * avg)
        };
        for _ in 0..len.min(k) {
            t.push((
                r as u32,
                rng.random_range(0..k as u32),
                rng.random_range(-1.0f32..1.0),
            ));
        }
    }
    csr_from_triplets(m, k, &t).expect("valid")
}

/// `len` values uniform in [-1, 1).
pub fn dense(rng: &mut ChaCha8Rng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// A random matrix of each `(rows, cols, average row length)` of `shapes` ([`random_csr`], named
/// by its shape), then an empty 10×10.
pub fn generated_cases(
    rng: &mut ChaCha8Rng,
    shapes: &[(usize, usize, usize)],
) -> Vec<(String, Csr)> {
    let mut v: Vec<(String, Csr)> = shapes
        .iter()
        .map(|&(m, k, avg)| {
            (
                format!("random {m}×{k} avg {avg}"),
                random_csr(rng, m, k, avg),
            )
        })
        .collect();
    v.push(("empty 10×10".into(), random_csr(rng, 10, 10, 0)));
    v
}
