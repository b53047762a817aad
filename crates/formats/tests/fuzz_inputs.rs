//! Structural fuzzing on stable Rust (issue 21): proptest strategies build Matrix Market text,
//! `.npz` containers (with members repeated under one name: always refused), cache files,
//! generator specs and special paths (FIFOs, device links, directories, dangling or looping links,
//! sparse 3 GiB files, given to every reader of files) from their grammar, then mutate them; every
//! input must give `Ok` or a typed error — never a panic, an allocation beyond the budget or a
//! silently different matrix (where an oracle exists: unmutated inputs must decode to the matrix
//! they were built from, a cache file must decode to its source or not at all).
//!
//! Each target runs for `TCSPARSE_FUZZ_SECS` seconds (default 2, so CI stays fast) from the seed
//! `TCSPARSE_FUZZ_SEED` (default fixed; `clock` for a fresh one; printed, with the failing input,
//! on a panic) and
//! prints how many inputs it tried (`cargo test -p tcsparse-formats --test fuzz_inputs -- --nocapture`).
//! A long run: `TCSPARSE_FUZZ_SEED=clock TCSPARSE_FUZZ_SECS=150 cargo test --release -p tcsparse-formats --test fuzz_inputs
//! -- --nocapture --test-threads=1` under `ulimit -v`.

#[path = "support/npz_writer.rs"]
mod npz_writer;

use std::fmt::Debug;
use std::io::{Cursor, Write};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::str::FromStr;
use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use sha2::{Digest, Sha256};
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::cache::{self, CachedFormat, HEADER_LEN};
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::generate::GeneratorSpec;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::metcf::MeTcf;
use tcsparse_formats::{Csr, Limits, mtx, npz};

/// Budget for every reader in these tests: far above what the generated inputs really hold, far
/// below what their declared sizes would take.
const LIMIT: u64 = 32 << 20;
/// An input that takes longer than this is a failure (a busy loop).
const SLOW: Duration = Duration::from_secs(20);

fn secs() -> f64 {
    std::env::var("TCSPARSE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

/// `TCSPARSE_FUZZ_SEED`: a number, or `clock` for a fresh seed each run; unset, a fixed seed (CI
/// sees the same inputs, as far as its time budget reaches).
fn seed() -> u64 {
    match std::env::var("TCSPARSE_FUZZ_SEED").ok().as_deref() {
        Some("clock") => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
        Some(s) => s.parse().expect("TCSPARSE_FUZZ_SEED is a u64 or `clock`"),
        None => 21,
    }
}

/// Draws inputs from `strategy` and runs `check` on each until the time budget is spent.
fn fuzz<S: Strategy>(name: &str, strategy: S, check: impl Fn(&S::Value))
where
    S::Value: Debug,
{
    Limits::set_global(Limits::new(LIMIT));
    let seed = seed();
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(name.len() as u64).to_le_bytes());
    for (k, b) in name.bytes().enumerate() {
        key[16 + k % 16] ^= b;
    }
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    );
    let budget = secs();
    let start = Instant::now();
    let mut count = 0u64;
    while start.elapsed().as_secs_f64() < budget {
        let value = strategy
            .new_tree(&mut runner)
            .expect("strategy draws")
            .current();
        let t = Instant::now();
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| check(&value))) {
            eprintln!("fuzz {name}: seed {seed}, input #{count} panicked on {value:?}");
            resume_unwind(p);
        }
        assert!(
            t.elapsed() < SLOW,
            "fuzz {name}: seed {seed}, input #{count} took {:?}: {value:?}",
            t.elapsed()
        );
        count += 1;
    }
    println!(
        "fuzz {name}: {count} inputs in {:.1} s (seed {seed})",
        start.elapsed().as_secs_f64()
    );
}

/// Byte-level damage applied after a structured input is built.
#[derive(Clone, Debug)]
enum Damage {
    Flip(usize, u8),
    Put32(usize, u32),
    Put64(usize, u64),
    Cut(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    let word32 = prop_oneof![
        Just(0u32),
        Just(1),
        Just(0xFFFF),
        Just(0xFFFF_FFFF),
        Just(0x7FFF_FFFF),
        any::<u32>()
    ];
    let word64 = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 7),
        Just(1 << 40),
        any::<u64>()
    ];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(p, x)| Damage::Flip(p, x)),
        (any::<usize>(), word32).prop_map(|(p, x)| Damage::Put32(p, x)),
        (any::<usize>(), word64).prop_map(|(p, x)| Damage::Put64(p, x)),
        any::<usize>().prop_map(Damage::Cut),
    ]
}

fn apply(bytes: &mut Vec<u8>, damage: &[Damage]) {
    for d in damage {
        if bytes.is_empty() {
            return;
        }
        let len = bytes.len();
        match *d {
            Damage::Flip(p, x) => bytes[p % len] ^= x,
            Damage::Put32(p, x) => {
                let p = p % len;
                let end = (p + 4).min(len);
                bytes[p..end].copy_from_slice(&x.to_le_bytes()[..end - p]);
            }
            Damage::Put64(p, x) => {
                let p = p % len;
                let end = (p + 8).min(len);
                bytes[p..end].copy_from_slice(&x.to_le_bytes()[..end - p]);
            }
            Damage::Cut(p) => bytes.truncate(p % (len + 1)),
        }
    }
}

// ---------------------------------------------------------------- Matrix Market

fn number_token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u64..12).prop_map(|v| v.to_string()),
        1 => prop::sample::select(vec![
            "0", "+5", "-1", "4294967295", "4294967296", "2147483648", "2000000000",
            "18446744073709551615", "18446744073709551616", "1e3", "x", "1.0", "99999999999999999999999",
        ])
        .prop_map(str::to_string),
    ]
}

fn value_token() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (-50i32..50).prop_map(|v| format!("{}", v as f32 / 4.0)),
        1 => any::<f32>().prop_map(|v| format!("{v:?}")),
        1 => prop::sample::select(vec![
            "nan", "-nan", "NaN", "inf", "-inf", "infinity", "1e39", "-1e-46", "0x10", "1,5", "3",
            "-9223372036854775808", "9223372036854775808", "",
        ])
        .prop_map(str::to_string),
    ]
}

#[derive(Clone, Debug)]
struct MtxCase {
    banner: String,
    size: Vec<String>,
    lines: Vec<Vec<String>>,
    gzip: bool,
    damage: Vec<Damage>,
}

fn mtx_case() -> impl Strategy<Value = MtxCase> {
    let field = prop::sample::select(vec![
        "real", "double", "integer", "pattern", "complex", "REAL", "bogus",
    ]);
    let symmetry = prop::sample::select(vec![
        "general",
        "symmetric",
        "skew-symmetric",
        "hermitian",
        "General",
        "x",
    ]);
    let banner = (field, symmetry, 0..8u8).prop_map(|(f, s, k)| match k {
        0 => format!("%%MatrixMarket matrix array {f} {s}"),
        1 => format!("%%MatrixMarket vector coordinate {f} {s}"),
        2 => format!("%%MatrixMarket matrix coordinate {f}"),
        _ => format!("%%MatrixMarket matrix coordinate {f} {s}"),
    });
    let size = vec(number_token(), 2..=4);
    let entry = prop_oneof![
        6 => (number_token(), number_token(), value_token()).prop_map(|(r, c, v)| vec![r, c, v]),
        1 => (number_token(), number_token()).prop_map(|(r, c)| vec![r, c]),
        1 => vec(value_token(), 0..5),
        1 => Just(vec!["%".to_string(), "comment".into()]),
    ];
    (
        banner,
        size,
        vec(entry, 0..24),
        any::<bool>(),
        prop_oneof![3 => Just(vec![]), 1 => vec(damage(), 1..4)],
    )
        .prop_map(|(banner, size, lines, gzip, damage)| MtxCase {
            banner,
            size,
            lines,
            gzip,
            damage,
        })
}

fn render_mtx(c: &MtxCase) -> Vec<u8> {
    let mut text = format!("{}\n% fuzz\n{}\n", c.banner, c.size.join(" "));
    for l in &c.lines {
        text.push_str(&l.join(" "));
        text.push('\n');
    }
    let mut bytes = text.into_bytes();
    apply(&mut bytes, &c.damage);
    if c.gzip {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&bytes).unwrap();
        bytes = e.finish().unwrap();
    }
    bytes
}

#[test]
fn fuzz_matrix_market_reader() {
    fuzz("matrix-market", mtx_case(), |c| {
        let bytes = render_mtx(c);
        let limits = Limits::new(LIMIT);
        if let Ok(m) = mtx::read_matrix_market_from_with(Cursor::new(&bytes), &limits) {
            assert_eq!(m.row_offsets().len(), m.rows() + 1);
            assert_eq!(m.row_offsets()[0], 0);
            assert_eq!(*m.row_offsets().last().unwrap() as usize, m.nnz());
        }
    });
}

/// A small random matrix with any f32 values (NaN of either sign, ±inf, subnormals).
fn small_matrix() -> impl Strategy<Value = Csr> {
    (0usize..9, 0usize..9)
        .prop_flat_map(|(rows, cols)| {
            let entry = (0..rows.max(1) as u32, 0..cols.max(1) as u32, any::<f32>());
            (Just(rows), Just(cols), vec(entry, 0..30))
        })
        .prop_map(|(rows, cols, t)| {
            let t: Vec<_> = if rows == 0 || cols == 0 {
                vec![]
            } else {
                // One entry per position: sums of random floats are not what this checks.
                let mut seen = std::collections::HashSet::new();
                t.into_iter().filter(|e| seen.insert((e.0, e.1))).collect()
            };
            csr_from_triplets(rows, cols, &t).unwrap()
        })
}

/// What a NaN reads back as: the quiet NaN of its sign (text carries no payload).
fn canonical(v: f32) -> u32 {
    if v.is_nan() {
        if v.is_sign_negative() {
            0xffc0_0000
        } else {
            0x7fc0_0000
        }
    } else {
        v.to_bits()
    }
}

#[test]
fn fuzz_matrix_market_round_trip_is_bit_exact() {
    fuzz("matrix-market-round-trip", small_matrix(), |a| {
        let mut text = Vec::new();
        mtx::write_matrix_market_to(&mut text, a).unwrap();
        let b = mtx::read_matrix_market_from_with(Cursor::new(&text), &Limits::new(LIMIT))
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&text)));
        assert_eq!(a.shape(), b.shape());
        assert_eq!(a.row_offsets(), b.row_offsets());
        assert_eq!(a.indices(), b.indices());
        let bits = |m: &Csr| m.data().iter().map(|&v| canonical(v)).collect::<Vec<_>>();
        assert_eq!(bits(a), bits(&b));
    });
}

// ---------------------------------------------------------------- .npz

#[derive(Clone, Debug)]
struct NpzCase {
    shape: (i64, i64),
    triplets: Vec<(i64, i64, i32)>,
    format: &'static str,
    index_size: usize,
    signed: bool,
    big: bool,
    f4: bool,
    unicode: bool,
    coords: bool,
    deflate: Vec<bool>,
    claim: Option<(usize, u32)>,
    /// A second member under the name of member `k`, with the same or other bytes.
    dup: Option<(usize, bool)>,
    zip64: Option<(u64, Option<u64>)>,
    damage: Vec<Damage>,
}

/// A dimension of an `.npz` header: mostly small, sometimes beyond u32 or negative.
fn npz_dim() -> impl Strategy<Value = i64> {
    prop_oneof![
        8 => 0i64..7,
        1 => prop::sample::select(vec![4_000_000_000i64, 4294967295, 4294967296, -1, 1 << 40]),
    ]
}

/// A ZIP64 extra field's sizes, now and then.
fn npz_zip64() -> impl Strategy<Value = Option<(u64, Option<u64>)>> {
    prop_oneof![
        3 => Just(None),
        1 => (
            prop_oneof![Just(u64::MAX), Just(u64::MAX - 45), any::<u64>(), 0u64..4096],
            proptest::option::of(prop_oneof![Just(u64::MAX), Just(u64::MAX - 19), any::<u64>()])
        )
            .prop_map(Some),
    ]
}

prop_compose! {
    fn npz_case()(
        shape in (npz_dim(), npz_dim()),
        triplets in vec((0i64..7, 0i64..7, -8i32..8), 0..20),
        format in prop::sample::select(vec!["csr", "csc", "coo", "bsr", ""]),
        index_size in prop::sample::select(vec![1usize, 2, 4, 8]),
        signed in any::<bool>(),
        big in any::<bool>(),
        f4 in any::<bool>(),
        (unicode, coords) in (any::<bool>(), any::<bool>()),
        deflate in vec(any::<bool>(), 6),
        claim in proptest::option::of((0usize..6, prop_oneof![Just(0xFFFF_FFF0u32), any::<u32>()])),
        dup in prop_oneof![3 => Just(None), 1 => proptest::option::of((0usize..6, any::<bool>()))],
        zip64 in npz_zip64(),
        damage in prop_oneof![3 => Just(vec![]), 1 => vec(damage(), 1..4)],
    ) -> NpzCase {
        NpzCase {
            shape, triplets, format, index_size, signed, big, f4, unicode, coords, deflate, claim,
            dup, zip64, damage,
        }
    }
}

/// The entries of the case that lie inside its shape (the oracle's matrix).
fn inside(c: &NpzCase) -> Vec<(i64, i64, i32)> {
    c.triplets
        .iter()
        .copied()
        .filter(|&(r, col, _)| r < c.shape.0 && col < c.shape.1)
        .collect()
}

fn render_npz(c: &NpzCase) -> Vec<u8> {
    use npz_writer::*;
    let t = inside(c);
    let csc = c.format == "csc";
    let major = if csc { c.shape.1 } else { c.shape.0 }.clamp(0, 64);
    let minor_of = |e: &(i64, i64, i32)| if csc { (e.1, e.0) } else { (e.0, e.1) };
    let mut members = vec![
        member("format.npy", text(c.format, c.unicode, c.big)),
        member("shape.npy", ints(&[c.shape.0, c.shape.1], 8, true, c.big)),
    ];
    let values: Vec<f64> = t.iter().map(|e| e.2 as f64).collect();
    members.push(member(
        "data.npy",
        floats(&values, if c.f4 { 4 } else { 8 }, c.big),
    ));
    let idx = |v: &[i64]| ints(v, c.index_size, c.signed, c.big);
    if c.format == "coo" {
        let rows: Vec<i64> = t.iter().map(|e| e.0).collect();
        let cols: Vec<i64> = t.iter().map(|e| e.1).collect();
        if c.coords {
            // One 2 × nnz array: the row indices, then the column indices.
            let mut both = rows.clone();
            both.extend_from_slice(&cols);
            let two_d = format!("(2, {})", rows.len());
            members.push(member(
                "coords.npy",
                ints_shaped(&both, c.index_size, c.signed, c.big, &two_d),
            ));
        } else {
            members.push(member("row.npy", idx(&rows)));
            members.push(member("col.npy", idx(&cols)));
        }
    } else {
        // Entries grouped by major index in input order (rows unsorted, duplicates kept).
        let mut indptr = vec![0i64; major as usize + 1];
        let mut indices = Vec::new();
        let mut data = Vec::new();
        for m in 0..major {
            for e in &t {
                let (mj, mi) = minor_of(e);
                if mj == m {
                    indices.push(mi);
                    data.push(e.2 as f64);
                }
            }
            indptr[m as usize + 1] = indices.len() as i64;
        }
        members[2] = member("data.npy", floats(&data, if c.f4 { 4 } else { 8 }, c.big));
        members.push(member("indptr.npy", idx(&indptr)));
        members.push(member("indices.npy", idx(&indices)));
    }
    for (m, &d) in members.iter_mut().zip(&c.deflate) {
        m.deflate = d;
    }
    if let Some((k, claim)) = c.claim
        && let Some(m) = members.get_mut(k)
    {
        m.claim = Some(claim);
    }
    if let Some((k, same)) = c.dup
        && let Some(m) = members.get(k % members.len())
    {
        let mut data = m.data.clone();
        if !same && let Some(last) = data.last_mut() {
            *last ^= 1;
        }
        let mut twin = member(&m.name, data);
        twin.deflate = m.deflate;
        members.push(twin);
    }
    let mut bytes = match c.zip64 {
        Some((cd, loc)) => zip(&members, Some(cd), loc),
        None => zip(&members, None, None),
    };
    apply(&mut bytes, &c.damage);
    bytes
}

#[test]
fn fuzz_npz_reader() {
    fuzz("npz", npz_case(), |c| {
        let bytes = render_npz(c);
        let got = npz::read_npz_bytes_with(&bytes, &Limits::new(LIMIT));
        let clean =
            c.damage.is_empty() && c.claim.is_none() && c.zip64.is_none() && c.dup.is_none();
        let small = (0..7).contains(&c.shape.0) && (0..7).contains(&c.shape.1);
        let fits = c.index_size == 8 || c.shape.0.max(c.shape.1) < (1 << (8 * c.index_size - 2));
        if c.damage.is_empty() && c.zip64.is_none() && c.dup.is_some() {
            // Two members of one name: refused whatever else the file holds.
            assert!(
                matches!(got, Err(npz::NpzError::DuplicateMember(_))),
                "a duplicate member was not refused: {got:?}"
            );
        } else if clean && small && fits && ["csr", "csc", "coo"].contains(&c.format) {
            // The oracle: exactly the matrix the arrays hold (integer values: sums are exact).
            let t: Vec<(u32, u32, f32)> = inside(c)
                .iter()
                .map(|&(r, col, v)| (r as u32, col as u32, v as f32))
                .collect();
            let want = csr_from_triplets(c.shape.0 as usize, c.shape.1 as usize, &t).unwrap();
            match got {
                Ok(m) => assert_eq!(m, want),
                Err(e) => panic!("a valid {} file was refused: {e}", c.format),
            }
        } else if let Ok(m) = got {
            assert_eq!(m.row_offsets()[0], 0);
            assert_eq!(m.row_offsets().len(), m.rows() + 1);
        }
    });
}

// ---------------------------------------------------------------- cache

#[derive(Clone, Debug)]
struct CacheCase {
    a: Csr,
    other: Csr,
    kind: u8,
    resign: bool,
    with_source: bool,
    damage: Vec<Damage>,
}

fn cache_case() -> impl Strategy<Value = CacheCase> {
    let finite = (0usize..40, 0usize..40).prop_flat_map(|(rows, cols)| {
        let entry = (0..rows.max(1) as u32, 0..cols.max(1) as u32, -8i8..8);
        (Just(rows), Just(cols), vec(entry, 0..80)).prop_map(|(rows, cols, t)| {
            let t: Vec<_> = if rows == 0 || cols == 0 {
                vec![]
            } else {
                t.into_iter().map(|(r, c, v)| (r, c, v as f32)).collect()
            };
            csr_from_triplets(rows, cols, &t).unwrap()
        })
    });
    (
        finite.clone(),
        finite,
        0u8..4,
        any::<bool>(),
        any::<bool>(),
        vec(damage(), 0..4),
    )
        .prop_map(|(a, other, kind, resign, with_source, damage)| CacheCase {
            a,
            other,
            kind,
            resign,
            with_source,
            damage,
        })
}

/// Encodes, damages (re-signing the payload when asked, as an attacker would) and decodes; a
/// decoded layout must hold exactly the source matrix.
fn cache_round<T: CachedFormat>(
    c: &CacheCase,
    build: impl Fn(&Csr) -> Option<T>,
    back: impl Fn(&T) -> Csr,
) {
    let Some(layout) = build(&c.a) else { return };
    let mut bytes = cache::encode(&layout, &c.a).unwrap();
    if c.resign && bytes.len() > HEADER_LEN {
        // Damage only the payload, then give it a valid payload checksum and length.
        let mut payload = bytes[HEADER_LEN..].to_vec();
        apply(&mut payload, &c.damage);
        if let Some(layout2) = build(&c.other)
            && payload.is_empty()
        {
            // A whole payload of another matrix under this header.
            payload = cache::encode(&layout2, &c.other).unwrap()[HEADER_LEN..].to_vec();
        }
        bytes.truncate(HEADER_LEN);
        bytes[45..53].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        let sum = Sha256::digest(&payload);
        bytes[53..85].copy_from_slice(&sum);
        bytes.extend_from_slice(&payload);
    } else {
        apply(&mut bytes, &c.damage);
    }
    let source = c.with_source.then_some(&c.a);
    if let Ok(got) = cache::decode::<T>(&bytes, source) {
        assert_eq!(back(&got), c.a, "a cache file decoded to another matrix");
    }
}

#[test]
fn fuzz_cache_decoder() {
    fuzz("cache", cache_case(), |c| match c.kind {
        0 => cache_round(c, |a| BitTcf::from_csr(a).ok(), BitTcf::to_csr),
        1 => cache_round(c, |a| MeTcf::from_csr(a).ok(), MeTcf::to_csr),
        2 => cache_round(c, |a| Hrpb::from_csr(a).ok(), Hrpb::to_csr),
        _ => cache_round(c, |a| BitBsr::from_csr(a).ok(), BitBsr::to_csr),
    });
}

// ---------------------------------------------------------------- generator specs

fn spec() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "uniform",
        "banded",
        "rmat",
        "clustered",
        "algebraic",
        "exponential",
        "bogus",
        "",
    ]);
    let key = prop::sample::select(vec![
        "rows",
        "n",
        "cols",
        "avg",
        "nnz_per_row",
        "hb",
        "half_bandwidth",
        "fill",
        "scale",
        "ef",
        "edge_factor",
        "a",
        "b",
        "c",
        "d",
        "bs",
        "block_size",
        "density",
        "intra_density",
        "inter",
        "inter_nnz_per_row",
        "rate",
        "seed",
        "zzz",
    ]);
    let value = prop_oneof![
        4 => (0u32..300).prop_map(|v| v.to_string()),
        1 => any::<u64>().prop_map(|v| v.to_string()),
        1 => any::<f64>().prop_map(|v| v.to_string()),
        2 => prop::sample::select(vec![
            "0", "1", "2", "1e-45", "1e-20", "5e-324", "0.5", "1.0", "1e9", "1e300", "nan", "NaN",
            "inf", "-inf", "-1", "-0", "18446744073709551615", "4294967296", "4294967295",
            "100000", "31", "32", "abc", "",
        ])
        .prop_map(str::to_string),
    ];
    (name, vec((key, value), 0..6), any::<bool>()).prop_map(|(name, kv, sep)| {
        let body: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if sep || !body.is_empty() {
            format!("{name}:{}", body.join(","))
        } else {
            name.to_string()
        }
    })
}

#[test]
fn fuzz_generator_specs() {
    fuzz("generator-spec", spec(), |s| {
        let Ok(spec) = GeneratorSpec::from_str(s) else {
            return;
        };
        if let Ok(m) = spec.build() {
            assert_eq!(m.row_offsets()[0], 0);
            assert!(
                m.data().iter().all(|v| v.is_finite()),
                "{spec}: non-finite values"
            );
            // The canonical string parses back to the same spec.
            assert_eq!(GeneratorSpec::from_str(&spec.to_string()).unwrap(), spec);
        }
    });
}

// ---------------------------------------------------------------- special paths

/// What sits at the path a reader is given.
#[derive(Clone, Debug)]
enum PathKind {
    /// A regular file with these bytes (a Matrix Market case, possibly damaged).
    Regular(Vec<u8>),
    /// Any other node: FIFO, links to devices, directory, dangling link, link loop, 3 GiB sparse
    /// file, empty file.
    Special(usize),
}

const SPECIALS: [&str; 8] = [
    "fifo", "zero", "null", "dir", "dangling", "loop", "sparse", "empty",
];

/// The special nodes, made once per process.
fn special_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz_special_paths");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(d.join("fifo"))
                    .status()
                    .unwrap()
                    .success()
            );
            symlink("/dev/zero", d.join("zero")).unwrap();
            symlink("/dev/null", d.join("null")).unwrap();
            symlink(d.join("nowhere"), d.join("dangling")).unwrap();
            symlink(d.join("loop"), d.join("loop")).unwrap();
        }
        std::fs::create_dir(d.join("dir")).unwrap();
        std::fs::File::create(d.join("sparse"))
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        std::fs::File::create(d.join("empty")).unwrap();
        d
    })
}

fn path_case() -> impl Strategy<Value = (PathKind, u8)> {
    let kind = prop_oneof![
        1 => mtx_case().prop_map(|c| PathKind::Regular(render_mtx(&c))),
        2 => (0..SPECIALS.len()).prop_map(PathKind::Special),
    ];
    (kind, 0u8..6)
}

#[test]
fn fuzz_special_paths() {
    let dir = special_dir();
    let regular = dir.join(format!("regular-{:?}.mtx", std::thread::current().id()));
    fuzz("special-paths", path_case(), |(kind, reader)| {
        let path = match kind {
            PathKind::Regular(bytes) => {
                std::fs::write(&regular, bytes).unwrap();
                regular.clone()
            }
            PathKind::Special(k) => dir.join(SPECIALS[*k]),
        };
        // Every reader of files: Ok (a regular file holding a matrix) or a typed error, at once.
        let ok = match reader {
            0 => mtx::read_matrix_market(&path).is_ok(),
            1 => mtx::read_header(&path).is_ok(),
            2 => mtx::read_matrix_with_report(&path).is_ok(),
            3 => npz::read_npz(&path).is_ok(),
            4 => cache::load::<BitTcf>(&path, None).is_ok(),
            _ => tcsparse_formats::file::read_regular(&path, 1 << 20).is_ok(),
        };
        if let PathKind::Special(k) = kind {
            // Nothing but the empty file (read_regular) is read; and that holds no matrix.
            assert!(
                !ok || (SPECIALS[*k] == "empty" && *reader == 5),
                "{} read as a matrix by reader {reader}",
                SPECIALS[*k]
            );
        }
    });
}
