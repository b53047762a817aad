//! A newcomer's first product: read a shipped matrix, prepare it once, multiply, print what the
//! engine did and the error against an f64 reference. Runs on the GPU when there is one and on the
//! CPU reference path otherwise (`TCSPARSE_FORCE_CPU=1` forces it).
//!
//! ```text
//! cargo run --release -p tcsparse --example quickstart [matrix.mtx|.mtx.gz|.npz] [N]
//! ```

use std::path::PathBuf;

use tcsparse::formats::reference::{max_scaled_error, spmm_f64};
use tcsparse::{Engine, Precision, PrepareOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../datasets/cora.mtx.gz")
    });
    let n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(64);

    // 1. Read (Matrix Market or SciPy .npz).
    let a = tcsparse::formats::mtx::read_matrix(&path)?;
    println!(
        "{}: {} × {}, {} nonzeros",
        path.display(),
        a.rows(),
        a.cols(),
        a.nnz()
    );

    // 2. Probe the GPU once, prepare once (reorder → format → plan → upload).
    let engine = Engine::new();
    println!("{}", engine.message());
    let opts = PrepareOptions::builder()
        .n(n)
        .precision(Precision::Tf32) // the default; Precision::F32 keeps to f32 kernels
        .build();
    let mut prepared = engine.prepare_spmm(&a, &opts)?;
    let r = prepared.report();
    println!("kernel:    {} ({})", r.kernel, r.kernel_note);
    println!(
        "precision: {}: {}",
        r.precision(),
        r.precision().bound_text()
    );
    println!(
        "prepare:   reorder {:.2} ms, build {:.2} ms, plan {:.2} ms, upload {:.2} ms, tune {:.2} ms",
        r.reorder_s * 1e3,
        r.build_s * 1e3,
        r.plan_s * 1e3,
        r.upload_s * 1e3,
        r.tune_s * 1e3
    );

    // 3. Multiply: C = A·B, B and C row-major in the matrix's own (original) row order.
    let b: Vec<f32> = (0..a.cols() * n)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let mut c = vec![0.0f32; a.rows() * n];
    let t = std::time::Instant::now();
    prepared.spmm(1.0, &b, 0.0, &mut c)?;
    println!(
        "spmm:      N = {n}, {:.3} ms (host call, transfers included)",
        t.elapsed().as_secs_f64() * 1e3
    );

    // 4. Check against the f64 reference: |C − C_ref| / (|A|·|B|) elementwise.
    let want = spmm_f64(&a, &b, n, n, false);
    let scale = spmm_f64(&a, &b, n, n, true);
    let err = max_scaled_error(&c, &want, &scale);
    let bound = prepared.error_bound();
    println!("error:     max scaled {err:.2e} (bound {bound:.2e})");
    if err > bound {
        return Err(format!("error {err:.2e} above the bound {bound:.2e}").into());
    }
    Ok(())
}
