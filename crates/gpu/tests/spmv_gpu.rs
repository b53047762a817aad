//! GPU tests of the bitBSR SpMV kernels (ignored by default; `--include-ignored` on a GPU machine).
//! Without a GPU they FAIL (`Gpu::require`), never pass vacuously.
//!
//! Bound, element-wise against the f64 reference: |y − y_ref| ≤ 2⁻⁹·(|α|·(|A|·|X|) + |β|·|y₀|).
//! f16 and TF32 both keep 11 significant bits of A and X (relative rounding ≤ 2⁻¹¹ each, so ≤ 2⁻¹⁰
//! per product) and accumulate in f32; 2⁻⁹ leaves a factor 2 for the f32 sums. With β = 0, y is
//! poisoned with NaN first (it must never be read). The same check runs through the graph-timed
//! path and the cuSPARSE baseline (f32: bound 2⁻¹⁷, far looser than its rounding).

mod data_support;
#[path = "../../formats/tests/support/spmv_check.rs"]
mod spmv_check;

use data_support::for_each_dataset;
use spmv_check::{check, operands};

use cudarc::driver::{CudaSlice, DevicePtr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bitbsr_device::{DeviceBitBsr, TileStorage};
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_gpu::cusparse::CusparseCsr;
use tcsparse_gpu::spmv::baseline::{CusparseSpmvAlg, CusparseSpmvGraphable};
use tcsparse_gpu::spmv::csr::{CSR_CHUNKS, CsrSpmv, CsrWalk};
use tcsparse_gpu::spmv::graph::time_spmv;
use tcsparse_gpu::spmv::{
    BLOCK_LAYOUTS, BitBsrSpmv, CORE_LAYOUTS, MAX_RHS, MULTI_LAYOUTS, TC_LAYOUTS,
};
use tcsparse_gpu::{DeviceProduct, Gpu};

const TOL: f64 = 1.0 / 512.0;
/// Bound of the CUDA-core walk on F32 storage (f32 values, f32 X, f32 FMAs): 2⁻¹⁵·|A|·|X|, room for
/// the f32 rounding of sums of a few thousand products (the long tile-row below).
const TOL_F32_CORE: f64 = 1.0 / 32_768.0;

/// Every tile storage.
const ALL: [TileStorage; 3] = [TileStorage::F16, TileStorage::Tf32, TileStorage::F32];

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

/// `b` encoded with storage `st` and uploaded.
fn spmv_of(gpu: &Gpu, b: &BitBsr, st: TileStorage) -> BitBsrSpmv {
    BitBsrSpmv::new(gpu, &DeviceBitBsr::encode(b, st).expect("encode")).expect("upload")
}

/// The bound of the CUDA-core walks on storage `st`: f32 products on F32 storage, else 11 bits.
fn walk_tol(st: TileStorage) -> f64 {
    if st == TileStorage::F32 {
        TOL_F32_CORE
    } else {
        TOL
    }
}

/// `y = α·A·X + β·y₀` by `k.run` with X already on the device (`dx`) and y₀ uploaded: y.
fn run_on<K: DeviceProduct>(
    gpu: &Gpu,
    k: &mut K,
    dx: &impl DevicePtr<f32>,
    y0: &[f32],
    n: usize,
    (alpha, beta): (f32, f32),
) -> Vec<f32> {
    let mut dy = gpu.upload(y0).expect("y");
    k.run(alpha, dx, beta, &mut dy, n).expect("launch");
    gpu.download(&dy).expect("download")
}

/// `y = A·X` by `k.run` ([`run_on`], X = `x` on the device as `dx`), checked (`what`, `tol`).
#[allow(clippy::too_many_arguments)]
fn run_checked_on<K: DeviceProduct>(
    gpu: &Gpu,
    k: &mut K,
    a: &Csr,
    (x, dx): (&[f32], &impl DevicePtr<f32>),
    y0: &[f32],
    n: usize,
    what: &str,
    tol: f64,
) {
    let y = run_on(gpu, k, dx, y0, n, (1.0, 0.0));
    check(what, a, x, n, 1.0, 0.0, y0, &y, tol);
}

/// `y = α·A·X + β·y₀` by `k.run` on fresh operands (y₀ NaN when β = 0), checked (`what`, `tol`).
#[allow(clippy::too_many_arguments)]
fn run_checked<K: DeviceProduct>(
    gpu: &Gpu,
    k: &mut K,
    rng: &mut ChaCha8Rng,
    a: &Csr,
    n: usize,
    (alpha, beta): (f32, f32),
    what: &str,
    tol: f64,
) {
    let (x, y0) = operands(rng, a, n, beta);
    let dx = gpu.upload(&x).expect("x");
    let y = run_on(gpu, k, &dx, &y0, n, (alpha, beta));
    check(what, a, &x, n, alpha, beta, &y0, &y, tol);
}

/// A product timed inside CUDA graphs (not imported: its methods share names with
/// [`DeviceProduct`]'s).
type GraphProduct = dyn tcsparse_gpu::spmv::graph::GraphSpmv;

/// `y = A·x` (`x`, `y0` on the device as `dx`, `dy`) timed inside a CUDA graph, then checked;
/// `what` names the case given the median time in µs.
#[allow(clippy::too_many_arguments)]
fn graph_checked(
    gpu: &Gpu,
    k: &GraphProduct,
    a: &Csr,
    (x, dx): (&[f32], &CudaSlice<f32>),
    (y0, dy): (&[f32], &mut CudaSlice<f32>),
    n: usize,
    what: impl FnOnce(f64) -> String,
    tol: f64,
) {
    let tm = time_spmv(gpu, k, dx, dy, n, 20, 3).expect("graph");
    let y = gpu.download(dy).expect("download");
    check(&what(tm.median_ms * 1e3), a, x, n, 1.0, 0.0, y0, &y, tol);
}

/// Our kernels (each storage; MMA kernels with n ∈ {1, 3, 8}, the CUDA-core walk with n = 1, its
/// set-bit layout with every n from 1 to 8; chunks 1/7/32, and the block layouts' own budgets
/// too, β = 0 with NaN y and β ≠ 0).
fn check_ours(gpu: &Gpu, rng: &mut ChaCha8Rng, name: &str, a: &Csr, storages: &[TileStorage]) {
    let b = BitBsr::from_csr(a).expect("bitBSR");
    for &st in storages {
        let mut k = spmv_of(gpu, &b, st);
        let core_tol = walk_tol(st);
        let mut modes = vec![(None, &[1, 3, MAX_RHS][..], TOL)];
        modes.extend(CORE_LAYOUTS.iter().map(|l| {
            let ns = if MULTI_LAYOUTS.contains(&l.0) {
                &[1, 2, 3, 4, 5, 6, 7, 8][..]
            } else {
                &[1][..]
            };
            // The tensor-core walk is a TF32 product on every storage: the MMA kernels' bound.
            let tol = if TC_LAYOUTS.contains(&l.0) {
                TOL
            } else {
                core_tol
            };
            (Some(l.0), ns, tol)
        }));
        for (core, ns, tol) in modes {
            k.set_core_layout(core).expect("layout");
            let mut chunks = vec![1, 7, 32];
            if let Some(b) = BLOCK_LAYOUTS.iter().find(|b| Some(b.0) == core) {
                chunks.extend(b.1);
            }
            for chunk in chunks {
                k.set_chunk(chunk).expect("work");
                for &n in ns {
                    assert_eq!(k.uses_core(n), core.is_some(), "{}", k.kernel_name(n));
                    for (alpha, beta) in [(1.0f32, 0.0f32), (-0.5, 0.75)] {
                        let what =
                            format!("{name} {} chunk {chunk} n {n} β {beta}", k.kernel_name(n));
                        run_checked(gpu, &mut k, rng, a, n, (alpha, beta), &what, tol);
                    }
                }
            }
        }
    }
}

fn triplets(rows: usize, cols: usize, t: &[(u32, u32, f32)]) -> Csr {
    csr_from_triplets(rows, cols, t).expect("csr")
}

/// A `rows × cols` matrix with `len(r, rng)` entries in row r (drawn before the row's entries) at
/// uniform random columns (duplicates summed), values uniform in (−1, 1).
fn rows_csr(
    rng: &mut ChaCha8Rng,
    rows: u32,
    cols: u32,
    len: impl Fn(u32, &mut ChaCha8Rng) -> u32,
) -> Csr {
    let mut t = Vec::new();
    for r in 0..rows {
        for _ in 0..len(r, rng) {
            t.push((r, rng.random_range(0..cols), rng.random_range(-1.0f32..1.0)));
        }
    }
    triplets(rows as usize, cols as usize, &t)
}

/// A `rows × cols` matrix of `count` entries at uniform random positions (duplicates summed),
/// values uniform in (−1, 1).
fn random_csr(rng: &mut ChaCha8Rng, rows: u32, cols: u32, count: usize) -> Csr {
    let t: Vec<_> = (0..count)
        .map(|_| {
            (
                rng.random_range(0..rows),
                rng.random_range(0..cols),
                rng.random_range(-1.0..1.0),
            )
        })
        .collect();
    triplets(rows as usize, cols as usize, &t)
}

/// The GPU, a generator seeded with `seed`, and a random `rows × cols` matrix of `count` entries
/// drawn from it ([`random_csr`]) with its bitBSR.
fn random_case(seed: u64, rows: u32, cols: u32, count: usize) -> (Gpu, ChaCha8Rng, Csr, BitBsr) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a = random_csr(&mut rng, rows, cols, count);
    let b = BitBsr::from_csr(&a).expect("bitBSR");
    (gpu(), rng, a, b)
}

/// The CSR walks (`spmv_csr{n}`, `spmv_csrrows{n}`) on `a` for n = 2..8 at budgets `chunks`, β = 0
/// with NaN y and β ≠ 0, through `run` and (the last budget, n = 8) through a CUDA graph: f32
/// products, bound [`TOL_F32_CORE`].
fn check_csr_walk(gpu: &Gpu, rng: &mut ChaCha8Rng, name: &str, a: &Csr, chunks: &[u32]) {
    let ca = CusparseCsr::new(gpu, a).expect("upload");
    let mut k = CsrSpmv::new(gpu, a, ca.device(), chunks[0]).expect("csr walk");
    for walk in CsrWalk::ALL {
        k.set_walk(walk);
        for &c in chunks {
            k.set_chunk(c).expect("chunk");
            for n in 2..=MAX_RHS {
                for (alpha, beta) in [(1.0f32, 0.0f32), (-0.75, 0.5)] {
                    let what = format!(
                        "{name} {} chunk {c} ({} split rows) β {beta}",
                        k.kernel_name(n).unwrap(),
                        k.split_rows()
                    );
                    run_checked(gpu, &mut k, rng, a, n, (alpha, beta), &what, TOL_F32_CORE);
                }
            }
        }
        let n = MAX_RHS;
        let (x, y0) = operands(rng, a, n, 0.0);
        let dx = gpu.upload(&x).expect("x");
        let mut dy = gpu.upload(&y0).expect("y");
        k.prepare_width(n).expect("load");
        let kernel = k.kernel_name(n).unwrap();
        graph_checked(
            gpu,
            &k,
            a,
            (&x, &dx),
            (&y0, &mut dy),
            n,
            |us| format!("{name} graph {kernel} ({us:.2} µs)"),
            TOL_F32_CORE,
        );
    }
}

/// The CSR walk: rectangular, empty rows, one row ~1000× longer than the rest (split over many
/// warp items at every budget: the fix-up node), budget 1 (every nonzero its own item), and a
/// matrix without nonzeros; n = 1 is refused (cuSPARSE SpMV serves it).
#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_csr_walk_matches_f64() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    let a = rows_csr(&mut rng, 3001, 2999, |r, rng| {
        if (200..260).contains(&r) {
            0 // empty rows
        } else if r == 7 {
            20_000
        } else {
            rng.random_range(0..24)
        }
    });
    check_csr_walk(
        &gpu,
        &mut rng,
        "long row",
        &a,
        &[1, CSR_CHUNKS[0], CSR_CHUNKS[1], CSR_CHUNKS[2]],
    );
    let b = random_csr(&mut rng, 77, 1300, 900);
    check_csr_walk(&gpu, &mut rng, "wide", &b, &CSR_CHUNKS);
    // Graph-like rows (0, 1, 2, 7, 8, 9 or 17 nonzeros, runs of empty rows): the row walk's run
    // cuts, row ends at and across its 8-nonzero steps, items that start or end with empty rows.
    let lens = [1u32, 0, 2, 0, 0, 8, 1, 9, 0, 7, 2, 17, 1, 1, 0, 0, 0, 2];
    let graph = rows_csr(&mut rng, 5000, 4100, |r, _| {
        lens[(r as usize * 7 + r as usize / 13) % lens.len()]
    });
    check_csr_walk(
        &gpu,
        &mut rng,
        "short rows",
        &graph,
        &[1, 5, 8, CSR_CHUNKS[0], CSR_CHUNKS[2]],
    );
    let empty = triplets(40, 9, &[]);
    check_csr_walk(&gpu, &mut rng, "no nonzeros", &empty, &[64]);
    let ca = CusparseCsr::new(&gpu, &b).expect("upload");
    let mut k = CsrSpmv::new(&gpu, &b, ca.device(), 64).expect("csr walk");
    let dx = gpu.upload(&vec![0.0f32; b.cols()]).expect("x");
    let mut dy = gpu.upload(&vec![0.0f32; b.rows()]).expect("y");
    assert!(k.run(1.0, &dx, 0.0, &mut dy, 1).is_err(), "n = 1 refused");
    // Device arrays of another matrix: a typed error.
    assert!(CsrSpmv::new(&gpu, &a, ca.device(), 64).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_edge_shapes_match_f64() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let both = ALL;
    // M and K not multiples of 8/16, rectangular both ways, empty tile-rows (rows 24..47 empty).
    let mut t = Vec::new();
    for _ in 0..3000 {
        let r = rng.random_range(0..101u32);
        if (24..48).contains(&r) {
            continue;
        }
        t.push((r, rng.random_range(0..77u32), rng.random_range(-1.0..1.0)));
    }
    check_ours(&gpu, &mut rng, "101x77", &triplets(101, 77, &t), &both);
    let a = random_csr(&mut rng, 13, 1003, 4000);
    check_ours(&gpu, &mut rng, "13x1003", &a, &both);
    let a = random_csr(&mut rng, 999, 9, 4000);
    check_ours(&gpu, &mut rng, "999x9", &a, &both);
    // One tile-row 1000× longer than the rest (3 tiles each elsewhere).
    let mut t = Vec::new();
    for r in 0..400u32 {
        for j in 0..3u32 {
            t.push((
                r,
                (r / 8 * 8 + j * 8) % 24_000,
                1.0 - (r + j) as f32 / 500.0,
            ));
        }
    }
    for c in 0..3000u32 {
        t.push((17, c * 8 + (c % 5), 0.25 + (c % 3) as f32));
    }
    check_ours(
        &gpu,
        &mut rng,
        "long tile-row",
        &triplets(400, 24_000, &t),
        &both,
    );
    // Odd tile counts in the two halves of a warp (the published stale-tile bug): tile-row 0 has 1
    // tile, tile-row 1 has 4, tile-row 2 has 3, with a chunk large enough to pair whole rows.
    let mut t = Vec::new();
    for (tr, tiles) in [(0u32, 1u32), (1, 4), (2, 3), (3, 0), (4, 5)] {
        for b in 0..tiles {
            for i in 0..8 {
                t.push((
                    tr * 8 + i,
                    b * 8 + (i * 3) % 8,
                    1.0 + i as f32 / 8.0 + b as f32,
                ));
            }
        }
    }
    check_ours(&gpu, &mut rng, "odd pairs", &triplets(40, 48, &t), &both);
}

/// Values far beyond f16 (bcsstk18-like, up to 3e10) and far below its normal range (1e-9), one
/// magnitude class per tile-row (the f16 scale is per tile-row: it keeps 24 binary orders of
/// magnitude below the tile-row's maximum), X beyond f16 too: within the bound. A tile-row mixing
/// rows of 3e10 and rows of 1e-9 would lose the small rows to f16 underflow: f16 tiles are refused
/// for it (`f16_unfit_tile_row`; the facade falls back to TF32/f32 tiles).
#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_f16_never_overflows() {
    let gpu = gpu();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for mixed in [false, true] {
        let t: Vec<_> = (0..5000)
            .map(|i| {
                let r = rng.random_range(0..200u32);
                let v: f32 = rng.random_range(-1.0..1.0);
                let class = if mixed { r % 3 } else { (r / 8) % 3 };
                let s = match class {
                    0 => 3.0e10,
                    1 => 1.0e-9,
                    _ => 1.0,
                };
                (r, (i * 37 % 300) as u32, v * s)
            })
            .collect();
        let a = triplets(200, 300, &t);
        let b = BitBsr::from_csr(&a).expect("bitBSR");
        if mixed {
            let Err(e) = DeviceBitBsr::encode(&b, TileStorage::F16) else {
                panic!("f16 tiles accepted for tile-rows mixing rows 1e19 apart");
            };
            println!("f16 mixed tile-rows refused: {e}");
            continue;
        }
        let mut k = spmv_of(&gpu, &b, TileStorage::F16);
        let modes = [(1, None), (MAX_RHS, None)]
            .into_iter()
            .chain(MULTI_LAYOUTS.iter().map(|&l| (MAX_RHS, Some(l))))
            .chain(CORE_LAYOUTS.iter().map(|l| (1, Some(l.0))));
        for (n, core) in modes {
            k.set_core_layout(core).expect("layout");
            let x: Vec<f32> = (0..300 * n)
                .map(|i| rng.random_range(-1.0f32..1.0) * if i % 5 == 0 { 1.0e6 } else { 1.0 })
                .collect();
            let dx = gpu.upload(&x).expect("x");
            let y0 = vec![f32::NAN; 200 * n];
            let what = format!("f16 huge values {} n {n}", k.kernel_name(n));
            run_checked_on(&gpu, &mut k, &a, (&x, &dx), &y0, n, &what, TOL);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_graph_path_and_baseline_match_f64() {
    let (gpu, mut rng, a, b) = random_case(4, 2001, 1999, 20_000);
    let ca = CusparseCsr::new(&gpu, &a).expect("upload");
    for n in [1, MAX_RHS] {
        let (x, y0) = operands(&mut rng, &a, n, 0.0);
        let dx = gpu.upload(&x).expect("x");
        // (what, product, bound): ours, then every cuSPARSE algorithm the tunings time.
        let mut products: Vec<(String, Box<GraphProduct>, f64)> = Vec::new();
        for (st, core) in [
            (TileStorage::F16, None),
            (TileStorage::Tf32, None),
            (TileStorage::F16, Some("core")),
            (TileStorage::F32, Some("corew1")),
            (TileStorage::F16, Some("corew2")),
            (TileStorage::F16, Some("bits")),
            (TileStorage::F32, Some("bits")),
            (TileStorage::F16, Some("seg")),
            (TileStorage::F32, Some("seg")),
            (TileStorage::F16, Some("bitsw")),
            (TileStorage::F32, Some("bitsw")),
            (TileStorage::F16, Some("segw")),
            (TileStorage::F32, Some("segw")),
        ] {
            let mut k = spmv_of(&gpu, &b, st);
            k.set_core_layout(core).expect("layout");
            products.push((format!("graph {}", k.kernel_name(n)), Box::new(k), TOL));
        }
        for &alg in CusparseSpmvAlg::candidates(n) {
            let base = CusparseSpmvGraphable::with_alg(&gpu, &ca, n, alg).expect("prepare");
            assert_eq!(base.alg(), alg);
            let what = format!("cusparse {} graph", alg.name(n));
            products.push((what, Box::new(base), 1.0 / 131_072.0));
        }
        for (what, k, tol) in &products {
            let mut dy = gpu.upload(&y0).expect("y");
            let xs = (&x[..], &dx);
            let what = |us| format!("{what} n {n} ({us:.2} µs)");
            graph_checked(&gpu, k.as_ref(), &a, xs, (&y0, &mut dy), n, what, *tol);
        }
    }
    // SpMV has no CSR_ALG3: a typed error, not a cuSPARSE failure at the first call.
    assert!(CusparseSpmvGraphable::with_alg(&gpu, &ca, 1, CusparseSpmvAlg::CsrAlg3).is_err());
}

/// The set-bit walks with X not 16-byte aligned (a sub-slice one float in): the entries run their
/// scalar-load instantiation there (v9: the aligned one is compiled apart), every n, both walk
/// storages, a split row (chunk 1) and whole rows (chunk 32); and the staged walks at n = 1 (their
/// 4-byte x copies).
#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_set_bit_walks_read_unaligned_x() {
    let (gpu, mut rng, a, b) = random_case(16, 1001, 997, 12_000);
    for st in [TileStorage::F16, TileStorage::F32] {
        let mut k = spmv_of(&gpu, &b, st);
        let tol = walk_tol(st);
        // The set-bit walks (every n) and the staged walks (n = 1: X segments copied 4 bytes at a
        // time when X is not 16-byte aligned).
        let layouts = MULTI_LAYOUTS.iter().filter(|l| !TC_LAYOUTS.contains(l));
        for layout in layouts.chain(&["staged", "staged16"]) {
            k.set_core_layout(Some(layout)).expect("layout");
            let max_n = if MULTI_LAYOUTS.contains(layout) {
                MAX_RHS
            } else {
                1
            };
            for chunk in [1, 32] {
                k.set_chunk(chunk).expect("work");
                for n in 1..=max_n {
                    let (x, y0) = operands(&mut rng, &a, n, 0.0);
                    let mut padded = vec![0.0f32];
                    padded.extend_from_slice(&x);
                    let dx = gpu.upload(&padded).expect("x");
                    let what = format!("unaligned x {} chunk {chunk} n {n}", k.kernel_name(n));
                    // X from its second element on: 4 bytes past the allocation's alignment.
                    let x_at = (&x[..], &dx.slice(1..));
                    run_checked_on(&gpu, &mut k, &a, x_at, &y0, n, &what, tol);
                }
            }
        }
    }
}

/// An infinite x entry in a column that a tile's row does not use must not reach that row (CSR
/// never multiplies it): the walks that multiply only set bits (the set-bit walks, `lane`,
/// `staged`, `staged16`, `blocklane`, `blockw`) give every row its finite f64 value.
#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_set_bit_walks_skip_unused_infinite_x() {
    let gpu = gpu();
    // One 8×8 tile: row r uses columns r and (r + 3) % 8 only; x[5] = inf reaches rows 2 and 5,
    // and rows 8..15 (a second tile-row over columns 8..15) not at all.
    let mut t: Vec<(u32, u32, f32)> = (0..8u32)
        .flat_map(|r| [(r, r, 1.0 + r as f32), (r, (r + 3) % 8, 0.5)])
        .collect();
    t.extend((8..16u32).map(|r| (r, r, 2.0)));
    let a = triplets(16, 16, &t);
    let mut x: Vec<f32> = (0..16).map(|i| 0.25 * i as f32 - 1.0).collect();
    x[5] = f32::INFINITY;
    let b = BitBsr::from_csr(&a).expect("bitBSR");
    let layouts = MULTI_LAYOUTS.iter().filter(|l| !TC_LAYOUTS.contains(l));
    for st in [TileStorage::F16, TileStorage::F32] {
        let mut k = spmv_of(&gpu, &b, st);
        for layout in layouts
            .clone()
            .chain(&["lane", "staged", "staged16", "blocklane", "blockw"])
        {
            k.set_core_layout(Some(layout)).expect("layout");
            let dx = gpu.upload(&x).expect("x");
            let y = run_on(&gpu, &mut k, &dx, &[f32::NAN; 16], 1, (1.0, 0.0));
            for (r, &yr) in y.iter().enumerate() {
                let uses_inf = r == 2 || r == 5;
                let want: f64 = t
                    .iter()
                    .filter(|e| e.0 as usize == r)
                    .map(|e| e.2 as f64 * x[e.1 as usize] as f64)
                    .sum();
                assert!(
                    if uses_inf {
                        yr == f32::INFINITY
                    } else {
                        (yr as f64 - want).abs() <= 1e-6 * want.abs().max(1.0)
                    },
                    "{} row {r}: {yr}, want {want}",
                    k.kernel_name(1)
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spmv_matches_f64_on_shared_datasets() {
    let gpu = gpu();
    for_each_dataset(5, |name, a, rng| {
        // TF32 everywhere; f16 too (bcsstk17-like value ranges are what the scales are for).
        check_ours(&gpu, rng, name, a, &ALL);
        check_csr_walk(&gpu, rng, name, a, &CSR_CHUNKS);
    });
}
