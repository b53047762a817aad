//! Shared by the dataset tests of tcsparse-formats.

#[path = "../support/data_skip.rs"]
mod data_skip;

use std::path::PathBuf;

/// The shared dataset folder: `$TCSPARSE_SHARED_DATASETS`, else `shared/datasets` next to this
/// checkout (`../shared/datasets` from the repository root). A dataset test never passes silently:
/// when the folder is absent this panics, unless the run allows the skip with
/// `TCSPARSE_ALLOW_MISSING_DATA=1` (and does not require the data with `TCSPARSE_REQUIRE_DATA=1`);
/// then it returns `None` after a note on stderr and, where `TCSPARSE_DATA_SKIP_LOG` names a
/// file, appends the skipping test's name to it (`.ci/run` counts those lines).
pub fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TCSPARSE_SHARED_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    if !dir.is_dir() {
        let set = |v: &str| std::env::var(v).as_deref() == Ok("1");
        assert!(
            set("TCSPARSE_ALLOW_MISSING_DATA") && !set("TCSPARSE_REQUIRE_DATA"),
            "no shared dataset folder at {}: set TCSPARSE_SHARED_DATASETS to a folder of .mtx.gz \
             matrices, or TCSPARSE_ALLOW_MISSING_DATA=1 to skip the dataset tests",
            dir.display()
        );
        let test = data_skip::current_test();
        eprintln!(
            "note: no shared dataset folder at {}; skipping {test}",
            dir.display()
        );
        data_skip::log_skip(&test);
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

/// Reads every shared matrix ([`shared_matrices`], a read error panics naming the file) and calls
/// `f` with its file name and the matrix; nothing when the folder is absent and the run allows it.
#[allow(dead_code)] // not every test binary that includes this module reads the matrices
pub fn for_each_shared_matrix(mut f: impl FnMut(&str, &tcsparse_formats::Csr)) {
    for p in shared_matrices().unwrap_or_default() {
        let a = tcsparse_formats::mtx::read_matrix(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        f(&name, &a);
    }
}
