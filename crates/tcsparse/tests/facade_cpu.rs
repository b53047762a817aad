//! CPU tests of the facade's options and API: precision, value updates (bit-identical to a fresh
//! preparation), leading dimensions, the options builder and the re-exports.

use tcsparse::formats::Csr;
use tcsparse::formats::csr::csr_from_triplets;
use tcsparse::reorder::Mode;
use tcsparse::{
    Engine, Error, ExecKernel, KernelRequest, Precision, PrepareOptions, Prepared, ReorderChoice,
    RowOrder, RowTileKernel, ScheduleKind,
};

mod support;
use support::values;

/// A rows × cols matrix with an irregular pattern (a few nonzeros per row, some empty rows).
fn matrix(rows: u32, cols: u32) -> Csr {
    let mut t = Vec::new();
    for r in 0..rows {
        if r % 11 == 3 {
            continue;
        }
        for k in 0..(r % 5 + 1) {
            t.push((
                r,
                (r * 7 + k * 13 + r / 3) % cols,
                1.0 + (r + k) as f32 * 0.01,
            ));
        }
    }
    csr_from_triplets(rows as usize, cols as usize, &t).unwrap()
}

/// `A` with its stored values replaced by `v` (same pattern).
fn with_values(a: &Csr, v: &[f32]) -> Csr {
    let mut b = a.clone();
    b.data_mut().copy_from_slice(v);
    b
}

fn product(p: &mut Prepared, a: &Csr, n: usize, beta: f32) -> Vec<f32> {
    let b = values(a.cols() * n, 1);
    let mut c = values(a.rows() * n, 2);
    p.set_n(n);
    p.spmm(1.5, &b, beta, &mut c).unwrap();
    c
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn issue_probe_products_are_right() {
    // A = [[1, 0, 2], [0, 3, 0]] · [1, 10, 100]ᵀ = [201, 30].
    let a = csr_from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
    let mut p = Engine::cpu("test")
        .prepare_spmm(&a, &PrepareOptions::builder().n(1).build())
        .unwrap();
    let mut c = vec![0.0f32; 2];
    p.spmm(1.0, &[1.0, 10.0, 100.0], 0.0, &mut c).unwrap();
    assert_eq!(c, [201.0, 30.0]);
}

#[test]
fn update_values_is_bit_identical_to_a_fresh_prepare() {
    let engine = Engine::cpu("test");
    let square = matrix(150, 150);
    let rect = matrix(90, 130);
    let cases = [
        (&square, ReorderChoice::Method("degree".into()), None),
        (&square, ReorderChoice::Method("rcm".into()), None),
        (&square, ReorderChoice::None, None),
        (&square, ReorderChoice::Auto, None),
        (
            &rect,
            ReorderChoice::Method("degree".into()),
            Some(Mode::RowOnly),
        ),
    ];
    for (a, reorder, mode) in cases {
        let opts = PrepareOptions::builder()
            .reorder(reorder.clone())
            .mode(mode)
            .build();
        let mut p = engine.prepare_spmm(a, &opts).unwrap();
        if matches!(reorder, ReorderChoice::Method(_)) {
            assert!(p.permutation().is_some(), "{reorder:?}: a real reordering");
        }
        for round in 0..2u64 {
            let new = values(a.nnz(), 10 + round);
            p.update_values(&new).unwrap();
            let a2 = with_values(a, &new);
            let mut fresh = engine.prepare_spmm(&a2, &opts).unwrap();
            assert_eq!(p.permutation(), fresh.permutation(), "{reorder:?}");
            assert_eq!(p.matrix(), fresh.matrix(), "{reorder:?}");
            assert_eq!(
                bits(p.bittcf().values()),
                bits(fresh.bittcf().values()),
                "{reorder:?}"
            );
            for beta in [0.0, 0.75] {
                assert_eq!(
                    bits(&product(&mut p, a, 24, beta)),
                    bits(&product(&mut fresh, &a2, 24, beta)),
                    "{reorder:?} β = {beta}"
                );
            }
        }
        // Wrong lengths are typed errors and change nothing.
        let before = p.matrix().clone();
        for len in [0, a.nnz() - 1, a.nnz() + 1] {
            assert!(matches!(
                p.update_values(&vec![1.0; len]),
                Err(Error::ValueCount { expected, got }) if expected == a.nnz() && got == len
            ));
        }
        assert_eq!(p.matrix(), &before);
    }
}

#[test]
fn a_shared_matrix_is_kept_by_reference_and_copied_on_write() {
    let engine = Engine::cpu("test");
    let a = std::sync::Arc::new(matrix(150, 150));
    let original = (*a).clone();
    // In its original order: the same matrix, not a copy; the same products as a borrowed one.
    let opts = PrepareOptions::builder()
        .reorder(ReorderChoice::None)
        .build();
    // (Nothing to warm up on the CPU path.)
    engine.warm_up().unwrap();
    let mut shared = engine.prepare_spmm_shared(&a, &opts).unwrap();
    let mut borrowed = engine.prepare_spmm(&a, &opts).unwrap();
    assert!(std::ptr::eq(shared.matrix(), &*a));
    assert!(!std::ptr::eq(borrowed.matrix(), &*a));
    assert_eq!(
        bits(&product(&mut shared, &a, 24, 0.5)),
        bits(&product(&mut borrowed, &a, 24, 0.5))
    );
    // A value update copies it first: the caller's matrix keeps its values.
    let new = values(a.nnz(), 33);
    shared.update_values(&new).unwrap();
    assert_eq!(*a, original);
    assert_eq!(shared.matrix().data(), &new[..]);
    let a2 = with_values(&a, &new);
    let mut fresh = engine.prepare_spmm(&a2, &opts).unwrap();
    assert_eq!(
        bits(&product(&mut shared, &a2, 24, 0.0)),
        bits(&product(&mut fresh, &a2, 24, 0.0))
    );
    // Reordered, the prepared matrix is its own (the permuted one).
    let degree = PrepareOptions::builder()
        .reorder(ReorderChoice::Method("degree".into()))
        .build();
    let p = engine.prepare_spmm_shared(&a, &degree).unwrap();
    assert!(p.permutation().is_some());
    assert!(!std::ptr::eq(p.matrix(), &*a));
    assert_eq!(*a, original);
}

#[test]
fn precision_is_a_choice() {
    assert_eq!(PrepareOptions::default().precision, Precision::Tf32);
    assert_eq!(Precision::default(), Precision::Tf32);
    assert_eq!(Precision::Tf32.scaled_error_bound(1000), 2.0 / 1024.0);
    let f32_bound = Precision::F32.scaled_error_bound(10);
    assert!(f32_bound > 10.0 * 2f64.powi(-24) && f32_bound < 10.01 * 2f64.powi(-24));
    assert_eq!(Precision::F32.to_string(), "F32");
    assert!(Precision::Tf32.bound_text().contains("2⁻¹⁰"));
    // Kernels and their arithmetic.
    let tc = [
        ExecKernel::AccSpmm {
            schedule: ScheduleKind::Balanced,
        },
        ExecKernel::RowTile {
            kernel: RowTileKernel::TC16,
            schedule: tcsparse::RowTileSchedule::Packed(4),
        },
    ];
    for k in tc {
        assert_eq!(k.precision(), Precision::Tf32, "{k}");
    }
    for k in [
        ExecKernel::Cusparse {
            alg: tcsparse::SpmmAlg::Default,
        },
        ExecKernel::Cusparse {
            alg: tcsparse::SpmmAlg::CsrAlg3,
        },
        ExecKernel::CsrCuda(tcsparse::CsrKernel { chunk_nnz: 256 }),
        ExecKernel::CpuBitTcf,
    ] {
        assert_eq!(k.precision(), Precision::F32, "{k}");
    }

    let engine = Engine::cpu("test");
    let a = matrix(120, 120);
    // The CPU path computes in f32: its report says so, and the error bound follows the rows.
    let p = engine.prepare_spmm(&a, &PrepareOptions::default()).unwrap();
    assert_eq!(p.report().precision(), Precision::F32);
    assert_eq!(p.error_bound(), Precision::F32.scaled_error_bound(5));
    // F32 refuses the tensor-core kernels, and skips the automatic reordering that only serves
    // them.
    for kernel in [
        KernelRequest::AccSpmm,
        KernelRequest::RowTile(RowTileKernel::TC32D),
    ] {
        let opts = PrepareOptions::builder()
            .precision(Precision::F32)
            .kernel(kernel)
            .build();
        assert!(
            matches!(engine.prepare_spmm(&a, &opts), Err(Error::InvalidArgs(m)) if m.contains("F32")),
            "{kernel:?}"
        );
    }
    let opts = PrepareOptions::builder().precision(Precision::F32).build();
    let p = engine.prepare_spmm(&a, &opts).unwrap();
    assert!(p.report().reorder.is_none());
    assert!(p.permutation().is_none());
}

#[test]
fn leading_dimensions_on_the_host_path() {
    let engine = Engine::cpu("test");
    let a = matrix(70, 50);
    let n = 9;
    let mut p = engine
        .prepare_spmm(&a, &PrepareOptions::builder().n(n).build())
        .unwrap();
    let b = values(a.cols() * n, 3);
    let c0 = values(a.rows() * n, 4);
    let mut compact = c0.clone();
    p.spmm(1.5, &b, 0.5, &mut compact).unwrap();
    // The same operands with ld = n + 3, padding NaN (never read, never written).
    let ld = n + 3;
    let pad = |x: &[f32], rows: usize| {
        let mut v = vec![f32::NAN; rows * ld];
        for r in 0..rows {
            v[r * ld..r * ld + n].copy_from_slice(&x[r * n..r * n + n]);
        }
        v
    };
    let bp = pad(&b, a.cols());
    let mut cp = pad(&c0, a.rows());
    p.spmm_strided(1.5, &bp, ld, 0.5, &mut cp, ld).unwrap();
    for r in 0..a.rows() {
        assert_eq!(
            bits(&cp[r * ld..r * ld + n]),
            bits(&compact[r * n..r * n + n])
        );
        assert!(cp[r * ld + n..r * ld + ld].iter().all(|v| v.is_nan()));
    }
    // Too small a leading dimension or buffer: InvalidArgs before any work.
    let mut c = c0.clone();
    assert!(matches!(
        p.spmm_strided(1.0, &b, n - 1, 0.0, &mut c, n),
        Err(Error::InvalidArgs(_))
    ));
    assert!(matches!(
        p.spmm(1.0, &b[1..], 0.0, &mut c),
        Err(Error::InvalidArgs(_))
    ));
    assert_eq!(bits(&c), bits(&c0));
    // The device entry point says plainly that this engine has no GPU.
    assert!(engine.gpu().is_none());
}

#[test]
fn builder_sets_every_field() {
    let opts = PrepareOptions::builder()
        .reorder(ReorderChoice::None)
        .mode(Some(Mode::RowOnly))
        .balance(tcsparse::Balance::Packed(4))
        .kernel(KernelRequest::Csr)
        .seed(7)
        .n(33)
        .tune(false)
        .precision(Precision::F32)
        .device_order(RowOrder::Prepared)
        .build();
    let mut want = PrepareOptions::default();
    want.reorder = ReorderChoice::None;
    want.mode = Some(Mode::RowOnly);
    want.balance = tcsparse::Balance::Packed(4);
    want.kernel = KernelRequest::Csr;
    want.seed = 7;
    want.n = 33;
    want.tune = false;
    want.precision = Precision::F32;
    want.device_order = RowOrder::Prepared;
    assert_eq!(opts, want);
    // Original row order unless the prepared one is asked for.
    assert_eq!(PrepareOptions::default().device_order, RowOrder::Original);
    assert_eq!(PrepareOptions::builder().build(), PrepareOptions::default());
}

#[test]
fn sprs_and_cudarc_are_re_exported() {
    // A CSR built with the re-exported sprs is the facade's matrix type.
    let m: tcsparse::sprs::CsMatI<f32, u32> =
        tcsparse::sprs::CsMatI::new((2, 2), vec![0u32, 1, 2], vec![1u32, 0], vec![2.0f32, 3.0]);
    let a = Csr::try_from(m).unwrap();
    let mut p = Engine::cpu("test")
        .prepare_spmm(&a, &PrepareOptions::builder().n(1).build())
        .unwrap();
    let mut c = vec![0.0f32; 2];
    p.spmm(1.0, &[1.0, 10.0], 0.0, &mut c).unwrap();
    assert_eq!(c, [20.0, 3.0]);
    // The device types callers pass to spmm_device, by the facade's path.
    fn takes_view(_: Option<&tcsparse::cudarc::driver::CudaView<'_, f32>>) {}
    takes_view(None);
}

/// `tcsparse::read` reads a Matrix Market file into the checked CSR, and a reader's error is the
/// facade's error.
#[test]
fn read_gives_the_matrix_and_a_facade_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.mtx");
    std::fs::write(
        &path,
        "%%MatrixMarket matrix coordinate real general\n2 3 3\n1 1 1.5\n1 3 2\n2 2 -1\n",
    )
    .unwrap();
    let a = tcsparse::read(&path).unwrap();
    assert_eq!((a.rows(), a.cols(), a.nnz()), (2, 3, 3));
    assert_eq!(a.indices(), &[0, 2, 1]);
    assert_eq!(a.data(), &[1.5, 2.0, -1.0]);
    let missing = tcsparse::read(dir.path().join("absent.mtx"));
    assert!(matches!(missing, Err(Error::Read(_))), "{missing:?}");
}
