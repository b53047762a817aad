//! The gather reduction of the window-staged CSR layout on Matrix Market files: per window cut,
//! the longest row, the windows, the staged B rows Σ|U_w| against one gathered row per nonzero, and the bytes a
//! product at `--n` must move (the numbers of docs/kernels/staged-spmm.md).
//!
//! `cargo run --release -p tcsparse-formats --example staged_reduction -- [--n 128] FILE.mtx.gz…`

use std::time::Instant;

use tcsparse_formats::mtx::read_matrix;
use tcsparse_formats::staged::{StagedCsr, StagedSpec};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut n = 128usize;
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--n" {
            n = it.next().and_then(|v| v.parse().ok()).expect("--n N");
        } else {
            files.push(a.clone());
        }
    }
    println!(
        "| matrix | rows | nnz | S | cap | max rows | windows | Σ|U_w| | nnz/Σ|U_w| | gathers MB (CSR) | staged MB | A MB | C MB | build ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &files {
        let a = read_matrix(std::path::Path::new(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let name = std::path::Path::new(f)
            .file_name()
            .map_or_else(String::new, |s| s.to_string_lossy().replace(".mtx.gz", ""));
        let mb = |bytes: usize| bytes as f64 / 1e6;
        let longest = a.longest_row();
        println!("| {name}: longest row {longest} |");
        for (s, cap) in [(32u32, 768u32), (64, 384), (32, 1792)] {
            for max_rows in [32u32, 64, 128, 256] {
                let spec = StagedSpec {
                    max_window_rows: max_rows,
                    slot_cap: cap,
                };
                let t = Instant::now();
                let built = StagedCsr::build(&a, &spec);
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let st = match built {
                    Ok(st) => st,
                    Err(e) => {
                        println!(
                            "| {name} | {} | {} | {s} | {cap} | {max_rows} | refused: {e} |",
                            a.rows(),
                            a.nnz()
                        );
                        continue;
                    }
                };
                let u = st.staged_rows();
                // A as the kernel reads it: row offsets, slots (u16), values, windows and lists.
                let a_bytes = 4 * (a.rows() + 1) + 6 * a.nnz() + 8 * (st.windows() + 1) + 4 * u;
                println!(
                    "| {name} | {} | {} | {s} | {cap} | {max_rows} | {} | {u} | {:.2} | {:.1} | {:.1} | {:.2} | {:.2} | {ms:.1} |",
                    a.rows(),
                    a.nnz(),
                    st.windows(),
                    a.nnz() as f64 / u.max(1) as f64,
                    mb(4 * n * a.nnz()),
                    mb(4 * n * u),
                    mb(a_bytes),
                    mb(4 * n * a.rows()),
                );
            }
        }
    }
}
