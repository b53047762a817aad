//! The window-staged CSR layout's gather reduction `nnz / Σ|U_w|` after each row reordering: the
//! staged kernel stages each window's distinct B rows once, so an order that puts rows sharing
//! columns together stages fewer (docs/kernels/staged-spmm.md). Only the row order matters (a
//! window's distinct columns are counted, whatever their ids), so each method runs row-only.
//!
//! `cargo run --release -p tcsparse-reorder --example staged_reorder -- FILE.mtx.gz…`

use tcsparse_formats::mtx::read_matrix;
use tcsparse_formats::staged::{StagedCsr, StagedSpec};
use tcsparse_reorder::{METHODS, Mode, apply, by_name};

fn main() {
    println!(
        "| matrix | row order | S = 32, cap 768: nnz/Σ|U_w| (windows) | S = 64, cap 384 | S = 32, cap 1792 |"
    );
    println!("|---|---|---:|---:|---:|");
    for f in std::env::args().skip(1) {
        let a = read_matrix(std::path::Path::new(&f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        let name = std::path::Path::new(&f)
            .file_name()
            .map_or_else(String::new, |s| s.to_string_lossy().replace(".mtx.gz", ""));
        for method in METHODS {
            let r = by_name(method, 0).expect("known method");
            let Ok(p) = r.permutation(&a, Mode::RowOnly) else {
                continue;
            };
            let m = apply(&p, &a, Mode::RowOnly).expect("applies");
            let cell = |slot_cap: u32| {
                let spec = StagedSpec {
                    max_window_rows: 128,
                    slot_cap,
                };
                match StagedCsr::build(&m, &spec) {
                    Ok(s) => format!(
                        "{:.2} ({})",
                        m.nnz() as f64 / s.staged_rows().max(1) as f64,
                        s.windows()
                    ),
                    Err(_) => "refused".to_string(),
                }
            };
            println!(
                "| {name} | {method} | {} | {} | {} |",
                cell(768),
                cell(384),
                cell(1792)
            );
        }
    }
}
