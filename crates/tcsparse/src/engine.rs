//! [`Engine`]: probes the GPU once and is the entry point of every operation
//! ([`Engine::prepare_spmm`] → [`Prepared`](crate::Prepared) for SpMM, in [`crate::spmm`]).

use tcsparse_gpu::{Gpu, GpuStatus};
use tcsparse_planner::DeviceSpec;

/// Environment variable that makes [`Engine::new`] skip the GPU (`1`): the CPU reference path.
pub const FORCE_CPU_ENV: &str = "TCSPARSE_FORCE_CPU";

/// Where products run.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A CUDA GPU (device 0).
    Gpu,
    /// The CPU reference path (no usable GPU, or forced).
    Cpu,
}

/// The entry point: probes the GPU once.
#[derive(Debug)]
pub struct Engine {
    pub(crate) gpu: Option<Gpu>,
    pub(crate) message: String,
    pub(crate) device: DeviceSpec,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    /// Probes device 0 (never panics). Without a usable GPU, or with `TCSPARSE_FORCE_CPU=1`, the
    /// engine runs on the CPU reference path and [`Engine::message`] says why.
    pub fn new() -> Self {
        if std::env::var(FORCE_CPU_ENV).is_ok_and(|v| v == "1") {
            return Self::cpu(format!("{FORCE_CPU_ENV}=1"));
        }
        match Gpu::probe() {
            GpuStatus::Ready(g) => Self::with_gpu(g),
            GpuStatus::NoDriver(m) | GpuStatus::NoDevice(m) | GpuStatus::Failed(m) => Self::cpu(m),
        }
    }

    /// A CPU-only engine; `why` goes into the message.
    pub fn cpu(why: impl std::fmt::Display) -> Self {
        Self {
            gpu: None,
            message: format!("no GPU ({why}): using the CPU reference path"),
            device: DeviceSpec::h200(),
        }
    }

    /// An engine on an already opened GPU. Plans use the H200 preset with the device's SM count
    /// and L2 size.
    pub fn with_gpu(gpu: Gpu) -> Self {
        let info = gpu.info();
        let mut device = DeviceSpec::h200();
        device.sm_count = info.sm_count.max(1);
        if info.l2_bytes > 0 {
            device.l2_bytes = info.l2_bytes;
        }
        let message = format!(
            "GPU: {} ({} SMs, compute {}.{})",
            info.name, info.sm_count, info.compute_capability.0, info.compute_capability.1
        );
        Self {
            gpu: Some(gpu),
            message,
            device,
        }
    }

    /// An engine on a CUDA context and stream the caller already has (e.g. a host application's
    /// own cudarc stream): every upload, launch and library call of the prepared matrices goes to
    /// `stream`, so the products order with the application's own work. The stream must belong to
    /// `ctx`.
    pub fn from_cuda(
        ctx: std::sync::Arc<cudarc::driver::CudaContext>,
        stream: std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<Self, crate::Error> {
        Ok(Self::with_gpu(Gpu::from_parts(ctx, stream)?))
    }

    /// Where products run.
    pub fn backend(&self) -> Backend {
        if self.gpu.is_some() {
            Backend::Gpu
        } else {
            Backend::Cpu
        }
    }

    /// One line: the GPU found, or why there is none.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The GPU, when there is one.
    pub fn gpu(&self) -> Option<&Gpu> {
        self.gpu.as_ref()
    }

    /// The device description plans are made for.
    pub fn device_spec(&self) -> &DeviceSpec {
        &self.device
    }

    /// Pays a new process's first-use costs of uploading (pinned staging buffers and a first pass
    /// through each: 55–67 ms on the H200 host, [`Gpu::warm_up_uploads`]), of downloading (the
    /// pinned buffers, [`Gpu::warm_up_downloads`]) and of loading the CSR
    /// kernel's modules ([`tcsparse_gpu::spmm::csr::load_modules`], 1.1–1.5 ms) so that the first
    /// [`Engine::prepare_spmm`] does not (a plan-cache hit of R-MAT scale 20 in a new process on the
    /// H200 host: 4.5–5.4 ms after [`Engine::warm_up_for`], 5.2–7.0 ms after a warm-up of the
    /// staging buffers alone, 7.2–7.3 ms when only the first staging buffer had been used). Run
    /// it on another thread while the matrix loads, e.g. `std::thread::scope(|s| { s.spawn(||
    /// engine.warm_up()); load() })`. Nothing to do on the CPU path.
    pub fn warm_up(&self) -> Result<(), crate::Error> {
        let Some(g) = &self.gpu else { return Ok(()) };
        g.warm_up_uploads()?;
        // (A host product's C comes back through them.)
        g.warm_up_downloads()?;
        // (The CSR kernel is a candidate of every tuned preparation and the kernel of many cache
        // hits: its modules cost a new process 1.1–1.5 ms.)
        tcsparse_gpu::spmm::csr::load_modules(g)?;
        Ok(())
    }

    /// [`Engine::warm_up`] for a matrix of about `rows` rows and `nnz` nonzeros (e.g. a Matrix
    /// Market header's), which also maps the device memory its preparation allocates into the
    /// memory pool and keeps it there ([`Gpu::reserve_device_memory`] of
    /// [`preparation_device_bytes`]; the process then holds that much device memory while it
    /// lives, at most half of what is free).
    pub fn warm_up_for(&self, rows: usize, nnz: usize) -> Result<(), crate::Error> {
        let Some(g) = &self.gpu else { return Ok(()) };
        self.warm_up()?;
        g.reserve_device_memory(preparation_device_bytes(rows, nnz))?;
        Ok(())
    }
}

/// Device bytes worth reserving before a GPU preparation of a `rows`-row matrix with `nnz`
/// nonzeros ([`Engine::warm_up_for`]): the CSR arrays it uploads first (4·(rows + 1) + 8·nnz
/// bytes; all a plan-cache hit on the CSR kernel needs besides its work list) and one eighth on
/// top for that work list (R-MAT scale 20: 1.2 MB beside 93 MB) and the pool's rounding.
/// Saturates instead of overflowing.
pub fn preparation_device_bytes(rows: usize, nnz: usize) -> usize {
    let csr = rows
        .saturating_add(1)
        .saturating_mul(4)
        .saturating_add(nnz.saturating_mul(8));
    csr.saturating_add(csr / 8)
}

#[cfg(test)]
mod tests {
    use super::preparation_device_bytes;

    #[test]
    fn reserved_bytes_cover_the_csr_arrays_with_an_eighth_on_top() {
        // R-MAT scale 20, ef 11: 4 MiB of row offsets and 89 MB of indices and values.
        let (rows, nnz) = (1 << 20, 11_166_427);
        let csr = 4 * (rows + 1) + 8 * nnz;
        assert_eq!(preparation_device_bytes(rows, nnz), csr + csr / 8);
        assert_eq!(preparation_device_bytes(0, 0), 4);
        // A header's absurd sizes saturate instead of overflowing.
        assert_eq!(preparation_device_bytes(usize::MAX, 1), usize::MAX);
        assert_eq!(preparation_device_bytes(1, usize::MAX), usize::MAX);
    }
}
