//! Operands and the one-GPU check the split and distributed GPU tests share.

use tcsparse::formats::Csr;
use tcsparse::formats::reference::{max_scaled_error, spmm_f64};
use tcsparse::gpu::Gpu;
use tcsparse::{Engine, PrepareOptions};

/// `rows × cols` with hub rows at the start (so a row split by count would be unbalanced), empty
/// rows and banded rows; the same on every call (and so on every rank).
pub fn hub_matrix(rows: usize, cols: usize) -> Csr {
    let mut t = Vec::new();
    for r in 0..rows {
        if r < 8 {
            for c in (0..cols).step_by(2) {
                t.push((r as u32, c as u32, 0.01 * (c % 7) as f32 - 0.02));
            }
        } else if r % 97 != 0 {
            for k in 0..(r % 9 + 1) {
                t.push((
                    r as u32,
                    ((r * 3 / 4 + k * 5) % cols) as u32,
                    0.25 - 0.05 * k as f32,
                ));
            }
        }
    }
    tcsparse::formats::csr::csr_from_triplets(rows, cols, &t).unwrap()
}

/// A deterministic dense `k × n` operand in [-1, 1).
pub fn b_matrix(k: usize, n: usize) -> Vec<f32> {
    (0..k * n)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

/// A product `A·B` to check: B ([`b_matrix`], `cols × n`) and the f64 reference of `A·B` with
/// its scale `|A|·|B|`.
pub struct Reference {
    pub n: usize,
    pub b: Vec<f32>,
    pub want: Vec<f64>,
    pub scale: Vec<f64>,
}

impl Reference {
    /// The reference of `a` times a `cols × n` [`b_matrix`].
    pub fn new(a: &Csr, n: usize) -> Self {
        let b = b_matrix(a.cols(), n);
        let want = spmm_f64(a, &b, n, n, false);
        let scale = spmm_f64(a, &b, n, n, true);
        Self { n, b, want, scale }
    }

    /// C = A·B of `a` prepared with `opts` on one GPU (every element written), after checking it
    /// against the reference within its own kernel's bound (`what` names it in a failure); C and
    /// that bound.
    pub fn one_gpu(
        &self,
        gpu: &Gpu,
        a: &Csr,
        opts: &PrepareOptions,
        what: &str,
    ) -> (Vec<f32>, f64) {
        let mut p = Engine::with_gpu(gpu.clone()).prepare_spmm(a, opts).unwrap();
        let mut c = vec![f32::NAN; a.rows() * self.n];
        p.spmm(1.0, &self.b, 0.0, &mut c).unwrap();
        let bound = p.error_bound();
        let err = max_scaled_error(&c, &self.want, &self.scale);
        assert!(
            err <= bound,
            "{what} one GPU: error {err:.3e} > {bound:.3e}"
        );
        (c, bound)
    }
}
