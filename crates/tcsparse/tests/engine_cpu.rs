//! CPU tests of the facade (no GPU needed): the CPU path of `Engine`/`Prepared` in original row
//! order for every reordering mode, α/β semantics (β = 0 never reads C), padded leading dimensions,
//! and typed errors on bad arguments.

#[path = "../../formats/tests/support/spmm_check.rs"]
mod spmm_check;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse::formats::Csr;
use tcsparse::formats::csr::csr_from_triplets;
use tcsparse::formats::reference::spmm_f64;
use tcsparse::reorder::Mode;
use tcsparse::{
    Backend, Balance, Engine, Error, ExecKernel, KernelRequest, PrepareOptions, Prepared,
    ReorderChoice, RowTileKernel, RowTileSchedule, StageCopy, StagedKernel, StagedSlice,
    StagedSpec,
};

use spmm_check::check_result;

fn matrix(rows: usize, cols: usize, per_row: usize, seed: u64) -> Csr {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Vec::new();
    for r in 0..rows {
        if r / 8 == 2 {
            continue; // an empty window
        }
        for _ in 0..rng.random_range(0..=2 * per_row) {
            t.push((
                r as u32,
                rng.random_range(0..cols) as u32,
                rng.random_range(-1.0f32..1.0),
            ));
        }
        if r < cols {
            t.push((r as u32, r as u32, 1.0)); // a diagonal, so reorderings have structure to find
        }
    }
    csr_from_triplets(rows, cols, &t).unwrap()
}

fn dense(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

#[test]
fn cpu_engine_says_so() {
    let e = Engine::cpu("test");
    assert_eq!(e.backend(), Backend::Cpu);
    assert!(
        e.message().contains("CPU reference path"),
        "{}",
        e.message()
    );
}

#[test]
fn cpu_path_matches_reference_in_original_order() {
    let engine = Engine::cpu("test");
    let square = matrix(77, 77, 4, 1);
    let rect = matrix(61, 45, 3, 2);
    let cases: Vec<(&Csr, ReorderChoice, Option<Mode>)> = vec![
        (&square, ReorderChoice::None, None),
        (
            &square,
            ReorderChoice::Method("affinity".into()),
            Some(Mode::Symmetric),
        ),
        (
            &square,
            ReorderChoice::Method("rcm".into()),
            Some(Mode::Symmetric),
        ),
        (
            &square,
            ReorderChoice::Method("degree".into()),
            Some(Mode::RowOnly),
        ),
        (&square, ReorderChoice::Auto, None),
        (
            &rect,
            ReorderChoice::Method("degree".into()),
            Some(Mode::RowOnly),
        ),
        (&rect, ReorderChoice::Auto, None),
    ];
    for (i, (a, reorder, mode)) in cases.into_iter().enumerate() {
        let opts = PrepareOptions::builder()
            .reorder(reorder)
            .mode(mode)
            .build();
        let mut p = engine.prepare_spmm(a, &opts).unwrap();
        assert_eq!(p.kernel(), ExecKernel::CpuBitTcf);
        assert_eq!(p.n(), 128, "the options' n");
        let r = p.report();
        assert_eq!((r.rows, r.cols, r.nnz), (a.rows(), a.cols(), a.nnz()));
        assert!(r.reorder_s >= 0.0 && r.build_s >= 0.0 && r.plan_s >= 0.0);
        for &(n, pad, alpha, beta) in &[
            (16usize, 0usize, 1.0f32, 0.0f32),
            (8, 3, -0.5, 2.0),
            (33, 1, 2.0, 0.0),
        ] {
            let (ldb, ldc) = (n + pad, n + 2 * pad);
            let b = dense(a.cols() * ldb, 10 + i as u64);
            let mut c0 = dense(a.rows() * ldc, 20 + i as u64);
            if beta == 0.0 {
                for r in 0..a.rows() {
                    c0[r * ldc] = f32::NAN; // never read when β = 0
                }
            }
            let mut c = c0.clone();
            p.set_n(n);
            p.spmm_strided(alpha, &b, ldb, beta, &mut c, ldc).unwrap();
            let what = format!("case {i}, n = {n}, pad = {pad}");
            check_result(&what, a, alpha, &b, ldb, beta, &c0, &c, ldc, n);
        }
    }
}

/// A 64 × 64 matrix prepared on the CPU engine with the degree reordering forced.
fn degree_reordered() -> (Engine, Csr, Prepared) {
    let engine = Engine::cpu("test");
    let a = matrix(64, 64, 3, 3);
    let opts = PrepareOptions::builder()
        .reorder(ReorderChoice::Method("degree".into()))
        .build();
    let p = engine.prepare_spmm(&a, &opts).unwrap();
    (engine, a, p)
}

#[test]
fn forced_reordering_is_applied_and_reported() {
    let (_, _, p) = degree_reordered();
    let r = p.report();
    assert!(r.reordered);
    assert_eq!(r.mode, Mode::Symmetric);
    let rr = r.reorder.as_ref().unwrap();
    assert_eq!(rr.method, "degree");
    assert!((r.mean_nnz_tc - rr.mean_nnz_tc_after).abs() < 1e-9);
    assert_eq!(p.permutation().unwrap().len(), 64);
}

#[test]
fn automatic_reordering_is_skipped_when_a_csr_kernel_is_requested() {
    // CSR kernels run in the original order, so Auto must not spend time reordering for them;
    // for Acc-SpMM (or Auto) it still runs.
    let engine = Engine::cpu("test");
    let a = matrix(64, 64, 3, 3);
    for (kernel, reorders) in [
        (KernelRequest::Cusparse, false),
        (KernelRequest::Csr, false),
        (KernelRequest::Staged(StagedSlice::S32), false),
        (KernelRequest::AccSpmm, true),
        (KernelRequest::Hrpb, true),
        (KernelRequest::Auto, true),
    ] {
        let opts = PrepareOptions::builder().kernel(kernel).build();
        let p = engine.prepare_spmm(&a, &opts).unwrap();
        // For the tensor-core kernels the gate runs first (and, on this unstructured matrix,
        // finds no order worth computing); for CSR kernels not even the gate runs.
        let considered = p.report().reorder.is_some() || p.report().reorder_gate.is_some();
        assert_eq!(considered, reorders, "{kernel:?}");
        if !reorders {
            assert!(
                p.permutation().is_none() && !p.report().reordered,
                "{kernel:?}"
            );
        }
    }
}

#[test]
fn every_named_request_prepares_at_tf32_and_only_tensor_core_ones_are_refused_at_f32() {
    let engine = Engine::cpu("test");
    let a = matrix(64, 64, 3, 3);
    let names = KernelRequest::names();
    assert_eq!(
        names,
        [
            "auto",
            "acc",
            "tc16",
            "tc32",
            "tc16d",
            "tc32d",
            "tc16d-tma",
            "tc32d-tma",
            "cusparse",
            "csr",
            "staged32",
            "staged64",
            "hrpb"
        ]
    );
    // Every named request but these runs on tensor cores.
    let cuda_cores = ["auto", "cusparse", "csr", "staged32", "staged64"];
    for name in names {
        let kernel = KernelRequest::from_name(name).unwrap();
        let at = |precision| {
            let opts = PrepareOptions::builder()
                .kernel(kernel)
                .precision(precision)
                .build();
            engine.prepare_spmm(&a, &opts)
        };
        assert!(at(tcsparse::Precision::Tf32).is_ok(), "{name}");
        for precision in [tcsparse::Precision::F32, tcsparse::Precision::Tf32x3] {
            match at(precision) {
                Err(Error::InvalidArgs(m)) => {
                    assert!(!cuda_cores.contains(&name), "{name}: {m}");
                    assert!(m.contains("runs on TF32 tensor cores"), "{name}: {m}");
                }
                Err(e) => panic!("{name} at {precision}: {e}"),
                Ok(_) => assert!(cuda_cores.contains(&name), "{name} at {precision}"),
            }
        }
    }
}

#[test]
fn a_nonzero_budget_per_warp_is_refused_for_every_kernel_but_csr() {
    let engine = Engine::cpu("test");
    let a = matrix(64, 64, 3, 3);
    let with = |kernel| {
        PrepareOptions::builder()
            .kernel(kernel)
            .balance(Balance::NnzPerWarp(64))
            .build()
    };
    for kernel in [
        KernelRequest::Auto,
        KernelRequest::AccSpmm,
        KernelRequest::Cusparse,
        KernelRequest::RowTile(RowTileKernel::TC16D),
    ] {
        let Err(err) = engine.prepare_spmm(&a, &with(kernel)) else {
            panic!("{kernel:?} accepted a nonzero budget per warp");
        };
        assert!(
            matches!(&err, Error::InvalidArgs(m) if m.contains("only to the CSR kernel")),
            "{kernel:?}: {err}"
        );
    }
    // On the CPU engine the request is accepted (and runs the CPU reference path).
    assert!(engine.prepare_spmm(&a, &with(KernelRequest::Csr)).is_ok());
    assert_eq!(
        ExecKernel::CsrCuda(tcsparse::CsrKernel { chunk_nnz: 64 }).to_string(),
        "CSR (CUDA cores, ≤ 64 nonzeros per warp)"
    );
}

#[test]
fn staged_kernel_requests_name_their_cut_and_run_the_cpu_path() {
    let engine = Engine::cpu("test");
    let a = matrix(64, 48, 3, 4);
    for slice in StagedSlice::ALL {
        let n = 5;
        let opts = PrepareOptions::builder()
            .kernel(KernelRequest::Staged(slice))
            .n(n)
            .build();
        let mut p = engine.prepare_spmm(&a, &opts).unwrap();
        assert!(p.permutation().is_none());
        let b: Vec<f32> = (0..a.cols() * n).map(|i| (i % 11) as f32 - 5.0).collect();
        let c0 = vec![f32::NAN; a.rows() * n];
        let mut c = c0.clone();
        p.spmm(1.0, &b, 0.0, &mut c).unwrap();
        check_result(
            "staged request, CPU path",
            &a,
            1.0,
            &b,
            n,
            0.0,
            &c0,
            &c,
            n,
            n,
        );
    }
    let kernel = ExecKernel::Staged(StagedKernel {
        slice: StagedSlice::S32,
        spec: StagedSpec {
            max_window_rows: 128,
            slot_cap: 768,
        },
        copy: StageCopy::Async,
    });
    assert_eq!(
        kernel.to_string(),
        "staged CSR (CUDA cores, 32-column slices, windows of ≤ 128 rows and ≤ 768 B rows, cp.async)"
    );
    assert_eq!(kernel.precision(), tcsparse::Precision::F32);
}

#[test]
fn given_permutation_reproduces_a_computed_one_and_wrong_lengths_are_errors() {
    let (engine, a, p) = degree_reordered();
    let perm = p.permutation().unwrap().clone();
    let given = PrepareOptions::builder()
        .reorder(ReorderChoice::Given(perm.clone()))
        .build();
    let mut q = engine.prepare_spmm(&a, &given).unwrap();
    assert_eq!(q.permutation(), Some(&perm));
    assert_eq!(q.matrix(), p.matrix());
    assert!(q.report().reordered);
    assert!(q.report().tuning.is_empty(), "no tuning on the CPU path");
    // Products still come back in the original row order.
    let n = 8;
    let b = dense(64 * n, 7);
    let mut c = vec![0f32; 64 * n];
    q.set_n(n);
    q.spmm(1.0, &b, 0.0, &mut c).unwrap();
    let want = spmm_f64(&a, &b, n, n, false);
    for (g, w) in c.iter().zip(&want) {
        assert!(
            (f64::from(*g) - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{g} vs {w}"
        );
    }
    for wrong in [
        tcsparse::reorder::Permutation::identity(63),
        tcsparse::reorder::Permutation::new((0..65).rev().collect()).unwrap(),
    ] {
        let opts = PrepareOptions::builder()
            .reorder(ReorderChoice::Given(wrong))
            .build();
        assert!(matches!(
            engine.prepare_spmm(&a, &opts),
            Err(Error::InvalidArgs(m)) if m.contains("64 rows")
        ));
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    let engine = Engine::cpu("test");
    let rect = matrix(20, 10, 2, 4);
    let opts = PrepareOptions::builder()
        .mode(Some(Mode::Symmetric))
        .build();
    assert!(matches!(
        engine.prepare_spmm(&rect, &opts),
        Err(Error::InvalidArgs(_))
    ));
    let opts = PrepareOptions::builder()
        .reorder(ReorderChoice::Method("nope".into()))
        .build();
    assert!(matches!(
        engine.prepare_spmm(&rect, &opts),
        Err(Error::Reorder(_))
    ));
    for cache_rows in [0, 4, 100, 2048] {
        let opts = PrepareOptions::builder()
            .balance(Balance::PackedCached {
                windows: 4,
                cache_rows,
            })
            .build();
        assert!(
            matches!(engine.prepare_spmm(&rect, &opts), Err(Error::InvalidArgs(m)) if m.contains("power of two")),
            "cache of {cache_rows} rows"
        );
    }
    let mut p = engine
        .prepare_spmm(&rect, &PrepareOptions::builder().n(8).build())
        .unwrap();
    let mut c = vec![0f32; 20 * 8];
    // B too short: an argument error, before any work.
    assert!(matches!(
        p.spmm(1.0, &[0.0; 10], 0.0, &mut c),
        Err(Error::InvalidArgs(_))
    ));
    // ldc < n.
    assert!(matches!(
        p.spmm_strided(1.0, &[0.0; 80], 8, 0.0, &mut c, 4),
        Err(Error::InvalidArgs(_))
    ));
}

#[test]
fn kernel_names_read_as_english() {
    use tcsparse::ScheduleKind;
    let acc = |schedule| ExecKernel::AccSpmm { schedule }.to_string();
    assert_eq!(acc(ScheduleKind::Packed(1)), "Acc-SpMM (1 window per TB)");
    assert_eq!(
        acc(ScheduleKind::Packed(16)),
        "Acc-SpMM (16 windows per TB)"
    );
    assert_eq!(
        acc(ScheduleKind::PackedCached {
            windows: 4,
            log2_rows: 7
        }),
        "Acc-SpMM (4 windows per TB, 128-row B cache)"
    );
    let row_tile = |kernel, schedule| ExecKernel::RowTile { kernel, schedule }.to_string();
    assert_eq!(
        row_tile(RowTileKernel::TC16, RowTileSchedule::Packed(1)),
        "TC16 (16-row tiles, 1 window per TB)"
    );
    assert_eq!(
        row_tile(RowTileKernel::TC32, RowTileSchedule::Packed(4)),
        "TC32 (32-row tiles, 4 windows per TB)"
    );
    assert_eq!(
        row_tile(RowTileKernel::TC32D, RowTileSchedule::Packed(16)),
        "TC32d (32-row tiles, dense tiles, 16 windows per TB)"
    );
    assert_eq!(
        row_tile(
            RowTileKernel::TC16D,
            RowTileSchedule::Split { max_blocks: 8 }
        ),
        "TC16d (16-row tiles, dense tiles, split, ≤ 8 blocks per TB)"
    );
}
