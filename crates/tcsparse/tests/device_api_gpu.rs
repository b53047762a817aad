//! GPU tests of the facade's device API (ignored without a GPU; they FAIL under
//! `--include-ignored` on a machine without one): `spmm_device` on views into larger buffers with
//! leading dimensions ≠ n, in prepared and in original row order, on every kernel; value updates;
//! an engine on the caller's own context and stream; an engine of `Engine::on_device` on another
//! stream's memory; F32 precision.

use tcsparse::cudarc::driver::{CudaContext, DevicePtr};
use tcsparse::external::{ForeignSlice, ForeignStream};
use tcsparse::formats::Csr;
use tcsparse::formats::reference::max_scaled_error;
use tcsparse::gpu::Gpu;
use tcsparse::{
    Engine, Error, KernelRequest, Precision, PrepareOptions, Prepared, ReorderChoice, RowOrder,
    RowTileKernel,
};

mod support;
use support::{GPU_KERNELS as KERNELS, hub_rows_203 as matrix, product_bound, reference, values};
use support::{engine_and_gpu, gpu_engine as engine};

/// Max scaled error of `c` (rows × n, leading dimension ldc) against α·A·B + β·C0 in f64, with B
/// (cols × n) and C0 (rows × n) compact.
#[allow(clippy::too_many_arguments)]
fn error(
    a: &Csr,
    alpha: f32,
    b: &[f32],
    beta: f32,
    c0: &[f32],
    c: &[f32],
    ldc: usize,
    n: usize,
) -> f64 {
    let mut got = Vec::with_capacity(a.rows() * n);
    for i in 0..a.rows() {
        got.extend_from_slice(&c[i * ldc..i * ldc + n]);
    }
    let (want, scale) = reference(a, alpha, b, beta, c0, n);
    max_scaled_error(&got, &want, &scale)
}

/// Asserts that `p`'s host product `C = 1.5·A·B + β·C0` (C starts as a copy of C0; `a` the
/// matrix `p` holds, B and C0 compact) is within `p`'s bound; `what` names the case.
fn assert_host_product(
    p: &mut Prepared,
    a: &Csr,
    b: &[f32],
    beta: f32,
    c0: &[f32],
    n: usize,
    what: &str,
) {
    let mut c = c0.to_vec();
    p.spmm(1.5, b, beta, &mut c).unwrap();
    let err = error(a, 1.5, b, beta, c0, &c, n, n);
    assert!(err <= product_bound(p, a), "{what}: scaled error {err:.3e}");
}

/// B and C0 (compact) copied into buffers with leading dimension `ld` starting at element `off`;
/// the padding holds NaN so a read or write outside the operand shows up.
fn padded(x: &[f32], rows: usize, n: usize, ld: usize, off: usize) -> Vec<f32> {
    let mut v = vec![f32::NAN; off + rows * ld + 7];
    for r in 0..rows {
        v[off + r * ld..off + r * ld + n].copy_from_slice(&x[r * n..r * n + n]);
    }
    v
}

/// Views with ld ≠ n (aligned float4 path and an unaligned scalar path), in prepared and in
/// original order, β = 0 and β ≠ 0, on every kernel, against the f64 reference. cuSPARSE refuses
/// ld ≠ n up front and runs on views with ld = n.
#[test]
#[ignore = "needs a CUDA GPU"]
fn views_with_leading_dimensions_in_both_orders() {
    let (engine, gpu) = engine_and_gpu();
    let a = matrix();
    let n = 40;
    let b = values(a.cols() * n, 1);
    let c0 = values(a.rows() * n, 2);
    for kernel in KERNELS {
        for order in [RowOrder::Prepared, RowOrder::Original] {
            let opts = PrepareOptions::builder()
                .kernel(kernel)
                .reorder(ReorderChoice::Method("degree".into()))
                .device_order(order)
                .n(n)
                .build();
            let mut p = engine.prepare_spmm(&a, &opts).unwrap();
            assert!(p.permutation().is_some(), "{kernel:?}: reordered");
            // The matrix the device operands are in the order of.
            let m = match order {
                RowOrder::Original => a.clone(),
                _ => p.matrix().clone(),
            };
            let layouts: &[(usize, usize)] = if kernel == KernelRequest::Cusparse {
                let bd = gpu.upload(&padded(&b, a.cols(), n, n + 4, 0)).unwrap();
                let mut cd = gpu.upload(&padded(&c0, a.rows(), n, n + 4, 0)).unwrap();
                let refused = p.spmm_device_strided(1.0, &bd, n + 4, 0.0, &mut cd, n + 4);
                assert!(
                    matches!(refused, Err(Error::InvalidArgs(_))),
                    "{kernel:?}: {refused:?}"
                );
                &[(n, 0), (n, 8)]
            } else {
                &[(n + 4, 0), (n + 4, 8), (n + 3, 3)]
            };
            for &(ld, off) in layouts {
                for beta in [0.0f32, 0.5] {
                    let bd = gpu.upload(&padded(&b, a.cols(), n, ld, off)).unwrap();
                    let mut cd = gpu.upload(&padded(&c0, a.rows(), n, ld, off)).unwrap();
                    let len = cd.len();
                    {
                        let bv = bd.slice(off..);
                        let mut cv = cd.slice_mut(off..len);
                        p.spmm_device_strided(1.5, &bv, ld, beta, &mut cv, ld)
                            .unwrap();
                    }
                    let c = gpu.download(&cd).unwrap();
                    // Padding untouched.
                    for r in 0..a.rows() {
                        for j in n..ld {
                            if r * ld + j + off < c.len() && r + 1 < a.rows() {
                                assert!(
                                    c[off + r * ld + j].is_nan(),
                                    "{kernel:?}: padding written"
                                );
                            }
                        }
                    }
                    let err = error(&m, 1.5, &b, beta, &c0, &c[off..], ld, n);
                    assert!(
                        err <= product_bound(&p, &m),
                        "{kernel:?} {order:?} ld {ld} off {off} β {beta}: scaled error {err:.3e}"
                    );
                }
            }
            // Too short a view is refused before any work.
            let bd = gpu.upload(&b).unwrap();
            let mut cd = gpu.upload(&c0).unwrap();
            let short = bd.slice(1..);
            assert!(matches!(
                p.spmm_device(1.0, &short, 0.0, &mut cd),
                Err(Error::InvalidArgs(_))
            ));
        }
    }
}

/// New values through `update_values` give the product of the new matrix, on every kernel, and a
/// wrong length is a typed error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn update_values_on_every_kernel() {
    let engine = engine();
    let a = matrix();
    let n = 32;
    let b = values(a.cols() * n, 3);
    let c0 = values(a.rows() * n, 4);
    let mut a2 = a.clone();
    let new = values(a.nnz(), 5);
    a2.data_mut().copy_from_slice(&new);
    for kernel in KERNELS {
        let opts = PrepareOptions::builder()
            .kernel(kernel)
            .reorder(ReorderChoice::Method("degree".into()))
            .n(n)
            .build();
        let mut p = engine.prepare_spmm(&a, &opts).unwrap();
        assert!(matches!(
            p.update_values(&new[1..]),
            Err(Error::ValueCount { expected, got }) if expected == a.nnz() && got == a.nnz() - 1
        ));
        p.update_values(&new).unwrap();
        assert_host_product(&mut p, &a2, &b, 0.5, &c0, n, &format!("{kernel:?}"));
    }
}

/// `prepare_spmm_shared`, tuned and on every kernel in the original order: the prepared matrix is the
/// caller's (no copy), products meet the bound, and a value update leaves the caller's matrix
/// as it was.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_shared_matrix_is_not_copied_on_the_gpu() {
    let engine = engine();
    let a = std::sync::Arc::new(matrix());
    let original = (*a).clone();
    let n = 32;
    let b = values(a.cols() * n, 6);
    let c0 = values(a.rows() * n, 7);
    let tuned = PrepareOptions::builder().n(n).build();
    let fixed = KERNELS.map(|kernel| {
        PrepareOptions::builder()
            .kernel(kernel)
            .reorder(ReorderChoice::None)
            .n(n)
            .build()
    });
    for opts in std::iter::once(&tuned).chain(&fixed) {
        let mut p = engine.prepare_spmm_shared(&a, opts).unwrap();
        let what = format!("{:?} ({})", opts.kernel, p.kernel());
        if p.permutation().is_none() {
            assert!(std::ptr::eq(p.matrix(), &*a), "{what}: copied");
        }
        assert_host_product(&mut p, &a, &b, 0.5, &c0, n, &what);
        let new = values(a.nnz(), 8);
        p.update_values(&new).unwrap();
        assert_eq!(*a, original, "{what}: the caller's matrix changed");
        let mut a2 = original.clone();
        a2.data_mut().copy_from_slice(&new);
        assert_host_product(
            &mut p,
            &a2,
            &b,
            0.0,
            &c0,
            n,
            &format!("{what}: after the update"),
        );
    }
}

/// `Engine::warm_up` before and beside a preparation whose uploads go through the staging
/// buffers (arrays of ≥ 4 MB): the products still meet the bound (an upload that meets the
/// warm-up mid-way takes the pageable path).
#[test]
#[ignore = "needs a CUDA GPU"]
fn warm_up_beside_a_preparation_changes_no_result() {
    let engine = engine();
    engine.warm_up().unwrap();
    let a = tcsparse::formats::generate::uniform_random(200_000, 150_000, 6.0, 11).unwrap();
    assert!(a.nnz() * 4 >= tcsparse::gpu::STAGED_UPLOAD_BYTES);
    let n = 8;
    let b = values(a.cols() * n, 12);
    let c0 = values(a.rows() * n, 13);
    for kernel in [KernelRequest::Cusparse, KernelRequest::Csr] {
        let opts = PrepareOptions::builder()
            .kernel(kernel)
            .reorder(ReorderChoice::None)
            .n(n)
            .build();
        let mut p = std::thread::scope(|s| {
            s.spawn(|| engine.warm_up().unwrap());
            engine.prepare_spmm(&a, &opts).unwrap()
        });
        assert_host_product(&mut p, &a, &b, 0.5, &c0, n, &format!("{kernel:?}"));
    }
}

/// An engine on the caller's context and stream queues its work there.
#[test]
#[ignore = "needs a CUDA GPU"]
fn engine_on_the_callers_stream() {
    Gpu::require().expect("this test needs a CUDA GPU");
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let engine = Engine::from_cuda(ctx.clone(), stream.clone()).unwrap();
    assert!(std::sync::Arc::ptr_eq(
        engine.gpu().unwrap().stream(),
        &stream
    ));
    // A stream of another handle on device 0's primary context is the same CUDA context.
    let same = CudaContext::new(0).unwrap().new_stream().unwrap();
    assert!(Engine::from_cuda(ctx.clone(), same).is_ok());
    let a = matrix();
    let n = 16;
    let b = values(a.cols() * n, 6);
    let opts = PrepareOptions::builder()
        .n(n)
        .device_order(RowOrder::Prepared)
        .build();
    let mut p = engine.prepare_spmm(&a, &opts).unwrap();
    let mut cd = stream.alloc_zeros::<f32>(a.rows() * n).unwrap();
    let q = p.permutation().cloned();
    // Prepared order: permute B as the engine does (symmetric), un-permute C below.
    let bp: Vec<f32> = match &q {
        Some(perm) => perm
            .as_slice()
            .iter()
            .flat_map(|&o| b[o as usize * n..o as usize * n + n].to_vec())
            .collect(),
        None => b.clone(),
    };
    let bpd = stream.clone_htod(&bp).unwrap();
    p.spmm_device(1.0, &bpd, 0.0, &mut cd).unwrap();
    stream.synchronize().unwrap();
    let cp = stream.clone_dtoh(&cd).unwrap();
    let mut c = vec![0f32; a.rows() * n];
    for i in 0..a.rows() {
        let o = q.as_ref().map_or(i, |perm| perm.as_slice()[i] as usize);
        c[o * n..o * n + n].copy_from_slice(&cp[i * n..i * n + n]);
    }
    let zeros = vec![0f32; a.rows() * n];
    let err = error(&a, 1.0, &b, 0.0, &zeros, &c, n, n);
    assert!(err <= product_bound(&p, &a), "scaled error {err:.3e}");
}

/// An engine of `Engine::on_device` (its buffers without cudarc's event tracking) runs every
/// kernel on memory of another context object's stream, as the Python package does with
/// PyTorch's: C0 and B are uploaded on the caller's stream just before the product and C read
/// back on it just after, with no synchronisation in between, so only the engine's stream waits
/// order them.
#[test]
#[ignore = "needs a CUDA GPU"]
fn on_device_products_are_ordered_on_the_callers_stream() {
    Gpu::require().expect("this test needs a CUDA GPU");
    let ctx = CudaContext::new(0).unwrap();
    let caller = ctx.new_stream().unwrap();
    let engine = Engine::on_device(0).unwrap();
    let own = engine.gpu().unwrap().stream().clone();
    let a = matrix();
    let n = 16;
    let (b, c0) = (values(a.cols() * n, 8), values(a.rows() * n, 9));
    // SAFETY: the handle of `caller`, a live stream of device 0's primary context that outlives
    // every product below.
    let fs = unsafe { ForeignStream::wrap(&ctx, caller.cu_stream() as usize) };
    for kernel in KERNELS {
        let opts = PrepareOptions::builder().n(n).kernel(kernel).build();
        let mut p = engine.prepare_spmm(&a, &opts).unwrap();
        let bd = caller.clone_htod(&b).unwrap();
        let cd = caller.clone_htod(&c0).unwrap();
        let (pb, pc) = (bd.device_ptr(&caller).0, cd.device_ptr(&caller).0);
        // SAFETY: bd and cd hold cols·n and rows·n f32 of device 0, live until `clone_dtoh` below
        // has synchronised the caller's stream, which the product is ordered before.
        let (bs, mut cs) = unsafe {
            (
                ForeignSlice::new(pb, bd.len(), own.clone()),
                ForeignSlice::new(pc, cd.len(), own.clone()),
            )
        };
        p.spmm_on_stream(&fs, 1.5, &bs, 0.5, &mut cs).unwrap();
        let c = caller.clone_dtoh(&cd).unwrap();
        let err = error(&a, 1.5, &b, 0.5, &c0, &c, n, n);
        assert!(
            err <= product_bound(&p, &a),
            "{kernel:?}: scaled error {err:.3e}"
        );
    }
}

/// F32 precision keeps the tensor-core kernels out of tuning and meets the f32 bound; a requested
/// tensor-core kernel is refused.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f32_precision_runs_only_f32_kernels() {
    let engine = engine();
    let a = matrix();
    let n = 64;
    let opts = PrepareOptions::builder()
        .precision(Precision::F32)
        .n(n)
        .build();
    let mut p = engine.prepare_spmm(&a, &opts).unwrap();
    support::assert_f32_kernel(&p);
    assert!(!p.report().tuning.is_empty());
    for t in &p.report().tuning {
        assert!(
            !t.candidate.contains("Acc-SpMM") && !t.candidate.starts_with("TC"),
            "{}",
            t.candidate
        );
    }
    let b = values(a.cols() * n, 7);
    let c0 = values(a.rows() * n, 8);
    assert_host_product(&mut p, &a, &b, 0.5, &c0, n, "F32 tuning");
    let tc = PrepareOptions::builder()
        .precision(Precision::F32)
        .kernel(KernelRequest::AccSpmm)
        .build();
    assert!(matches!(
        engine.prepare_spmm(&a, &tc),
        Err(Error::InvalidArgs(_))
    ));
}

/// A plan-cache hit on a dense-tile row-tile kernel builds the layout on the GPU from the cached
/// skeleton (no host layout, no host permutation; acc_spmm_gpu checks that layout bit for bit):
/// its products meet the bound, in both reordering modes and both window heights; the reordered
/// matrix is made on first use and equals the first's; value updates after the hit meet it too.
/// (Products are compared with the f64 reference, not bit for bit: split windows add with
/// atomics.)
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cache_hit_builds_dense_row_tiles_on_the_gpu() {
    use std::sync::Arc;
    use tcsparse::reorder::Mode;
    let engine = engine();
    let a = Arc::new(matrix());
    let n = 24;
    let b = values(a.cols() * n, 3);
    let c0 = values(a.rows() * n, 4);
    let product = |p: &mut Prepared| {
        let mut c = c0.clone();
        p.spmm(1.25, &b, -0.5, &mut c).unwrap();
        c
    };
    for kernel in [RowTileKernel::TC16D, RowTileKernel::TC32D] {
        for mode in [Mode::Symmetric, Mode::RowOnly] {
            let what = format!("{}/{mode:?}", kernel.name());
            let dir = std::env::temp_dir().join(format!(
                "tcsparse-gpu-hit-{}-{}-{mode:?}",
                std::process::id(),
                kernel.name()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let opts = PrepareOptions::builder()
                .kernel(KernelRequest::RowTile(kernel))
                .reorder(ReorderChoice::Method("affinity".into()))
                .mode(Some(mode))
                .n(n)
                .cache_dir(Some(dir.clone()))
                .build();
            let mut first = engine.prepare_spmm_shared(&a, &opts).unwrap();
            assert!(first.permutation().is_some(), "{what}");
            let mut hit = engine.prepare_spmm_shared(&a, &opts).unwrap();
            assert_eq!(hit.report().cache, tcsparse::CacheOutcome::Hit, "{what}");
            assert!(
                hit.report().kernel_note.contains("built on the GPU"),
                "{what}: {}",
                hit.report().kernel_note
            );
            assert_eq!(hit.kernel(), first.kernel(), "{what}");
            assert_eq!(hit.permutation(), first.permutation(), "{what}");
            for (p, who) in [(&mut first, "first"), (&mut hit, "hit")] {
                let got = product(p);
                let err = error(&a, 1.25, &b, -0.5, &c0, &got, n, n);
                assert!(
                    err <= product_bound(p, &a),
                    "{what} {who}: scaled error {err:.3e}"
                );
            }
            assert_eq!(hit.matrix(), first.matrix(), "{what}");
            let v2 = values(a.nnz(), 9);
            hit.update_values(&v2).unwrap();
            let a2 = Csr::new(
                (a.rows(), a.cols()),
                a.indptr().raw_storage().to_vec(),
                a.indices().to_vec(),
                v2,
            );
            let got = product(&mut hit);
            let err = error(&a2, 1.25, &b, -0.5, &c0, &got, n, n);
            assert!(
                err <= product_bound(&hit, &a2),
                "{what} updated: scaled error {err:.3e}"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// A tuned preparation with a plan cache (whose matrix goes up to the GPU while the cache is
/// read, and is taken by a miss's cuSPARSE stage or a hit's kernel) keeps the same kernel on the
/// hit, borrowed or shared, and every product meets the bound (compared with the f64 reference:
/// split rows add with atomics), on a CSR-kernel matrix and a tensor-core one; the same pattern
/// with new values hits too and multiplies with its own values.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tuned_preparations_with_a_cache_hit_with_the_same_products() {
    use std::sync::Arc;
    let engine = engine();
    let clustered =
        tcsparse::formats::generate::clustered_block_diagonal(2048, 64, 0.4, 2.0, 5).unwrap();
    for (name, a) in [("hubs", matrix()), ("clustered", clustered)] {
        let a = Arc::new(a);
        let n = 32;
        let b = values(a.cols() * n, 5);
        let dir = std::env::temp_dir().join(format!(
            "tcsparse-gpu-tuned-hit-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let opts = PrepareOptions::builder()
            .n(n)
            .cache_dir(Some(dir.clone()))
            .build();
        let mut miss = engine.prepare_spmm(&a, &opts).unwrap();
        assert_eq!(miss.report().cache, tcsparse::CacheOutcome::Miss, "{name}");
        let mut hits = [
            engine.prepare_spmm(&a, &opts).unwrap(),
            engine.prepare_spmm_shared(&a, &opts).unwrap(),
        ];
        let mut c_miss = vec![0f32; a.rows() * n];
        miss.spmm(1.0, &b, 0.0, &mut c_miss).unwrap();
        let err = error(&a, 1.0, &b, 0.0, &vec![0.0; a.rows() * n], &c_miss, n, n);
        assert!(
            err <= product_bound(&miss, &a),
            "{name}: scaled error {err:.3e}"
        );
        for hit in &mut hits {
            assert_eq!(hit.report().cache, tcsparse::CacheOutcome::Hit, "{name}");
            assert_eq!(hit.kernel(), miss.kernel(), "{name}");
            let mut got = vec![f32::NAN; a.rows() * n];
            hit.spmm(1.0, &b, 0.0, &mut got).unwrap();
            let err = error(&a, 1.0, &b, 0.0, &vec![0.0; a.rows() * n], &got, n, n);
            assert!(
                err <= product_bound(hit, &a),
                "{name} {:?}: scaled error {err:.3e}",
                hit.kernel()
            );
        }
        // The same pattern with new values hits (the key is the pattern) and multiplies with
        // the new values: its layout is built from the matrix it is given.
        let a2 = Arc::new(Csr::new(
            (a.rows(), a.cols()),
            a.indptr().raw_storage().to_vec(),
            a.indices().to_vec(),
            values(a.nnz(), 11),
        ));
        let mut revalued = engine.prepare_spmm_shared(&a2, &opts).unwrap();
        assert_eq!(
            revalued.report().cache,
            tcsparse::CacheOutcome::Hit,
            "{name}"
        );
        assert_eq!(revalued.kernel(), miss.kernel(), "{name}");
        let mut got = vec![f32::NAN; a.rows() * n];
        revalued.spmm(1.0, &b, 0.0, &mut got).unwrap();
        let err = error(&a2, 1.0, &b, 0.0, &vec![0.0; a.rows() * n], &got, n, n);
        assert!(
            err <= product_bound(&revalued, &a2),
            "{name} new values: scaled error {err:.3e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
