//! A device lost between calls (ignored by default; `--include-ignored` on a GPU machine, where
//! it FAILS without one): after a kernel executes `trap;` on the engine's stream, the CUDA
//! context is unusable, and every later call of the facade (`spmm`, `spmm_device`, `spmv`,
//! `spmv_device`, `update_values`, a new preparation) returns [`Error::DeviceLost`], never a
//! panic or a hang; dropping the prepared matrices, device buffers, a cuBLAS handle and the
//! engine afterwards does not abort the process (the test reaching its end proves it).
//!
//! The poisoned context is the process's device-0 primary context, shared by every engine of
//! the process: this file is its own test binary with one test, so that nothing else runs on
//! the lost context.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tcsparse::accuracy::check_products;
use tcsparse::formats::Csr;
use tcsparse::formats::generate::banded;
use tcsparse::formats::reference::spmm_f64;
use tcsparse::gpu::baselines::cublas_ex::CublasEx;
use tcsparse::gpu::{Gpu, GpuError, GpuErrorKind};
use tcsparse::{Engine, Error, PrepareOptions, SpmvOptions};

mod support;
use support::values;

/// Most seconds one stage may take (a tuned preparation included) before the watchdog ends the
/// process: a call on a lost context must fail, not hang.
const STAGE_LIMIT: Duration = Duration::from_secs(120);

/// Ends the process with a message naming the stage when one stage runs past [`STAGE_LIMIT`]
/// (the harness cannot stop a test thread stuck in a driver call).
struct Watchdog {
    stage: Arc<Mutex<(&'static str, Instant)>>,
}

impl Watchdog {
    fn start() -> Self {
        let stage = Arc::new(Mutex::new(("start", Instant::now())));
        let watched = Arc::clone(&stage);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(250));
                let (name, since) = *watched.lock().unwrap_or_else(|p| p.into_inner());
                if name == "done" {
                    return;
                }
                if since.elapsed() > STAGE_LIMIT {
                    eprintln!("device_lost_gpu: `{name}` still running after {STAGE_LIMIT:?}");
                    std::process::exit(3);
                }
            }
        });
        Self { stage }
    }

    fn stage(&self, name: &'static str) {
        *self.stage.lock().unwrap_or_else(|p| p.into_inner()) = (name, Instant::now());
    }
}

/// `r` is the facade's lost-device error, with the message that says what to do.
fn assert_lost<T>(what: &str, r: Result<T, Error>) {
    let e = match r {
        Ok(_) => panic!("{what} on a lost context returned Ok"),
        Err(e) => e,
    };
    assert!(matches!(e, Error::DeviceLost(_)), "{what}: {e:?}");
    assert_eq!(e.gpu_kind(), Some(GpuErrorKind::DeviceLost), "{what}: {e}");
    let text = e.to_string();
    assert!(
        text.contains("context is unusable") && text.contains("new process"),
        "{what}: {text}"
    );
    eprintln!("{what}: {text}");
}

/// `got` (rows × n) within `rel` of the f64 product `A·x`.
fn assert_close(what: &str, a: &Csr, x: &[f32], n: usize, got: &[f32], rel: f64) {
    let want = spmm_f64(a, x, n, n, false);
    let scale = spmm_f64(a, x, n, n, true);
    let check = check_products(got, &want, &scale, rel, a.longest_row());
    assert!(check.passed(), "{what}: {check:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn after_a_kernel_trap_every_call_is_device_lost_and_drops_do_not_abort() {
    let dog = Watchdog::start();
    let gpu = Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let engine = Engine::with_gpu(gpu.clone());
    let a = banded(3000, 9, 0.6, 7).expect("valid generator");
    let n = 8;
    let b = values(a.cols() * n, 1);
    let x = values(a.cols(), 2);

    // A tuned SpMM and a tuned SpMV, each right once.
    dog.stage("tuned SpMM preparation");
    let mut spmm = engine
        .prepare_spmm(&a, &PrepareOptions::builder().n(n).build())
        .expect("tuned SpMM");
    dog.stage("SpMM");
    let mut c = vec![f32::NAN; a.rows() * n];
    spmm.spmm(1.0, &b, 0.0, &mut c).expect("SpMM");
    assert_close("SpMM", &a, &b, n, &c, spmm.error_bound());
    dog.stage("tuned SpMV preparation");
    let spmv_opts = SpmvOptions::default();
    let mut spmv = engine.prepare_spmv(&a, &spmv_opts).expect("tuned SpMV");
    dog.stage("SpMV");
    let mut y = vec![f32::NAN; a.rows()];
    spmv.spmv(1.0, &x, 0.0, &mut y).expect("SpMV");
    assert_close("SpMV", &a, &x, 1, &y, spmv_opts.precision.spmv_bound());
    eprintln!("kernels: SpMM {}, SpMV {}", spmm.kernel(), spmv.kernel());
    // Device operands of the device products, allocated while the context is fine.
    let db = gpu.upload(&b).expect("B");
    let mut dc = gpu.alloc_zeros::<f32>(a.rows() * n).expect("C");
    let dx = gpu.upload(&x).expect("x");
    let mut dy = gpu.alloc_zeros::<f32>(a.rows()).expect("y");
    // A cuBLAS handle (cudarc's Drop unwraps cublasDestroy, which would fail on a lost context).
    let blas = CublasEx::new(&gpu).expect("cuBLAS handle");
    assert_eq!(gpu.lost_status(), None, "a usable context");

    // A kernel executes `trap;` on the engine's stream.
    dog.stage("trap");
    let status = engine
        .gpu()
        .expect("GPU engine")
        .poison_with_trap()
        .expect("the trap kernel ran and faulted");
    eprintln!("the trap left the context with: {status}");
    assert!(
        matches!(status, GpuError::DeviceLost { .. }),
        "the trap's status: {status:?}"
    );
    let lost = gpu.lost_status().expect("the context reports its status");
    assert_eq!(
        tcsparse::gpu::driver_error_kind(&lost),
        GpuErrorKind::DeviceLost,
        "{lost:?}"
    );

    // Every later call is the typed lost-device error.
    dog.stage("spmm after the trap");
    assert_lost("spmm", spmm.spmm(1.0, &b, 0.0, &mut c));
    dog.stage("spmm_device after the trap");
    assert_lost("spmm_device", spmm.spmm_device(1.0, &db, 0.0, &mut dc));
    dog.stage("update_values after the trap");
    let scaled: Vec<f32> = a.data().iter().map(|v| 2.0 * v).collect();
    assert_lost("update_values", spmm.update_values(&scaled));
    dog.stage("spmv after the trap");
    assert_lost("spmv", spmv.spmv(1.0, &x, 0.0, &mut y));
    dog.stage("spmv_device after the trap");
    assert_lost("spmv_device", spmv.spmv_device(1.0, &dx, 0.0, &mut dy));
    dog.stage("SpMM preparation after the trap");
    assert_lost(
        "prepare_spmm",
        engine.prepare_spmm(&a, &PrepareOptions::builder().n(n).build()),
    );
    dog.stage("SpMV preparation after the trap");
    assert_lost("prepare_spmv", engine.prepare_spmv(&a, &spmv_opts));
    dog.stage("synchronize after the trap");
    let e = gpu.synchronize().expect_err("the context stays lost");
    assert!(matches!(e, GpuError::DeviceLost { .. }), "{e:?}");
    // (For the record: a new handle on device 0 shares the lost primary context while this
    // one lives.)
    dog.stage("a new GPU handle after the trap");
    match Gpu::require().map(|fresh| fresh.upload(&x).map(drop)) {
        Err(e) => eprintln!("a new GPU handle: refused: {e}"),
        Ok(upload) => eprintln!("a new GPU handle: its first upload gives {upload:?}"),
    }

    // Dropping everything on the lost context does not abort.
    dog.stage("drops after the trap");
    drop((db, dc, dx, dy));
    drop(blas);
    drop(spmm);
    drop(spmv);
    drop(engine);
    drop(gpu);
    // (For the record: whether a handle made after every one on the lost context was dropped
    // gets a fresh primary context in this process.)
    dog.stage("a GPU handle after every drop");
    let round_trip = Gpu::require().and_then(|fresh| {
        let buf = fresh.upload(&x)?;
        fresh.download(&buf)
    });
    match round_trip {
        Ok(back) => eprintln!(
            "a GPU handle after every drop: an upload and download work (equal: {})",
            back == x
        ),
        Err(e) => eprintln!("a GPU handle after every drop: {e}"),
    }
    dog.stage("done");
}
