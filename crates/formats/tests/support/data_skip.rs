//! The one record of a dataset test skipped for want of the shared dataset folder, shared by the
//! dataset helpers of the test suites (`#[path]`-included, so `CARGO_PKG_NAME` names the crate
//! whose test skipped).

/// The running test's name (its thread's name), for the skip note and the skip log.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string()
}

/// Appends `<crate> <test>` to the file `TCSPARSE_DATA_SKIP_LOG` names, when it names one
/// (`.ci/run` counts those lines); panics when it cannot write there.
pub fn log_skip(test: &str) {
    if let Some(log) = std::env::var_os("TCSPARSE_DATA_SKIP_LOG") {
        use std::io::Write;
        let line = format!("{} {test}\n", env!("CARGO_PKG_NAME"));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .unwrap_or_else(|e| panic!("TCSPARSE_DATA_SKIP_LOG {}: {e}", log.to_string_lossy()));
    }
}
