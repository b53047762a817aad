//! User errors from the command line: every numeric option refuses NaN, infinities and
//! out-of-range values before any work (clap's usage error, status 2, naming the option and the
//! range); bad paths say what is wrong with the path, once; no backtrace even with
//! `RUST_BACKTRACE=1`; nothing printed on standard output before the input is read; no colour
//! codes on a standard error that is not a terminal.

mod common;

use std::process::{Command, Output};

use common::repo_root;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcsparse"))
        .args(args)
        .current_dir(repo_root())
        .env("TCSPARSE_FORCE_CPU", "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

/// Asserts a usage error (status 2) naming `needle`. The input path does not exist, so an error
/// that came after reading would say so instead: the check ran before any work.
fn usage_error(args: &[&str], needle: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in\n{err}");
    assert!(o.stdout.is_empty(), "{args:?} printed before failing");
}

#[test]
fn bad_numbers_are_refused_before_any_work() {
    let m = "missing.mtx";
    for (args, needle) in [
        (
            &["spmm", m, "--n", "0"][..],
            "'--n <N>': expected a number of columns, at least 1, got `0`",
        ),
        (&["spmm", m, "--n=-3"], "got `-3`"),
        (&["spmm", m, "--iters", "0"], "from 1 to 10000"),
        (
            &["spmm", m, "--iters", "100000000"],
            "from 1 to 10000, got `100000000`",
        ),
        (
            &["spmm", m, "--reorder", "foo"],
            "expected auto or a method (none, degree, rcm, lsh, rabbit, affinity), got `foo`",
        ),
        (&["spmm", m, "--precision", "f64"], "'f64'"),
        (&["spmv", m, "--rhs", "9"], "from 1 to 8"),
        (&["spmv", m, "--rhs", "0"], "from 1 to 8"),
        (&["spmv", m, "--iters", "100000000"], "from 1 to 10000"),
        (&["spmv", m, "--precision", "f8"], "'f8'"),
        (&["plan", m, "--n", "0"], "at least 1"),
        (&["demo", "--n", "0"], "at least 1"),
        (&["demo", "--iters", "NaN"], "got `NaN`"),
        (&["demo", "--reorder", "foo"], "got `foo`"),
        (
            &["spamm", m, "--tau", "NaN"],
            "expected a finite τ ≥ 0, got `NaN`",
        ),
        (&["spamm", m, "--tau", "inf"], "got `inf`"),
        (&["spamm", m, "--tau=-1"], "got `-1`"),
        (&["spamm", m, "--tau", "1e39"], "got `1e39`"),
        (&["spamm", m, "--valid-ratio", "NaN"], "got `NaN`"),
        (&["spamm", m, "--valid-ratio", "0"], "in (0, 1]"),
        (&["spamm", m, "--valid-ratio", "1.5"], "in (0, 1]"),
        (&["spamm", m, "--target-error=-inf"], "got `-inf`"),
        (&["spamm", m, "--target-error", "0"], "in (0, 1]"),
        (&["spamm", m, "--s", "0"], "from 1 to 1024"),
        (&["spamm", m, "--block", "96"], "'96'"),
        (&["spamm", m, "--gpus", "0"], "from 1 to 64"),
    ] {
        usage_error(args, needle);
    }
}

/// Asserts a one-line user error (status 1) equal to `want`, printed without a backtrace.
fn user_error(args: &[&str], want: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.trim_end(), want, "{args:?}");
    assert!(o.stdout.is_empty(), "{args:?} printed before failing");
}

#[test]
fn bad_paths_say_what_is_wrong_once_without_a_backtrace() {
    for cmd in ["info", "plan", "spmm", "spmv", "convert", "reorder"] {
        let mut args = vec![cmd, "missing.mtx"];
        match cmd {
            "convert" => args.extend(["--format", "bittcf", "-o", "x.bittcf"]),
            "reorder" => args.extend(["-o", "x.perm"]),
            _ => {}
        }
        user_error(&args, "error: missing.mtx: no such file");
        args[1] = "datasets";
        user_error(&args, "error: datasets: is a directory, not a matrix file");
        args[1] = "/dev/zero";
        user_error(
            &args,
            "error: /dev/zero: not a regular file (a FIFO, device or socket); give a file",
        );
    }
    user_error(
        &["demo", "--matrix", "missing.mtx"],
        "error: missing.mtx: no such file",
    );
    user_error(
        &["spamm", "missing.npy"],
        "error: missing.npy: no such file",
    );
    user_error(
        &["info", "Cargo.toml"],
        "error: Cargo.toml: unknown matrix file (expected .mtx, .mtx.gz, .npz, or a layout file written by `tcsparse convert`)",
    );
}

#[test]
fn a_fifo_input_is_refused_without_blocking() {
    let dir = common::workdir("cli_errors", "fifo");
    let fifo = dir.join("in.mtx");
    let _ = std::fs::remove_file(&fifo);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for cmd in ["info", "plan", "spmm", "spmv"] {
        let o = common::tcsparse(&[cmd, "in.mtx"], &dir);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {err}");
        assert!(err.contains("in.mtx: not a regular file"), "{cmd}: {err}");
    }
}

#[test]
fn a_bad_file_names_the_path_and_the_line() {
    let dir = common::workdir("cli_errors", "bad");
    std::fs::write(
        dir.join("bad.mtx"),
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
    )
    .unwrap();
    let o = common::tcsparse(&["info", "bad.mtx"], &dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim_end(),
        "error: bad.mtx: line 3: index (3, 1) is outside the 1-based 2×2 matrix"
    );
}

#[test]
fn logs_on_a_redirected_stderr_are_plain_text() {
    let o = run(&["-v", "info", "datasets/west0067.mtx.gz"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("INFO"), "no log lines to check:\n{err}");
    assert!(!err.contains('\u{1b}'), "colour codes in\n{err}");
}
