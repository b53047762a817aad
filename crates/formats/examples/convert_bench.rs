//! CSR → layout conversion speed on the shared datasets, in ns per nonzero (median of 5 runs,
//! after one warm-up run; the load average is printed because other processes distort it). Run
//! with
//! `cargo run --release -p tcsparse-formats --example convert_bench [DATASET_DIR]`.

use std::path::PathBuf;
use std::time::Instant;
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::metcf::MeTcf;

fn median_ns<T>(mut f: impl FnMut() -> T) -> f64 {
    std::hint::black_box(f());
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let s = Instant::now();
            std::hint::black_box(f());
            s.elapsed().as_nanos() as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("TCSPARSE_SHARED_DATASETS")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
                })
        });
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("no dataset folder at {}", dir.display());
        return;
    };
    let mut files: Vec<_> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".mtx.gz"))
        .collect();
    files.sort();
    // Other processes distort the numbers: print the load average with them.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "threads: {}, load average: {}",
        rayon::current_num_threads(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("| matrix | nnz | BitTCF | ME-TCF | HRPB | bitBSR | BitTCF→CSR |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for path in files {
        let a: Csr = match tcsparse_formats::mtx::read_matrix_market(&path) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("skip {}: {e}", path.display());
                continue;
            }
        };
        let nnz = a.nnz().max(1) as f64;
        let bt = median_ns(|| BitTcf::from_csr(&a).unwrap()) / nnz;
        let me = median_ns(|| MeTcf::from_csr(&a).unwrap()) / nnz;
        let hr = median_ns(|| Hrpb::from_csr(&a).unwrap()) / nnz;
        let bb = median_ns(|| BitBsr::from_csr(&a).unwrap()) / nnz;
        let f = BitTcf::from_csr(&a).unwrap();
        let back = median_ns(|| f.to_csr()) / nnz;
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".mtx.gz")
            .to_string();
        println!(
            "| {name} | {} | {bt:.2} | {me:.2} | {hr:.2} | {bb:.2} | {back:.2} |",
            a.nnz()
        );
    }
}
