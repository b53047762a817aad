//! Reads every shared real matrix (`shared/datasets/*.mtx.gz`) and checks its shape and nnz against
//! the header. Fails when the folder is absent unless the run allows the skip (`common::shared_dir`).

mod common;

use std::path::PathBuf;

use tcsparse_formats::mtx::{self, Symmetry};

#[test]
fn every_shared_matrix_matches_its_header() {
    let Some(files) = common::shared_matrices() else {
        return;
    };
    for p in files {
        let h = mtx::read_header(&p).unwrap();
        let m = mtx::read_matrix(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(
            (m.rows() as u64, m.cols() as u64),
            (h.rows, h.cols),
            "{}",
            p.display()
        );
        let diag = (0..m.rows())
            .filter(|&r| {
                let ip = m.indptr();
                let o = ip.raw_storage();
                m.indices()[o[r] as usize..o[r + 1] as usize]
                    .binary_search(&(r as u32))
                    .is_ok()
            })
            .count() as u64;
        let expect = match h.symmetry {
            Symmetry::General => h.entries,
            Symmetry::Symmetric | Symmetry::SkewSymmetric => 2 * h.entries - diag,
        };
        assert_eq!(m.nnz() as u64, expect, "{}", p.display());
        if p.file_name().unwrap() == "bcsstk17.mtx.gz" {
            assert_eq!((h.entries, m.nnz()), (219_812, 428_650));
        }
        eprintln!(
            "{}: {}x{} nnz {}",
            p.file_name().unwrap().to_string_lossy(),
            m.rows(),
            m.cols(),
            m.nnz()
        );
    }
}

/// Reader throughput on decompressed xenon1 (the largest real-valued file). Run with
/// `cargo test --release -p tcsparse-formats --test io_datasets -- --ignored --nocapture`.
#[test]
#[ignore = "timing: run in release to measure reader MB/s"]
fn reader_throughput_on_xenon1() {
    use std::io::Read;
    let Some(dir) = common::shared_dir() else {
        return;
    };
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(dir.join("xenon1.mtx.gz")).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let plain = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xenon1.mtx");
    std::fs::write(&plain, &text).unwrap();
    let mb = text.len() as f64 / 1e6;
    for (name, path) in [
        ("plain", plain.clone()),
        ("gzip", dir.join("xenon1.mtx.gz")),
    ] {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let m = mtx::read_matrix_market(&path).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            assert_eq!(m.nnz(), 1_181_120);
        }
        eprintln!(
            "xenon1 {name}: {mb:.1} MB of text in {best:.3} s = {:.0} MB/s",
            mb / best
        );
    }
    let t = std::time::Instant::now();
    let m = mtx::read_matrix_market_from(std::io::Cursor::new(&text)).unwrap();
    let s = t.elapsed().as_secs_f64();
    eprintln!("xenon1 in memory: {:.0} MB/s ({} nnz)", mb / s, m.nnz());
    std::fs::remove_file(plain).unwrap();
}
