//! Matrix Market reader and writer: every variant, every malformed case, round trips.

use std::io::{Cursor, Write};
use std::path::PathBuf;

use proptest::prelude::*;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::generate;
use tcsparse_formats::mtx::{self, MtxError};

fn read_str(text: &str) -> Result<Csr, MtxError> {
    mtx::read_matrix_market_from(Cursor::new(text.as_bytes().to_vec()))
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("io_mtx");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// (row, col, value) triplets of a CSR, in row-major order.
/// The entries of `body` read under a `real` and under an `integer` banner of `symmetry`, which
/// must agree.
fn real_and_integer_entries(symmetry: &str, body: &str) -> Vec<(usize, usize, f32)> {
    let read = |field: &str| {
        let text = format!("%%MatrixMarket matrix coordinate {field} {symmetry}\n{body}");
        entries(&read_str(&text).unwrap())
    };
    let real = read("real");
    assert_eq!(
        read("integer"),
        real,
        "{symmetry}: integer field ≠ real field"
    );
    real
}

fn entries(m: &Csr) -> Vec<(usize, usize, f32)> {
    let offsets = m.indptr().raw_storage().to_vec();
    let mut out = Vec::new();
    for r in 0..m.rows() {
        for k in offsets[r] as usize..offsets[r + 1] as usize {
            out.push((r, m.indices()[k] as usize, m.data()[k]));
        }
    }
    out
}

#[test]
fn general_real_sums_duplicates_and_sorts_rows() {
    let m = read_str(
        "%%MatrixMarket matrix coordinate real general\n% a comment\n\n2 3 4\n2 3 1.5\n1 2 -2e-3\n2 1 4\n2 3 0.5\n",
    )
    .unwrap();
    assert_eq!(m.shape(), (2, 3));
    assert_eq!(entries(&m), vec![(0, 1, -2e-3), (1, 0, 4.0), (1, 2, 2.0)]);
}

#[test]
fn banner_is_case_insensitive_and_double_means_real() {
    let m = read_str("%%MatrixMarket MATRIX Coordinate DOUBLE General\n1 1 1\n1 1 0.25\n").unwrap();
    assert_eq!(entries(&m), vec![(0, 0, 0.25)]);
}

#[test]
fn integer_and_pattern_fields() {
    let m = read_str("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 -7\n2 2 +3\n")
        .unwrap();
    assert_eq!(entries(&m), vec![(0, 0, -7.0), (1, 1, 3.0)]);
    let m =
        read_str("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n").unwrap();
    assert_eq!(entries(&m), vec![(0, 1, 1.0), (1, 0, 1.0)]);
}

#[test]
fn symmetric_storage_is_expanded_without_doubling_the_diagonal() {
    assert_eq!(
        real_and_integer_entries("symmetric", "3 3 3\n1 1 5\n3 1 2\n3 2 -1\n"),
        vec![
            (0, 0, 5.0),
            (0, 2, 2.0),
            (1, 2, -1.0),
            (2, 0, 2.0),
            (2, 1, -1.0)
        ]
    );
    let m =
        read_str("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 2\n3 1\n").unwrap();
    assert_eq!(entries(&m), vec![(0, 2, 1.0), (1, 1, 1.0), (2, 0, 1.0)]);
}

#[test]
fn skew_symmetric_mirrors_with_negation() {
    assert_eq!(
        real_and_integer_entries("skew-symmetric", "3 3 2\n2 1 4\n3 2 -1\n"),
        vec![(0, 1, -4.0), (1, 0, 4.0), (1, 2, 1.0), (2, 1, -1.0)]
    );
}

#[test]
fn gzip_is_detected_by_magic_bytes_not_name() {
    let text = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 2.0\n";
    let plain = read_str(text).unwrap();
    let from_gz = mtx::read_matrix_market_from(Cursor::new(gzip(text.as_bytes()))).unwrap();
    assert_eq!(plain, from_gz);
    // A gzip file without a .gz name, and a plain file with one.
    let p = tmp("really_gzip.mtx");
    std::fs::write(&p, gzip(text.as_bytes())).unwrap();
    assert_eq!(mtx::read_matrix_market(&p).unwrap(), plain);
    let p = tmp("really_plain.mtx.gz");
    std::fs::write(&p, text).unwrap();
    assert_eq!(mtx::read_matrix(&p).unwrap(), plain);
}

#[test]
fn every_variant_plain_and_gzip() {
    let bodies = [
        (
            "general",
            "1 2 3\n3 1 -2\n2 2 1\n",
            vec![(0, 1, 3.0), (1, 1, 1.0), (2, 0, -2.0)],
        ),
        (
            "symmetric",
            "2 1 3\n3 1 -2\n2 2 1\n",
            vec![
                (0, 1, 3.0),
                (0, 2, -2.0),
                (1, 0, 3.0),
                (1, 1, 1.0),
                (2, 0, -2.0),
            ],
        ),
        (
            "skew-symmetric",
            "2 1 3\n3 1 -2\n3 2 1\n",
            vec![
                (0, 1, -3.0),
                (0, 2, 2.0),
                (1, 0, 3.0),
                (1, 2, -1.0),
                (2, 0, -2.0),
                (2, 1, 1.0),
            ],
        ),
    ];
    for (sym, body, expected) in bodies {
        for field in ["real", "integer", "pattern"] {
            if field == "pattern" && sym == "skew-symmetric" {
                continue; // rejected, see the bad-files test
            }
            let body = if field == "pattern" {
                body.lines()
                    .map(|l| l.rsplit_once(' ').unwrap().0.to_string() + "\n")
                    .collect::<String>()
            } else {
                body.to_string()
            };
            let text = format!("%%MatrixMarket matrix coordinate {field} {sym}\n3 3 3\n{body}");
            let want: Vec<_> = if field == "pattern" {
                expected.iter().map(|&(r, c, _)| (r, c, 1.0)).collect()
            } else {
                expected.clone()
            };
            let name = format!("{field}_{sym}");
            let p = tmp(&format!("{name}.mtx"));
            std::fs::write(&p, &text).unwrap();
            assert_eq!(
                entries(&mtx::read_matrix(&p).unwrap()),
                want,
                "{name} plain"
            );
            let p = tmp(&format!("{name}.mtx.gz"));
            std::fs::write(&p, gzip(text.as_bytes())).unwrap();
            assert_eq!(entries(&mtx::read_matrix(&p).unwrap()), want, "{name} gz");
        }
    }
}

#[test]
fn crlf_line_endings_and_tabs_are_accepted() {
    let m = read_str("%%MatrixMarket matrix coordinate real general\r\n2 2 1\r\n2\t1\t0.5\r\n")
        .unwrap();
    assert_eq!(entries(&m), vec![(1, 0, 0.5)]);
}

#[test]
fn empty_matrix_and_zero_entries() {
    let m = read_str("%%MatrixMarket matrix coordinate real general\n0 0 0\n").unwrap();
    assert_eq!((m.rows(), m.cols(), m.nnz()), (0, 0, 0));
    let m = read_str("%%MatrixMarket matrix coordinate real general\n4 5 0\n").unwrap();
    assert_eq!((m.rows(), m.cols(), m.nnz()), (4, 5, 0));
}

/// What a bad file must produce: the variant (by name) and the 1-based line.
fn expect(e: &MtxError) -> (&'static str, u64) {
    match e {
        MtxError::Io { line, .. } => ("Io", *line),
        MtxError::Banner { line, .. } => ("Banner", *line),
        MtxError::Unsupported { line, .. } => ("Unsupported", *line),
        MtxError::SizeLine { line, .. } => ("SizeLine", *line),
        MtxError::Parse { line, .. } => ("Parse", *line),
        MtxError::MissingValue { line } => ("MissingValue", *line),
        MtxError::IndexOutOfRange { line, .. } => ("IndexOutOfRange", *line),
        MtxError::TooFewEntries { line, .. } => ("TooFewEntries", *line),
        MtxError::TooManyEntries { line, .. } => ("TooManyEntries", *line),
        MtxError::Csr(_) => ("Csr", 0),
        MtxError::Budget { line, .. } => ("Budget", *line),
        MtxError::Npz(_) => ("Npz", 0),
        MtxError::UnknownExtension { .. } => ("UnknownExtension", 0),
    }
}

#[test]
fn every_bad_file_gives_its_error_and_line() {
    let cases: &[(&str, &str, u64)] = &[
        ("empty.mtx", "Banner", 1),
        ("no_banner.mtx", "Banner", 1),
        ("banner_short.mtx", "Banner", 1),
        ("binary.mtx", "Banner", 1),
        ("array.mtx", "Unsupported", 1),
        ("complex.mtx", "Unsupported", 1),
        ("hermitian.mtx", "Unsupported", 1),
        ("real_hermitian.mtx", "Unsupported", 1),
        ("pattern_skew.mtx", "Unsupported", 1),
        ("no_size_line.mtx", "SizeLine", 2),
        ("size_two_numbers.mtx", "SizeLine", 3),
        ("size_not_number.mtx", "SizeLine", 2),
        ("symmetric_not_square.mtx", "SizeLine", 2),
        ("too_few.mtx", "TooFewEntries", 4),
        ("too_many.mtx", "TooManyEntries", 4),
        ("row_out_of_range.mtx", "IndexOutOfRange", 4),
        ("col_out_of_range.mtx", "IndexOutOfRange", 4),
        ("zero_based.mtx", "IndexOutOfRange", 3),
        ("value_not_number.mtx", "Parse", 4),
        ("integer_not_integer.mtx", "Parse", 4),
        ("index_not_number.mtx", "Parse", 4),
        ("index_negative.mtx", "Parse", 4),
        ("missing_value.mtx", "MissingValue", 4),
        ("missing_column.mtx", "Parse", 4),
        ("extra_token.mtx", "Parse", 3),
        ("truncated_mid_line.mtx", "Parse", 5),
    ];
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad_files");
    // Sub-folders (limits/, npz/, values/) belong to bad_inputs.rs.
    let mut seen: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    seen.sort();
    let mut listed: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    listed.sort();
    assert_eq!(seen, listed, "every file in bad_files/ has an expectation");
    for &(file, variant, line) in cases {
        let err = mtx::read_matrix_market(dir.join(file)).expect_err(file);
        assert_eq!(expect(&err), (variant, line), "{file}: {err}");
        assert!(
            err.to_string().contains(&format!("line {line}")),
            "{file}: message `{err}` names the line"
        );
        // The same bytes gzipped give the same error.
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let err = mtx::read_matrix_market_from(Cursor::new(gzip(&bytes))).expect_err(file);
        assert_eq!(expect(&err), (variant, line), "{file} (gz): {err}");
    }
}

#[test]
fn zero_based_message_says_so() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad_files");
    let err = mtx::read_matrix_market(dir.join("zero_based.mtx")).unwrap_err();
    assert!(err.to_string().contains("1-based"), "{err}");
    let err = mtx::read_matrix_market(dir.join("complex.mtx")).unwrap_err();
    assert!(err.to_string().contains("complex"), "{err}");
}

#[test]
fn truncated_gzip_stream_is_an_io_error_not_a_panic() {
    let m = generate::uniform_random(300, 300, 8.0, 1).unwrap();
    let mut text = Vec::new();
    mtx::write_matrix_market_to(&mut text, &m).unwrap();
    let gz = gzip(&text);
    for cut in [gz.len() / 2, gz.len() - 4, 11] {
        let err = mtx::read_matrix_market_from(Cursor::new(gz[..cut].to_vec())).unwrap_err();
        match err {
            MtxError::Io { line, .. } => assert!(line >= 1, "cut {cut}"),
            MtxError::Banner { .. } if cut == 11 => {} // the stream ends inside the gzip header
            other => panic!("cut {cut}: expected an I/O error, got {other}"),
        }
    }
    // Corrupt (not truncated) deflate data is an error too.
    let mut bad = gz.clone();
    let mid = bad.len() / 2;
    bad[mid..mid + 8].fill(0xAA);
    assert!(mtx::read_matrix_market_from(Cursor::new(bad)).is_err());
}

#[test]
fn truncated_plain_file_reports_too_few_entries_at_the_last_line() {
    let m = generate::banded(50, 2, 1.0, 3).unwrap();
    let mut text = Vec::new();
    mtx::write_matrix_market_to(&mut text, &m).unwrap();
    let text = String::from_utf8(text).unwrap();
    let keep: Vec<&str> = text.lines().take(20).collect();
    let err = read_str(&(keep.join("\n") + "\n")).unwrap_err();
    assert!(
        matches!(
            err,
            MtxError::TooFewEntries {
                line: 20,
                found: 17,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn read_matrix_rejects_unknown_extensions() {
    let p = tmp("matrix.csv");
    std::fs::write(&p, "1,2\n").unwrap();
    assert!(matches!(
        mtx::read_matrix(&p),
        Err(MtxError::UnknownExtension { .. })
    ));
    assert!(matches!(
        mtx::read_matrix(tmp("missing.mtx")),
        Err(MtxError::Io { line: 0, .. })
    ));
}

#[test]
fn header_only_read() {
    let p = tmp("header.mtx.gz");
    std::fs::write(
        &p,
        gzip(b"%%MatrixMarket matrix coordinate pattern symmetric\n% c\n7 7 9\n"),
    )
    .unwrap();
    let h = mtx::read_header(&p).unwrap();
    assert_eq!((h.rows, h.cols, h.entries), (7, 7, 9));
    assert_eq!(h.field, mtx::Field::Pattern);
    assert_eq!(h.symmetry, mtx::Symmetry::Symmetric);
}

#[test]
fn written_file_snapshot() {
    let m = csr_from_triplets(
        3,
        4,
        &[(0, 0, 1.0), (0, 3, -0.1), (2, 1, 1e-30), (2, 2, 3.25e7)],
    )
    .unwrap();
    let mut out = Vec::new();
    mtx::write_matrix_market_to(&mut out, &m).unwrap();
    insta::assert_snapshot!("io_written_small", String::from_utf8(out).unwrap());
}

fn arb_matrix() -> impl Strategy<Value = Csr> {
    (0usize..40, 0usize..40).prop_flat_map(|(rows, cols)| {
        let entry = (0..rows.max(1) as u32, 0..cols.max(1) as u32, any::<f32>());
        proptest::collection::vec(entry, 0..200).prop_map(move |mut t| {
            if rows == 0 || cols == 0 {
                t.clear();
            }
            csr_from_triplets(rows, cols, &t).unwrap()
        })
    })
}

fn same_bits(a: &Csr, b: &Csr) -> bool {
    a.shape() == b.shape()
        && a.indptr().raw_storage() == b.indptr().raw_storage()
        && a.indices() == b.indices()
        && a.data()
            .iter()
            .zip(b.data())
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any matrix (any f32 bit pattern, NaN and infinities included) survives write → read bit-exact.
    #[test]
    fn write_then_read_is_bit_exact(m in arb_matrix()) {
        let mut text = Vec::new();
        mtx::write_matrix_market_to(&mut text, &m).unwrap();
        let back = mtx::read_matrix_market_from(Cursor::new(text)).unwrap();
        prop_assert!(same_bits(&m, &back));
    }

    /// Generated matrices round trip through files, plain and gzip.
    #[test]
    fn generated_matrices_round_trip_through_files(seed in any::<u64>(), gz in any::<bool>()) {
        let m = generate::clustered_block_diagonal(150, 16, 0.3, 1.5, seed).unwrap();
        let p = tmp(&format!("rt_{seed}.mtx{}", if gz { ".gz" } else { "" }));
        mtx::write_matrix_market(&p, &m).unwrap();
        let back = mtx::read_matrix(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        prop_assert!(same_bits(&m, &back));
    }

    /// Arbitrary bytes after a valid banner never panic.
    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut text = b"%%MatrixMarket matrix coordinate real symmetric\n".to_vec();
        text.extend_from_slice(&body);
        let _ = mtx::read_matrix_market_from(Cursor::new(text));
    }

    /// Arbitrary printable entry lines never panic.
    #[test]
    fn arbitrary_entries_never_panic(body in "[0-9 .eE+\\-\n%a]{0,120}") {
        let text = format!("%%MatrixMarket matrix coordinate integer skew-symmetric\n4 4 3\n{body}");
        let _ = read_str(&text);
    }
}
