//! The prepared-plan cache on the CPU path: a miss stores the entry, a hit loads the same
//! permutation and kernel (same products), changed options or pattern miss, changed values hit (and
//! multiply with the new values), and a corrupt, truncated or stale entry is rebuilt, never trusted.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use tcsparse::formats::Csr;
use tcsparse::formats::generate::clustered_block_diagonal;
use tcsparse::reorder::Permutation;
use tcsparse::{CacheOutcome, Engine, PrepareOptions, Prepared};

/// Clustered 64-row blocks with the rows and columns shuffled: the gate lets the automatic
/// reordering through, so the entry holds a permutation.
fn matrix() -> Csr {
    let a = clustered_block_diagonal(4096, 64, 0.3, 2.0, 1).unwrap();
    let mut v: Vec<u32> = (0..a.rows() as u32).collect();
    v.shuffle(&mut ChaCha8Rng::seed_from_u64(2));
    Permutation::new(v).unwrap().apply_symmetric(&a).unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tcsparse-plan-cache-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A fresh cache folder `name`, the CPU engine and the test matrix.
fn setup(name: &str) -> (PathBuf, Engine, Csr) {
    (temp_dir(name), Engine::cpu("test"), matrix())
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "plan"));
    v.sort();
    v
}

fn product(p: &mut Prepared, a: &Csr) -> Vec<f32> {
    let n = 4;
    let b: Vec<f32> = (0..a.cols() * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let mut c = vec![0f32; a.rows() * n];
    p.set_n(n);
    p.spmm(1.0, &b, 0.0, &mut c).unwrap();
    c
}

fn opts(dir: &Path) -> PrepareOptions {
    PrepareOptions::builder()
        .cache_dir(Some(dir.to_path_buf()))
        .build()
}

#[test]
fn miss_then_hit_gives_the_same_preparation() {
    let (dir, engine, a) = setup("hit");
    let mut first = engine.prepare_spmm(&a, &opts(&dir)).unwrap();
    assert_eq!(first.report().cache, CacheOutcome::Miss);
    assert!(
        first.report().reordered,
        "{:?}",
        first.report().reorder_gate
    );
    assert_eq!(entries(&dir).len(), 1);
    let mut second = engine.prepare_spmm(&a, &opts(&dir)).unwrap();
    assert_eq!(second.report().cache, CacheOutcome::Hit);
    assert_eq!(second.permutation(), first.permutation());
    assert_eq!(second.kernel(), first.kernel());
    assert_eq!(second.matrix(), first.matrix());
    assert!(
        second
            .report()
            .kernel_note
            .starts_with("from the plan cache")
    );
    assert!(second.report().total_s > 0.0);
    assert_eq!(product(&mut second, &a), product(&mut first, &a));
    // Without a cache directory nothing is read or written.
    let plain = engine.prepare_spmm(&a, &PrepareOptions::default()).unwrap();
    assert_eq!(plain.report().cache, CacheOutcome::Off);
    assert_eq!(plain.permutation(), first.permutation());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn changed_options_or_pattern_miss_changed_values_hit() {
    let (dir, engine, a) = setup("miss");
    assert_eq!(
        engine.prepare_spmm(&a, &opts(&dir)).unwrap().report().cache,
        CacheOutcome::Miss
    );
    let mut other_n = opts(&dir);
    other_n.n = 64;
    assert_eq!(
        engine.prepare_spmm(&a, &other_n).unwrap().report().cache,
        CacheOutcome::Miss
    );
    let mut other_seed = opts(&dir);
    other_seed.seed = 9;
    assert_eq!(
        engine.prepare_spmm(&a, &other_seed).unwrap().report().cache,
        CacheOutcome::Miss
    );
    let mut t: Vec<(u32, u32, f32)> = Vec::new();
    for r in 0..a.rows() {
        let row = a.outer_view(r).unwrap();
        for (&c, &v) in row.indices().iter().zip(row.data()) {
            t.push((r as u32, c, v));
        }
    }
    // One column index moved to a column the row does not hold: another pattern.
    let mut moved = t.clone();
    let (r, c) = (moved[17].0, moved[17].1);
    let free = (0..a.cols() as u32)
        .find(|&x| x != c && !t.iter().any(|e| e.0 == r && e.1 == x))
        .unwrap();
    moved[17].1 = free;
    let b = tcsparse::formats::csr::csr_from_triplets(a.rows(), a.cols(), &moved).unwrap();
    assert_eq!(
        engine.prepare_spmm(&b, &opts(&dir)).unwrap().report().cache,
        CacheOutcome::Miss
    );
    assert_eq!(entries(&dir).len(), 4);
    // Every one of them hits now.
    for o in [opts(&dir), other_n, other_seed] {
        assert_eq!(
            engine.prepare_spmm(&a, &o).unwrap().report().cache,
            CacheOutcome::Hit
        );
    }
    assert_eq!(
        engine.prepare_spmm(&b, &opts(&dir)).unwrap().report().cache,
        CacheOutcome::Hit
    );
    // Same pattern, new values: a hit whose products use the new values.
    let mut revalued = t.clone();
    for (i, e) in revalued.iter_mut().enumerate() {
        e.2 = e.2 * 2.0 + (i % 5) as f32;
    }
    let v = tcsparse::formats::csr::csr_from_triplets(a.rows(), a.cols(), &revalued).unwrap();
    let mut hit = engine.prepare_spmm(&v, &opts(&dir)).unwrap();
    assert_eq!(hit.report().cache, CacheOutcome::Hit);
    assert_eq!(entries(&dir).len(), 4, "no new entry for new values");
    let mut fresh = Engine::cpu("test")
        .prepare_spmm(&v, &PrepareOptions::default())
        .unwrap();
    assert_eq!(product(&mut hit, &v), product(&mut fresh, &v));
    assert_ne!(
        product(&mut hit, &v),
        product(&mut engine.prepare_spmm(&a, &opts(&dir)).unwrap(), &a),
        "the hit multiplies with the new values"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupt_truncated_or_stale_entries_are_rebuilt() {
    let (dir, engine, a) = setup("corrupt");
    let reference = engine.prepare_spmm(&a, &opts(&dir)).unwrap();
    let file = entries(&dir).pop().unwrap();
    let good = std::fs::read(&file).unwrap();
    let damages: Vec<(&str, Damage)> = vec![
        (
            "payload byte",
            Box::new(|b: &mut Vec<u8>| *b.last_mut().unwrap() ^= 0x40),
        ),
        (
            "permutation byte",
            Box::new(|b: &mut Vec<u8>| b[84 + 10] ^= 1),
        ),
        (
            "truncated",
            Box::new(|b: &mut Vec<u8>| b.truncate(b.len() / 2)),
        ),
        ("header only", Box::new(|b: &mut Vec<u8>| b.truncate(20))),
        (
            "version",
            Box::new(|b: &mut Vec<u8>| b[8] = b[8].wrapping_add(1)),
        ),
        ("key", Box::new(|b: &mut Vec<u8>| b[20] ^= 0xff)),
        ("magic", Box::new(|b: &mut Vec<u8>| b[0] = b'X')),
        ("empty", Box::new(|b: &mut Vec<u8>| b.clear())),
        // Checksummed but wrong inside: a repeated permutation entry, an unknown kernel tag.
        (
            "valid checksum, not a permutation",
            Box::new(|b: &mut Vec<u8>| {
                // payload: mode (1), kernel tag 0 (CPU, no parameters), flag (1), length (4), perm.
                assert_eq!(b[85], 0, "CPU kernel tag");
                let p0 = 84 + 1 + 1 + 1 + 4;
                let first: [u8; 4] = b[p0..p0 + 4].try_into().unwrap();
                b[p0 + 4..p0 + 8].copy_from_slice(&first);
                reseal(b);
            }),
        ),
        (
            "valid checksum, unknown kernel",
            Box::new(|b: &mut Vec<u8>| {
                b[85] = 9;
                reseal(b);
            }),
        ),
    ];
    for (what, damage) in damages {
        let mut bytes = good.clone();
        damage(&mut bytes);
        std::fs::write(&file, &bytes).unwrap();
        let p = engine.prepare_spmm(&a, &opts(&dir)).unwrap();
        assert!(
            matches!(p.report().cache, CacheOutcome::Rebuilt(_)),
            "{what}: {:?}",
            p.report().cache
        );
        assert_eq!(p.permutation(), reference.permutation(), "{what}");
        // The rebuilt entry is good again.
        assert_eq!(std::fs::read(&file).unwrap(), good, "{what}");
        assert_eq!(
            engine.prepare_spmm(&a, &opts(&dir)).unwrap().report().cache,
            CacheOutcome::Hit,
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A way of damaging a plan file's bytes.
type Damage = Box<dyn Fn(&mut Vec<u8>)>;

/// Recomputes the payload checksum of a plan file (header bytes 52..84).
fn reseal(b: &mut [u8]) {
    let sum = blake3::hash(&b[84..]);
    b[52..84].copy_from_slice(sum.as_bytes());
}

#[test]
fn pattern_checksum_follows_the_pattern_not_values_or_thread_count() {
    let a = matrix();
    let on = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
            .install(|| tcsparse::pattern_checksum(&a))
    };
    assert_eq!(on(1), on(3));
    let b = clustered_block_diagonal(4096, 64, 0.3, 2.0, 5).unwrap();
    assert_ne!(
        tcsparse::pattern_checksum(&a),
        tcsparse::pattern_checksum(&b)
    );
    // Arrays of several MiB (BLAKE3's tree is then split over the threads): the same digest on
    // any thread count and after a value change, a different one after any change of the
    // pattern or the shape.
    let big = tcsparse::formats::generate::uniform_random(400_000, 300_000, 3.0, 9).unwrap();
    let sum = |m: &Csr, t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
            .install(|| tcsparse::pattern_checksum(m))
    };
    let base = sum(&big, 1);
    assert_eq!(base, sum(&big, 4));
    let mut value = big.clone();
    let v = &mut value.data_mut()[big.nnz() / 2];
    *v = f32::from_bits(v.to_bits() ^ 1);
    assert_eq!(sum(&value, 2), base, "values are not part of the pattern");
    let ip = big.indptr().raw_storage().to_vec();
    let mut idx = big.indices().to_vec();
    let r = (0..big.rows()).find(|&r| ip[r + 1] - ip[r] == 1).unwrap();
    idx[ip[r] as usize] = (idx[ip[r] as usize] + 1) % big.cols() as u32;
    let moved = Csr::new(big.shape(), ip.clone(), idx, big.data().to_vec());
    assert_ne!(sum(&moved, 2), base, "one column index");
    let wider = Csr::new(
        (big.rows(), big.cols() + 1),
        ip,
        big.indices().to_vec(),
        big.data().to_vec(),
    );
    assert_ne!(sum(&wider, 2), base, "the declared column count");
}
