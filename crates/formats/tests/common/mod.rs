//! Shared by the dataset tests of tcsparse-formats.

use std::path::PathBuf;

/// The shared dataset folder: `$TCSPARSE_SHARED_DATASETS`, else `shared/datasets` next to this
/// checkout; `None` (after a note on stderr) when it is absent, so the caller skips. Panics when it
/// is absent under `TCSPARSE_REQUIRE_DATA=1` (set by .ci/run where ../shared exists): a dataset
/// test never passes silently.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TCSPARSE_SHARED_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    if !dir.is_dir() {
        assert!(
            std::env::var("TCSPARSE_REQUIRE_DATA").as_deref() != Ok("1"),
            "TCSPARSE_REQUIRE_DATA=1 but no dataset folder at {} (set TCSPARSE_SHARED_DATASETS)",
            dir.display()
        );
        eprintln!("note: shared/datasets not found (set TCSPARSE_SHARED_DATASETS); skipping");
        return None;
    }
    Some(dir)
}

/// The shared real matrices (`*.mtx.gz`, sorted) of [`shared_dir`]; `None` when the folder is
/// absent. Panics when the folder exists but holds no matrix.
#[allow(dead_code)] // not every test binary that includes this module lists the matrices
pub fn shared_matrices() -> Option<Vec<PathBuf>> {
    let dir = shared_dir()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".mtx.gz"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .mtx.gz in {}", dir.display());
    Some(files)
}
