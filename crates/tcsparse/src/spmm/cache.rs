//! The prepared-plan cache (`PrepareOptions::cache_dir`): what a preparation decided (permutation,
//! kernel and its schedule) stored on disk, so that the next preparation of the same matrix with
//! the same options, N, device and library version skips reordering and tuning.
//!
//! Key = SHA-256 over a domain tag, the library version, the matrix's pattern checksum
//! ([`pattern_checksum`]: an XXH3-128 tree over its shape, row offsets and column indices, in
//! parallel; with a GPU its leaves are hashed as the arrays go up, by the threads that copy
//! them), the
//! options (all but `cache_dir`), N and the device (backend, GPU name, SM count, compute
//! capability, planner preset). The values are not part of the key: nothing stored depends on
//! them (permutation, kernel, block counts and skeleton follow the pattern; a hit builds its
//! layout from the matrix it is given), so a matrix whose values changed since (a GNN layer's
//! new edge weights) hits. File `<dir>/<key hex>.plan`:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `TCSPPLAN` |
//! | 4 | format version (u32 LE, [`PLAN_VERSION`]) |
//! | 32 | the key again (a file renamed onto another key is stale) |
//! | 8 | payload length (u64 LE) |
//! | 32 | BLAKE3 of the payload |
//! | … | payload |
//!
//! Payload (little endian): mode u8 (0 symmetric, 1 row-only); kernel tag u8 and its parameters
//! (u32s; cuSPARSE, tag 1: one u8, its SpMM algorithm: 0 default, 1–3 CSR_ALG1–3, any other byte
//! corrupt; a kernel family's kernel: the family's tag and the parameters its file in `family/`
//! writes (`SpmmFamily::tag`, `FamilyKernel::encode`), e.g. the staged CSR kernel, tag 8: its
//! slice width (32 or 64), most rows and slots per window, and its stage copy, 0 bulk copies or
//! 1 `cp.async`); permutation flag u8, then length u32 and the `perm[new] = old` entries (u32); block
//! counts flag u8, then the prepared matrix's 8×8, 16×4 and 16×8 block counts (u64 each; the
//! planner's features, so that a hit needs no counting pass); the row-tile skeleton flag u8, then
//! (dense-tile row-tile kernels after a symmetric reordering) its window height u32, window prefix
//! and block columns (each a u32 length and its u32s: [`RowTileStructure`], so that a hit fills
//! the tiles on the GPU from the CSR; without a symmetric reordering every row's columns stay
//! sorted and the hit finds the skeleton on the GPU too); cuSPARSE's tuned time flag u8, then its
//! milliseconds (f64, finite and positive); the original kernel note (u32 length + UTF-8). Loading checks every field, the payload
//! checksum, the permutation (a bijection of the matrix's row count), the mode against the matrix
//! shape, the kernel parameters and the skeleton's invariants (and that it fits the kernel);
//! anything wrong is a [`StaleOrCorrupt`] reason and the caller prepares in
//! full and overwrites the entry.
//!
//! The layouts themselves are not stored: checking a stored BitTCF (payload checksum, source
//! checksum, validation) reads more bytes than building it again from the permuted CSR, which the
//! builders do at a few ns per nonzero; a dense-tile row-tile layout (4 bytes per tile slot,
//! 345 MB for 30.9 M nonzeros) is filled on the GPU from its skeleton (a 32nd of it, stored only
//! where the GPU cannot find it: 10.5 MB for clustered256k took 13 ms to read and check on a hit).

use std::io::Write;
use std::path::{Path, PathBuf};
use tcsparse_gpu::baselines::cusparse::SpmmAlg;

use sha2::{Digest, Sha256};
use tcsparse_formats::Csr;
use tcsparse_formats::rowtile::RowTileStructure;
use tcsparse_gpu::spmm::row_tile::{KERNELS as ROW_TILE_KERNELS, RowTileSchedule};
use tcsparse_reorder::{Mode, Permutation};

use super::codec::{Reader, StaleOrCorrupt, put_u32};
use super::family::FAMILIES;
use crate::{Engine, ExecKernel, PrepareOptions, ReorderChoice, ScheduleKind};

/// File magic.
const MAGIC: &[u8; 8] = b"TCSPPLAN";
/// Version of the file layout and payload encoding; bump on any change. (5: the cuSPARSE kernel
/// carries its SpMM algorithm; 6: the staged CSR kernel's tag and cuSPARSE's tuned time; 7: the
/// row-tile kernel index counts the TMA kernels, `KERNELS`' order.)
pub const PLAN_VERSION: u32 = 7;
const HEADER_LEN: usize = 8 + 4 + 32 + 8 + 32;
/// Largest row-tile skeleton stored (bytes of its two arrays); a larger one is left out.
const MAX_SKELETON_BYTES: usize = 1 << 30;
/// Largest payload accepted (a permutation of u32::MAX rows, the largest skeleton, slack).
const MAX_PAYLOAD: u64 = 4 * u32::MAX as u64 + MAX_SKELETON_BYTES as u64 + (1 << 20);

/// What a preparation decided, as stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlanEntry {
    pub mode: Mode,
    pub kernel: ExecKernel,
    pub perm: Option<Permutation>,
    /// The prepared matrix's block counts (8×8, 16×4, 16×8), when known.
    pub blocks: Option<[u64; 3]>,
    /// The skeleton of a dense-tile row-tile layout, when the kernel runs on one.
    pub row_tile: Option<RowTileStructure>,
    /// cuSPARSE's tuned milliseconds per product ([`crate::PrepareReport::cusparse_ms`]), so
    /// that a hit can report it without timing cuSPARSE again.
    pub cusparse_ms: Option<f64>,
    pub note: String,
}

/// Bytes per leaf of [`pattern_checksum`]'s tree: the pieces of a staged upload, so that an
/// upload can hash them as it copies them ([`tcsparse_gpu::Gpu::upload_inspected`]).
pub(crate) const PATTERN_LEAF_BYTES: usize = tcsparse_gpu::UPLOAD_PIECE_BYTES;

/// A 128-bit digest of the matrix's sparsity pattern: its shape, row offsets and column indices
/// (their little-endian bytes), as a tree of XXH3-128 hashes: every 256 KiB leaf of each array
/// hashed on its own (`pattern_leaf`, on all cores), then the leaves' digests with the
/// lengths. The same digest on any thread count. The values are left out: what the plan cache
/// stores depends only on the pattern.
///
/// Not a cryptographic hash, on purpose: it names a cache entry, and an entry found under the
/// name of another pattern can only give a valid plan for the wrong matrix (its permutation,
/// kernel and skeleton are checked against the matrix on load, and a hit builds its layout from
/// the matrix it is given), never a wrong product. XXH3 hashes at memory speed; BLAKE3 took 4.5 of
/// R-MAT scale 20's 6.3 ms cache hit, beside the matrix's upload (the entry's own payload keeps
/// its BLAKE3 checksum against corruption).
pub fn pattern_checksum(a: &Csr) -> [u8; 16] {
    pattern_checksum_of_leaves(a, leaf_digests(a.row_offsets()), leaf_digests(a.indices()))
}

/// One leaf's digest in [`pattern_checksum`]'s tree (`bytes`: at most [`PATTERN_LEAF_BYTES`]).
pub(crate) fn pattern_leaf(bytes: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(bytes)
}

/// [`pattern_checksum`] from the digests of the leaves of `a`'s row offsets and column indices
/// (in order; [`pattern_leaf`] of each [`PATTERN_LEAF_BYTES`] piece of their little-endian bytes).
pub(crate) fn pattern_checksum_of_leaves(
    a: &Csr,
    row_offset_leaves: Vec<u128>,
    index_leaves: Vec<u128>,
) -> [u8; 16] {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(b"tcsparse pattern checksum v3 (xxh3-128 tree of 256 KiB leaves)");
    for v in [a.rows(), a.cols(), a.nnz()] {
        h.update(&(v as u64).to_le_bytes());
    }
    for (leaves, bytes) in [
        (row_offset_leaves, std::mem::size_of_val(a.row_offsets())),
        (index_leaves, std::mem::size_of_val(a.indices())),
    ] {
        h.update(&(leaves.len() as u64 + 1).to_le_bytes());
        for d in leaves {
            h.update(&d.to_le_bytes());
        }
        h.update(&(bytes as u128).to_le_bytes());
    }
    h.digest128().to_le_bytes()
}

/// [`pattern_leaf`] of every [`PATTERN_LEAF_BYTES`] leaf of `x`'s little-endian bytes (the last
/// one shorter), the leaves hashed in parallel.
fn leaf_digests<T: bytemuck::Pod + Sync>(x: &[T]) -> Vec<u128> {
    use rayon::prelude::*;
    if cfg!(target_endian = "little") {
        let bytes: &[u8] = bytemuck::cast_slice(x);
        bytes
            .par_chunks(PATTERN_LEAF_BYTES)
            .map(pattern_leaf)
            .collect()
    } else {
        // (Each element's bytes reversed, a leaf at a time.)
        let per = (PATTERN_LEAF_BYTES / std::mem::size_of::<T>().max(1)).max(1);
        x.par_chunks(per)
            .map(|c| {
                let b: Vec<u8> = c
                    .iter()
                    .flat_map(|e| bytemuck::bytes_of(e).iter().rev().copied())
                    .collect();
                pattern_leaf(&b)
            })
            .collect()
    }
}

/// The cache entry of one (matrix, options, device) triple.
pub(crate) struct PlanCache {
    path: PathBuf,
    key: [u8; 32],
}

impl PlanCache {
    /// The entry for a matrix of pattern checksum `pattern` ([`pattern_checksum`]) prepared with
    /// `opts` on `engine`, in `dir`.
    pub fn new(dir: &Path, pattern: [u8; 16], opts: &PrepareOptions, engine: &Engine) -> Self {
        let mut h = Sha256::new();
        h.update(b"tcsparse prepared plan");
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.update(PLAN_VERSION.to_le_bytes());
        h.update(pattern);
        // Options: everything but the cache directory; a given permutation by its entries.
        let given = match &opts.reorder {
            ReorderChoice::Given(p) => {
                let mut g = Sha256::new();
                for x in p.as_slice() {
                    g.update(x.to_le_bytes());
                }
                Some(g.finalize())
            }
            _ => None,
        };
        let opts_key = PrepareOptions {
            cache_dir: None,
            reorder: match &opts.reorder {
                ReorderChoice::Given(_) => ReorderChoice::Method("<given>".into()),
                r => r.clone(),
            },
            ..opts.clone()
        };
        h.update(format!("{opts_key:?}").as_bytes());
        if let Some(g) = given {
            h.update(g);
        }
        // Device.
        h.update(format!("{:?}", engine.backend()).as_bytes());
        if let Some(gpu) = &engine.gpu {
            let i = gpu.info();
            h.update(
                format!(
                    "{}|{}|{:?}|{}",
                    i.name, i.sm_count, i.compute_capability, i.memory_bytes
                )
                .as_bytes(),
            );
        }
        h.update(format!("{:?}", engine.device).as_bytes());
        let key: [u8; 32] = h.finalize().into();
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        Self {
            path: dir.join(format!("{hex}.plan")),
            key,
        }
    }

    /// The entry's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `Ok(None)`: no entry. `Err`: an entry that cannot be trusted, and why.
    ///
    /// The entry must be a regular file (a FIFO, a device such as a link to `/dev/zero`, or a
    /// directory is refused without blocking or reading, through
    /// [`tcsparse_formats::file::open_regular`]); its 84-byte header is read and checked first
    /// (magic, version, key, and a payload length that fits both the file and what a plan for `a`
    /// can hold), and only then the payload, so a damaged or oversized entry costs a header read.
    pub fn load(&self, a: &Csr) -> Result<Option<PlanEntry>, StaleOrCorrupt> {
        use tcsparse_formats::file::{FileError, open_regular, read_exact_vec};
        let t = std::time::Instant::now();
        let f = match open_regular(&self.path) {
            Ok(f) => f,
            Err(FileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(e) => return Err(format!("unreadable: {e}")),
        };
        let unreadable = |e: std::io::Error| format!("unreadable: {e}");
        let mut file = &f.file;
        let head_len = (HEADER_LEN as u64).min(f.len);
        let header = read_exact_vec(&mut std::io::Read::take(&mut file, head_len), head_len)
            .map_err(unreadable)?;
        let len = self.check_header(&header, a)?;
        if f.len != HEADER_LEN as u64 + len {
            return Err(format!(
                "corrupt: {} bytes, header says {}",
                f.len,
                HEADER_LEN as u64 + len
            ));
        }
        let payload =
            read_exact_vec(&mut std::io::Read::take(&mut file, len), len).map_err(unreadable)?;
        let read_ms = t.elapsed().as_secs_f64() * 1e3;
        let entry = check_payload(&header, &payload, a);
        tracing::debug!(
            "plan cache entry of {} bytes read in {read_ms:.1} ms, checked and decoded in {:.1} ms",
            HEADER_LEN + payload.len(),
            t.elapsed().as_secs_f64() * 1e3 - read_ms
        );
        entry.map(Some)
    }

    /// Checks the header at the start of `bytes` (at least [`HEADER_LEN`] bytes) against this
    /// entry's key and `a`; returns the payload length it declares.
    fn check_header(&self, bytes: &[u8], a: &Csr) -> Result<u64, StaleOrCorrupt> {
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err("not a plan cache file (bad magic or truncated header)".into());
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().map_err(|_| "header")?);
        if version != PLAN_VERSION {
            return Err(format!(
                "stale: plan cache version {version}, this build reads {PLAN_VERSION}"
            ));
        }
        if bytes[12..44] != self.key {
            return Err("stale: the entry was written for another key".into());
        }
        let len = u64::from_le_bytes(bytes[44..52].try_into().map_err(|_| "header")?);
        let max = max_payload(a);
        if len > max {
            return Err(format!(
                "corrupt: a payload of {len} bytes, more than a plan for this matrix holds ({max})"
            ));
        }
        Ok(len)
    }

    /// Writes the entry atomically (temporary file in the same directory, then rename).
    pub fn store(&self, e: &PlanEntry) -> Result<(), String> {
        let payload = encode_payload(e);
        let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&PLAN_VERSION.to_le_bytes());
        bytes.extend_from_slice(&self.key);
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&payload_checksum(&payload));
        bytes.extend_from_slice(&payload);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = self.path.with_extension(format!(
            "tmp.{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

/// The largest payload a plan for `a` can hold: the fixed fields, a permutation of its rows, a
/// row-tile skeleton (a window prefix and at most 8 block columns per nonzero) and a note.
fn max_payload(a: &Csr) -> u64 {
    let rows = a.rows() as u64;
    let nnz = a.nnz() as u64;
    (4 * rows + 4 * (rows + 2) + 32 * nnz + (1 << 20)).min(MAX_PAYLOAD)
}

/// Checks the payload against the header's checksum (`header`: at least [`HEADER_LEN`] bytes)
/// and decodes it.
fn check_payload(header: &[u8], payload: &[u8], a: &Csr) -> Result<PlanEntry, StaleOrCorrupt> {
    if payload_checksum(payload) != header[52..84] {
        return Err("corrupt: payload checksum mismatch".into());
    }
    decode_payload(payload, a)
}

/// BLAKE3 of a payload, on all cores (a row-tile skeleton runs to megabytes).
fn payload_checksum(payload: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update_rayon(payload);
    h.finalize().into()
}

/// The byte that stores cuSPARSE's SpMM algorithm (stable: never renumber, add new ones after).
fn alg_byte(alg: SpmmAlg) -> u8 {
    match alg {
        SpmmAlg::Default => 0,
        SpmmAlg::CsrAlg1 => 1,
        SpmmAlg::CsrAlg2 => 2,
        SpmmAlg::CsrAlg3 => 3,
    }
}

/// The algorithm [`alg_byte`] stored as `b`, `None` for a byte it never writes.
fn alg_of_byte(b: u8) -> Option<SpmmAlg> {
    match b {
        0 => Some(SpmmAlg::Default),
        1 => Some(SpmmAlg::CsrAlg1),
        2 => Some(SpmmAlg::CsrAlg2),
        3 => Some(SpmmAlg::CsrAlg3),
        _ => None,
    }
}

fn encode_payload(e: &PlanEntry) -> Vec<u8> {
    let mut out = Vec::new();
    out.push(match e.mode {
        Mode::Symmetric => 0,
        Mode::RowOnly => 1,
    });
    match e.kernel {
        ExecKernel::Cusparse { alg } => {
            out.push(1);
            out.push(alg_byte(alg));
        }
        ExecKernel::AccSpmm { schedule } | ExecKernel::AccSpmmPaper { schedule } => {
            out.push(if matches!(e.kernel, ExecKernel::AccSpmmPaper { .. }) {
                5
            } else {
                3
            });
            let (tag, a, b) = match schedule {
                ScheduleKind::Unbalanced => (0, 0, 0),
                ScheduleKind::Balanced => (1, 0, 0),
                ScheduleKind::Packed(k) => (2, k, 0),
                ScheduleKind::PackedCached { windows, log2_rows } => {
                    (3, windows, u32::from(log2_rows))
                }
            };
            for x in [tag, a, b] {
                put_u32(&mut out, x);
            }
        }
        ExecKernel::RowTile { kernel, schedule } => {
            out.push(4);
            let idx = ROW_TILE_KERNELS
                .iter()
                .position(|k| *k == kernel)
                .unwrap_or(usize::MAX) as u32;
            let (tag, x) = match schedule {
                RowTileSchedule::Packed(k) => (0, k),
                RowTileSchedule::Split { max_blocks } => (1, max_blocks),
            };
            for v in [idx, tag, x] {
                put_u32(&mut out, v);
            }
        }
        ExecKernel::CpuBitTcf => out.push(0),
        family => match family.as_family() {
            Some(k) => {
                out.push(k.family().tag());
                k.encode(&mut out);
            }
            // (Every other kernel is a family's; a tag no kernel has reads back as corrupt.)
            None => out.push(u8::MAX),
        },
    }
    match &e.perm {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            put_u32(&mut out, p.len() as u32);
            for &x in p.as_slice() {
                put_u32(&mut out, x);
            }
        }
    }
    match e.blocks {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            for x in b {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
    }
    match &e.row_tile {
        Some(s)
            if 4 * (s.row_window_offset().len() + s.block_cols().len()) <= MAX_SKELETON_BYTES =>
        {
            out.push(1);
            put_u32(&mut out, s.window_rows() as u32);
            for part in [s.row_window_offset(), s.block_cols()] {
                put_u32(&mut out, part.len() as u32);
                if cfg!(target_endian = "little") {
                    out.extend_from_slice(bytemuck::cast_slice::<u32, u8>(part));
                } else {
                    part.iter().for_each(|&x| put_u32(&mut out, x));
                }
            }
        }
        _ => out.push(0),
    }
    match e.cusparse_ms {
        None => out.push(0),
        Some(ms) => {
            out.push(1);
            out.extend_from_slice(&ms.to_le_bytes());
        }
    }
    put_u32(&mut out, e.note.len() as u32);
    out.extend_from_slice(e.note.as_bytes());
    out
}

fn decode_payload(payload: &[u8], a: &Csr) -> Result<PlanEntry, StaleOrCorrupt> {
    let mut r = Reader { b: payload };
    let mode = match r.u8()? {
        0 => Mode::Symmetric,
        1 => Mode::RowOnly,
        t => return Err(format!("corrupt: mode tag {t}")),
    };
    if mode == Mode::Symmetric && a.rows() != a.cols() {
        return Err("corrupt: symmetric mode for a rectangular matrix".into());
    }
    let kernel = match r.u8()? {
        0 => ExecKernel::CpuBitTcf,
        1 => {
            let b = r.u8()?;
            let alg =
                alg_of_byte(b).ok_or_else(|| format!("corrupt: cuSPARSE SpMM algorithm {b}"))?;
            ExecKernel::Cusparse { alg }
        }
        kernel_tag @ (3 | 5) => {
            let (tag, x, y) = (r.u32()?, r.u32()?, r.u32()?);
            let schedule = match tag {
                0 => ScheduleKind::Unbalanced,
                1 => ScheduleKind::Balanced,
                2 if x >= 1 => ScheduleKind::Packed(x),
                3 if x >= 1
                    && (3..=u32::from(tcsparse_gpu::acc_spmm::MAX_CACHE_LOG2)).contains(&y) =>
                {
                    ScheduleKind::PackedCached {
                        windows: x,
                        log2_rows: y as u8,
                    }
                }
                _ => return Err(format!("corrupt: Acc-SpMM schedule ({tag}, {x}, {y})")),
            };
            if kernel_tag == 5 {
                ExecKernel::AccSpmmPaper { schedule }
            } else {
                ExecKernel::AccSpmm { schedule }
            }
        }
        4 => {
            let (idx, tag, x) = (r.u32()?, r.u32()?, r.u32()?);
            let kernel = *ROW_TILE_KERNELS
                .get(idx as usize)
                .ok_or_else(|| format!("corrupt: row-tile kernel {idx}"))?;
            let schedule = match tag {
                0 if x >= 1 => RowTileSchedule::Packed(x),
                1 if x >= 1 => RowTileSchedule::Split { max_blocks: x },
                _ => return Err(format!("corrupt: row-tile schedule ({tag}, {x})")),
            };
            ExecKernel::RowTile { kernel, schedule }
        }
        // (7, cuSPARSE in f16 / bf16, is no longer written: no preparation keeps it.)
        t => match FAMILIES.iter().find(|f| f.tag() == t) {
            Some(f) => f.decode(&mut r)?,
            None => return Err(format!("corrupt: kernel tag {t}")),
        },
    };
    let perm = match r.u8()? {
        0 => None,
        1 => {
            let n = r.u32()? as usize;
            if n != a.rows() || r.b.len() < 4 * n {
                return Err(format!(
                    "corrupt: permutation of {n} rows for a matrix of {}",
                    a.rows()
                ));
            }
            let v: Vec<u32> = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
            Some(Permutation::new(v).map_err(|e| format!("corrupt: {e}"))?)
        }
        t => return Err(format!("corrupt: permutation flag {t}")),
    };
    let blocks = match r.u8()? {
        0 => None,
        1 => {
            let b = [r.u64()?, r.u64()?, r.u64()?];
            // Every block holds a nonzero; a 16×8 block covers at least one 16×4 brick.
            let nnz = a.nnz() as u64;
            if b.iter().any(|&x| x > nnz) || b[2] > b[1] || (nnz > 0 && b.contains(&0)) {
                return Err(format!("corrupt: block counts {b:?} for {nnz} nonzeros"));
            }
            Some(b)
        }
        t => return Err(format!("corrupt: block counts flag {t}")),
    };
    let row_tile = match r.u8()? {
        0 => None,
        1 => {
            let window_rows = r.u32()? as usize;
            let windows = a.rows().div_ceil(window_rows.max(1));
            let rwo = r.u32_array(windows + 1, "a row-tile window prefix")?;
            // Every block holds a nonzero: at most 8 ids per nonzero.
            let cols = r.u32_array(8 * a.nnz(), "row-tile block columns")?;
            let s = RowTileStructure::new(a.rows(), a.cols(), window_rows, rwo, cols)
                .map_err(|e| format!("corrupt: {e}"))?;
            if !matches!(kernel, ExecKernel::RowTile { kernel: k, .. }
                if k.dense_tiles && k.window_rows as usize == window_rows)
            {
                return Err("corrupt: a row-tile skeleton for another kernel".into());
            }
            Some(s)
        }
        t => return Err(format!("corrupt: row-tile skeleton flag {t}")),
    };
    let cusparse_ms = match r.u8()? {
        0 => None,
        1 => {
            let ms = f64::from_bits(r.u64()?);
            if !(ms.is_finite() && ms > 0.0) {
                return Err(format!("corrupt: cuSPARSE's time {ms} ms"));
            }
            Some(ms)
        }
        t => return Err(format!("corrupt: cuSPARSE time flag {t}")),
    };
    let len = r.u32()? as usize;
    if r.b.len() != len {
        return Err("corrupt: note length".into());
    }
    let note = String::from_utf8(r.b.to_vec()).map_err(|_| "corrupt: note is not UTF-8")?;
    Ok(PlanEntry {
        mode,
        kernel,
        perm,
        blocks,
        row_tile,
        cusparse_ms,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix() -> Csr {
        tcsparse_formats::csr::csr_from_triplets(
            20,
            20,
            &(0..20u32)
                .map(|r| (r, (r * 7) % 20, 1.0))
                .collect::<Vec<_>>(),
        )
        .unwrap()
    }

    /// A FIFO, a link to `/dev/zero`, a directory and oversized (sparse) files at an entry's path
    /// are refused from their type or their 84-byte header, without blocking or reading on.
    #[cfg(unix)]
    #[test]
    fn special_or_oversized_entries_are_refused_without_reading_them() {
        let dir =
            std::env::temp_dir().join(format!("tcsparse-plan-special-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = matrix();
        let at = |name: &str| {
            let path = dir.join(name);
            let _ = std::fs::remove_file(&path);
            PlanCache { path, key: [7; 32] }
        };
        let t = std::time::Instant::now();
        let fifo = at("fifo.plan");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo.path)
            .status()
            .unwrap();
        assert!(made.success());
        let why = fifo.load(&a).unwrap_err();
        assert!(why.contains("FIFO"), "{why}");
        let zero = at("zero.plan");
        std::os::unix::fs::symlink("/dev/zero", &zero.path).unwrap();
        let why = zero.load(&a).unwrap_err();
        assert!(why.contains("character device"), "{why}");
        let d = at("dir.plan");
        std::fs::create_dir_all(&d.path).unwrap();
        assert!(d.load(&a).unwrap_err().contains("directory"));
        // A valid entry grown to 3 GiB (a sparse file): its length disagrees with its header.
        let e = PlanEntry {
            mode: Mode::RowOnly,
            kernel: ExecKernel::CsrCuda(crate::CsrKernel { chunk_nnz: 64 }),
            perm: None,
            blocks: None,
            row_tile: None,
            cusparse_ms: None,
            note: "n".into(),
        };
        let big = at("big.plan");
        big.store(&e).unwrap();
        assert_eq!(big.load(&a), Ok(Some(e.clone())));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&big.path)
            .unwrap();
        f.set_len(3 << 30).unwrap();
        let why = big.load(&a).unwrap_err();
        assert!(why.contains("header says"), "{why}");
        // A header that declares the 3 GiB as its payload: more than a plan of this matrix holds.
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&big.path)
            .unwrap();
        f.seek(SeekFrom::Start(44)).unwrap();
        f.write_all(&((3u64 << 30) - HEADER_LEN as u64).to_le_bytes())
            .unwrap();
        drop(f);
        let why = big.load(&a).unwrap_err();
        assert!(
            why.contains("more than a plan for this matrix holds"),
            "{why}"
        );
        assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", t.elapsed());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn row_tile_skeletons_round_trip_and_broken_or_foreign_ones_are_refused() {
        use tcsparse_formats::rowtile::RowTileTcf;
        use tcsparse_gpu::spmm::row_tile::RowTileKernel;
        let a = matrix();
        let m = RowTileTcf::from_csr(&a, 16).unwrap();
        let kernel = |k| ExecKernel::RowTile {
            kernel: k,
            schedule: RowTileSchedule::Split { max_blocks: 4 },
        };
        let mut e = PlanEntry {
            mode: Mode::RowOnly,
            kernel: kernel(RowTileKernel::TC16D),
            perm: None,
            blocks: Some([3, 5, 2]),
            row_tile: Some(m.structure()),
            cusparse_ms: None,
            note: "n".into(),
        };
        assert_eq!(decode_payload(&encode_payload(&e), &a), Ok(e.clone()));
        // A skeleton for a kernel of another height or with masked tiles.
        for other in [RowTileKernel::TC32D, RowTileKernel::TC16] {
            let mut f = e.clone();
            f.kernel = kernel(other);
            let why = decode_payload(&encode_payload(&f), &a).unwrap_err();
            assert!(why.contains("another kernel"), "{why}");
        }
        // Every byte of the skeleton's arrays changed in turn: refused, or (a column id that still
        // keeps the invariants) accepted as a different skeleton, never a panic.
        let bytes = encode_payload(&e);
        let start = bytes.len() - 4 - e.note.len() - 4 * m.block_cols().len();
        for i in (start - 4 * (m.row_window_offset().len() + 1) - 4..start).chain(start..start + 64)
        {
            let mut b = bytes.clone();
            b[i] ^= 0x5A;
            if let Ok(got) = decode_payload(&b, &a) {
                assert_ne!(got, e, "byte {i}");
            }
        }
        // A skeleton claiming more column ids than 8 per nonzero.
        let mut b = bytes.clone();
        let at = start - 4;
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            decode_payload(&b, &a)
                .unwrap_err()
                .contains("block columns")
        );
        e.row_tile = None;
        assert_eq!(decode_payload(&encode_payload(&e), &a), Ok(e));
    }

    #[test]
    fn cusparse_algorithms_round_trip_and_unknown_ones_are_refused() {
        let a = matrix();
        let entry = |alg| PlanEntry {
            mode: Mode::RowOnly,
            kernel: ExecKernel::Cusparse { alg },
            perm: None,
            blocks: Some([3, 5, 2]),
            row_tile: None,
            cusparse_ms: None,
            note: "tuned".into(),
        };
        let mut bytes_seen = Vec::new();
        for alg in SpmmAlg::CANDIDATES {
            let e = entry(alg);
            let bytes = encode_payload(&e);
            // Mode, kernel tag 1, then the algorithm's byte.
            assert_eq!(bytes[1], 1, "{alg:?}");
            bytes_seen.push(bytes[2]);
            assert_eq!(decode_payload(&bytes, &a), Ok(e), "{alg:?}");
        }
        // Each algorithm its own byte.
        bytes_seen.sort_unstable();
        bytes_seen.dedup();
        assert_eq!(bytes_seen.len(), SpmmAlg::CANDIDATES.len());
        // A byte no algorithm writes: corrupt, never a guess.
        let mut bytes = encode_payload(&entry(SpmmAlg::CsrAlg3));
        for bad in [4u8, 0x7f, 0xff] {
            bytes[2] = bad;
            let why = decode_payload(&bytes, &a).unwrap_err();
            assert!(why.starts_with("corrupt:"), "{why}");
            assert!(why.contains("cuSPARSE SpMM algorithm"), "{why}");
        }
        // A payload cut right after the kernel tag: corrupt, not a panic.
        let cut = &encode_payload(&entry(SpmmAlg::Default))[..2];
        assert!(decode_payload(cut, &a).unwrap_err().starts_with("corrupt:"));
    }

    #[test]
    fn row_tile_kernels_in_other_arithmetic_are_not_named_and_refused() {
        // The cache names the TF32 row-tile kernels only (3×TF32, f16 and bf16 preparations
        // do not use it): any other decodes as corrupt, never as a TF32 kernel.
        use tcsparse_gpu::spmm::row_tile::{RowTileArith, RowTileKernel};
        let a = matrix();
        for arith in [RowTileArith::Tf32x3, RowTileArith::F16, RowTileArith::Bf16] {
            let e = PlanEntry {
                mode: Mode::RowOnly,
                kernel: ExecKernel::RowTile {
                    kernel: RowTileKernel::TC16.with_arith(arith),
                    schedule: RowTileSchedule::Packed(1),
                },
                perm: None,
                blocks: None,
                row_tile: None,
                cusparse_ms: None,
                note: "n".into(),
            };
            let why = decode_payload(&encode_payload(&e), &a).unwrap_err();
            assert!(why.contains("corrupt: row-tile kernel"), "{arith:?}: {why}");
        }
    }

    /// An entry for `kernel` in the original order with nothing optional stored.
    fn plain_entry(kernel: ExecKernel) -> PlanEntry {
        PlanEntry {
            mode: Mode::RowOnly,
            kernel,
            perm: None,
            blocks: None,
            row_tile: None,
            cusparse_ms: None,
            note: "n".into(),
        }
    }

    /// Why `e`'s payload with byte `at` set to `byte` is refused for `a`.
    fn refused_with(e: &PlanEntry, at: usize, byte: u8, a: &Csr) -> String {
        let mut bytes = encode_payload(e);
        bytes[at] = byte;
        decode_payload(&bytes, a).unwrap_err()
    }

    #[test]
    fn cusparse_time_round_trips_and_impossible_ones_are_refused() {
        let a = matrix();
        let e = |cusparse_ms| PlanEntry {
            cusparse_ms,
            ..plain_entry(ExecKernel::CsrCuda(crate::CsrKernel { chunk_nnz: 64 }))
        };
        for ms in [None, Some(0.0421), Some(1234.5)] {
            assert_eq!(decode_payload(&encode_payload(&e(ms)), &a), Ok(e(ms)));
        }
        // The time sits right before the note's length and bytes: flag 1, then 8 bytes.
        let tail = 4 + e(None).note.len();
        let at = encode_payload(&e(Some(1.0))).len() - tail - 8;
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut bytes = encode_payload(&e(Some(1.0)));
            bytes[at..at + 8].copy_from_slice(&bad.to_le_bytes());
            let why = decode_payload(&bytes, &a).unwrap_err();
            assert!(why.starts_with("corrupt: cuSPARSE's time"), "{bad}: {why}");
        }
        let flag = encode_payload(&e(None)).len() - tail - 1;
        assert_eq!(
            refused_with(&e(None), flag, 2, &a),
            "corrupt: cuSPARSE time flag 2"
        );
    }

    #[test]
    fn staged_kernels_round_trip_and_impossible_cuts_are_refused() {
        use crate::StagedKernel;
        use tcsparse_formats::staged::StagedSpec;
        use tcsparse_gpu::spmm::staged::{Slice, StageCopy};
        let a = matrix();
        let e = |slice: Slice, spec, copy| {
            plain_entry(ExecKernel::Staged(StagedKernel {
                slice,
                spec: StagedSpec {
                    slot_cap: spec,
                    ..slice.default_spec()
                },
                copy,
            }))
        };
        for slice in Slice::ALL {
            for cap in [1, slice.default_spec().slot_cap, 1 << 16] {
                for copy in StageCopy::ALL {
                    let entry = e(slice, cap, copy);
                    let bytes = encode_payload(&entry);
                    // Mode, then the kernel's tag: 8, a tag of its own.
                    assert_eq!(bytes[1], 8);
                    assert_eq!(decode_payload(&bytes, &a), Ok(entry));
                }
            }
        }
        // The tag is followed by the slice width, the row cap, the slot cap and the stage copy
        // (u32 LE each).
        let entry = e(Slice::S32, 768, StageCopy::Async);
        for (x, copy) in [(0u32, StageCopy::Bulk), (1, StageCopy::Async)] {
            let mut b = encode_payload(&entry);
            b[14..18].copy_from_slice(&x.to_le_bytes());
            assert_eq!(decode_payload(&b, &a), Ok(e(Slice::S32, 768, copy)));
        }
        assert_eq!(
            refused_with(&entry, 14, 2, &a),
            "corrupt: staged stage copy 2"
        );
        assert_eq!(
            refused_with(&entry, 2, 48, &a),
            "corrupt: staged slice of 48 columns"
        );
        let rows_zero = {
            let mut b = encode_payload(&entry);
            b[6..10].copy_from_slice(&0u32.to_le_bytes());
            decode_payload(&b, &a).unwrap_err()
        };
        assert!(
            rows_zero.starts_with("corrupt: staged window cut"),
            "{rows_zero}"
        );
        for cap in [0u32, (1 << 16) + 1] {
            let mut b = encode_payload(&entry);
            b[10..14].copy_from_slice(&cap.to_le_bytes());
            let why = decode_payload(&b, &a).unwrap_err();
            assert!(
                why.starts_with("corrupt: staged window cut"),
                "{cap}: {why}"
            );
        }
        // Cut after the tag: corrupt, not a panic.
        let cut = &encode_payload(&entry)[..6];
        assert!(decode_payload(cut, &a).unwrap_err().starts_with("corrupt:"));
    }

    #[test]
    fn every_family_kernel_round_trips_under_its_tag_and_a_cut_is_corrupt() {
        let a = matrix();
        for f in super::super::family::FAMILIES {
            for kernel in f.examples() {
                let e = plain_entry(kernel);
                let bytes = encode_payload(&e);
                // Mode, then the family's tag and its parameters.
                assert_eq!(bytes[1], f.tag(), "{kernel}");
                assert_eq!(decode_payload(&bytes, &a), Ok(e.clone()), "{kernel}");
                // Cut anywhere before the optional fields: corrupt, never a panic or a kernel.
                let fixed = bytes.len() - (1 + 1 + 1 + 1 + 4 + e.note.len());
                for cut in 2..fixed {
                    let why = decode_payload(&bytes[..cut], &a).unwrap_err();
                    assert!(why.starts_with("corrupt:"), "{kernel}, cut at {cut}: {why}");
                }
            }
        }
    }

    #[test]
    fn the_retired_half_cusparse_tag_is_refused_as_corrupt() {
        let e = plain_entry(ExecKernel::Cusparse {
            alg: SpmmAlg::CsrAlg1,
        });
        // Mode, then the kernel's tag (1, cuSPARSE in f32): 7 was cuSPARSE in f16 / bf16.
        assert_eq!(encode_payload(&e)[1], 1);
        assert_eq!(refused_with(&e, 1, 7, &matrix()), "corrupt: kernel tag 7");
    }

    #[test]
    fn block_counts_round_trip_and_impossible_ones_are_refused() {
        let a = matrix();
        let mut e = PlanEntry {
            mode: Mode::Symmetric,
            kernel: ExecKernel::CsrCuda(crate::CsrKernel { chunk_nnz: 64 }),
            perm: None,
            blocks: Some([3, 5, 2]),
            row_tile: None,
            cusparse_ms: None,
            note: "n".into(),
        };
        assert_eq!(decode_payload(&encode_payload(&e), &a), Ok(e.clone()));
        e.blocks = None;
        assert_eq!(decode_payload(&encode_payload(&e), &a), Ok(e.clone()));
        // More blocks than nonzeros, more 16×8 blocks than 16×4 bricks, no block at all.
        for bad in [[21, 5, 2], [3, 5, 6], [0, 5, 2]] {
            e.blocks = Some(bad);
            let why = decode_payload(&encode_payload(&e), &a).unwrap_err();
            assert!(why.contains("block counts"), "{why}");
        }
    }
}
