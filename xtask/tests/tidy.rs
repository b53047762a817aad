//! Tidy: the project's text describes the code as it is now. A measurement is named by its date,
//! commit and device, and the history of who tried what when lives in git, so no file under
//! `crates/`, `kernels-ptx/`, `docs/`, `xtask/` or `README.md` may refer to a numbered work sitting
//! ("session 19", "sessions 11–13", "sitting 4") or to its bundle names (`s18/go.sh`,
//! `s8_shared.json`).
//!
//! What is matched, case-insensitively, in every UTF-8 file under those roots (build output and
//! hidden folders excluded):
//! - the word `session` at the start of a word (`session`, `sessions`, `session's`, `session-8`);
//! - the word `sitting` or `sittings`;
//! - a sitting's bundle name: `s` and one or two digits at the start of a word, followed by `/`
//!   or `_` (`s16/go.sh`, `s8_shared.json`); a variable such as `s8` or `s16,` does not match.
//!
//! The word "session" has no technical use in the project today (no API of cudarc, NCCL or
//! cuSPARSE that the code calls is named so). Should one appear, add its file to [`ALLOWED`] with
//! the reason; the list stays small and explicit.

use std::path::{Path, PathBuf};

/// Files exempt from the check, each with the reason.
const ALLOWED: &[(&str, &str)] = &[(
    "xtask/tests/tidy.rs",
    "this check: it names the patterns it refuses",
)];

/// The folders and files checked, relative to the workspace root.
const ROOTS: &[&str] = &["crates", "kernels-ptx", "docs", "xtask", "README.md"];

/// Folders never entered: build output and hidden folders (`.git`, editor state).
fn skipped_dir(name: &str) -> bool {
    name == "target" || name.starts_with('.')
}

/// Whether the byte before `i` ends a word (or `i` is the start of the line).
fn word_start(line: &[u8], i: usize) -> bool {
    i == 0 || !(line[i - 1].is_ascii_alphanumeric() || line[i - 1] == b'_')
}

/// The first sitting reference in `line` (already lowercase), as the matched text.
fn sitting_reference(line: &str) -> Option<String> {
    let b = line.as_bytes();
    for (i, _) in line.char_indices() {
        if !word_start(b, i) {
            continue;
        }
        let rest = &line[i..];
        if rest.starts_with("session") {
            return Some("session".into());
        }
        if let Some(after) = rest.strip_prefix("sitting") {
            let after = after.strip_prefix('s').unwrap_or(after);
            if !after.starts_with(|c: char| c.is_ascii_alphabetic()) {
                return Some("sitting".into());
            }
        }
        if let Some(after) = rest.strip_prefix('s') {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            if (1..=2).contains(&digits)
                && matches!(after.as_bytes().get(digits), Some(b'/' | b'_'))
            {
                return Some(rest[..digits + 2].to_string());
            }
        }
    }
    None
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .map(|e| {
                e.unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                    .path()
            })
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            if p.is_dir() && name.as_deref().is_some_and(skipped_dir) {
                continue;
            }
            collect(&p, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

#[test]
fn the_patterns_match_sitting_references_and_nothing_else() {
    for hit in [
        "measured in session 19",
        "(Session 9: 6 ms;",
        "sessions 11–13",
        "session-8 H200 times",
        "session's device time",
        "at the sitting's start",
        "two sittings",
        ".bundles/s18/go.sh",
        "--merge s8_shared.json",
    ] {
        assert!(
            sitting_reference(&hit.to_lowercase()).is_some(),
            "not matched: {hit}"
        );
    }
    for miss in [
        "let (s8, s16) = (a, b);",
        "s2 = wave_split(&counts)",
        "obsession",
        "a sitter's bench",
        "kernels s16 and s32",
        "ms16/go",
    ] {
        assert_eq!(
            sitting_reference(&miss.to_lowercase()),
            None,
            "matched: {miss}"
        );
    }
}

#[test]
fn no_numbered_sitting_references_in_the_project_text() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for r in ROOTS {
        let p = root.join(r);
        assert!(p.exists(), "tidy root {} is missing", p.display());
        collect(&p, &mut files);
    }
    assert!(
        files.len() > 100,
        "only {} files found under {ROOTS:?}",
        files.len()
    );
    let mut found = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap_or(f)
            .to_string_lossy()
            .replace('\\', "/");
        if ALLOWED.iter().any(|(p, _)| *p == rel) {
            continue;
        }
        // Not UTF-8: a binary file (a gzip matrix, a cache), which holds no prose.
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if let Some(m) = sitting_reference(&line.to_lowercase()) {
                let shown: String = line.trim().chars().take(120).collect();
                found.push(format!("{rel}:{}: `{m}`: {shown}", i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} reference(s) to numbered work sittings:\n{}\n\nDocs and comments describe the code as it \
         is: name a measurement by its date, commit and device (`git log --format='%h %ad' -- FILE` \
         tells which commit produced a result file) and leave the history of attempts to git and to \
         the kernel notes' \"versions tried\" tables. A use of the word in an unrelated technical \
         sense goes into ALLOWED in xtask/tests/tidy.rs, with the reason.",
        found.len(),
        found.join("\n")
    );
}
