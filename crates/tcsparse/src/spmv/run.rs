//! Products of a prepared SpMV: host ([`PreparedSpmv::spmv`]), device
//! ([`PreparedSpmv::spmv_device`]) and timed ([`PreparedSpmv::time_device`]), and the CPU f32 CSR.

use cudarc::driver::{DevicePtr, DevicePtrMut};
use tcsparse_formats::Csr;
use tcsparse_gpu::DeviceProduct;
use tcsparse_gpu::Timing;
use tcsparse_gpu::spmv::graph::time_spmv;

use super::{Exec, PreparedSpmv, fmt_err};
use crate::Error;

impl PreparedSpmv {
    fn check(&self, x: usize, y: usize) -> Result<(), Error> {
        if x < self.cols * self.n || y < self.rows * self.n {
            return Err(Error::InvalidArgs(format!(
                "SpMV with {} right-hand sides needs X of {}·{n} and y of {}·{n} elements, got {x} and {y}",
                self.n,
                self.cols,
                self.rows,
                n = self.n
            )));
        }
        Ok(())
    }

    /// `y = α·A·X + β·y` on host slices (X: `cols × n`, y: `rows × n`, row-major). β = 0 never
    /// reads y.
    ///
    /// Non-finite X: the tensor-core kernels and the per-tile-row walks multiply a tile's absent
    /// entries (zeros) by its columns of X, so an ∞ or NaN in X can give NaN in a row of the same
    /// tile that has no entry in that column, where cuSPARSE and the set-bit walks give a finite
    /// value ([`PreparedSpmv::kernel`] names the kernel kept).
    pub fn spmv(&mut self, alpha: f32, x: &[f32], beta: f32, y: &mut [f32]) -> Result<(), Error> {
        self.check(x.len(), y.len())?;
        let n = self.n;
        match &mut self.exec {
            Exec::Cpu(c) => match (&c.dev, &c.work) {
                (Some(d), Some(w)) => d.spmv_cpu(w, alpha, x, beta, y, n).map_err(fmt_err),
                _ => {
                    csr_f32(&c.csr, alpha, x, beta, y, n);
                    Ok(())
                }
            },
            _ => {
                let gpu = self
                    .gpu
                    .clone()
                    .ok_or_else(|| Error::Unavailable("no GPU".into()))?;
                let dx = gpu.upload(&x[..self.cols * n])?;
                let mut dy = gpu.upload(&y[..self.rows * n])?;
                self.spmv_device(alpha, &dx, beta, &mut dy)?;
                let out = gpu.download(&dy)?;
                y[..self.rows * n].copy_from_slice(&out);
                Ok(())
            }
        }
    }

    /// `y = α·A·X + β·y` on device data, queued on the engine's GPU stream (the argument order
    /// of [`PreparedSpmv::spmv`] and of SpMM's `spmm_device`): X and y may be whole buffers
    /// ([`CudaSlice`](cudarc::driver::CudaSlice)) or views into larger ones (`CudaView` / `CudaViewMut`, e.g.
    /// `buf.slice(..)`).
    pub fn spmv_device<X: DevicePtr<f32>, Y: DevicePtrMut<f32>>(
        &mut self,
        alpha: f32,
        x: &X,
        beta: f32,
        y: &mut Y,
    ) -> Result<(), Error> {
        self.check(x.len(), y.len())?;
        match &mut self.exec {
            Exec::Ours(k) => Ok(k.run(alpha, x, beta, y, self.n)?),
            Exec::Csr(k) => Ok(k.run(alpha, x, beta, y, self.n)?),
            Exec::Cusparse(c) => {
                c.run(alpha, x, beta, y, self.n)?;
                // (cuSPARSE reports success on a lost context: ask the stream.)
                match &self.gpu {
                    Some(gpu) => Ok(gpu.stream_fault()?),
                    None => Ok(()),
                }
            }
            Exec::Cpu(_) => Err(Error::Unavailable(
                "spmv_device on an engine without a GPU".into(),
            )),
        }
    }

    /// Median per-call time in ms of the prepared product inside CUDA graphs of 20 calls
    /// (`samples` graph launches), on device buffers `x`, `y` (β = 0).
    pub fn time_device<X: DevicePtr<f32>, Y: DevicePtrMut<f32>>(
        &mut self,
        x: &X,
        y: &mut Y,
        samples: usize,
    ) -> Result<Timing, Error> {
        self.check(x.len(), y.len())?;
        let gpu = self
            .gpu
            .clone()
            .ok_or_else(|| Error::Unavailable("no GPU".into()))?;
        let n = self.n;
        match &self.exec {
            Exec::Ours(k) => Ok(time_spmv(&gpu, k.as_ref(), x, y, n, 20, samples)?),
            Exec::Csr(k) => Ok(time_spmv(&gpu, k.as_ref(), x, y, n, 20, samples)?),
            Exec::Cusparse(c) => Ok(time_spmv(&gpu, c.as_ref(), x, y, n, 20, samples)?),
            Exec::Cpu(_) => Err(Error::Unavailable("no GPU".into())),
        }
    }
}

/// y = α·A·X + β·y in f32 on CSR (X, y row-major with n columns).
fn csr_f32(a: &Csr, alpha: f32, x: &[f32], beta: f32, y: &mut [f32], n: usize) {
    let ip = a.indptr();
    let ip = ip.raw_storage();
    let mut acc = vec![0f32; n];
    for r in 0..a.rows() {
        acc.fill(0.0);
        for p in ip[r] as usize..ip[r + 1] as usize {
            let (c, v) = (a.indices()[p] as usize, a.data()[p]);
            for j in 0..n {
                acc[j] += v * x[c * n + j];
            }
        }
        for j in 0..n {
            let o = &mut y[r * n + j];
            *o = if beta == 0.0 {
                alpha * acc[j]
            } else {
                beta.mul_add(*o, alpha * acc[j])
            };
        }
    }
}
