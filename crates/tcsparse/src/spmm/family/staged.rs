//! The window-staged CSR kernel (CUDA cores, f32; `tcsparse_gpu::spmm::staged`): each window of
//! rows stages the B rows it reads in shared memory once and multiplies every row of the window
//! from there (docs/kernels/staged-spmm.md). Requested as `staged32` / `staged64` (its slice
//! width, the slice's default window cut); tuned at each slice and each of its tuned cuts.

use std::time::Instant;

use tcsparse_formats::Csr;
use tcsparse_formats::staged::{StagedCsr, StagedSpec};
use tcsparse_gpu::spmm::staged::{Slice, StageCopy, StagedSpmm};
use tcsparse_gpu::{DeviceProduct, Gpu};

use super::{Build, Choice, FamilyDevice, FamilyFacts, FamilyKernel, SpmmFamily};
use crate::spmm::codec::{Reader, StaleOrCorrupt, put_u32};
use crate::spmm::tune::{Probe, Tuning};
use crate::{Error, ExecKernel, KernelRequest, Precision};

/// The window-staged CSR kernel (f32, CUDA cores) as [`ExecKernel::Staged`] runs it: each window
/// of rows stages the B rows it reads in shared memory once and multiplies every row of the
/// window from there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedKernel {
    /// Columns of C per thread block.
    pub slice: Slice,
    /// How rows were cut into windows.
    pub spec: StagedSpec,
    /// How aligned full slices of B are staged.
    pub copy: StageCopy,
}

impl std::fmt::Display for StagedKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "staged CSR (CUDA cores, {}-column slices, windows of ≤ {} rows and ≤ {} B rows, {})",
            self.slice.width(),
            self.spec.max_window_rows,
            self.spec.slot_cap,
            self.copy.name()
        )
    }
}

impl StagedKernel {
    /// The light window cut ([`Slice::light_spec`]) at the widest slice whose slot cap holds a
    /// row of `longest_row` nonzeros (64 columns, else 32), bulk copies: what an untuned
    /// preparation runs on a matrix of few nonzeros (`choose::model_kernel`). `None` when no
    /// light cut holds such a row.
    pub(crate) fn light_cut_for(longest_row: usize) -> Option<StagedKernel> {
        [Slice::S64, Slice::S32]
            .into_iter()
            .find(|s| longest_row <= s.light_spec().slot_cap as usize)
            .map(|slice| StagedKernel {
                slice,
                spec: slice.light_spec(),
                copy: StageCopy::Bulk,
            })
    }
}

/// The family ([`KernelRequest::Staged`] at a slice width: that slice's default window cut
/// ([`Slice::default_spec`]), bulk copies; a matrix with a row longer than the cut's slot cap is
/// refused at its build).
pub(crate) struct Family;

impl SpmmFamily for Family {
    fn facts(&self) -> &'static FamilyFacts {
        &FamilyFacts {
            tag: 8,
            requests: &[
                ("staged32", KernelRequest::Staged(Slice::S32)),
                ("staged64", KernelRequest::Staged(Slice::S64)),
            ],
            precision: Precision::F32,
            original_order: true,
        }
    }

    fn choose(&self, request: KernelRequest, c: &Choice<'_>) -> Option<(ExecKernel, String)> {
        let KernelRequest::Staged(slice) = request else {
            return None;
        };
        let kernel = ExecKernel::Staged(StagedKernel {
            slice,
            spec: slice.default_spec(),
            copy: StageCopy::Bulk,
        });
        Some((
            kernel,
            format!("{kernel} requested (planner: {})", c.reason),
        ))
    }

    /// Slice width (32 or 64), most rows and slots per window, stage copy (0 bulk copies, 1
    /// `cp.async`), u32 each.
    fn decode(&self, r: &mut Reader<'_>) -> Result<ExecKernel, StaleOrCorrupt> {
        let (width, max_window_rows, slot_cap) = (r.u32()?, r.u32()?, r.u32()?);
        let copy = match r.u32()? {
            0 => StageCopy::Bulk,
            1 => StageCopy::Async,
            x => return Err(format!("corrupt: staged stage copy {x}")),
        };
        let slice = Slice::ALL
            .into_iter()
            .find(|s| s.width() == width)
            .ok_or_else(|| format!("corrupt: staged slice of {width} columns"))?;
        let spec = StagedSpec {
            max_window_rows,
            slot_cap,
        };
        spec.check()
            .map_err(|e| format!("corrupt: staged window cut: {e}"))?;
        Ok(ExecKernel::Staged(StagedKernel { slice, spec, copy }))
    }

    #[cfg(test)]
    fn examples(&self) -> Vec<ExecKernel> {
        Slice::ALL
            .into_iter()
            .flat_map(|slice| {
                slice.tuned_specs().into_iter().flat_map(move |spec| {
                    StageCopy::ALL
                        .map(|copy| ExecKernel::Staged(StagedKernel { slice, spec, copy }))
                })
            })
            .collect()
    }
}

impl FamilyKernel for StagedKernel {
    fn family(&self) -> &'static dyn SpmmFamily {
        &Family
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let copy = match self.copy {
            StageCopy::Bulk => 0,
            StageCopy::Async => 1,
        };
        for v in [
            self.slice.width(),
            self.spec.max_window_rows,
            self.spec.slot_cap,
            copy,
        ] {
            put_u32(out, v);
        }
    }

    fn build(&self, b: &mut Build<'_>) -> Result<Box<dyn FamilyDevice>, Error> {
        let s = StagedCsr::build(b.a, &self.spec).map_err(|e| Error::Format(e.to_string()))?;
        let mut k = StagedSpmm::new(b.gpu, &s, self.slice)?;
        k.set_copy(self.copy);
        Ok(Box::new(k))
    }
}

impl FamilyDevice for StagedSpmm {
    fn kernel(&self) -> ExecKernel {
        ExecKernel::Staged(StagedKernel {
            slice: self.slice(),
            spec: self.spec(),
            copy: self.copy(),
        })
    }

    fn set_values(&mut self, _gpu: &Gpu, a: &Csr) -> Result<(), Error> {
        // (The staged layout keeps the values in CSR order.)
        Ok(StagedSpmm::set_values(self, a.data())?)
    }
}

/// The tuning candidates: the kernel on `a` at each slice of [`Slice::ALL`] and each of its
/// [`Slice::tuned_specs`] (a cut that refuses `a`, a row longer than its slot cap, is skipped), the
/// stage by bulk copies (the `cp.async` stage measured slower on every shared matrix on the H200,
/// docs/kernels/staged-spmm.md); returns the kernel of the finalist and its full time (`None` when
/// `a` has no rows, no cut fits or none came close to the best so far). `order`, when given, is
/// added to the candidates' names.
pub(in crate::spmm) fn tune(
    t: &mut Tuning,
    probe: Probe<'_>,
) -> Result<Option<(f64, StagedSpmm)>, Error> {
    let a = probe.a;
    if a.rows() == 0 {
        return Ok(None);
    }
    let t0 = Instant::now();
    let mut devs = Vec::new();
    for slice in Slice::ALL {
        for spec in slice.tuned_specs() {
            match StagedCsr::build(a, &spec) {
                Ok(s) => devs.push(StagedSpmm::new(t.gpu, &s, slice)?),
                Err(e) => tracing::debug!(
                    "tuning: staged CSR kernel at {}-column slices, {spec:?}, skipped: {e}",
                    slice.width()
                ),
            }
        }
    }
    tracing::debug!(
        "tuning: staged CSR kernel set up at {} cuts in {:.1} ms",
        devs.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let names: Vec<String> = devs
        .iter()
        .map(|d| probe.name(FamilyDevice::kernel(d)))
        .collect();
    let Probe { b, c, n, .. } = probe;
    let found = t.family(&names, |_, _| true, |i| Ok(devs[i].run(1.0, b, 0.0, c, n)?))?;
    Ok(found.map(|(i, ms)| (ms, devs.swap_remove(i))))
}
