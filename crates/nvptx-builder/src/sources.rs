//! Finding kernel sources, their local includes, and the source hash that the stamp records.

use std::collections::BTreeSet;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::BuildError;

/// One `.cu` file with the local headers it includes (transitively).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    /// File name, e.g. `csr_spmm.cu`.
    pub name: String,
    /// Text of the `.cu` file.
    pub text: String,
    /// Local headers (`#include "x.cuh"`), sorted by name, transitively.
    pub includes: Vec<String>,
    /// Hex sha256 over the `.cu` and its includes, see [`hash_sources`].
    pub sha256: String,
}

impl KernelSource {
    /// Name of the generated file, `<stem>.ptx`.
    pub fn ptx_name(&self) -> String {
        let stem = self.name.strip_suffix(".cu").unwrap_or(&self.name);
        format!("{stem}.ptx")
    }
}

/// Names in `#include "name"` lines (quoted includes only; `<...>` are compiler headers).
pub fn quoted_includes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('#')?.trim_start().strip_prefix("include")?;
            let rest = rest.trim_start().strip_prefix('"')?;
            let end = rest.find('"')?;
            Some(rest[..end].to_string())
        })
        .collect()
}

/// sha256 over `(name, 0, text, 0)` of the `.cu` file first, then of each include in name order.
pub fn hash_sources(files: &[(&str, &str)]) -> String {
    let mut h = Sha256::new();
    for (name, text) in files {
        h.update(name.as_bytes());
        h.update([0u8]);
        h.update(text.as_bytes());
        h.update([0u8]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn read(dir: &Path, name: &str) -> Result<String, BuildError> {
    let p = dir.join(name);
    std::fs::read_to_string(&p).map_err(|e| BuildError::io(&p, e))
}

/// Loads one `.cu` from `dir`, resolving its quoted includes in `dir`.
pub fn load(dir: &Path, name: &str) -> Result<KernelSource, BuildError> {
    let text = read(dir, name)?;
    let mut seen = BTreeSet::new();
    let mut todo: Vec<(String, String)> = quoted_includes(&text)
        .into_iter()
        .map(|i| (name.to_string(), i))
        .collect();
    let mut texts = std::collections::BTreeMap::new();
    while let Some((from, inc)) = todo.pop() {
        if !seen.insert(inc.clone()) {
            continue;
        }
        if inc.contains('/') || inc.contains('\\') || !dir.join(&inc).is_file() {
            return Err(BuildError::MissingInclude { from, name: inc });
        }
        let t = read(dir, &inc)?;
        todo.extend(quoted_includes(&t).into_iter().map(|i| (inc.clone(), i)));
        texts.insert(inc, t);
    }
    let mut files: Vec<(&str, &str)> = vec![(name, &text)];
    files.extend(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())));
    let sha256 = hash_sources(&files);
    Ok(KernelSource {
        name: name.to_string(),
        includes: texts.keys().cloned().collect(),
        sha256,
        text,
    })
}

/// Every `*.cu` in `dir`, sorted by name.
pub fn discover(dir: &Path) -> Result<Vec<KernelSource>, BuildError> {
    let mut names = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| BuildError::io(dir, e))? {
        let e = e.map_err(|e| BuildError::io(dir, e))?;
        let n = e.file_name().to_string_lossy().into_owned();
        if n.ends_with(".cu") {
            names.push(n);
        }
    }
    names.sort();
    names.iter().map(|n| load(dir, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_parsed() {
        let t = "#include \"common.cuh\"\n  # include \"b.cuh\" // x\n#include <cuda_fp16.h>\n";
        assert_eq!(quoted_includes(t), vec!["common.cuh", "b.cuh"]);
    }

    #[test]
    fn hash_depends_on_names_and_texts() {
        let a = hash_sources(&[("a.cu", "x"), ("h.cuh", "y")]);
        assert_ne!(a, hash_sources(&[("a.cu", "x"), ("h.cuh", "z")]));
        assert_ne!(a, hash_sources(&[("a.cu", "xy"), ("h.cuh", "")]));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn header_change_changes_hash_and_missing_include_errors() {
        let dir = std::env::temp_dir().join(format!("nvptx-builder-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("k.cu"), "#include \"c.cuh\"\n").unwrap();
        std::fs::write(dir.join("c.cuh"), "#include \"d.cuh\"\n").unwrap();
        std::fs::write(dir.join("d.cuh"), "int x;\n").unwrap();
        let s1 = load(&dir, "k.cu").unwrap();
        assert_eq!(s1.includes, vec!["c.cuh", "d.cuh"]);
        std::fs::write(dir.join("d.cuh"), "int y;\n").unwrap();
        let s2 = load(&dir, "k.cu").unwrap();
        assert_ne!(s1.sha256, s2.sha256);
        std::fs::remove_file(dir.join("d.cuh")).unwrap();
        assert!(matches!(
            load(&dir, "k.cu"),
            Err(BuildError::MissingInclude { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
