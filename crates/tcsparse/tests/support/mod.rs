//! Operands and options several facade test files share (each file uses some of them).
#![allow(dead_code)]

use std::path::PathBuf;

use tcsparse::formats::Csr;
use tcsparse::formats::reference::spmm_f64;
use tcsparse::gpu::Gpu;
use tcsparse::{
    Balance, DType, Engine, Error, ExecKernel, KernelRequest, Precision, PrepareOptions, Prepared,
    ReorderChoice, Requested, RowTileKernel,
};

/// An engine on the GPU (a test that calls it fails without one).
pub fn gpu_engine() -> Engine {
    Engine::with_gpu(Gpu::require().expect("this test needs a CUDA GPU"))
}

/// [`gpu_engine`] and a handle to its GPU.
pub fn engine_and_gpu() -> (Engine, Gpu) {
    let engine = gpu_engine();
    let gpu = engine.gpu().expect("an engine made on a GPU").clone();
    (engine, gpu)
}

/// GPU kernels asked for by name: Acc-SpMM, the six TF32 row-tile kernels, CSR, the staged
/// kernel at both slices and cuSPARSE (the device-API tests run each; the engine tests add HRPB
/// and the tuned choice).
pub const GPU_KERNELS: [KernelRequest; 11] = [
    KernelRequest::AccSpmm,
    KernelRequest::RowTile(RowTileKernel::TC16),
    KernelRequest::RowTile(RowTileKernel::TC32),
    KernelRequest::RowTile(RowTileKernel::TC16D),
    KernelRequest::RowTile(RowTileKernel::TC32D),
    KernelRequest::RowTile(RowTileKernel::TC16D_TMA),
    KernelRequest::RowTile(RowTileKernel::TC32D_TMA),
    KernelRequest::Csr,
    KernelRequest::Staged(tcsparse::StagedSlice::S32),
    KernelRequest::Staged(tcsparse::StagedSlice::S64),
    KernelRequest::Cusparse,
];

/// `len` values in [-1, 1) from a seeded LCG: the same on every call.
pub fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// 203×203 with empty rows, short rows and a few dense (hub) rows, so that split windows and
/// split CSR rows (atomics after a β pre-scale) are exercised.
pub fn hub_rows_203() -> Csr {
    let mut t = Vec::new();
    let rows = 203u32;
    for r in 0..rows {
        if (40..56).contains(&r) {
            continue;
        }
        for k in 0..(r % 7 + 1) {
            t.push((r, (r * 13 + k * 29) % rows, 0.25 + (k as f32) * 0.1));
        }
        if r % 50 == 0 {
            for c in 0..rows {
                t.push((r, c, 0.01));
            }
        }
    }
    tcsparse::formats::csr::csr_from_triplets(rows as usize, rows as usize, &t).unwrap()
}

/// Untuned options of `kernel` in the input order, without balancing: no atomics, so products
/// are bitwise reproducible.
pub fn reproducible_options(kernel: KernelRequest) -> PrepareOptions {
    PrepareOptions::builder()
        .kernel(kernel)
        .reorder(ReorderChoice::None)
        .balance(Balance::Off)
        .tune(false)
        .build()
}

/// The reference a product is held to: `α·A·B + β·C0` in f64 and its scale
/// `|α|·|A|·|B| + |β·C0|` (β = 0: C0 is not read), for B (`cols × n`) and C0 (`rows × n`)
/// row-major and compact.
pub fn reference(
    a: &Csr,
    alpha: f32,
    b: &[f32],
    beta: f32,
    c0: &[f32],
    n: usize,
) -> (Vec<f64>, Vec<f64>) {
    let ab = spmm_f64(a, b, n, n, false);
    let abs = spmm_f64(a, b, n, n, true);
    let beta_c = |i: usize| {
        if beta == 0.0 {
            0.0
        } else {
            beta as f64 * c0[i] as f64
        }
    };
    let want = ab
        .iter()
        .enumerate()
        .map(|(i, &x)| alpha as f64 * x + beta_c(i))
        .collect();
    let scale = abs
        .iter()
        .enumerate()
        .map(|(i, &x)| (alpha as f64 * x).abs() + beta_c(i).abs())
        .collect();
    (want, scale)
}

/// The bound C = α·A·B + β·C₀ by `p` must meet, relative to |α|·|A|·|B| + |β|·|C₀|:
/// [`Prepared::error_bound`] (the bound of A·B), for f32 kernels γ_{k+3} (k products summed,
/// one rounding for α, two for + β·C₀).
pub fn product_bound(p: &Prepared, a: &Csr) -> f64 {
    match p.precision() {
        Precision::F32 => Precision::F32.scaled_error_bound(a.longest_row() + 3),
        _ => p.error_bound(),
    }
}

/// Asserts that `e` is [`Error::Unsupported`] for `requested` and that its message contains
/// `names`.
pub fn assert_unsupported(e: &Error, requested: Requested, names: &[&str]) {
    assert!(
        matches!(e, Error::Unsupported { requested: r, .. } if *r == requested),
        "{e}"
    );
    let msg = e.to_string();
    for name in names {
        assert!(msg.contains(name), "{name} not in {msg}");
    }
}

/// Asserts that `e` is [`Error::ElementType`] for a preparation in `prepared` given operands in
/// `got`.
pub fn assert_element_type(e: &Error, prepared: DType, got: DType) {
    assert!(
        matches!(e, Error::ElementType { prepared: p, got: g } if *p == prepared && *g == got),
        "{e}"
    );
}

/// Asserts that `p` runs an f32 kernel (cuSPARSE, the CSR kernel or the staged CSR kernel) and
/// says so.
pub fn assert_f32_kernel(p: &Prepared) {
    assert!(
        matches!(
            p.kernel(),
            ExecKernel::Cusparse { .. } | ExecKernel::CsrCuda { .. } | ExecKernel::Staged { .. }
        ),
        "{}",
        p.kernel()
    );
    assert_eq!(p.precision(), Precision::F32);
}

/// The shared dataset folder: `$TCSPARSE_SHARED_DATASETS`, else `../../../shared/datasets` from
/// this crate, if it is a folder.
pub fn datasets() -> Option<PathBuf> {
    let p = std::env::var_os("TCSPARSE_SHARED_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    p.is_dir().then_some(p)
}

/// [`datasets`] for a test that has nothing to do without them: when the folder is absent, a
/// failure if the run requires the GPU or the data (`TCSPARSE_REQUIRE_GPU=1`,
/// `TCSPARSE_REQUIRE_DATA=1`), else `None` after the note "nothing to `what`".
pub fn datasets_or_skip(what: &str) -> Option<PathBuf> {
    let dir = datasets();
    if dir.is_none() {
        assert!(
            ["TCSPARSE_REQUIRE_GPU", "TCSPARSE_REQUIRE_DATA"]
                .iter()
                .all(|v| std::env::var(v).as_deref() != Ok("1")),
            "TCSPARSE_REQUIRE_GPU=1 or TCSPARSE_REQUIRE_DATA=1 but no dataset folder (set TCSPARSE_SHARED_DATASETS)"
        );
        println!("note: no shared dataset folder; nothing to {what}");
    }
    dir
}
