//! [`Engine::prepare_spamm`]: A checked and the devices opened once; every product then
//! chooses τ for its B.

use tcsparse_gpu::multi::{DeviceGroup, DeviceSet};
use tcsparse_gpu::spamm::{SpammConfig, SpammRun};

use super::options::gpu_precision;
use super::run::{spamm_cpu, spamm_on_group_keeping_operands};
use super::{
    DenseRef, SpammOptions, SpammReport, check, measured_error, measured_error_device, sample_rows,
};
use crate::{Engine, Error};

/// A dense A prepared for SpAMM products ([`Engine::prepare_spamm`]): its shape checked and,
/// on a GPU engine, the device group opened (NCCL communicators between the devices of
/// [`SpammOptions::devices`], or the engine's own GPU), kept for every product.
pub struct PreparedSpamm<'a> {
    a: DenseRef<'a>,
    opts: SpammOptions,
    /// `None`: the CPU reference path.
    group: Option<DeviceGroup>,
}

impl std::fmt::Debug for PreparedSpamm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSpamm")
            .field("rows", &self.a.rows)
            .field("cols", &self.a.cols)
            .field("opts", &self.opts)
            .field("devices", &self.group.as_ref().map(|g| g.len()))
            .finish()
    }
}

impl Engine {
    /// Prepares the dense `a` for SpAMM products `C ≈ A·B` ([`PreparedSpamm::spamm`]). On a GPU
    /// engine the products run on its GPU, or over [`SpammOptions::devices`] when that names
    /// other or more devices (each must be present); on a CPU engine on the CPU reference path
    /// (a device list other than the default is then an [`Error::Unavailable`]).
    pub fn prepare_spamm<'a>(
        &self,
        a: DenseRef<'a>,
        opts: &SpammOptions,
    ) -> Result<PreparedSpamm<'a>, Error> {
        // A's own shape (against itself as the right operand's row count).
        check(&a, &DenseRef::new(&[], a.cols, 0))?;
        let group = match &self.gpu {
            None if opts.devices != DeviceSet::default() => {
                return Err(Error::Unavailable(format!(
                    "SpAMM devices {:?} asked for on an engine without a GPU ({})",
                    opts.devices.ordinals(),
                    self.message
                )));
            }
            None => None,
            Some(g) if opts.devices == DeviceSet::default() => {
                Some(DeviceGroup::host_staged(vec![g.clone()], "one device")?)
            }
            Some(_) => Some(DeviceGroup::open(opts.devices)?),
        };
        Ok(PreparedSpamm {
            a,
            opts: *opts,
            group,
        })
    }
}

/// The report of a run on `backend` in `precision`.
fn report(backend: &'static str, precision: &str, run: SpammRun, transport: String) -> SpammReport {
    SpammReport {
        backend,
        precision: precision.into(),
        tau: run.tau,
        valid_ratio: run.valid_ratio,
        abs_bound: run.abs_bound,
        rel_bound: run.rel_bound,
        measured_error: None,
        attempts: run.attempts,
        row_ranges: run.row_ranges,
        transport,
    }
}

impl PreparedSpamm<'_> {
    /// `gpu` or `cpu`: where the products run.
    pub fn backend(&self) -> &'static str {
        if self.group.is_some() { "gpu" } else { "cpu" }
    }

    /// C ≈ A·B (SpAMM): C (`a.rows × b.cols`, row-major) and what the product did. With
    /// [`SpammOptions::measure_error`], the error is measured where the product ran: after a GPU
    /// product on its first device, reading the B it multiplied.
    pub fn spamm(&mut self, b: DenseRef<'_>) -> Result<(Vec<f32>, SpammReport), Error> {
        let (m, n, k) = check(&self.a, &b)?;
        let opts = &self.opts;
        let (c, mut report, operands) = match &self.group {
            Some(group) => {
                let precision = gpu_precision(opts.precision);
                let cfg = SpammConfig {
                    precision,
                    block: opts.block,
                    s: opts.s.max(1),
                    target: opts.target,
                };
                let (c, run, ops) = spamm_on_group_keeping_operands(group, self.a, b, &cfg)?;
                let transport = group.transport().to_string();
                (c, report("gpu", precision.name(), run, transport), ops)
            }
            None => {
                let (c, run) = spamm_cpu(self.a, b, opts)?;
                (c, report("cpu", "cpu-f32", run, "cpu".into()), None)
            }
        };
        if opts.measure_error {
            let rows = sample_rows(m, opts.measure_rows);
            let (a, b) = (self.a.data, b.data);
            let _span = tracing::info_span!("spamm_measured_error", rows = rows.len()).entered();
            report.measured_error = Some(match operands {
                Some(ops) => measured_error_device(ops, a, b, &c, &rows)?,
                None => measured_error(a, b, &c, n, k, &rows),
            });
        }
        Ok((c, report))
    }
}
