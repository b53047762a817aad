//! Matrix Market read rate: writes a generated matrix once (R-MAT, `rmat:scale=19,ef=16` unless a
//! spec is given) to `FILE` when it does not exist, then reads it three times and prints the best
//! rate in MB/s of file bytes. Run with
//! `cargo run --release -p tcsparse-formats --example read_speed -- FILE [SPEC]`
//! (a `FILE` ending in `.gz` is written gzip-compressed; its rate counts compressed bytes and the
//! uncompressed text's rate is printed beside it).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use tcsparse_formats::generate::GeneratorSpec;
use tcsparse_formats::mtx;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: read_speed FILE [SPEC]");
        std::process::exit(2);
    };
    let spec = args.next().unwrap_or_else(|| "rmat:scale=19,ef=16".into());
    if !path.exists() {
        let spec = GeneratorSpec::from_str(&spec).unwrap_or_else(|e| panic!("{e}"));
        let m = spec.build().unwrap_or_else(|e| panic!("{e}"));
        mtx::write_matrix_market(&path, &m).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("wrote {} ({spec}, {} nonzeros)", path.display(), m.nnz());
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let mut best = f64::INFINITY;
    let mut nnz = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let m = mtx::read_matrix_market(&path).unwrap_or_else(|e| panic!("{e}"));
        best = best.min(t.elapsed().as_secs_f64());
        nnz = m.nnz();
    }
    println!(
        "{}: {bytes} bytes, {nnz} nonzeros, best of 3 reads {best:.3} s = {:.0} MB/s on {} threads",
        path.display(),
        bytes as f64 / best / 1e6,
        rayon::current_num_threads()
    );
}
