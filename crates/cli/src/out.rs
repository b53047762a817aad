//! Standard output and standard error, checked: every line the subcommands print goes through
//! [`outln!`] / [`out!`], which return a [`StdoutError`] instead of panicking when the write fails.
//!
//! `main` turns that error into the exit: a closed pipe (`tcsparse info x | head -1`, `EPIPE`) is a
//! quiet exit with status 0, since the reader has all it asked for; any other write error (a full
//! disk, `>/dev/full`) is a one-line error with status 1. Rust ignores `SIGPIPE`, so a closed pipe
//! reaches us as that write error, never as a signal.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the text lines are printed (off under `--json`, see [`json_only`]).
static TEXT: AtomicBool = AtomicBool::new(true);

/// Under `--json` (`json` true; a subcommand passes its flag): the text lines ([`outln!`],
/// [`out!`]) are dropped, so a subcommand does the same work and prints the same facts, and the
/// one JSON document ([`json`]) is all that reaches standard output. `false` changes nothing.
pub fn json_only(json: bool) {
    if json {
        TEXT.store(false, Ordering::Relaxed);
    }
}

fn text() -> bool {
    TEXT.load(Ordering::Relaxed)
}

/// Writes the run's JSON document and a newline.
pub fn json(doc: &str) -> Result<(), StdoutError> {
    let mut s = io::stdout().lock();
    s.write_all(doc.as_bytes())
        .and_then(|()| s.write_all(b"\n"))
        .map_err(StdoutError)
}

/// Writing to standard output failed.
#[derive(Debug, thiserror::Error)]
#[error("writing to standard output")]
pub struct StdoutError(#[source] pub io::Error);

impl StdoutError {
    /// Whether the reader closed the pipe (the quiet exit).
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == io::ErrorKind::BrokenPipe
    }
}

/// Writes `args` to standard output (locked for the call).
pub fn write(args: fmt::Arguments<'_>) -> Result<(), StdoutError> {
    if !text() {
        return Ok(());
    }
    io::stdout().lock().write_fmt(args).map_err(StdoutError)
}

/// Writes `args` and a newline to standard output (locked for the call).
pub fn line(args: fmt::Arguments<'_>) -> Result<(), StdoutError> {
    if !text() {
        return Ok(());
    }
    let mut s = io::stdout().lock();
    s.write_fmt(args)
        .and_then(|()| s.write_all(b"\n"))
        .map_err(StdoutError)
}

/// Flushes standard output (what is still buffered when a subcommand returns).
pub fn flush() -> Result<(), StdoutError> {
    io::stdout().lock().flush().map_err(StdoutError)
}

/// Writes a line to standard error; a failure is ignored (there is nowhere left to report it).
pub fn err_line(args: fmt::Arguments<'_>) {
    let mut s = io::stderr().lock();
    let _ = s.write_fmt(args).and_then(|()| s.write_all(b"\n"));
}

/// `println!` through [`line`]: evaluates to `Result<(), StdoutError>`.
macro_rules! outln {
    () => { $crate::out::line(format_args!("")) };
    ($($t:tt)*) => { $crate::out::line(format_args!($($t)*)) };
}

/// `print!` through [`write`]: evaluates to `Result<(), StdoutError>`.
macro_rules! out {
    ($($t:tt)*) => { $crate::out::write(format_args!($($t)*)) };
}

/// `eprintln!` through [`err_line`]: never fails, never panics.
macro_rules! errln {
    ($($t:tt)*) => { $crate::out::err_line(format_args!($($t)*)) };
}

pub(crate) use {errln, out, outln};
