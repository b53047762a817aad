//! The concurrency contract (crate docs, "Threads and streams"): `Engine` and `Gpu` are `Send +
//! Sync`; `Prepared` and `PreparedSpmv` are `Send` but not `Sync` (a product takes `&mut self`).
//! The static checks run everywhere; the GPU tests (ignored by default) run several threads, each
//! on its own stream, on one host matrix and on one prepared matrix, and compare every result bit
//! for bit with the single-thread one.

use std::sync::{Arc, Mutex};

use tcsparse::formats::Csr;
use tcsparse::formats::generate::banded;
use tcsparse::gpu::Gpu;
use tcsparse::{Engine, Error, KernelRequest, PrepareOptions, Prepared};
use tcsparse::{PreparedSpmv, SpmvOptions};

mod support;
use support::reproducible_options as spmm_options;

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn engine_is_send_and_sync_prepared_matrices_are_send() {
    assert_send_sync::<Engine>();
    assert_send_sync::<Gpu>();
    assert_send_sync::<Error>();
    assert_send::<Prepared>();
    assert_send::<PreparedSpmv>();
}

#[test]
fn a_prepared_matrix_moves_to_another_thread_on_the_cpu_path() {
    let a = matrix();
    let engine = Engine::cpu("test");
    let mut p = engine
        .prepare_spmm(&a, &PrepareOptions::builder().n(1).build())
        .unwrap();
    let x = operand(a.cols(), 1);
    let mut want = vec![0f32; a.rows()];
    p.spmm(1.0, &x, 0.0, &mut want).unwrap();
    let got = std::thread::spawn(move || {
        let mut c = vec![0f32; a.rows()];
        p.spmm(1.0, &x, 0.0, &mut c).unwrap();
        c
    })
    .join()
    .unwrap();
    assert_eq!(got, want);
}

const THREADS: usize = 4;
const ROUNDS: usize = 25;

fn matrix() -> Csr {
    banded(2500, 12, 0.5, 3).expect("valid generator")
}

fn operand(len: usize, seed: u64) -> Vec<f32> {
    (0..len)
        .map(|i| ((i as u64 * 7919 + seed * 104_729) % 2003) as f32 / 1001.5 - 1.0)
        .collect()
}

fn gpu() -> Gpu {
    Gpu::require().expect("this test needs a CUDA GPU")
}

/// Threads, each with an engine on its own stream of one context, prepare the same host matrix
/// (shared, not copied: `prepare_spmm_shared`) and multiply at the same time; every product equals the
/// single-thread one bit for bit.
#[test]
#[ignore = "needs a CUDA GPU"]
fn threads_on_their_own_streams_share_one_host_matrix() {
    let root = gpu();
    let a = Arc::new(matrix());
    let n = 8;
    let b = operand(a.cols() * n, 5);
    let mut want = Vec::new();
    // Our kernels (cuSPARSE's algorithms need not be bitwise reproducible run to run).
    for kernel in [KernelRequest::AccSpmm, KernelRequest::Csr] {
        let mut p = Engine::with_gpu(root.clone())
            .prepare_spmm_shared(&a, &spmm_options(kernel))
            .unwrap();
        p.set_n(n);
        let mut c = vec![0f32; a.rows() * n];
        p.spmm(1.0, &b, 0.0, &mut c).unwrap();
        want.push((kernel, c));
    }
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (root, a, b, want) = (&root, &a, &b, &want);
            s.spawn(move || {
                let engine = Engine::with_gpu(root.with_new_stream().expect("a new stream"));
                let (kernel, want) = &want[t % want.len()];
                let mut p = engine
                    .prepare_spmm_shared(a, &spmm_options(*kernel))
                    .unwrap();
                p.set_n(n);
                let mut c = vec![f32::NAN; a.rows() * n];
                for round in 0..ROUNDS {
                    p.spmm(1.0, b, 0.0, &mut c).unwrap();
                    assert!(c == *want, "thread {t}, {kernel:?}, round {round}");
                }
            });
        }
    });
}

/// One prepared SpMM and one prepared SpMV shared by threads, each thread with its own stream for
/// its own device work (uploads of its operands): a prepared matrix is `Send`, not `Sync`, so the
/// threads take turns through a `Mutex` (a product takes `&mut self`); every result equals the
/// single-thread one bit for bit, and the threads' own streams' work is ordered with the
/// products' (each product synchronises before it returns).
#[test]
#[ignore = "needs a CUDA GPU"]
fn threads_share_one_prepared_matrix_through_a_mutex() {
    let root = gpu();
    let engine = Engine::with_gpu(root.clone());
    let a = matrix();
    let n = 4;
    let b = operand(a.cols() * n, 9);
    let mut spmm = engine
        .prepare_spmm(&a, &spmm_options(KernelRequest::AccSpmm))
        .unwrap();
    spmm.set_n(n);
    let mut want_c = vec![0f32; a.rows() * n];
    spmm.spmm(1.0, &b, 0.0, &mut want_c).unwrap();
    // Untuned: our walk (a tuned one may keep cuSPARSE, whose SpMV need not be bitwise
    // reproducible run to run).
    let opts = SpmvOptions::builder().n(n).tune(false).build();
    let mut spmv = engine.prepare_spmv(&a, &opts).unwrap();
    let mut want_y = vec![0f32; a.rows() * n];
    spmv.spmv(1.0, &b, 0.0, &mut want_y).unwrap();
    let spmm = Mutex::new(spmm);
    let spmv = Mutex::new(spmv);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (root, b, spmm, spmv, want_c, want_y) = (&root, &b, &spmm, &spmv, &want_c, &want_y);
            s.spawn(move || {
                let own = root.with_new_stream().expect("a new stream");
                // Work of the thread's own on its stream, beside the shared products.
                let mine = own.upload(b).unwrap();
                for round in 0..ROUNDS {
                    let mut c = vec![f32::NAN; want_c.len()];
                    spmm.lock().unwrap().spmm(1.0, b, 0.0, &mut c).unwrap();
                    assert!(c == *want_c, "SpMM, thread {t}, round {round}");
                    let mut y = vec![f32::NAN; want_y.len()];
                    spmv.lock().unwrap().spmv(1.0, b, 0.0, &mut y).unwrap();
                    assert!(y == *want_y, "SpMV, thread {t}, round {round}");
                }
                assert_eq!(own.download(&mine).unwrap(), *b);
            });
        }
    });
}
