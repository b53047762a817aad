//! What `cargo publish --workspace --dry-run --exclude xtask` needs, checked without a registry:
//! every internal dependency carries the workspace's version beside its path, every crate that is
//! published has the metadata crates.io shows, and the gpu crate reaches its PTX and cubins
//! through a folder inside the crate (`crates/gpu/kernels-ptx`, a link `cargo package` follows).

use std::path::{Path, PathBuf};

use toml::Table;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn manifest(path: &Path) -> Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn workspace() -> Table {
    manifest(&root().join("Cargo.toml"))
}

/// `crates/*/Cargo.toml` of the workspace.
fn crate_manifests() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/")
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("Cargo.toml"))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    assert!(out.len() >= 8, "{out:?}");
    out
}

#[test]
fn internal_dependencies_carry_the_workspace_version() {
    let ws = workspace();
    let version = ws["workspace"]["package"]["version"]
        .as_str()
        .expect("workspace.package.version");
    let deps = ws["workspace"]["dependencies"]
        .as_table()
        .expect("workspace.dependencies");
    let mut internal = 0;
    for (name, spec) in deps {
        let Some(spec) = spec.as_table() else {
            continue;
        };
        if spec.contains_key("path") {
            internal += 1;
            assert_eq!(
                spec.get("version").and_then(|v| v.as_str()),
                Some(version),
                "workspace dependency `{name}` has a path but not version = \"{version}\""
            );
        }
    }
    assert!(internal >= 6, "{internal} internal dependencies");
    // Crates name internal dependencies through the workspace table only, never by a path of
    // their own (which would have no version).
    for m in crate_manifests() {
        let t = manifest(&m);
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            for (name, spec) in t
                .get(section)
                .and_then(|s| s.as_table())
                .into_iter()
                .flatten()
            {
                let own_path = spec.as_table().is_some_and(|s| s.contains_key("path"));
                assert!(
                    !own_path,
                    "{}: [{section}] {name} has a path of its own; use {name}.workspace = true",
                    m.display()
                );
            }
        }
    }
}

#[test]
fn published_crates_have_the_metadata_crates_io_shows() {
    for m in crate_manifests() {
        let t = manifest(&m);
        let package = t["package"].as_table().expect("[package]");
        if package.get("publish").and_then(|p| p.as_bool()) == Some(false) {
            continue;
        }
        for key in [
            "description",
            "license",
            "repository",
            "readme",
            "keywords",
            "categories",
        ] {
            assert!(
                package.contains_key(key),
                "{}: [package] has no {key}",
                m.display()
            );
        }
        let keywords = package["keywords"].as_array().expect("keywords");
        assert!(
            (1..=5).contains(&keywords.len()),
            "{}: crates.io takes 1 to 5 keywords",
            m.display()
        );
    }
}

#[test]
fn the_gpu_crate_holds_its_kernels_inside_its_folder() {
    let inside = root().join("crates/gpu/kernels-ptx");
    let outside = root().join("kernels-ptx");
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let files = names(&inside);
    assert_eq!(
        files,
        names(&outside),
        "crates/gpu/kernels-ptx is kernels-ptx/"
    );
    for stem in files.iter().filter_map(|f| f.strip_suffix(".cu")) {
        for built in [format!("{stem}.ptx"), format!("{stem}.sm_90.cubin.gz")] {
            assert!(files.contains(&built), "{built} missing");
        }
    }
    // Every include of the gpu crate's sources goes through that folder.
    let mut stack = vec![root().join("crates/gpu/src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("src").filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("source");
                for (i, line) in text.lines().enumerate() {
                    if let Some(at) = line.find("kernels-ptx/")
                        && (line.contains("include_str!") || line.contains("include_bytes!"))
                    {
                        let path = &line[..at];
                        let quote = path.rfind('"').expect("a quoted path");
                        let up = path[quote + 1..].matches("../").count();
                        let depth = p
                            .strip_prefix(root().join("crates/gpu/src"))
                            .expect("inside src")
                            .components()
                            .count();
                        assert_eq!(
                            up,
                            depth,
                            "{}:{}: include from outside crates/gpu",
                            p.display(),
                            i + 1
                        );
                    }
                }
            }
        }
    }
}
