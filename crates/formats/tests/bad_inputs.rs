//! Issue 21, class by class: no input may crash, exhaust memory or silently change the answer.
//! The files live under `bad_files/{limits,npz,values}/`; the `.npz` ones are written by the
//! ignored test `write_npz_fixtures` (`cargo test -p tcsparse-formats --test bad_inputs --
//! --ignored write_npz_fixtures`) since CI machines have no numpy.

#[path = "support/npz_writer.rs"]
mod npz_writer;

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tcsparse_formats::cache::{self, CacheError, HEADER_LEN};
use tcsparse_formats::csr::{CsrError, csr_from_triplets};
use tcsparse_formats::generate::{GenError, GeneratorSpec};
use tcsparse_formats::mtx::{self, MtxError};
use tcsparse_formats::npz::{self, NpzError};
use tcsparse_formats::reference::dense_len;
use tcsparse_formats::{BudgetError, Limits};

const GIB: Limits = Limits::new(1 << 30);

fn dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/bad_files")
        .join(sub)
}

/// The names of the files in `bad_files/<sub>/`, sorted.
fn files_in(sub: &str) -> Vec<String> {
    let mut seen: Vec<String> = std::fs::read_dir(dir(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    seen.sort();
    seen
}

fn read_mtx(sub: &str, name: &str, limits: &Limits) -> Result<tcsparse_formats::Csr, MtxError> {
    let f = File::open(dir(sub).join(name)).unwrap();
    mtx::read_matrix_market_from_with(BufReader::new(f), limits)
}

fn budget_error(e: &MtxError) -> &BudgetError {
    match e {
        MtxError::Budget { line: 2, source } => source,
        other => panic!("expected a budget error, got {other}"),
    }
}

// ---------------------------------------------------------------- tiny files, giant allocations

#[test]
fn tiny_mtx_files_declaring_giant_shapes_are_refused_by_the_budget() {
    // (file, at least this many bytes needed)
    let cases = [
        ("max_u32_rows.mtx", 16u64 << 30),
        ("two_billion_rows.mtx", 8_000_000_000),
        ("symmetric_max_u32.mtx", 16 << 30),
        ("declares_2e40_entries.mtx", 16 << 40),
    ];
    let mut listed: Vec<&str> = cases.iter().map(|c| c.0).collect();
    listed.push("one_row_4e9_cols.mtx");
    listed.sort();
    assert_eq!(
        files_in("limits"),
        listed,
        "every file in bad_files/limits/ has an expectation"
    );
    for (file, at_least) in cases {
        let e = read_mtx("limits", file, &GIB).expect_err(file);
        let b = budget_error(&e);
        assert!(b.needed >= at_least, "{file}: {e}");
        assert_eq!(b.budget, 1 << 30);
        let msg = e.to_string();
        assert!(
            msg.starts_with("line 2: ") && msg.contains("would need") && msg.contains("GiB"),
            "{file}: {msg}"
        );
    }
}

#[test]
fn one_row_of_4e9_columns_reads_in_memory_of_its_one_entry() {
    // 1 MiB of budget is plenty: nothing scales with the column count.
    let m = read_mtx("limits", "one_row_4e9_cols.mtx", &Limits::new(1 << 20)).unwrap();
    assert_eq!(m.shape(), (1, 4_294_967_294));
    assert_eq!(m.indices(), &[4_294_967_293]);
    assert_eq!(m.data(), &[2.5]);
}

#[test]
fn triplets_beyond_the_budget_are_refused_before_allocating() {
    let e = tcsparse_formats::csr::csr_from_triplets_with(
        4_000_000_000,
        1,
        &[(0, 0, 1.0)],
        &Limits::new(1 << 20),
    )
    .unwrap_err();
    assert!(
        matches!(e, CsrError::Budget(ref b) if b.needed >= 16_000_000_000),
        "{e}"
    );
}

#[test]
fn a_line_without_end_is_an_error_not_a_buffer_of_the_stream() {
    // 64 MiB of spaces after the size line, gzip-compressed to a few KiB.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(
        &mut gz,
        b"%%MatrixMarket matrix coordinate real general\n1 1 1\n",
    )
    .unwrap();
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..64 {
        std::io::Write::write_all(&mut gz, &spaces).unwrap();
    }
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 1 << 20);
    let e = mtx::read_matrix_market_from_with(Cursor::new(bomb), &GIB).unwrap_err();
    assert!(
        matches!(e, MtxError::Parse { line: 3, ref message } if message.contains("longer than")),
        "{e}"
    );
}

// ---------------------------------------------------------------- npz

fn npz_file(name: &str) -> Vec<u8> {
    std::fs::read(dir("npz").join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The fixtures: (file name, bytes).
fn npz_fixtures() -> Vec<(&'static str, Vec<u8>)> {
    use npz_writer::*;
    // [[1, 0, 2], [0, 3, 0]]
    let ok = |format_member: Vec<u8>, big: bool| {
        zip(
            &[
                member("indices.npy", ints(&[0, 2, 1], 4, true, big)),
                member("indptr.npy", ints(&[0, 2, 3], 4, true, big)),
                member("format.npy", format_member),
                member("shape.npy", ints(&[2, 3], 8, true, big)),
                member("data.npy", floats(&[1.0, 2.0, 3.0], 8, big)),
            ],
            None,
            None,
        )
    };
    let mut claim = vec![
        member("indices.npy", ints(&[0, 2, 1], 4, true, false)),
        member("indptr.npy", ints(&[0, 2, 3], 4, true, false)),
        member("format.npy", text("csr", false, false)),
        member("shape.npy", ints(&[2, 3], 8, true, false)),
        member("data.npy", floats(&[1.0, 2.0, 3.0], 8, false)),
    ];
    claim[4].deflate = true;
    claim[4].claim = Some(0xFFFF_FFF0);
    let small = || {
        vec![
            member("format.npy", text("csr", false, false)),
            member("shape.npy", ints(&[1, 1], 8, true, false)),
        ]
    };
    vec![
        ("ok_unicode_format.npz", ok(text("csr", true, false), false)),
        ("ok_big_endian.npz", ok(text("csr", true, true), true)),
        (
            "ok_coo_with_duplicate.npz",
            zip(
                &[
                    member("row.npy", ints(&[1, 0, 0, 0], 4, true, false)),
                    member("col.npy", ints(&[1, 2, 0, 2], 4, true, false)),
                    member("format.npy", text("coo", false, false)),
                    member("shape.npy", ints(&[2, 3], 8, true, false)),
                    member("data.npy", floats(&[3.0, 1.5, 1.0, 0.5], 8, false)),
                ],
                None,
                None,
            ),
        ),
        (
            "indptr_starts_at_1.npz",
            compressed("csr", (2, 3), &[1, 2, 3], &[0, 2, 1], &[1.0, 2.0, 3.0]),
        ),
        (
            "four_billion_rows.npz",
            compressed("csr", (4_000_000_000, 4), &[0, 0], &[], &[]),
        ),
        ("member_claims_4gib.npz", zip(&claim, None, None)),
        (
            "zip64_directory_near_u64_max.npz",
            zip(&small(), Some(u64::MAX - 45), None),
        ),
        (
            "zip64_locator_near_u64_max.npz",
            zip(&small(), Some(0), Some(u64::MAX - 19)),
        ),
    ]
}

#[test]
#[ignore = "writes the .npz fixtures; run once after changing them"]
fn write_npz_fixtures() {
    for (name, bytes) in npz_fixtures() {
        std::fs::write(dir("npz").join(name), bytes).unwrap();
    }
}

#[test]
fn npz_fixtures_are_current() {
    let mut listed: Vec<&str> = npz_fixtures().iter().map(|f| f.0).collect();
    listed.sort();
    assert_eq!(
        files_in("npz"),
        listed,
        "bad_files/npz/ holds exactly the fixtures"
    );
    for (name, bytes) in npz_fixtures() {
        assert_eq!(
            npz_file(name),
            bytes,
            "{name} is stale: run write_npz_fixtures"
        );
    }
}

#[test]
fn npz_valid_files_scipy_reads_are_read() {
    let want = csr_from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
    for name in [
        "ok_unicode_format.npz",
        "ok_big_endian.npz",
        "ok_coo_with_duplicate.npz",
    ] {
        let m = npz::read_npz_bytes_with(&npz_file(name), &GIB)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(m, want, "{name}");
    }
}

#[test]
fn npz_indptr_not_starting_at_0_is_refused_not_truncated() {
    let e = npz::read_npz_bytes_with(&npz_file("indptr_starts_at_1.npz"), &GIB).unwrap_err();
    assert!(
        matches!(e, NpzError::Invalid(ref m) if m.contains("indptr[0] is 1")),
        "{e}"
    );
}

#[test]
fn npz_giant_shape_is_refused_by_the_budget() {
    let e = npz::read_npz_bytes_with(&npz_file("four_billion_rows.npz"), &GIB).unwrap_err();
    assert!(
        matches!(e, NpzError::Budget(ref b) if b.needed >= 16_000_000_000),
        "{e}"
    );
    assert!(e.to_string().contains("would need"), "{e}");
}

#[test]
fn npz_member_claiming_4gib_is_neither_reserved_nor_believed() {
    let bytes = npz_file("member_claims_4gib.npz");
    let e = npz::read_npz_bytes_with(&bytes, &GIB).unwrap_err();
    assert!(
        matches!(e, NpzError::Budget(ref b) if b.needed == 0xFFFF_FFF0),
        "{e}"
    );
    // Without a budget the claim is not reserved up front, and the short member is an error.
    let t = Instant::now();
    let e = npz::read_npz_bytes_with(&bytes, &Limits::unlimited()).unwrap_err();
    assert!(
        matches!(e, NpzError::Zip(ref m) if m.contains("inflates to 152 bytes")),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn npz_zip64_offsets_near_u64_max_are_errors_not_overflows() {
    for name in [
        "zip64_directory_near_u64_max.npz",
        "zip64_locator_near_u64_max.npz",
    ] {
        let e = npz::read_npz_bytes_with(&npz_file(name), &GIB).unwrap_err();
        assert!(matches!(e, NpzError::Zip(_)), "{name}: {e}");
    }
}

// ---------------------------------------------------------------- silent changes

#[test]
fn resigned_cache_payload_of_another_shape_is_refused() {
    use tcsparse_formats::bittcf::BitTcf;
    let diag = |rows: usize| {
        let t: Vec<_> = (0..67u32).map(|i| (i, i, 1.0 + i as f32)).collect();
        csr_from_triplets(rows, 67, &t).unwrap()
    };
    let (a, b) = (diag(67), diag(68));
    let good = cache::encode(&BitTcf::from_csr(&a).unwrap(), &a).unwrap();
    let other = cache::encode(&BitTcf::from_csr(&b).unwrap(), &b).unwrap();
    // a's header, b's payload, re-signed.
    let payload = &other[HEADER_LEN..];
    let mut forged = good[..HEADER_LEN].to_vec();
    forged[45..53].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    forged[53..85].copy_from_slice(&Sha256::digest(payload));
    forged.extend_from_slice(payload);
    for source in [Some(&a), None] {
        let e = cache::decode::<BitTcf>(&forged, source).unwrap_err();
        assert!(
            matches!(
                e,
                CacheError::PayloadNotFromSource {
                    rows: 68,
                    cols: 67,
                    ..
                }
            ),
            "{e}"
        );
    }
    assert_eq!(
        cache::decode::<BitTcf>(&good, Some(&a)).unwrap().to_csr(),
        a
    );
}

#[test]
fn nan_and_inf_are_read_counted_and_written_back_bit_exact() {
    let m = read_mtx("values", "nan_inf.mtx", &GIB).unwrap();
    assert_eq!(m.non_finite(), 4);
    let bits: Vec<u32> = m.data().iter().map(|v| v.to_bits()).collect();
    assert_eq!(
        bits,
        vec![0x7fc0_0000, 0xffc0_0000, 0x7f80_0000, 0xff80_0000]
    );
    let mut text = Vec::new();
    mtx::write_matrix_market_to(&mut text, &m).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("1 2 -nan\n"), "{text}");
    let back = mtx::read_matrix_market_from_with(Cursor::new(text), &GIB).unwrap();
    let back_bits: Vec<u32> = back.data().iter().map(|v| v.to_bits()).collect();
    assert_eq!(back_bits, bits);
}

// ---------------------------------------------------------------- generators that never stop

fn spec(s: &str) -> Result<tcsparse_formats::Csr, GenError> {
    GeneratorSpec::from_str(s)?.build()
}

#[test]
fn tiny_densities_finish_with_the_diagonal() {
    for s in [
        "banded:n=2000,hb=100,fill=1e-20",
        "banded:n=2000,hb=100,fill=5e-324",
        "clustered:n=2000,bs=64,density=1e-45,inter=0",
    ] {
        let t = Instant::now();
        let m = spec(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{s} took {:?}",
            t.elapsed()
        );
        assert_eq!(m.nnz(), 2000, "{s}: only the diagonal");
    }
}

#[test]
fn generator_parameters_are_validated() {
    for (s, name) in [
        ("uniform:n=1,avg=1e9", "nnz_per_row_avg"),
        ("uniform:rows=10,cols=3,avg=49", "nnz_per_row_avg"),
        // Found by the fuzz target: the message's 16 × cols overflowed.
        (
            "uniform:n=7258039217320509226,nnz_per_row=3.6e200",
            "nnz_per_row_avg",
        ),
        ("exponential:n=4,rate=nan", "rate"),
        ("exponential:n=4,rate=-1", "rate"),
        ("banded:n=10,fill=nan", "fill"),
        ("clustered:n=10,density=nan", "intra_density"),
        ("clustered:n=10,inter=11", "inter_nnz_per_row"),
        ("rmat:scale=8,a=nan", "a,b,c,d"),
    ] {
        let e = spec(s).unwrap_err();
        assert!(
            matches!(e, GenError::Invalid { name: n, .. } if n == name),
            "{s}: {e}"
        );
    }
}

#[test]
fn generator_outputs_beyond_u32_or_the_budget_are_refused_before_work() {
    for s in [
        "algebraic:n=1099511627776",
        "algebraic:n=18446744073709551615",
        "uniform:n=18446744073709551615,avg=0",
        "banded:n=4294967295,hb=4294967295",
    ] {
        let t = Instant::now();
        let e = spec(s).unwrap_err();
        assert!(
            matches!(e, GenError::TooLarge(_) | GenError::Budget(_)),
            "{s}: {e}"
        );
        assert!(t.elapsed() < Duration::from_secs(2), "{s}");
    }
}

// ---------------------------------------------------------------- unchecked arithmetic

#[test]
fn dense_extents_use_checked_arithmetic() {
    assert_eq!(dense_len(0, 5, 5), Some(0));
    assert_eq!(dense_len(3, 2, 4), Some(10));
    assert_eq!(dense_len(usize::MAX, 2, 2), None);
    assert_eq!(dense_len(2, usize::MAX, usize::MAX), None);
}
