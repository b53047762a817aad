//! Helpers shared by the CLI integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built `tcsparse` binary with `args` in `dir`.
pub fn tcsparse(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A fresh-or-reused scratch folder `<target tmp>/<suite>/<name>`.
pub fn workdir(suite: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(suite)
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
