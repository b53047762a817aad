//! cuTeSpMM's HRPB kernel (TF32 tensor cores on 16×4 bricks; `tcsparse_gpu::spmm::hrpb`).
//! Requested as `hrpb` (the MMA shape for the matrix's row panels, the wave-aware split unless
//! `Balance::Off`); tuned at each of [`HRPB_TUNED`] and a fill cap. The planner's model picks it
//! for HRPB plans and at the launch floor (`choose.rs`).

use tcsparse_formats::Csr;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_gpu::spmm::hrpb::{HrpbMma, HrpbSplit, HrpbSpmm};
use tcsparse_gpu::{DeviceProduct, Gpu};

use super::{Build, Choice, FamilyDevice, FamilyFacts, FamilyKernel, SpmmFamily};
use crate::spmm::codec::{Reader, StaleOrCorrupt, put_u32};
use crate::spmm::tune::{Probe, Tuning};
use crate::{Balance, Error, ExecKernel, KernelRequest, Precision};

/// cuTeSpMM's HRPB kernel (TF32, 16×4 bricks) as [`ExecKernel::Hrpb`] runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HrpbKernel {
    /// MMA shape.
    pub mma: HrpbMma,
    /// How heavy row panels are split.
    pub split: HrpbSplit,
}

impl std::fmt::Display for HrpbKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let split = match self.split {
            HrpbSplit::None => "panels whole".to_string(),
            HrpbSplit::Wave => "wave-aware split".to_string(),
            HrpbSplit::WaveCoarse(k) => format!("wave-aware split at 1/{k} of the slots"),
            HrpbSplit::Cap(c) => format!("split, ≤ {c} bricks per TB"),
        };
        write!(f, "HRPB ({}, {split})", self.mma.name())
    }
}

/// The family ([`KernelRequest::Hrpb`]: [`HrpbMma::for_rows`]'s shape; `Balance::Off` keeps every
/// row panel whole, anything else splits heavy panels wave-aware from the device).
pub(crate) struct Family;

/// The MMA shapes by their plan-cache number (the position, which `encode` writes):
/// `HrpbMma::ALL`, whose order is therefore part of the cache format (pinned by
/// `mma_cache_numbers_are_stable`).
const MMAS: [HrpbMma; 10] = HrpbMma::ALL;

impl SpmmFamily for Family {
    fn facts(&self) -> &'static FamilyFacts {
        &FamilyFacts {
            tag: 6,
            requests: &[("hrpb", KernelRequest::Hrpb)],
            precision: Precision::Tf32,
            original_order: false,
        }
    }

    fn choose(&self, request: KernelRequest, c: &Choice<'_>) -> Option<(ExecKernel, String)> {
        if request != KernelRequest::Hrpb {
            return None;
        }
        let kernel = HrpbKernel {
            mma: HrpbMma::for_rows(c.rows, c.sms),
            // Balance::Off keeps every panel whole; anything else splits wave-aware.
            split: if c.opts.balance == Balance::Off {
                HrpbSplit::None
            } else {
                HrpbSplit::Wave
            },
        };
        Some((
            ExecKernel::Hrpb(kernel),
            format!("HRPB requested (planner: {})", c.reason),
        ))
    }

    /// The MMA shape's number ([`MMAS`]), the split's kind (0 none, 1 wave, 2 coarse wave, 3 cap)
    /// and its parameter (≥ 1 for 2 and 3), u32 each.
    fn decode(&self, r: &mut Reader<'_>) -> Result<ExecKernel, StaleOrCorrupt> {
        let (m, tag, x) = (r.u32()?, r.u32()?, r.u32()?);
        let mma = *MMAS
            .get(m as usize)
            .ok_or_else(|| format!("corrupt: HRPB MMA shape {m}"))?;
        let split = match tag {
            0 => HrpbSplit::None,
            1 => HrpbSplit::Wave,
            2 if x >= 1 => HrpbSplit::WaveCoarse(x),
            3 if x >= 1 => HrpbSplit::Cap(x),
            _ => return Err(format!("corrupt: HRPB split ({tag}, {x})")),
        };
        Ok(ExecKernel::Hrpb(HrpbKernel { mma, split }))
    }

    #[cfg(test)]
    fn examples(&self) -> Vec<ExecKernel> {
        let splits = [
            HrpbSplit::None,
            HrpbSplit::Wave,
            HrpbSplit::WaveCoarse(4),
            HrpbSplit::Cap(16),
        ];
        MMAS.into_iter()
            .flat_map(|mma| splits.map(|split| ExecKernel::Hrpb(HrpbKernel { mma, split })))
            .collect()
    }
}

impl FamilyKernel for HrpbKernel {
    fn family(&self) -> &'static dyn SpmmFamily {
        &Family
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let m = MMAS
            .iter()
            .position(|&x| x == self.mma)
            .map_or(u32::MAX, |i| i as u32);
        let (tag, x) = match self.split {
            HrpbSplit::None => (0, 0),
            HrpbSplit::Wave => (1, 0),
            HrpbSplit::WaveCoarse(k) => (2, k),
            HrpbSplit::Cap(k) => (3, k),
        };
        for v in [m, tag, x] {
            put_u32(out, v);
        }
    }

    fn build(&self, b: &mut Build<'_>) -> Result<Box<dyn FamilyDevice>, Error> {
        let h = Hrpb::from_csr(b.a).map_err(|e| Error::Format(e.to_string()))?;
        Ok(Box::new(HrpbSpmm::from_hrpb(
            b.gpu, &h, self.mma, self.split,
        )?))
    }
}

impl FamilyDevice for HrpbSpmm {
    fn kernel(&self) -> ExecKernel {
        ExecKernel::Hrpb(HrpbKernel {
            mma: self.mma(),
            split: self.split(),
        })
    }

    /// The wave split's pieces at width `n` (no split windows).
    fn blocks(&self, n: usize) -> Result<(usize, usize), Error> {
        Ok((self.wave_split(n)?.panels.len(), 0))
    }

    /// The layout is built again from `a` (HRPB has no map from its slots to CSR positions yet).
    fn set_values(&mut self, gpu: &Gpu, a: &Csr) -> Result<(), Error> {
        let h = Hrpb::from_csr(a).map_err(|e| Error::Format(e.to_string()))?;
        *self = HrpbSpmm::from_hrpb(gpu, &h, self.mma(), self.split())?;
        Ok(())
    }
}

/// HRPB candidates a tuned preparation times: the kernels under the wave-aware split (which
/// leaves short panels whole), the tight walk first (k8ts: one work item per thread block, split
/// panels without a pre-scale launch: 1.250× cuSPARSE geomean on the shared datasets against
/// k8wsc's 1.139×, same process, docs/kernels/hrpb.md v6), then k8t (the same walk with the
/// pre-scale: 6–13 % faster than k8ts on BlogCatalog, and faster than k8sc on every large
/// dataset), k8wtd (the tight walk with warp items and k8w's B gather: 1–9 % faster than k8t on
/// copter2 and xenon1) and k8wsc (v5's lean warp-item walk); k8sc, k8 and k8d4 timed slower than
/// these on the H200 (2026-11-25, 7a8a386 to 04742de), panels whole without a cap lost everywhere
/// in the bench of 959fafc; k4 timed 0.96-1.06 × k8.
const HRPB_TUNED: [(HrpbMma, HrpbSplit); 4] = [
    (HrpbMma::K8TS, HrpbSplit::Wave),
    (HrpbMma::K8T, HrpbSplit::Wave),
    (HrpbMma::K8WTD, HrpbSplit::Wave),
    (HrpbMma::K8WSC, HrpbSplit::Wave),
];

/// The tuning candidates ([`HRPB_TUNED`], then its first kernel (k8ts) split at
/// [`HrpbSpmm::fill_cap`]: pieces for about two waves) on `a`; returns the device set to the
/// finalist and its full time (`None` when HRPB cannot be built for `a` or no candidate came close
/// to the best so far).
pub(in crate::spmm) fn tune(
    t: &mut Tuning,
    probe: Probe<'_>,
) -> Result<Option<(f64, Box<HrpbSpmm>)>, Error> {
    let Ok(h) = Hrpb::from_csr(probe.a) else {
        return Ok(None);
    };
    let (mma0, split0) = HRPB_TUNED[0];
    let mut dev = Box::new(HrpbSpmm::from_hrpb(t.gpu, &h, mma0, split0)?);
    // The cap is the first kernel's (dev runs it here; k8ts, one work item per thread block):
    // its resident units are thread blocks (warps for a warp-item kernel).
    let fill = (mma0, HrpbSplit::Cap(dev.fill_cap(probe.n)?));
    let configs: Vec<_> = HRPB_TUNED.into_iter().chain([fill]).collect();
    let names: Vec<String> = configs
        .iter()
        .map(|&(mma, split)| probe.name(HrpbKernel { mma, split }))
        .collect();
    let Probe { b, c, n, .. } = probe;
    let found = t.family(
        &names,
        |_, _| true,
        |i| {
            // `set_split` keeps the cached work list when the split is unchanged, so the timed
            // launches do not rebuild and upload it.
            let (mma, split) = configs[i];
            if mma != dev.mma() {
                dev.set_mma(mma)?;
            }
            dev.set_split(split);
            Ok(dev.run(1.0, b, 0.0, c, n)?)
        },
    )?;
    let Some((i, ms)) = found else {
        return Ok(None);
    };
    let (mma, split) = configs[i];
    if mma != dev.mma() {
        dev.set_mma(mma)?;
    }
    dev.set_split(split);
    Ok(Some((ms, dev)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mma_cache_numbers_are_stable() {
        // A cached plan names its MMA shape by this number: reordering `HrpbMma::ALL` would
        // make old plans decode to another kernel.
        let names: Vec<&str> = MMAS.iter().map(|m| m.name()).collect();
        assert_eq!(
            names.join(" "),
            "k4 k8 k8d4 k8w k8o k8sc k8wsc k8t k8ts k8wtd"
        );
        for (i, &mma) in MMAS.iter().enumerate() {
            let mut out = Vec::new();
            HrpbKernel {
                mma,
                split: HrpbSplit::Wave,
            }
            .encode(&mut out);
            assert_eq!(out[..4], (i as u32).to_le_bytes());
        }
    }
}
