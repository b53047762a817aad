//! The parallel Matrix Market reader: the matrix and every error (variant, line, message) do not
//! depend on how the text is cut into blocks and pieces or on the thread count; values beyond the
//! f32 range are refused, subnormals kept; the parallel CSR build sums duplicates in input order.

use std::collections::BTreeMap;
use std::io::{Cursor, Write};

use proptest::prelude::*;
use tcsparse_formats::csr::{csr_from_triplets, csr_from_triplets_with};
use tcsparse_formats::mtx::{self, MtxError};
use tcsparse_formats::{Csr, Limits, generate};

const LIMIT: Limits = Limits::new(1 << 30);

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Outcome of a read as comparable text: the matrix's arrays (value bits) or the error message
/// (which names the variant's line and detail).
fn outcome(r: Result<Csr, MtxError>) -> String {
    match r {
        Ok(m) => format!(
            "ok {:?} {:?} {:?} {:?}",
            m.shape(),
            m.row_offsets(),
            m.indices(),
            m.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        ),
        Err(e) => format!("err {e}"),
    }
}

fn read_default(bytes: &[u8]) -> String {
    outcome(mtx::read_matrix_market_from_with(
        Cursor::new(bytes),
        &LIMIT,
    ))
}

fn read_cut(bytes: &[u8], block: usize, piece: usize, prefetch: bool) -> String {
    outcome(mtx::read_matrix_market_chunked(
        Cursor::new(bytes),
        &LIMIT,
        block,
        piece,
        prefetch,
    ))
}

fn line_strategy() -> impl Strategy<Value = String> {
    let num = prop_oneof![
        6 => (1u64..7).prop_map(|v| v.to_string()),
        1 => prop::sample::select(vec!["0", "9", "x", "-1", "1.5", ""]).prop_map(str::to_string),
    ];
    let value = prop_oneof![
        5 => (-40i32..40).prop_map(|v| format!("{}", v as f32 / 8.0)),
        1 => prop::sample::select(vec![
            "1e39", "-3.5e38", "3.4028235e38", "1e-45", "-7e-46", "nan", "-inf", "Infinity", "abc",
            "1e", "",
        ])
        .prop_map(str::to_string),
    ];
    prop_oneof![
        8 => (num.clone(), num, value).prop_map(|(r, c, v)| format!("{r} {c} {v}")),
        1 => Just("% comment".to_string()),
        1 => Just("   ".to_string()),
        1 => Just("1 1 1 1".to_string()),
    ]
}

fn text_strategy() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let field = prop::sample::select(vec!["real", "integer", "pattern"]);
    let symmetry = prop::sample::select(vec!["general", "symmetric", "skew-symmetric"]);
    (
        field,
        symmetry,
        0u64..30,
        proptest::collection::vec(line_strategy(), 0..40),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(f, s, entries, lines, final_newline, gz)| {
            let mut t = format!("%%MatrixMarket matrix coordinate {f} {s}\n6 6 {entries}\n");
            t.push_str(&lines.join("\n"));
            if final_newline {
                t.push('\n');
            }
            (t.into_bytes(), gz)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any cut into blocks and pieces, read inline or by a reader thread, gives what one piece gives.
    #[test]
    fn the_cut_never_changes_the_result(
        (text, gz) in text_strategy(),
        block in prop::sample::select(vec![1usize, 2, 7, 64, 1 << 20]),
        piece in prop::sample::select(vec![1usize, 3, 16, 100, 1 << 20]),
        prefetch in any::<bool>(),
    ) {
        let bytes = if gz { gzip(&text) } else { text.clone() };
        let want = read_cut(&bytes, 1 << 20, 1 << 20, false);
        prop_assert_eq!(read_default(&bytes), want.clone());
        prop_assert_eq!(read_cut(&bytes, block, piece, prefetch), want);
    }

    /// The parallel CSR build equals an ordered map that sums duplicates in input order, on one
    /// thread and on three.
    #[test]
    fn csr_build_sums_duplicates_in_input_order(
        rows in 0usize..3000,
        cols in 1usize..50,
        raw in proptest::collection::vec((any::<u32>(), any::<u32>(), -1e3f32..1e3), 0..3000),
    ) {
        let t: Vec<(u32, u32, f32)> = if rows == 0 {
            vec![]
        } else {
            raw.iter()
                .map(|&(r, c, v)| (r % rows as u32, c % cols as u32, v))
                .collect()
        };
        let mut want: BTreeMap<(u32, u32), f32> = BTreeMap::new();
        for &(r, c, v) in &t {
            want.entry((r, c)).and_modify(|s| *s += v).or_insert(v);
        }
        let pool = |n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
        for threads in [1, 3] {
            let m = pool(threads).install(|| csr_from_triplets_with(rows, cols, &t, &LIMIT)).unwrap();
            let mut got = Vec::new();
            for r in 0..m.rows() {
                for k in m.row_offsets()[r] as usize..m.row_offsets()[r + 1] as usize {
                    got.push(((r as u32, m.indices()[k]), m.data()[k].to_bits()));
                }
            }
            let want: Vec<_> = want.iter().map(|(&k, v)| (k, v.to_bits())).collect();
            prop_assert_eq!(got, want);
        }
    }

    /// Real values parse exactly as the standard library parses them (fast-float2 underneath).
    #[test]
    fn real_values_parse_like_the_standard_library(
        token in prop_oneof![
            any::<f32>().prop_map(|v| format!("{v:?}")),
            any::<f64>().prop_map(|v| format!("{v:e}")),
            "[-+]?[0-9]{0,12}(\\.[0-9]{0,12})?([eE][-+]?[0-9]{1,3})?",
            "[-+]?(nan|NaN|inf|INF|infinity|Infinity|in|na|1e|e5|\\.|\\.e1|0x1)",
        ]
    ) {
        prop_assume!(!token.is_empty());
        let text = format!("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 {token}\n");
        let got = mtx::read_matrix_market_from_with(Cursor::new(text), &LIMIT);
        match token.parse::<f32>() {
            Ok(v) if v.is_infinite() && !token.to_ascii_lowercase().contains('n') => {
                // A finite number beyond the f32 range: refused, with its line.
                let e = got.unwrap_err();
                prop_assert!(
                    matches!(e, MtxError::Parse { line: 3, ref message } if message.contains("beyond the f32 range")),
                    "{}", e
                );
            }
            Ok(v) => {
                let m = got.unwrap();
                let (a, b) = (m.data()[0], v);
                prop_assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.is_sign_negative() == b.is_sign_negative()), "{} vs {}", a, b);
            }
            Err(_) => prop_assert!(
                matches!(got, Err(MtxError::Parse { line: 3, .. })),
                "`{}` is not a number, but {:?}", token, got.map(|m| m.data().to_vec())
            ),
        }
    }
}

/// A matrix large enough for many pieces, written out as text.
fn big_text() -> (Csr, Vec<u8>) {
    let m = generate::uniform_random(4000, 3000, 30.0, 7).unwrap();
    let mut text = Vec::new();
    mtx::write_matrix_market_to(&mut text, &m).unwrap();
    assert!(text.len() > 2 << 20, "{} bytes", text.len());
    (m, text)
}

fn lines_of(text: &[u8]) -> Vec<Vec<u8>> {
    text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn join(lines: &[Vec<u8>]) -> Vec<u8> {
    lines.join(&b'\n')
}

#[test]
fn a_file_of_many_pieces_reads_back_exactly_from_disk_and_memory() {
    let (m, text) = big_text();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("io_mtx_parallel");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("big.mtx");
    std::fs::write(&p, &text).unwrap();
    let (back, report) = mtx::read_matrix_with_report(&p).unwrap();
    assert_eq!(back, m);
    assert_eq!(report.file_bytes, text.len() as u64);
    assert_eq!(report.text_bytes, text.len() as u64);
    assert!(!report.gzip && report.seconds > 0.0);
    assert!(report.text_bytes_per_second() > 0.0);
    let p = dir.join("big.mtx.gz");
    let gz = gzip(&text);
    std::fs::write(&p, &gz).unwrap();
    let (back, report) = mtx::read_matrix_with_report(&p).unwrap();
    assert_eq!(back, m);
    assert_eq!(
        (report.file_bytes, report.text_bytes, report.gzip),
        (gz.len() as u64, text.len() as u64, true)
    );
    assert_eq!(mtx::read_matrix_market_from(Cursor::new(&text)).unwrap(), m);
}

#[test]
fn errors_deep_in_a_file_of_many_pieces_name_their_line() {
    let (_, text) = big_text();
    let lines = lines_of(&text);
    // Line numbers are 1-based; lines[k] is line k + 1. Lines 1–3 are banner, comment, size.
    let n = lines.len() - 1; // the last element is the empty string after the final newline
    for k in [3, 40_000, 40_001, 65_432, n - 1] {
        let mut bad = lines.clone();
        bad[k] = b"1 1 x".to_vec();
        for (block, piece) in [(32 << 20, 1 << 20), (1 << 20, 4096), (100_000, 777)] {
            let e = mtx::read_matrix_market_chunked(
                Cursor::new(join(&bad)),
                &LIMIT,
                block,
                piece,
                true,
            )
            .unwrap_err();
            assert!(
                matches!(e, MtxError::Parse { line, .. } if line == k as u64 + 1),
                "line {}: {e}",
                k + 1
            );
        }
    }
    // From a file on disk (positional reads of 1 MiB parts), the same lines.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("io_mtx_parallel");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("deep_error.mtx");
    for k in [3, 40_001, n - 1] {
        let mut bad = lines.clone();
        bad[k] = b"1 1 x".to_vec();
        std::fs::write(&p, join(&bad)).unwrap();
        let e = mtx::read_matrix_market(&p).unwrap_err();
        assert!(
            matches!(e, MtxError::Parse { line, .. } if line == k as u64 + 1),
            "file, line {}: {e}",
            k + 1
        );
    }
    // The file cut after line 50,000: too few entries, at the last line.
    let too_few = |e: &MtxError| {
        assert!(
            matches!(
                e,
                MtxError::TooFewEntries {
                    line: 50_000,
                    found: 49_997,
                    ..
                }
            ),
            "{e}"
        );
    };
    std::fs::write(&p, join(&lines[..50_000])).unwrap();
    too_few(&mtx::read_matrix_market(&p).unwrap_err());
    // One entry fewer declared: the last entry line is the first surplus one.
    let mut fewer = lines.clone();
    let size = String::from_utf8(fewer[2].clone()).unwrap();
    let nums: Vec<u64> = size.split(' ').map(|w| w.parse().unwrap()).collect();
    fewer[2] = format!("{} {} {}", nums[0], nums[1], nums[2] - 1).into_bytes();
    let e = mtx::read_matrix_market_from(Cursor::new(join(&fewer))).unwrap_err();
    assert!(
        matches!(e, MtxError::TooManyEntries { line, .. } if line == n as u64),
        "{e}"
    );
    // The same cut from memory.
    too_few(&mtx::read_matrix_market_from(Cursor::new(join(&lines[..50_000]))).unwrap_err());
    // A line too long in the middle.
    let mut long = lines.clone();
    long[70_000] = vec![b' '; (1 << 20) + 1];
    let e = mtx::read_matrix_market_from(Cursor::new(join(&long))).unwrap_err();
    assert!(
        matches!(e, MtxError::Parse { line: 70_001, ref message } if message.contains("longer than")),
        "{e}"
    );
}

#[test]
fn values_beyond_f32_are_refused_and_subnormals_kept() {
    let read = |v: &str| {
        mtx::read_matrix_market_from(Cursor::new(format!(
            "%%MatrixMarket matrix coordinate real general\n% c\n2 2 2\n1 1 1.0\n2 2 {v}\n"
        )))
    };
    for v in ["1e39", "-3.5e38", "3.4028236e38", "1e300"] {
        let e = read(v).unwrap_err();
        assert!(
            matches!(e, MtxError::Parse { line: 5, ref message }
                if message.contains(v) && message.contains("beyond the f32 range")),
            "{v}: {e}"
        );
    }
    // The largest finite f32 and the infinities as written stay.
    assert_eq!(read("3.4028235e38").unwrap().data()[1], f32::MAX);
    assert_eq!(read("-inf").unwrap().data()[1], f32::NEG_INFINITY);
    assert_eq!(read("Infinity").unwrap().data()[1], f32::INFINITY);
    // Subnormals, bit for bit: the smallest, the largest, one between.
    for bits in [1u32, 0x007f_ffff, 0x0001_2345, 0x8000_0001] {
        let v = f32::from_bits(bits);
        assert_eq!(read(&format!("{v:?}")).unwrap().data()[1].to_bits(), bits);
    }
    // Below half the smallest subnormal a value rounds to (signed) zero, as IEEE rounding says.
    assert_eq!(read("-1e-46").unwrap().data()[1].to_bits(), 0x8000_0000);
    // Integer files cannot overflow f32 (|i64| < 2^63).
    let m = mtx::read_matrix_market_from(Cursor::new(
        "%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 -9223372036854775808\n",
    ))
    .unwrap();
    assert_eq!(m.data()[0], -9.223_372e18);
}

#[test]
fn csr_from_triplets_names_the_first_entry_out_of_bounds() {
    let e = csr_from_triplets(3, 3, &[(0, 0, 1.0), (5, 0, 1.0), (0, 9, 1.0)]).unwrap_err();
    assert!(
        matches!(
            e,
            tcsparse_formats::CsrError::OutOfBounds { row: 5, col: 0, .. }
        ),
        "{e}"
    );
}
