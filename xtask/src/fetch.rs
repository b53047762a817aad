//! `cargo xtask fetch NAME... | --suite S | --list`: downloads the public matrices listed in
//! `datasets/manifest.toml` into the dataset cache (`$TCSPARSE_DATA_DIR`, default
//! `~/.cache/tcsparse/datasets`).
//!
//! Guarantees: every download streams into a temporary file in the cache folder while its sha256 is
//! computed; only a download whose length matches `Content-Length` and whose digest matches the
//! manifest is renamed into place (SuiteSparse tarballs are unpacked first, also through a temporary
//! file). Any failure (HTTP error, truncated body, checksum mismatch, bad archive) leaves no partial
//! file behind. Entries whose sha256 is not yet known are refused unless `--allow-unverified`.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Arguments of `cargo xtask fetch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix names from the manifest (see --list).
    names: Vec<String>,
    /// Fetch a whole suite: `shipped`, `all`, or a paper prefix (`acc-spmm`, `spaden`, `cutespmm`).
    #[arg(long)]
    suite: Option<String>,
    /// List the manifest (name, kind, size, verified digest, cached) and exit.
    #[arg(long)]
    list: bool,
    /// Download entries whose sha256 is not in the manifest yet (prints the digest seen).
    #[arg(long)]
    allow_unverified: bool,
    /// Manifest to read (default: datasets/manifest.toml of this checkout).
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Replace the scheme and host of every URL with this one (a mirror, e.g. https://sparse.tamu.edu).
    #[allow(rustdoc::bare_urls)] // help text
    #[arg(long)]
    base_url: Option<String>,
    /// Cache folder (default: $TCSPARSE_DATA_DIR, else ~/.cache/tcsparse/datasets).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// How a manifest entry is stored upstream and in the cache.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// SuiteSparse Matrix Market tarball (`<Name>/<Name>.mtx` inside), cached gzip-compressed as
    /// `<name>.mtx.gz` (what the tests and the bench read from a dataset folder).
    SuitesparseTar,
    /// A gzip Matrix Market file, cached as `<name>.mtx.gz`.
    MtxGz,
    /// A SNAP gzip edge list, cached as `<name>.txt.gz`.
    SnapTxtGz,
    /// Not fetchable by this tool (zip/npz bundle or no stable URL); listed for completeness.
    External,
}

/// One `[[matrix]]` of the manifest.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Unique name, also the cached file's stem.
    pub name: String,
    /// Storage kind.
    pub kind: Kind,
    /// Download URL ("" for shipped or unknown).
    #[serde(default)]
    pub url: String,
    /// Hex sha256 of the downloaded file; "" = unknown.
    #[serde(default)]
    pub sha256: String,
    /// Rows as reported by the paper, if any.
    pub rows: Option<u64>,
    /// Nonzeros as reported by the paper, if any.
    pub nnz: Option<u64>,
    /// Download size in bytes, 0 = unknown.
    #[serde(default)]
    pub bytes: u64,
    /// Where the papers use it, e.g. "acc-spmm Table 2".
    #[serde(default)]
    pub papers: Vec<String>,
    /// File name under datasets/ when the repository ships a copy.
    pub shipped: Option<String>,
    /// Free-form note (why an external entry cannot be fetched).
    pub note: Option<String>,
}

/// The parsed `datasets/manifest.toml`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// All entries, in file order.
    pub matrix: Vec<Entry>,
}

impl Manifest {
    /// Reads and validates a manifest (unique names, well-formed digests, URLs where needed).
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let m: Manifest =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let mut seen = std::collections::HashSet::new();
        for e in &m.matrix {
            if !seen.insert(e.name.as_str()) {
                bail!("{}: duplicate name {:?}", path.display(), e.name);
            }
            if e.name.is_empty() || e.name.contains(['/', '\\']) || e.name.starts_with('.') {
                bail!("{}: bad name {:?}", path.display(), e.name);
            }
            if !e.sha256.is_empty()
                && (e.sha256.len() != 64 || !e.sha256.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                bail!(
                    "{}: {}: sha256 must be 64 hex digits",
                    path.display(),
                    e.name
                );
            }
            if e.kind != Kind::External && e.url.is_empty() && e.shipped.is_none() {
                bail!(
                    "{}: {}: needs a url or a shipped file",
                    path.display(),
                    e.name
                );
            }
        }
        Ok(m)
    }

    /// Entries selected by names (exact) and/or a suite.
    pub fn select(&self, names: &[String], suite: Option<&str>) -> Result<Vec<&Entry>> {
        let mut out: Vec<&Entry> = Vec::new();
        for n in names {
            let e = self.matrix.iter().find(|e| &e.name == n).ok_or_else(|| {
                anyhow!("no matrix named {n:?} in the manifest (try `cargo xtask fetch --list`)")
            })?;
            out.push(e);
        }
        if let Some(s) = suite {
            let before = out.len();
            for e in &self.matrix {
                let hit = match s {
                    "all" => true,
                    "shipped" => e.shipped.is_some(),
                    _ => e.papers.iter().any(|p| p.starts_with(s)),
                };
                if hit && !out.iter().any(|o| o.name == e.name) {
                    out.push(e);
                }
            }
            if out.len() == before {
                bail!(
                    "suite {s:?} matches nothing (suites: shipped, all, acc-spmm, spaden, cutespmm)"
                );
            }
        }
        Ok(out)
    }
}

/// What happened to one entry.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The cached file already existed; nothing was downloaded.
    Cached(PathBuf),
    /// Downloaded (or copied from datasets/), verified and stored.
    Stored {
        /// Final path in the cache.
        path: PathBuf,
        /// sha256 of the downloaded file (hex).
        sha256: String,
        /// Whether the manifest had a digest to compare with.
        verified: bool,
    },
}

/// Downloads manifest entries into a cache folder.
pub struct Fetcher {
    agent: ureq::Agent,
    /// Cache folder.
    pub dir: PathBuf,
    /// Folder holding the shipped files (datasets/).
    pub shipped_dir: PathBuf,
    /// Replaces scheme + host of every URL when set.
    pub base_url: Option<String>,
    /// Accept entries without a known sha256.
    pub allow_unverified: bool,
    /// Show a progress bar.
    pub progress: bool,
}

/// Removes its path on drop unless [`TempPath::persist`] moved it: no partial file survives an error.
struct TempPath(Option<PathBuf>);

impl TempPath {
    fn new(dir: &Path, name: &str, what: &str) -> Self {
        TempPath(Some(
            dir.join(format!(".{name}.{what}.{}.tmp", std::process::id())),
        ))
    }
    fn path(&self) -> &Path {
        self.0.as_deref().expect("temp path present until kept")
    }
    /// Renames the file to `to` and disarms the guard.
    fn persist(mut self, to: &Path) -> Result<()> {
        let p = self.0.take().expect("temp path present until kept");
        fs::rename(&p, to).with_context(|| format!("renaming {} to {}", p.display(), to.display()))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// Replaces `scheme://host[:port]` of `url` with `base` (no trailing slash needed).
pub fn rebase_url(url: &str, base: &str) -> Result<String> {
    let after_scheme = url
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| anyhow!("not an absolute URL: {url}"))?;
    let path_start = url[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(url.len());
    Ok(format!(
        "{}{}",
        base.trim_end_matches('/'),
        &url[path_start..]
    ))
}

/// The cache folder: `$TCSPARSE_DATA_DIR`, else `~/.cache/tcsparse/datasets`.
pub fn default_data_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("TCSPARSE_DATA_DIR") {
        return Ok(PathBuf::from(d));
    }
    let home = std::env::var_os("HOME").ok_or_else(|| anyhow!("set TCSPARSE_DATA_DIR or HOME"))?;
    Ok(PathBuf::from(home).join(".cache/tcsparse/datasets"))
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

impl Fetcher {
    /// A fetcher writing into `dir`; proxies from the environment are honoured unless `use_proxy` is false.
    pub fn new(dir: PathBuf, shipped_dir: PathBuf, use_proxy: bool) -> Self {
        let mut cfg = ureq::Agent::config_builder().timeout_connect(Some(Duration::from_secs(30)));
        if !use_proxy {
            cfg = cfg.proxy(None);
        }
        Fetcher {
            agent: cfg.build().into(),
            dir,
            shipped_dir,
            base_url: None,
            allow_unverified: false,
            progress: true,
        }
    }

    /// Where `e` lives in the cache once fetched.
    pub fn target(&self, e: &Entry) -> PathBuf {
        let file = match e.kind {
            Kind::SuitesparseTar | Kind::MtxGz | Kind::External => format!("{}.mtx.gz", e.name),
            Kind::SnapTxtGz => format!("{}.txt.gz", e.name),
        };
        self.dir.join(file)
    }

    /// Fetches one entry (skipping it when already cached).
    pub fn fetch(&self, e: &Entry) -> Result<Outcome> {
        let target = self.target(e);
        if target.is_file() {
            return Ok(Outcome::Cached(target));
        }
        if e.kind == Kind::External {
            bail!(
                "{}: not fetchable by this tool ({}){}",
                e.name,
                e.note.as_deref().unwrap_or("external"),
                if e.url.is_empty() {
                    String::new()
                } else {
                    format!("; see {}", e.url)
                }
            );
        }
        let expected = (!e.sha256.is_empty()).then(|| e.sha256.to_ascii_lowercase());
        if expected.is_none() && !self.allow_unverified {
            bail!(
                "{}: the manifest has no sha256 for it yet; refusing an unverified download \
                 (pass --allow-unverified, then record the printed digest in datasets/manifest.toml)",
                e.name
            );
        }
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let download = TempPath::new(&self.dir, &e.name, "download");
        let sha = match &e.shipped {
            Some(file) => self.copy_hashed(&self.shipped_dir.join(file), download.path())?,
            None => {
                let url = match &self.base_url {
                    Some(b) => rebase_url(&e.url, b)?,
                    None => e.url.clone(),
                };
                self.download(&e.name, &url, download.path())?
            }
        };
        if let Some(want) = &expected
            && &sha != want
        {
            bail!(
                "{}: sha256 mismatch: manifest {want}, downloaded {sha}; nothing stored",
                e.name
            );
        }
        match e.kind {
            Kind::SuitesparseTar => {
                let unpacked = TempPath::new(&self.dir, &e.name, "unpack");
                extract_mtx(download.path(), &e.name, unpacked.path())?;
                unpacked.persist(&target)?;
            }
            Kind::MtxGz | Kind::SnapTxtGz => download.persist(&target)?,
            Kind::External => unreachable!("external entries bail above"),
        }
        Ok(Outcome::Stored {
            path: target,
            sha256: sha,
            verified: expected.is_some(),
        })
    }

    fn copy_hashed(&self, from: &Path, to: &Path) -> Result<String> {
        let mut src = File::open(from).with_context(|| format!("opening {}", from.display()))?;
        let mut out = BufWriter::new(File::create(to)?);
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let k = src.read(&mut buf)?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            out.write_all(&buf[..k])?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(hex(&h.finalize()))
    }

    /// Streams `url` into `to`, hashing as it goes; errors on HTTP failure or a short body.
    fn download(&self, name: &str, url: &str, to: &Path) -> Result<String> {
        let resp = self
            .agent
            .get(url)
            .call()
            .with_context(|| format!("{name}: GET {url}"))?;
        let declared = resp.body().content_length();
        let mut reader = resp.into_body().into_reader();
        let bar = match (self.progress, declared) {
            (false, _) => ProgressBar::hidden(),
            (true, Some(n)) => ProgressBar::new(n).with_style(
                ProgressStyle::with_template(
                    "{msg:20} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            ),
            (true, None) => ProgressBar::new_spinner(),
        };
        bar.set_message(name.to_string());
        let mut out = BufWriter::new(File::create(to)?);
        let mut h = Sha256::new();
        let mut got: u64 = 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let k = match reader.read(&mut buf) {
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    bar.abandon();
                    return Err(e).with_context(|| {
                        format!("{name}: download from {url} broke off after {got} bytes")
                    });
                }
            };
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            out.write_all(&buf[..k])?;
            got += k as u64;
            bar.inc(k as u64);
        }
        bar.finish_and_clear();
        if let Some(n) = declared
            && n != got
        {
            bail!("{name}: truncated download from {url}: {got} of {n} bytes");
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(hex(&h.finalize()))
    }
}

/// Unpacks `<name>.mtx` (any folder) from a SuiteSparse `.tar.gz` into `to`, gzip-compressed.
fn extract_mtx(tarball: &Path, name: &str, to: &Path) -> Result<()> {
    let want = format!("{name}.mtx");
    let mut ar = tar::Archive::new(GzDecoder::new(File::open(tarball)?));
    for entry in ar.entries().context("reading tarball")? {
        let mut entry = entry.context("reading tarball entry")?;
        let path = entry.path()?.into_owned();
        if path.file_name().and_then(|f| f.to_str()) == Some(want.as_str()) {
            let out = BufWriter::new(File::create(to)?);
            let mut gz = GzEncoder::new(out, Compression::default());
            io::copy(&mut entry, &mut gz).context("unpacking tarball")?;
            let out = gz.finish().context("compressing the matrix")?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            return Ok(());
        }
    }
    bail!("{name}: the tarball has no {want}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn human(n: u64) -> String {
    match n {
        0 => "?".into(),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n => format!("{:.1} KiB", n as f64 / 1024.0),
    }
}

fn list(m: &Manifest, f: &Fetcher) {
    println!(
        "{:<18} {:<16} {:>10} {:>11} {:>9} {:<8} {:<6} papers",
        "name", "kind", "rows", "nnz", "size", "sha256", "cached"
    );
    for e in &m.matrix {
        let kind = match e.kind {
            Kind::SuitesparseTar => "suitesparse-tar",
            Kind::MtxGz => "mtx-gz",
            Kind::SnapTxtGz => "snap-txt-gz",
            Kind::External => "external",
        };
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
        println!(
            "{:<18} {:<16} {:>10} {:>11} {:>9} {:<8} {:<6} {}",
            e.name,
            kind,
            opt(e.rows),
            opt(e.nnz),
            human(e.bytes),
            if e.sha256.is_empty() {
                "unknown"
            } else {
                "known"
            },
            if f.target(e).is_file() { "yes" } else { "no" },
            e.papers.join("; ")
        );
    }
    println!("cache: {}", f.dir.display());
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<()> {
    let root = workspace_root();
    let manifest_path = args
        .manifest
        .unwrap_or_else(|| root.join("datasets/manifest.toml"));
    let m = Manifest::load(&manifest_path)?;
    let dir = match args.dir {
        Some(d) => d,
        None => default_data_dir()?,
    };
    let shipped_dir = manifest_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join("datasets"));
    let mut f = Fetcher::new(dir.clone(), shipped_dir, true);
    f.base_url = args.base_url;
    f.allow_unverified = args.allow_unverified;
    if args.list {
        list(&m, &f);
        return Ok(());
    }
    if args.names.is_empty() && args.suite.is_none() {
        bail!("name matrices, or pass --suite S or --list");
    }
    let picked = m.select(&args.names, args.suite.as_deref())?;
    let mut failed = Vec::new();
    for e in picked {
        match f.fetch(e) {
            Ok(Outcome::Cached(p)) => println!("{:<18} cached   {}", e.name, p.display()),
            Ok(Outcome::Stored {
                path,
                sha256,
                verified,
            }) => {
                println!("{:<18} fetched  {}", e.name, path.display());
                if !verified {
                    println!(
                        "{:<18} UNVERIFIED: sha256 = \"{sha256}\" (record it in the manifest)",
                        ""
                    );
                }
            }
            Err(err) => {
                eprintln!("{:<18} FAILED   {err:#}", e.name);
                failed.push(e.name.clone());
            }
        }
    }
    println!(
        "the tests and the bench read this folder's .mtx.gz files with TCSPARSE_SHARED_DATASETS={}",
        dir.display()
    );
    if !failed.is_empty() {
        bail!(
            "{} of the requested matrices failed: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    const MTX: &str = "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.5\n3 2 -2\n";

    /// A SuiteSparse-shaped tarball: `m/m.mtx` plus a distractor.
    fn tarball() -> Vec<u8> {
        let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut b = tar::Builder::new(enc);
        for (path, body) in [("m/README.txt", "not this one\n"), ("m/m.mtx", MTX)] {
            let mut h = tar::Header::new_gnu();
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, path, body.as_bytes()).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    /// Serves `routes` (path -> (declared Content-Length, body)) on 127.0.0.1 until `max_conns`
    /// connections were handled or 20 s passed. Returns the base URL and a hit counter.
    /// [`serve`] of one connection answering `path` with [`tarball`], declaring `extra` bytes more
    /// than it sends; returns the tarball too.
    fn serve_tarball(
        path: &'static str,
        extra: usize,
    ) -> (Vec<u8>, String, std::sync::Arc<AtomicUsize>) {
        let tgz = tarball();
        let (base, hits) = serve(HashMap::from([(path, (tgz.len() + extra, tgz.clone()))]), 1);
        (tgz, base, hits)
    }

    fn serve(
        routes: HashMap<&'static str, (usize, Vec<u8>)>,
        max_conns: usize,
    ) -> (String, std::sync::Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let hits = std::sync::Arc::new(AtomicUsize::new(0));
        let h2 = hits.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut served = 0;
            while served < max_conns && Instant::now() < deadline {
                let (mut s, _) = match l.accept() {
                    Ok(c) => c,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                served += 1;
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut req = Vec::new();
                let mut byte = [0u8; 1];
                while !req.ends_with(b"\r\n\r\n")
                    && s.read(&mut byte).map(|k| k == 1).unwrap_or(false)
                {
                    req.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&req)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                h2.fetch_add(1, Ordering::SeqCst);
                let resp = match routes.get(path.as_str()) {
                    Some((len, body)) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = s.write_all(&resp);
                let _ = s.flush();
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
        (base, hits)
    }

    fn sha(b: &[u8]) -> String {
        hex(&Sha256::digest(b))
    }

    fn entry(name: &str, kind: Kind, url: &str, sha256: &str) -> Entry {
        Entry {
            name: name.into(),
            kind,
            url: url.into(),
            sha256: sha256.into(),
            rows: None,
            nnz: None,
            bytes: 0,
            papers: vec![],
            shipped: None,
            note: None,
        }
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tcsparse-fetch-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn files(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn fetcher(dir: &Path) -> Fetcher {
        let mut f = Fetcher::new(dir.to_path_buf(), dir.to_path_buf(), false);
        f.progress = false;
        f
    }

    /// What a fetch reports when it stored the served bytes `body` at `path`.
    fn stored(path: PathBuf, body: &[u8], verified: bool) -> Outcome {
        Outcome::Stored {
            path,
            sha256: sha(body),
            verified,
        }
    }

    /// The error (with its causes) of a fetch of `e` that must fail, once checked that it left
    /// no file in its fresh directory `tmpdir(tag)` (then removed).
    fn fails_leaving_nothing(tag: &str, e: &Entry) -> String {
        let dir = tmpdir(tag);
        let err = format!("{:#}", fetcher(&dir).fetch(e).unwrap_err());
        assert!(files(&dir).is_empty(), "left behind: {:?}", files(&dir));
        fs::remove_dir_all(&dir).unwrap();
        err
    }

    #[test]
    fn downloads_verifies_unpacks_and_then_skips() {
        let (tgz, base, hits) = serve_tarball("/MM/G/m.tar.gz", 0);
        let dir = tmpdir("good");
        let mut f = fetcher(&dir);
        // The manifest URL points elsewhere; --base-url redirects it to the test server.
        f.base_url = Some(base);
        let e = entry(
            "m",
            Kind::SuitesparseTar,
            "https://example.invalid/MM/G/m.tar.gz",
            &sha(&tgz),
        );
        let out = f.fetch(&e).unwrap();
        assert_eq!(out, stored(dir.join("m.mtx.gz"), &tgz, true));
        let mut text = String::new();
        GzDecoder::new(File::open(dir.join("m.mtx.gz")).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, MTX);
        assert_eq!(
            files(&dir),
            vec!["m.mtx.gz".to_string()],
            "no temporary files left"
        );
        // Second time: cached, no request.
        assert_eq!(f.fetch(&e).unwrap(), Outcome::Cached(dir.join("m.mtx.gz")));
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn checksum_mismatch_leaves_nothing() {
        let (_, base, hits) = serve_tarball("/bad.tar.gz", 0);
        let e = entry(
            "m",
            Kind::SuitesparseTar,
            &format!("{base}/bad.tar.gz"),
            &"0".repeat(64),
        );
        let err = fails_leaving_nothing("mismatch", &e);
        assert!(err.contains("sha256 mismatch"), "{err}");
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn truncated_download_leaves_nothing() {
        // Declares 1000 more bytes than it sends, then closes the connection.
        let (tgz, base, _) = serve_tarball("/t.mtx.gz", 1000);
        let e = entry("t", Kind::MtxGz, &format!("{base}/t.mtx.gz"), &sha(&tgz));
        let err = fails_leaving_nothing("trunc", &e);
        assert!(
            err.contains("broke off") || err.contains("truncated"),
            "{err}"
        );
    }

    #[test]
    fn http_error_leaves_nothing() {
        let (base, _) = serve(HashMap::new(), 1);
        let e = entry(
            "x",
            Kind::MtxGz,
            &format!("{base}/missing.mtx.gz"),
            &"0".repeat(64),
        );
        fails_leaving_nothing("404", &e);
    }

    #[test]
    fn unverified_is_refused_unless_allowed() {
        let (tgz, base, hits) = serve_tarball("/u.mtx.gz", 0);
        let dir = tmpdir("unverified");
        let mut f = fetcher(&dir);
        let e = entry("u", Kind::MtxGz, &format!("{base}/u.mtx.gz"), "");
        let err = f.fetch(&e).unwrap_err().to_string();
        assert!(err.contains("--allow-unverified"), "{err}");
        assert_eq!(hits.load(Ordering::SeqCst), 0, "refused before any request");
        f.allow_unverified = true;
        let out = f.fetch(&e).unwrap();
        assert_eq!(out, stored(dir.join("u.mtx.gz"), &tgz, false));
        assert_eq!(fs::read(dir.join("u.mtx.gz")).unwrap(), tgz);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn external_entries_explain_themselves() {
        let dir = tmpdir("external");
        let f = fetcher(&dir);
        let mut e = entry("r", Kind::External, "https://example.invalid/r.zip", "");
        e.note = Some("zip of an npz".into());
        let err = f.fetch(&e).unwrap_err().to_string();
        assert!(
            err.contains("not fetchable") && err.contains("zip of an npz"),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rebase_replaces_scheme_and_host_only() {
        assert_eq!(
            rebase_url(
                "https://a.example/MM/HB/west0067.tar.gz",
                "http://127.0.0.1:9/"
            )
            .unwrap(),
            "http://127.0.0.1:9/MM/HB/west0067.tar.gz"
        );
        assert_eq!(rebase_url("http://h:1", "https://m").unwrap(), "https://m");
        assert!(rebase_url("no-scheme", "https://m").is_err());
    }

    /// The real manifest parses, and every shipped file matches its recorded digest (copy path).
    #[test]
    fn real_manifest_and_shipped_files_verify() {
        let root = workspace_root();
        let m = Manifest::load(&root.join("datasets/manifest.toml")).unwrap();
        assert!(m.matrix.len() >= 20);
        for suite in ["acc-spmm", "spaden", "cutespmm", "shipped"] {
            assert!(!m.select(&[], Some(suite)).unwrap().is_empty(), "{suite}");
        }
        let shipped = m.select(&[], Some("shipped")).unwrap();
        assert_eq!(shipped.len(), 4);
        let dir = tmpdir("shipped");
        let f = Fetcher::new(dir.clone(), root.join("datasets"), false);
        for e in shipped {
            assert!(!e.sha256.is_empty(), "{} shipped without a digest", e.name);
            match f.fetch(e).unwrap() {
                Outcome::Stored { verified, .. } => assert!(verified),
                o => panic!("{o:?}"),
            }
        }
        assert_eq!(files(&dir).len(), 4);
        fs::remove_dir_all(&dir).unwrap();
        assert!(m.select(&["no-such-matrix".into()], None).is_err());
    }
}
