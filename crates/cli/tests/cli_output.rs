//! Issue 39's failure classes at the CLI's edges: standard output that cannot be written (a closed
//! pipe: quiet exit 0; a full disk: one-line error, exit 1).

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::repo_root;

/// Every subcommand that prints to standard output, on small inputs and the CPU path.
fn printing_commands(dir: &Path) -> Vec<Vec<String>> {
    let m = repo_root().join("datasets/west0067.mtx.gz");
    let m = m.to_str().unwrap();
    let o = |name: &str| dir.join(name).to_string_lossy().into_owned();
    [
        vec!["info", m, "--formats"],
        vec!["plan", m],
        vec!["spmm", m, "--n", "4", "--iters", "1"],
        vec!["spmv", m, "--iters", "1"],
        vec!["spamm", "--gen", "exponential:n=64,rate=0.5"],
        vec!["demo", "--iters", "1", "--n", "4"],
        vec!["convert", m, "--format", "bittcf", "-o", &o("w.bittcf")],
        vec!["reorder", m, "--mode", "row", "-o", &o("w.perm")],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect()
}

fn run_with_stdout(args: &[String], stdout: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(repo_root())
        .env("TCSPARSE_FORCE_CPU", "1")
        .env("RUST_BACKTRACE", "1")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_pipe_is_a_quiet_exit() {
    let dir = common::workdir("cli_output", "pipe");
    for args in printing_commands(&dir) {
        // The read end is closed before the command starts: its first write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = run_with_stdout(&args, writer.into());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {:?}\n{err}", o.status);
        assert!(err.is_empty(), "{args:?} said something:\n{err}");
    }
}

#[test]
fn a_full_disk_is_a_one_line_error() {
    let dir = common::workdir("cli_output", "full");
    for args in printing_commands(&dir) {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = run_with_stdout(&args, full.into());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {:?}\n{err}", o.status);
        assert_eq!(
            err.trim_end(),
            "error: writing to standard output: No space left on device (os error 28)",
            "{args:?}"
        );
    }
}
