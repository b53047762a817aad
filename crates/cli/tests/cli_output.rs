//! Issue 39's failure classes at the CLI's edges: standard output that cannot be written (a closed
//! pipe: quiet exit 0; a full disk: one-line error, exit 1) and outputs into special files (a
//! device or FIFO written in place, a symbolic link followed and kept, a directory refused).

mod common;

use std::os::unix::fs::FileTypeExt;
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
        vec!["info", m, "--json"],
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

fn tcsparse(args: &[&str], dir: &Path) -> Output {
    let o = common::tcsparse(args, dir);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("panicked"),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every command that writes a file, writing to `out` (`reorder` chooses what to write by the
/// name: a matrix for `.mtx`).
fn writers(out: &str) -> Vec<Vec<String>> {
    let m = repo_root().join("datasets/west0067.mtx.gz");
    let m = m.to_str().unwrap();
    [
        vec!["gen", "banded:n=16,hb=1", "-o", out],
        vec!["reorder", m, "-o", out],
        vec!["convert", m, "--format", "bitbsr", "-o", out],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn dev_null_stays_a_device() {
    let dir = common::workdir("cli_output", "devnull");
    let link = dir.join("null.mtx");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    let direct = writers("/dev/null")
        .into_iter()
        .filter(|a| a[0] != "reorder");
    for args in direct.chain(writers("null.mtx")) {
        ok(&tcsparse(&strs(&args), &dir));
        let t = std::fs::symlink_metadata("/dev/null").unwrap().file_type();
        assert!(t.is_char_device(), "{args:?} replaced /dev/null");
        let t = std::fs::symlink_metadata(&link).unwrap().file_type();
        assert!(t.is_symlink(), "{args:?} replaced the link to /dev/null");
    }
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = common::workdir("cli_output", "fifo");
    let fifo = dir.join("out.mtx");
    let _ = std::fs::remove_file(&fifo);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    for args in writers("out.mtx") {
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        ok(&tcsparse(&strs(&args), &dir));
        let got = reader.join().unwrap();
        assert!(!got.is_empty(), "{args:?} wrote nothing into {f}");
        let t = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(t.is_fifo(), "{args:?} replaced the FIFO");
    }
}

#[test]
fn a_symlink_is_followed_and_kept() {
    let dir = common::workdir("cli_output", "symlink");
    for (i, args) in writers("link.mtx").into_iter().enumerate() {
        let (link, target) = (dir.join("link.mtx"), dir.join(format!("real{i}.mtx")));
        let _ = std::fs::remove_file(&link);
        std::fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink(format!("real{i}.mtx"), &link).unwrap();
        ok(&tcsparse(&strs(&args), &dir));
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{args:?} replaced the link"
        );
        let written = std::fs::read(&target).unwrap();
        assert!(written.len() > 3, "{args:?} did not write through the link");
    }
}

#[test]
fn a_directory_is_refused_and_nothing_is_left_behind() {
    let dir = common::workdir("cli_output", "dir");
    std::fs::create_dir_all(dir.join("sub.mtx")).unwrap();
    for args in writers("sub.mtx") {
        let o = tcsparse(&strs(&args), &dir);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("sub.mtx: is a directory"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.join("sub.mtx")).unwrap().count(), 0);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_regular_file_is_replaced_whole() {
    let dir = common::workdir("cli_output", "regular");
    let out = dir.join("m.mtx.gz");
    std::fs::write(&out, vec![b'x'; 1 << 20]).unwrap();
    ok(&tcsparse(
        &["gen", "banded:n=16,hb=1", "-o", "m.mtx.gz"],
        &dir,
    ));
    let back = tcsparse::formats::mtx::read_matrix(&out).unwrap();
    let spec: tcsparse::formats::generate::GeneratorSpec = "banded:n=16,hb=1".parse().unwrap();
    assert_eq!(back, spec.build().unwrap());
}
