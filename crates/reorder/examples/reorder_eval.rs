//! Reordering evaluation: every method on every matrix of the shared datasets folder plus generated
//! R-MAT and clustered matrices (~1M and ~10M nnz, labels shuffled), symmetric mode.
//!
//! `cargo run --release -p tcsparse-reorder --example reorder_eval [-- --quick]`
//!
//! Prints a Markdown table (MeanNNZTC 8×8 and 16×8, 8×8 blocks, time in ns per nonzero) and a
//! summary per method. `--quick` skips the ~10M-nnz matrices. The datasets folder is
//! `$TCSPARSE_SHARED_DATASETS` or `../../../shared/datasets` from this crate.

mod common;

use common::{cpu_seconds, shuffled};
use std::path::PathBuf;
use std::time::Instant;
use tcsparse_formats::Csr;
use tcsparse_formats::generate::{clustered_block_diagonal, rmat};
use tcsparse_formats::mtx::read_matrix;
use tcsparse_reorder::metrics::window_stats;
use tcsparse_reorder::{METHODS, Mode, by_name};

fn datasets_dir() -> Option<PathBuf> {
    let d = std::env::var_os("TCSPARSE_SHARED_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    d.is_dir().then_some(d)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only SUBSTRING` keeps matching matrices; `--methods a,b` keeps those methods.
    let flag = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only = flag("--only");
    let methods: Vec<&str> = match flag("--methods") {
        Some(m) => METHODS
            .iter()
            .copied()
            .filter(|x| m.split(',').any(|y| y == *x))
            .collect(),
        None => METHODS.to_vec(),
    };
    let mut inputs: Vec<(String, Box<dyn Fn() -> Csr>)> = Vec::new();
    match datasets_dir() {
        Some(dir) => {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .expect("datasets folder")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".mtx.gz"))
                .collect();
            files.sort();
            for f in files {
                let name = f
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .trim_end_matches(".mtx.gz")
                    .to_string();
                inputs.push((
                    name,
                    Box::new(move || read_matrix(&f).expect("readable matrix")),
                ));
            }
        }
        None => eprintln!("note: shared datasets folder not found; generated matrices only"),
    }
    let mut gen_sizes = vec![(17u32, 65_536usize, "1M")];
    if !quick {
        gen_sizes.push((20, 655_360, "10M"));
    }
    for (scale, n, tag) in gen_sizes {
        inputs.push((
            format!("rmat-{tag} (shuffled)"),
            Box::new(move || {
                shuffled(
                    rmat(
                        scale,
                        if scale == 17 { 8 } else { 10 },
                        (0.57, 0.19, 0.19, 0.05),
                        1,
                    )
                    .unwrap(),
                    2,
                )
            }),
        ));
        inputs.push((
            format!("clustered-{tag} (shuffled)"),
            Box::new(move || shuffled(clustered_block_diagonal(n, 32, 0.4, 2.0, 3).unwrap(), 4)),
        ));
    }

    println!(
        "| matrix | rows | nnz | method | MeanNNZTC 8×8 | MeanNNZTC 16×8 | blocks 8×8 | B rows/window | ns/nnz |"
    );
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|");
    // Per method: (sum of 8×8 MeanNNZTC, sum of log improvement, count).
    let mut summary = vec![(0f64, 0f64, 0usize); METHODS.len()];
    let mut timing: Vec<(String, String, usize, f64, f64)> = Vec::new();
    for (name, load) in &inputs {
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let t = Instant::now();
        let a = load();
        eprintln!(
            "{name}: {}×{} nnz {} (loaded in {:.1}s)",
            a.rows(),
            a.cols(),
            a.nnz(),
            t.elapsed().as_secs_f64()
        );
        let base = window_stats(&a, 8, 8).mean_nnz_tc();
        let mode = if a.rows() == a.cols() {
            Mode::Symmetric
        } else {
            Mode::RowOnly
        };
        for (mi, method) in methods.iter().enumerate() {
            let m = by_name(method, 1).unwrap();
            let (t, c) = (Instant::now(), cpu_seconds());
            let p = m.permutation(&a, mode).expect("reordering");
            let secs = t.elapsed().as_secs_f64();
            let cpu_ns = (cpu_seconds() - c) * 1e9 / a.nnz().max(1) as f64;
            let b = p.apply_rows(&a).unwrap();
            let (s8, s16) = (window_stats(&b, 8, 8), window_stats(&b, 16, 8));
            let ns = secs * 1e9 / a.nnz().max(1) as f64;
            println!(
                "| {name} | {} | {} | {method} | {:.2} | {:.2} | {} | {:.1} | {:.0} | {:.0} |",
                a.rows(),
                a.nnz(),
                s8.mean_nnz_tc(),
                s16.mean_nnz_tc(),
                s8.blocks,
                s8.mean_distinct_cols(),
                ns,
                cpu_ns
            );
            let e = &mut summary[mi];
            e.0 += s8.mean_nnz_tc();
            if base > 0.0 {
                e.1 += (s8.mean_nnz_tc() / base).ln();
            }
            e.2 += 1;
            if name.contains("rmat") || name.contains("clustered") {
                timing.push((name.clone(), method.to_string(), a.nnz(), ns, cpu_ns));
            }
            eprintln!(
                "  {method:8} {:6.2} {:6.0} ns/nnz wall {:6.0} CPU",
                s8.mean_nnz_tc(),
                ns,
                cpu_ns
            );
        }
    }
    println!();
    println!("| method | mean MeanNNZTC 8×8 | geomean gain vs input order | matrices |");
    println!("|---|---:|---:|---:|");
    for (mi, method) in methods.iter().enumerate() {
        let (s, l, c) = summary[mi];
        let c1 = c.max(1) as f64;
        println!(
            "| {method} | {:.2} | {:.2}× | {c} |",
            s / c1,
            (l / c1).exp()
        );
    }
    println!();
    println!("| generated matrix | method | nnz | ns/nnz wall | ns/nnz CPU |");
    println!("|---|---|---:|---:|---:|");
    for (n, m, nnz, ns, cpu) in timing {
        println!("| {n} | {m} | {nnz} | {ns:.0} | {cpu:.0} |");
    }
}
