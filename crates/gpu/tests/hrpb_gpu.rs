//! GPU tests of the HRPB (cuTeSpMM) kernels against the f64 reference with the TF32 bound
//! |C − C_ref| ≤ 2·2⁻¹⁰·(|α|·|A|·|B| + |β|·|C₀|), element-wise. Ignored without a GPU; with
//! `--include-ignored` on a machine without one they FAIL (Gpu::require), never pass vacuously.
//!
//! Covered: empty panels (inside and trailing), one dense panel, M and K not multiples of 16,
//! rectangular (tall and wide), hub rows (split panels with atomics), an empty matrix,
//! N ∈ {8, 32, 100, 128, 512, 1000}, β = 0 with NaN in C, β ≠ 0, every kernel (k4, k8, the deep k8d4,
//! the warp-item k8w and k8 built for 10 blocks per SM, k8o) and the
//! split policies (none, wave, coarse wave, every brick its own piece, pieces of 3); then every shared dataset at N = 128/256/512 with timings against cuSPARSE.

mod data_support;

mod acc_support;

use data_support::{dataset_files, dataset_name};

use acc_support::*;
use cudarc::driver::CudaSlice;
use rayon::prelude::*;
use tcsparse_formats::Csr;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::reference::spmm_f64;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit, HrpbSpmm};
use tcsparse_gpu::{DeviceProduct, Gpu};

fn gpu() -> Gpu {
    Gpu::require().expect("this test needs a CUDA GPU")
}

/// The dataset timing's kernels and splits: all of them, or those named (comma-separated) in
/// `TCSPARSE_HRPB_KERNELS` (`k8w,k8s`) and `TCSPARSE_HRPB_SPLITS` (`none,wave,eq7`), to keep a
/// timed GPU run short. Every selected column is still checked against f64.
fn timed_columns() -> Vec<(HrpbMma, HrpbSplit, String)> {
    let pick = |var: &str, name: &str| {
        std::env::var(var).map_or(true, |v| v.split(',').any(|w| w.trim() == name))
    };
    let mut cols = Vec::new();
    for mma in HrpbMma::ALL {
        for split in SPLITS {
            let s = match split {
                HrpbSplit::None => "none",
                HrpbSplit::Wave => "wave",
                _ => "eq7",
            };
            if pick("TCSPARSE_HRPB_KERNELS", mma.name()) && pick("TCSPARSE_HRPB_SPLITS", s) {
                cols.push((mma, split, format!("{} {s}", mma.name())));
            }
        }
    }
    cols
}

/// Dataset timings: whole panels, the capped wave split (the default) and Eq. 7 alone.
const SPLITS: [HrpbSplit; 3] = [HrpbSplit::None, HrpbSplit::Wave, HrpbSplit::WaveCoarse(1)];
/// Edge cases also run every brick as its own piece (the most atomics) and pieces of 3 bricks.
const EDGE_SPLITS: [HrpbSplit; 5] = [
    HrpbSplit::None,
    HrpbSplit::Wave,
    HrpbSplit::WaveCoarse(4),
    HrpbSplit::Cap(1),
    HrpbSplit::Cap(3),
];

/// One product on the GPU with `C0` poisoned by NaN when β = 0, checked against f64.
fn check(
    gpu: &Gpu,
    what: &str,
    a: &Csr,
    dev: &mut HrpbSpmm,
    n: usize,
    alpha: f32,
    beta: f32,
) -> f64 {
    let b = dense(a.cols(), n, n, 1000 + n as u64);
    let mut c0 = dense(a.rows(), n, n, 2000 + n as u64);
    if beta == 0.0 {
        c0.iter_mut().for_each(|x| *x = f32::NAN);
    }
    let bd = gpu.upload(&b).unwrap();
    let mut cd = gpu.upload(&c0).unwrap();
    dev.run(alpha, &bd, beta, &mut cd, n).expect("launch");
    let got = gpu.download(&cd).unwrap();
    check_result(what, a, alpha, &b, n, beta, &c0, &got, n, n)
}

/// The edge-case matrices by name.
fn edge_cases() -> Vec<(&'static str, Csr)> {
    let mut v = Vec::new();
    // M and K not multiples of 16, empty panels inside (rows 32..80) and a trailing empty panel.
    let mut g = Gen::new(203, 77, 5, 1);
    g.empty_windows = 4..10;
    g.trailing_empty = true;
    v.push(("ragged+empty panels", g.build()));
    // Hubs: a few rows with hundreds of entries, so some panels are far above the mean (split).
    v.push(("hubs", Gen::new(517, 600, 3, 2).with_hubs(2, 400).build()));
    // Banded (full bricks).
    let mut g = Gen::new(300, 300, 8, 3);
    g.banded = true;
    v.push(("banded", g.build()));
    // Rectangular: tall and wide.
    v.push(("tall 1000x37", Gen::new(1000, 37, 4, 4).build()));
    v.push(("wide 45x2000", Gen::new(45, 2000, 40, 5).build()));
    // One dense panel: rows 16..32 of a 70×90 matrix hold every column, nothing else.
    let mut t = Vec::new();
    for r in 16..32u32 {
        for c in 0..90u32 {
            t.push((r, c, ((r * 31 + c * 7) % 13) as f32 / 13.0 - 0.5));
        }
    }
    v.push(("one dense panel", csr_from_triplets(70, 90, &t).unwrap()));
    // Empty matrix (every row written with 0 or β·C).
    v.push(("empty", csr_from_triplets(40, 33, &[]).unwrap()));
    v
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn hrpb_kernels_match_reference() {
    let gpu = gpu();
    let mut worst = 0f64;
    for (name, a) in edge_cases() {
        let h = Hrpb::from_csr(&a).unwrap();
        for mma in HrpbMma::ALL {
            for split in EDGE_SPLITS {
                let mut dev = HrpbSpmm::from_hrpb(&gpu, &h, mma, split).unwrap();
                for n in [8usize, 32, 100, 128, 512, 1000] {
                    let what = format!("{name}/{}/{split:?}/n={n}", mma.name());
                    worst = worst.max(check(
                        &gpu,
                        &format!("{what}/β=0"),
                        &a,
                        &mut dev,
                        n,
                        1.0,
                        0.0,
                    ));
                    if n == 100 || n == 128 {
                        worst = worst.max(check(
                            &gpu,
                            &format!("{what}/β≠0"),
                            &a,
                            &mut dev,
                            n,
                            -0.5,
                            0.75,
                        ));
                    }
                    if mma.syncs_split_panels() {
                        // The split panels' hand-off leaves its flags and counts at zero for
                        // the next launch (a captured graph's replay included).
                        let (slots, set) = dev.split_handoff_state(n).unwrap();
                        assert_eq!(
                            set, 0,
                            "{what}: {set} hand-off words left set ({slots} split panels)"
                        );
                    }
                }
                if name == "hubs" && split == HrpbSplit::Wave {
                    let s = dev.wave_split(128).unwrap();
                    println!(
                        "hubs/{}: waves {}, concurrent TBs {}, split panels {}",
                        mma.name(),
                        s.num_waves,
                        s.concurrent_tbs,
                        s.split_panels
                    );
                    assert!(s.split_panels > 0, "hubs should split a panel on one wave");
                }
            }
        }
    }
    println!("worst scaled error {worst:.3e}");
}

/// Largest scaled error |got − ab| / abs of a β = 0 product against its f64 reference (`ab`, and
/// `abs` = |A|·|B|), asserting every element finite and within the TF32 bound 2·2⁻¹⁰.
fn scaled_error(what: &str, got: &[f32], ab: &[f64], abs: &[f64]) -> f64 {
    got.par_iter()
        .zip(ab.par_iter().zip(abs.par_iter()))
        .enumerate()
        .map(|(i, (&g, (&w, &s)))| tf32_scaled_error(format_args!("{what}: C[{i}]"), g, w, s))
        .reduce(|| 0.0, f64::max)
}

/// A β = 0 product at width `n` on a shared dataset: B (seed 77) and C on the device, C reset to
/// NaN before every checked launch, and the f64 references A·B and |A|·|B|.
struct DatasetCase {
    n: usize,
    bd: CudaSlice<f32>,
    cd: CudaSlice<f32>,
    c0: Vec<f32>,
    ab: Vec<f64>,
    abs: Vec<f64>,
}

impl DatasetCase {
    fn new(gpu: &Gpu, a: &Csr, n: usize) -> Self {
        let b = dense(a.cols(), n, n, 77);
        Self {
            n,
            bd: gpu.upload(&b).unwrap(),
            cd: gpu.alloc_zeros::<f32>(a.rows() * n).unwrap(),
            c0: vec![f32::NAN; a.rows() * n],
            ab: spmm_f64(a, &b, n, n, false),
            abs: spmm_f64(a, &b, n, n, true),
        }
    }

    /// One launch of `d` on NaN C: its largest scaled error ([`scaled_error`], named `what`).
    fn check(&mut self, gpu: &Gpu, d: &mut HrpbSpmm, what: &str) -> f64 {
        let n = self.n;
        gpu.stream().memcpy_htod(&self.c0, &mut self.cd).unwrap();
        d.run(1.0, &self.bd, 0.0, &mut self.cd, n).unwrap();
        let got = gpu.download(&self.cd).unwrap();
        scaled_error(what, &got, &self.ab, &self.abs)
    }
}

/// Every shared dataset: correctness of every kernel under every split at N = 128, 256, 512 (β = 0, NaN
/// C), and median times against cuSPARSE (default algorithm) in the same process; prints the
/// geomean of cuSPARSE / best HRPB.
#[test]
#[ignore = "needs a CUDA GPU"]
fn hrpb_shared_datasets_match_reference_and_time() {
    let gpu = gpu();
    // Column labels: every (selected) kernel × split, then the k8 fill cap.
    let cols = timed_columns();
    let mut labels: Vec<String> = cols.iter().map(|c| c.2.clone()).collect();
    labels.push("k8 fill".into());
    print!(
        "{:<16} {:>8} {:>9} {:>6} {:>5}",
        "matrix", "rows", "nnz", "alpha", "N"
    );
    for l in &labels {
        print!(" {l:>10}");
    }
    println!(" {:>9} {:>8} {:>9}", "cusp ms", "speedup", "err");
    // Per column: log of cuSPARSE / its time (geomean per kernel and split at the end).
    let mut col_logs = vec![0f64; labels.len()];
    let mut logs = Vec::new();
    for path in dataset_files(u64::MAX) {
        let name = dataset_name(&path);
        let a = tcsparse_formats::mtx::read_matrix(&path).expect("read matrix");
        let h = Hrpb::from_csr(&a).unwrap();
        let alpha = a.nnz() as f64 / (64.0 * h.num_bricks().max(1) as f64);
        let mut devs: Vec<HrpbSpmm> = cols
            .iter()
            .map(|&(mma, split, _)| HrpbSpmm::from_hrpb(&gpu, &h, mma, split).unwrap())
            .collect();
        // k8 split at the two-wave brick cap of each N (the tuned engine's fifth HRPB candidate
        // splits its first kernel, k8wsc, at the same kind of cap).
        let mut fill = HrpbSpmm::from_hrpb(&gpu, &h, HrpbMma::K8, HrpbSplit::Wave).unwrap();
        let csr = CusparseCsr::new(&gpu, &a).unwrap();
        for n in [128usize, 256, 512] {
            fill.set_split(HrpbSplit::Cap(fill.fill_cap(n).unwrap()));
            // The f64 reference once per (matrix, N), compared in parallel.
            let mut case = DatasetCase::new(&gpu, &a, n);
            let mut times = Vec::new();
            let mut err = 0f64;
            for d in devs.iter_mut().chain([&mut fill]) {
                let what = format!("{name}/n={n}/{}/{:?}", d.mma().name(), d.split());
                err = err.max(case.check(&gpu, d, &what));
                let t = gpu
                    .time_launches(3, 20, || d.run(1.0, &case.bd, 0.0, &mut case.cd, n))
                    .unwrap();
                times.push(t.median_ms);
            }
            let mut sp = CusparseSpmm::new(&gpu, &csr, n, SpmmAlg::Default).unwrap();
            let tc = gpu
                .time_launches(3, 20, || sp.run(1.0, &case.bd, 0.0, &mut case.cd, n))
                .unwrap();
            let best = times.iter().copied().fold(f64::INFINITY, f64::min);
            let speedup = tc.median_ms / best;
            logs.push(speedup.ln());
            for (l, t) in col_logs.iter_mut().zip(&times) {
                *l += (tc.median_ms / t).ln();
            }
            print!(
                "{:<16} {:>8} {:>9} {:>6.3} {:>5}",
                name,
                a.rows(),
                a.nnz(),
                alpha,
                n
            );
            for t in &times {
                print!(" {t:>10.4}");
            }
            println!(" {:>9.4} {:>7.2}× {:>9.2e}", tc.median_ms, speedup, err);
        }
    }
    for (l, sum) in labels.iter().zip(&col_logs) {
        if !logs.is_empty() {
            println!(
                "geomean cuSPARSE / {l}: {:.3}×",
                (sum / logs.len() as f64).exp()
            );
        }
    }
    if !logs.is_empty() {
        let g = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
        println!(
            "geomean (hrpb alone, shared datasets): {g:.2}× over {} cases",
            logs.len()
        );
    }
}

/// One launch per kernel of the k8 family (k8w, k8wsc, k8o, k8sc, k8t, k8ts, k8wtd, or those named
/// in `TCSPARSE_HRPB_KERNELS`; wave split, N = 128, β = 0 with NaN in C) on the shared datasets named in `TCSPARSE_HRPB_PROBE` (comma-separated name
/// prefixes; default cora), each checked against f64 — short enough to run under Nsight Compute
/// (`ncu -k regex:hrpb_spmm_k8 … --exact hrpb_probe_launches_for_profiling`).
#[test]
#[ignore = "needs a CUDA GPU"]
fn hrpb_probe_launches_for_profiling() {
    let gpu = gpu();
    let want = std::env::var("TCSPARSE_HRPB_PROBE").unwrap_or_else(|_| "cora".into());
    let n = 128;
    let mut ran = 0;
    for path in dataset_files(u64::MAX) {
        let name = dataset_name(&path);
        if !want
            .split(',')
            .any(|w| !w.is_empty() && name.starts_with(w))
        {
            continue;
        }
        let a = tcsparse_formats::mtx::read_matrix(&path).expect("read matrix");
        let h = Hrpb::from_csr(&a).unwrap();
        let mut case = DatasetCase::new(&gpu, &a, n);
        let kernels = std::env::var("TCSPARSE_HRPB_KERNELS").unwrap_or_default();
        for mma in [
            HrpbMma::K8W,
            HrpbMma::K8WSC,
            HrpbMma::K8O,
            HrpbMma::K8SC,
            HrpbMma::K8T,
            HrpbMma::K8TS,
            HrpbMma::K8WTD,
        ] {
            if !kernels.is_empty() && !kernels.split(',').any(|w| w.trim() == mma.name()) {
                continue;
            }
            let mut d = HrpbSpmm::from_hrpb(&gpu, &h, mma, HrpbSplit::Wave).unwrap();
            let what = format!("probe {name}/n={n}/{}", mma.name());
            let e = case.check(&gpu, &mut d, &what);
            println!("{what}: {} bricks, scaled error {e:.2e}", h.num_bricks());
            ran += 1;
        }
    }
    assert!(
        ran > 0,
        "no shared dataset matches TCSPARSE_HRPB_PROBE={want}"
    );
}
