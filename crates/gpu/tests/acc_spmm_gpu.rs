//! GPU tests of the Acc-SpMM kernel against the f64 reference with the TF32 bound
//! |C − C_ref| ≤ 2·2⁻¹⁰·(|α|·|A|·|B| + |β|·|C₀|), element-wise. Ignored without a GPU; with
//! `--include-ignored` on a machine without one they FAIL (Gpu::require), never pass vacuously.
//!
//! Covered: M and K not multiples of 8, empty windows (inside and trailing), hub rows, a banded
//! matrix, an empty matrix, N ∈ {8,16,24,32,64,128,256,384,512,1024}, padded ldb/ldc (B padding is
//! NaN and must never be read; C padding must stay untouched), β = 0 with NaN in C, β ≠ 0, both
//! kernel variants, unbalanced / chopped / packed / streamed / planner-balanced schedules (split
//! windows with atomics), and the shared real matrices.

mod data_support;

mod acc_support;

use data_support::{dataset_files, dataset_name};

use acc_support::*;
use cudarc::driver::CudaSlice;
use tcsparse_formats::Csr;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_gpu::baselines::cusparse::{CusparseCsr, CusparseSpmm, SpmmAlg};
use tcsparse_gpu::device_csr::DeviceCsr;
use tcsparse_gpu::spmm::acc::{
    AccSpmmDevice, AccVariant, FlatSchedule, emulate, flatten_acc_schedule, unbalanced_schedule,
};
use tcsparse_gpu::spmm::row_tile::{KERNELS, RowTileDevice, RowTileKernel, RowTileSchedule};
use tcsparse_gpu::{Dense, DenseMut, DeviceProduct, Gpu};
use tcsparse_planner::{AccSchedule, DeviceSpec, Eq4Model};

fn gpu() -> Gpu {
    Gpu::require().expect("this test needs a CUDA GPU")
}

#[allow(clippy::too_many_arguments)]
fn run_gpu(
    gpu: &Gpu,
    what: &str,
    a: &Csr,
    bt: &OwnedBitTcf,
    s: &FlatSchedule,
    variant: AccVariant,
    n: usize,
    alpha: f32,
    beta: f32,
    pad: usize,
) -> f64 {
    let (ldb, ldc, b, c0) = operands(a, n, pad, beta, 1000);
    let mut dev = AccSpmmDevice::upload_parts(gpu, &bt.parts(), s, variant).expect("upload");
    let bd = gpu.upload(&b).unwrap();
    let mut cd = gpu.upload(&c0).unwrap();
    let (bv, mut cv) = (Dense::new(&bd, n, ldb), DenseMut::new(&mut cd, n, ldc));
    dev.enqueue(alpha, &bv, beta, &mut cv).expect("launch");
    let got = gpu.download(&cd).unwrap();
    let err = check_result(what, a, alpha, &b, ldb, beta, &c0, &got, ldc, n);
    // The lane-exact CPU model must agree too (same TF32 rounding; only the f32 summation order
    // inside the tensor core may differ).
    let mut emu = c0.clone();
    emulate(&bt.parts(), s, alpha, &b, ldb, beta, &mut emu, ldc, n);
    check_result(
        &format!("{what} (emulator)"),
        a,
        alpha,
        &b,
        ldb,
        beta,
        &c0,
        &emu,
        ldc,
        n,
    );
    err
}

fn schedules(bt: &OwnedBitTcf, n: usize) -> Vec<(&'static str, FlatSchedule)> {
    let cuts = Cuts {
        chop: 3,
        pack: 4,
        stream: 7,
    };
    let bal = AccSchedule::balanced(&bt.rwo, &Eq4Model::paper(&DeviceSpec::h200()), n);
    acc_support::schedules(&bt.rwo, cuts, &bal)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn acc_spmm_edge_cases_match_reference() {
    let gpu = gpu();
    let mut worst = 0f64;
    for (name, a) in edge_matrices() {
        let bt = OwnedBitTcf::from_csr(&a);
        for &n in &[8usize, 16, 24, 32, 64, 128, 256, 384, 512, 1024] {
            for (sname, s) in schedules(&bt, n) {
                for variant in [
                    AccVariant::SharedMeta,
                    AccVariant::RegisterMeta,
                    AccVariant::CachedRows { log2_slots: 5 },
                    AccVariant::Paper,
                ] {
                    for &(alpha, beta, pad) in &[(1.0f32, 0.0f32, 0usize), (-0.75, 1.25, 5)] {
                        let what = format!("{name}/{sname}/{variant:?}/n={n}/α={alpha}/β={beta}");
                        worst = worst.max(run_gpu(
                            &gpu, &what, &a, &bt, &s, variant, n, alpha, beta, pad,
                        ));
                    }
                }
            }
        }
    }
    println!(
        "edge cases: worst scaled error {worst:.3e} (bound {:.3e})",
        2.0 * 2f64.powi(-10)
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn acc_spmm_hub_dominated_split_windows() {
    // A few windows hold most blocks: the balanced schedule must split them (atomics after the β
    // pre-scale) and still match.
    let gpu = gpu();
    let a = Gen::new(4000, 4000, 2, 11).with_hubs(1, 3000).build();
    let bt = OwnedBitTcf::from_csr(&a);
    let bal = AccSchedule::balanced(&bt.rwo, &Eq4Model::paper(&DeviceSpec::h200()), 128);
    let s = flatten_acc_schedule(&bt.rwo, &bal).unwrap();
    assert!(!s.split_windows.is_empty(), "expected split windows");
    for variant in [
        AccVariant::SharedMeta,
        AccVariant::RegisterMeta,
        AccVariant::CachedRows { log2_slots: 6 },
        AccVariant::Paper,
    ] {
        for &(beta, n) in &[(0.0f32, 128usize), (0.5, 64), (0.0, 8)] {
            run_gpu(
                &gpu,
                &format!("hub/{variant:?}/β={beta}/n={n}"),
                &a,
                &bt,
                &s,
                variant,
                n,
                1.0,
                beta,
                0,
            );
        }
    }
}

/// Runs `launch` (C = A·B with β = 0, ld = n) once into a fresh C, checks it against the f64
/// reference, then times it: (worst scaled error, median ms).
fn check_and_time(
    gpu: &Gpu,
    what: &str,
    a: &Csr,
    b: &[f32],
    n: usize,
    mut launch: impl FnMut(&mut CudaSlice<f32>) -> Result<(), tcsparse_gpu::GpuError>,
) -> (f64, f64) {
    let mut cd = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
    launch(&mut cd).unwrap();
    let got = gpu.download(&cd).unwrap();
    let c0 = vec![0f32; a.rows() * n];
    let err = check_result(what, a, 1.0, b, n, 0.0, &c0, &got, n, n);
    let t = gpu.time_launches(3, 20, || launch(&mut cd)).unwrap();
    (err, t.median_ms)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn acc_spmm_real_matrices_match_reference_and_time() {
    let gpu = gpu();
    // Timed columns: the six Acc-SpMM runs below, then every row-tile kernel, then cuSPARSE.
    let mut columns: Vec<String> = ["shared", "reg", "bal", "paper", "pk16", "pk16c"]
        .map(String::from)
        .to_vec();
    columns.extend(KERNELS.iter().map(|k| k.name().to_lowercase()));
    columns.push("cusp".into());
    let header: String = columns
        .iter()
        .map(|c| format!(" {:>12}", format!("{c} ms")))
        .collect();
    println!(
        "{:<22} {:>9} {:>10} {:>6} {:>5}{header} {:>9}",
        "matrix", "rows", "nnz", "nnz/tc", "N", "err"
    );
    for path in dataset_files(10 << 20) {
        let name = dataset_name(&path);
        let a = tcsparse_formats::mtx::read_matrix(&path).expect("read matrix");
        let bt = OwnedBitTcf::from_csr(&a);
        let unb = unbalanced_schedule(&bt.rwo);
        for &n in &[32usize, 128, 512] {
            let b = dense(a.cols(), n, n, 77);
            let bd = gpu.upload(&b).unwrap();
            let mut cd = gpu.alloc_zeros::<f32>(a.rows() * n).unwrap();
            let bal = AccSchedule::balanced(&bt.rwo, &Eq4Model::paper(&DeviceSpec::h200()), n);
            let bal = flatten_acc_schedule(&bt.rwo, &bal).unwrap();
            let pk16 = flatten_acc_schedule(&bt.rwo, &AccSchedule::packed(&bt.rwo, 16)).unwrap();
            let mut times = Vec::new();
            let mut err = 0f64;
            for (s, v) in [
                (&unb, AccVariant::SharedMeta),
                (&unb, AccVariant::RegisterMeta),
                (&bal, AccVariant::SharedMeta),
                (&bal, AccVariant::Paper),
                (&pk16, AccVariant::RegisterMeta),
                (&pk16, AccVariant::CachedRows { log2_slots: 7 }),
            ] {
                let mut dev = AccSpmmDevice::upload_parts(&gpu, &bt.parts(), s, v).unwrap();
                let (e, ms) =
                    check_and_time(&gpu, &format!("{name}/n={n}/{v:?}"), &a, &b, n, |c| {
                        dev.run(1.0, &bd, 0.0, c, n)
                    });
                err = err.max(e);
                times.push(ms);
            }
            // The row-tile kernels, 4 windows per thread block.
            for k in KERNELS {
                let m = RowTileTcf::from_csr(&a, k.window_rows as usize).unwrap();
                let mut dev =
                    RowTileDevice::upload_for(&gpu, &m, k, RowTileSchedule::Packed(4)).unwrap();
                let what = format!("{name}/n={n}/{}", k.name());
                let (e, ms) =
                    check_and_time(&gpu, &what, &a, &b, n, |c| dev.run(1.0, &bd, 0.0, c, n));
                err = err.max(e);
                times.push(ms);
            }
            let csr = CusparseCsr::new(&gpu, &a).unwrap();
            let mut sp = CusparseSpmm::new(&gpu, &csr, n, SpmmAlg::Default).unwrap();
            let tc = gpu
                .time_launches(3, 20, || sp.run(1.0, &bd, 0.0, &mut cd, n))
                .unwrap();
            times.push(tc.median_ms);
            let cells: String = times.iter().map(|t| format!(" {t:>12.4}")).collect();
            println!(
                "{:<22} {:>9} {:>10} {:>6.1} {:>5}{cells} {:>9.2e}",
                name,
                a.rows(),
                a.nnz(),
                a.nnz() as f64 / bt.bits.len().max(1) as f64,
                n,
                err
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn set_schedule_swaps_schedules_on_one_upload_and_rejects_foreign_ones() {
    let gpu = gpu();
    let a = Gen::new(301, 999, 3, 2).with_hubs(2, 600).build();
    let bt = tcsparse_formats::bittcf::BitTcf::from_csr(&a).unwrap();
    let rwo = bt.row_window_offset().to_vec();
    let n = 64;
    let b = dense(a.cols(), n, n, 77);
    let c0 = vec![f32::NAN; a.rows() * n];
    let bd = gpu.upload(&b).unwrap();
    let mut dev = AccSpmmDevice::upload(&gpu, &bt, &AccSchedule::unbalanced(&rwo)).unwrap();
    let run = |dev: &mut AccSpmmDevice, what: &str| {
        let mut cd = gpu.upload(&c0).unwrap();
        dev.run(1.0, &bd, 0.0, &mut cd, n).unwrap();
        let got = gpu.download(&cd).unwrap();
        check_result(what, &a, 1.0, &b, n, 0.0, &c0, &got, n, n);
    };
    run(&mut dev, "unbalanced");
    let bal = AccSchedule::balanced(&rwo, &Eq4Model::paper(&DeviceSpec::h200()), n);
    assert!(bal.num_split_windows() > 0, "the hubs must be split");
    dev.set_schedule(&gpu, &bal).unwrap();
    assert_eq!(dev.num_split_windows(), bal.num_split_windows());
    run(&mut dev, "balanced after set_schedule");
    dev.set_schedule(&gpu, &AccSchedule::packed(&rwo, 5))
        .unwrap();
    assert_eq!(
        (dev.num_tbs(), dev.num_split_windows()),
        ((rwo.len() - 1).div_ceil(5), 0)
    );
    run(&mut dev, "packed:5 after set_schedule");
    // A schedule made for another matrix is refused and the packed one stays usable.
    let other = Gen::new(301, 999, 7, 9).build();
    let other_bt = tcsparse_formats::bittcf::BitTcf::from_csr(&other).unwrap();
    let foreign = AccSchedule::unbalanced(other_bt.row_window_offset());
    assert!(dev.set_schedule(&gpu, &foreign).is_err());
    assert_eq!(dev.num_tbs(), (rwo.len() - 1).div_ceil(5));
    run(&mut dev, "packed:5 after a refused schedule");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cached_rows_variant_is_bit_identical_to_register_variant() {
    // The B-row cache changes where B rows are read from, never the arithmetic: every element must
    // equal the register variant's bit for bit (a stale or mixed cache slot would show here even
    // where it stays inside the TF32 error bound). Matrices whose windows share columns (banded,
    // clustered) so that rows are inserted, hit and evicted; tiny caches force conflicts.
    let gpu = gpu();
    let mats = banded_clustered_and_edges(2000, 3000, 21);
    for (name, a) in &mats {
        let bt = OwnedBitTcf::from_csr(a);
        for &n in &[32usize, 128, 264, 1000] {
            let b = dense(a.cols(), n, n, 5 + n as u64);
            let bd = gpu.upload(&b).unwrap();
            let c0 = vec![f32::NAN; a.rows() * n];
            for (sname, s) in [
                ("unbalanced", unbalanced_schedule(&bt.rwo)),
                (
                    "packed16",
                    flatten_acc_schedule(&bt.rwo, &AccSchedule::packed(&bt.rwo, 16)).unwrap(),
                ),
            ] {
                let mut dev =
                    AccSpmmDevice::upload_parts(&gpu, &bt.parts(), &s, AccVariant::RegisterMeta)
                        .unwrap();
                let run = |dev: &mut AccSpmmDevice| {
                    let mut cd = gpu.upload(&c0).unwrap();
                    dev.run(1.0, &bd, 0.0, &mut cd, n).unwrap();
                    gpu.download(&cd).unwrap()
                };
                let want = run(&mut dev);
                check_result(name, a, 1.0, &b, n, 0.0, &c0, &want, n, n);
                for log2_slots in [3u8, 5, 7] {
                    dev.set_variant(&gpu, AccVariant::CachedRows { log2_slots })
                        .unwrap();
                    let got = run(&mut dev);
                    let bad = want
                        .iter()
                        .zip(&got)
                        .position(|(w, g)| w.to_bits() != g.to_bits());
                    assert!(
                        bad.is_none(),
                        "{name}/{sname}/n={n}/cache 2^{log2_slots}: element {} differs: {} vs {}",
                        bad.unwrap(),
                        want[bad.unwrap()],
                        got[bad.unwrap()]
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cached_rows_variant_refuses_caches_beyond_the_device_limit() {
    let gpu = gpu();
    let a = Gen::new(64, 64, 4, 3).build();
    let bt = OwnedBitTcf::from_csr(&a);
    let s = unbalanced_schedule(&bt.rwo);
    let mut dev =
        AccSpmmDevice::upload_parts(&gpu, &bt.parts(), &s, AccVariant::RegisterMeta).unwrap();
    let err = dev
        .set_variant(&gpu, AccVariant::CachedRows { log2_slots: 11 })
        .expect_err("2^11 slots is above MAX_CACHE_LOG2");
    assert!(err.to_string().contains("at most"), "{err}");
    assert_eq!(dev.variant(), AccVariant::RegisterMeta, "old variant kept");
    // 2^10 slots · 132 B = 132 KiB per warp: fine for one warp (n = 32), too much for 8 warps.
    dev.set_variant(&gpu, AccVariant::CachedRows { log2_slots: 10 })
        .unwrap();
    let b = dense(a.cols(), 256, 256, 1);
    let bd = gpu.upload(&b).unwrap();
    let mut cd = gpu.alloc_zeros::<f32>(a.rows() * 256).unwrap();
    let err = dev
        .run(1.0, &bd, 0.0, &mut cd, 256)
        .expect_err("8 warps x 132 KiB cannot launch");
    assert!(err.to_string().contains("shared memory"), "{err}");
    dev.enqueue(
        1.0,
        &Dense::new(&bd, 32, 256),
        0.0,
        &mut DenseMut::new(&mut cd, 32, 256),
    )
    .expect("one warp fits");
    let got = gpu.download(&cd).unwrap();
    let c0 = vec![0f32; a.rows() * 256];
    check_result(
        "cache 2^10, n = 32",
        &a,
        1.0,
        &b,
        256,
        0.0,
        &c0,
        &got,
        256,
        32,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn row_tile_kernels_match_reference() {
    // The 16- and 32-row row-tile kernels on the edge-case matrices (ragged M and K, empty and trailing empty
    // windows, hubs, one row, empty) plus banded and clustered ones, every N shape (scalar tails,
    // several feature tiles), packed, unpacked and split (every block its own thread block, and 3
    // blocks per thread block: atomics, pre-scale, windows shared by thread blocks), β = 0 with
    // NaN-poisoned C and β ≠ 0 with padded leading dimensions (scalar path).
    let gpu = gpu();
    let mats = banded_clustered_and_edges(700, 1000, 31);
    let mut worst = 0f64;
    for ((name, a), kernel) in mats.iter().flat_map(|m| KERNELS.map(|k| (m, k))) {
        let m = RowTileTcf::from_csr(a, kernel.window_rows as usize).unwrap();
        let mut dev =
            RowTileDevice::upload_for(&gpu, &m, kernel, RowTileSchedule::Packed(1)).unwrap();
        for &n in &[8usize, 16, 24, 32, 40, 64, 100, 128, 264, 512, 1000] {
            for k in [
                RowTileSchedule::Packed(1),
                RowTileSchedule::Packed(4),
                RowTileSchedule::Split { max_blocks: 1 },
                RowTileSchedule::Split { max_blocks: 3 },
            ] {
                dev.set_schedule(&gpu, k).unwrap();
                for &(alpha, beta, pad) in &[(1.0f32, 0.0f32, 0usize), (-0.75, 1.25, 5)] {
                    let (ldb, ldc, b, c0) = operands(a, n, pad, beta, 3000);
                    let bd = gpu.upload(&b).unwrap();
                    let mut cd = gpu.upload(&c0).unwrap();
                    let (bv, mut cv) = (Dense::new(&bd, n, ldb), DenseMut::new(&mut cd, n, ldc));
                    dev.enqueue(alpha, &bv, beta, &mut cv).unwrap();
                    let got = gpu.download(&cd).unwrap();
                    let what = format!("{}/{name}/n={n}/{k}/α={alpha}/β={beta}", kernel.name());
                    worst = worst.max(check_result(
                        &what, a, alpha, &b, ldb, beta, &c0, &got, ldc, n,
                    ));
                }
            }
        }
    }
    println!("row-tile kernels: worst scaled error {worst:.3e}");
}

/// The inverse of the permutation `p`.
fn inverse(p: &[u32]) -> Vec<u32> {
    let mut inv = vec![0u32; p.len()];
    for (new, &old) in p.iter().enumerate() {
        inv[old as usize] = new as u32;
    }
    inv
}

/// `a` with input row r moved to row `new_of_old[r]` (and, with `cols_too`, column c to
/// `new_of_old[c]`), built from triplets: the host reference for a relabelled device build.
fn relabelled(a: &Csr, new_of_old: &[u32], cols_too: bool) -> Csr {
    let mut t = Vec::with_capacity(a.nnz());
    for (r, row) in a.outer_iterator().enumerate() {
        for (c, &v) in row.iter() {
            let c = if cols_too { new_of_old[c] } else { c as u32 };
            t.push((new_of_old[r], c, v));
        }
    }
    tcsparse_formats::csr::csr_from_triplets(a.rows(), a.cols(), &t).unwrap()
}

/// The plan cache's device builds of the dense tiles (from the CSR in its original order and a
/// relabelling, with the layout's stored skeleton or with the skeleton found on the GPU too) equal
/// the host-built layout's upload bit for bit (tiles, window prefix, block columns), for both
/// window heights, no relabelling, a row relabelling and (stored skeleton only) a symmetric one; a
/// skeleton that lacks one of the matrix's columns is refused with a typed error, not built.
#[test]
#[ignore = "needs a CUDA GPU"]
fn row_tile_dense_build_on_the_gpu_equals_the_host_upload() {
    let gpu = gpu();
    let mut mats = edge_matrices();
    mats.push(("square-random", Gen::new(300, 300, 9, 11).build()));
    for (name, a) in &mats {
        let mut rev: Vec<u32> = (0..a.rows() as u32).rev().collect();
        // A permutation that is neither the identity nor a reversal.
        if rev.len() > 2 {
            rev.swap(0, 2);
        }
        let mut cases: Vec<(&str, Option<&[u32]>, bool)> =
            vec![("none", None, false), ("rows", Some(&rev), false)];
        if a.rows() == a.cols() {
            cases.push(("symmetric", Some(&rev), true));
        }
        for (how, old_of_new, cols_too) in cases {
            let want_csr = match old_of_new {
                Some(p) => relabelled(a, &inverse(p), cols_too),
                None => a.clone(),
            };
            for kernel in KERNELS.into_iter().filter(|k| k.dense_tiles) {
                let window_rows = kernel.window_rows as usize;
                let what = format!("{name}/{how}/{}", kernel.name());
                let m = RowTileTcf::from_csr(&want_csr, window_rows).unwrap();
                let sched = RowTileSchedule::Split { max_blocks: 3 };
                let host = RowTileDevice::upload(&gpu, &m, true, sched).unwrap();
                let csr = DeviceCsr::upload(&gpu, a).unwrap();
                let stored = RowTileDevice::build_dense(
                    &gpu,
                    a,
                    &csr,
                    old_of_new,
                    cols_too,
                    &m.structure(),
                    kernel,
                    sched,
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                let mut devices = vec![("stored", stored)];
                if !cols_too {
                    let derived = RowTileDevice::build_dense_derived(
                        &gpu, a, &csr, old_of_new, kernel, sched,
                    )
                    .unwrap_or_else(|e| panic!("{what} derived: {e}"));
                    devices.push(("derived", derived));
                }
                let h = host.dense_tiles(&gpu).unwrap().unwrap();
                for (skeleton, dev) in devices {
                    let what = format!("{what} ({skeleton} skeleton)");
                    let d = dev.dense_tiles(&gpu).unwrap().unwrap();
                    assert_eq!(h.len(), d.len(), "{what}");
                    let differ = h
                        .iter()
                        .zip(&d)
                        .position(|(x, y)| x.to_bits() != y.to_bits());
                    assert_eq!(differ, None, "{what}: first differing tile slot");
                    assert_eq!(dev.num_tbs(), host.num_tbs(), "{what}");
                    assert_eq!(dev.kernel(), kernel, "{what}");
                    assert_eq!(dev.structure(&gpu).unwrap(), m.structure(), "{what}");
                }
            }
        }
    }
    // The skeleton of the diagonal without entry (5, 5): column 5 is missing from window 0.
    let diag: Vec<(u32, u32, f32)> = (0..64u32).map(|i| (i, i, 1.0 + i as f32)).collect();
    let a = tcsparse_formats::csr::csr_from_triplets(64, 64, &diag).unwrap();
    let mut t = diag.clone();
    t.remove(5);
    let b = tcsparse_formats::csr::csr_from_triplets(64, 64, &t).unwrap();
    let mb = RowTileTcf::from_csr(&b, 16).unwrap();
    let ma = RowTileTcf::from_csr(&a, 16).unwrap();
    let csr = DeviceCsr::upload(&gpu, &a).unwrap();
    let e = RowTileDevice::build_dense(
        &gpu,
        &a,
        &csr,
        None,
        false,
        &mb.structure(),
        RowTileKernel::TC16D,
        RowTileSchedule::Packed(1),
    )
    .expect_err("a foreign skeleton must be refused");
    assert!(e.to_string().contains("1 nonzeros"), "{e}");
    // Another matrix's upload: refused.
    assert!(
        RowTileDevice::build_dense(
            &gpu,
            &a,
            &DeviceCsr::upload(&gpu, &b).unwrap(),
            None,
            false,
            &ma.structure(),
            RowTileKernel::TC16D,
            RowTileSchedule::Packed(1)
        )
        .is_err()
    );
    // A kernel that does not run dense tiles of the skeleton's height: refused.
    for other in [
        RowTileKernel::TC16,
        RowTileKernel::TC32D,
        RowTileKernel::TC32D_TMA,
    ] {
        assert!(
            RowTileDevice::build_dense(
                &gpu,
                &a,
                &csr,
                None,
                false,
                &ma.structure(),
                other,
                RowTileSchedule::Packed(1)
            )
            .is_err(),
            "{}",
            other.name()
        );
    }
    // A relabelling that is not a permutation: refused before anything runs.
    let bad: Vec<u32> = vec![0; 64];
    assert!(
        RowTileDevice::build_dense(
            &gpu,
            &a,
            &csr,
            Some(&bad),
            false,
            &ma.structure(),
            RowTileKernel::TC16D,
            RowTileSchedule::Packed(1)
        )
        .is_err()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tma_kernels_equal_their_register_kernels_bit_for_bit() {
    // Same layout, same MMAs in the same order: the TMA pipeline must return the register
    // pipeline's bits (unsplit windows), NaN and ∞ included, on the edge matrices and one with non-finite values in
    // A and B, every N shape, packed and split schedules, packed leading dimensions (bulk
    // copies) and padded ones (ldb not a multiple of 4: the producer copies through registers),
    // β = 0 with NaN-poisoned C. (row_tile_kernels_match_reference checks them against f64.)
    let gpu = gpu();
    let mut mats: Vec<(&str, Csr)> = banded_clustered_and_edges(300, 280, 5);
    mats.push(("non-finite", non_finite_operands(8, 8).0));
    for kernel in [RowTileKernel::TC16D_TMA, RowTileKernel::TC32D_TMA] {
        for (name, a) in &mats {
            let m = RowTileTcf::from_csr(a, kernel.window_rows as usize).unwrap();
            let sched = RowTileSchedule::Packed(1);
            let mut tma = RowTileDevice::upload_for(&gpu, &m, kernel, sched).unwrap();
            let mut reg =
                RowTileDevice::upload_for(&gpu, &m, kernel.on_registers(), sched).unwrap();
            assert_eq!(tma.kernel(), kernel);
            // A layout of the other window height is refused.
            let other = RowTileTcf::from_csr(a, 48 - kernel.window_rows as usize).unwrap();
            assert!(RowTileDevice::upload_for(&gpu, &other, kernel, sched).is_err());
            for &n in &[8usize, 32, 100, 128, 512, 1000] {
                for k in [
                    RowTileSchedule::Packed(1),
                    RowTileSchedule::Packed(4),
                    RowTileSchedule::Split { max_blocks: 3 },
                ] {
                    tma.set_schedule(&gpu, k).unwrap();
                    reg.set_schedule(&gpu, k).unwrap();
                    for &(alpha, beta, pad) in &[(1.0f32, 0.0f32, 0usize), (-0.75, 1.25, 5)] {
                        let (ldb, ldc, mut b, c0) = operands(a, n, pad, beta, 4000);
                        if *name == "non-finite" {
                            b = non_finite_operands(n, ldb).1;
                        }
                        let bd = gpu.upload(&b).unwrap();
                        let mut got = Vec::new();
                        for dev in [&mut tma, &mut reg] {
                            let mut cd = gpu.upload(&c0).unwrap();
                            let bv = Dense::new(&bd, n, ldb);
                            dev.enqueue(alpha, &bv, beta, &mut DenseMut::new(&mut cd, n, ldc))
                                .unwrap();
                            got.push(gpu.download(&cd).unwrap());
                        }
                        let what = format!("{}/{name}/n={n}/{k}/β={beta}", kernel.name());
                        // Split windows add their thread blocks' partial sums with atomics, in
                        // no fixed order: there only the non-finite elements must agree (the f64
                        // test bounds the rest).
                        let split = matches!(k, RowTileSchedule::Split { .. });
                        for (i, (x, y)) in got[0].iter().zip(&got[1]).enumerate() {
                            let same = if split {
                                x.is_finite() == y.is_finite() && x.is_nan() == y.is_nan()
                            } else {
                                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
                            };
                            assert!(same, "{what}: element {i}: TMA {x}, registers {y}");
                        }
                        if *name == "non-finite" && n > 9 {
                            // +∞ in A meets B's positive... any sign: non-finite in row 3; NaN in row 40.
                            assert!((0..n).all(|f| !got[0][3 * ldc + f].is_finite()), "{what}");
                            assert!((0..n).all(|f| got[0][40 * ldc + f].is_nan()), "{what}");
                        }
                    }
                }
            }
        }
    }
}
