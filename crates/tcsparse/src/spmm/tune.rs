//! The tuning harness of SpMM: candidates in, timed choice out. A family of candidates (names
//! and a launch per candidate) is probed with a few launches, the fastest probe within reach of
//! the best so far is timed in full, and the samples, the bound and each family's cost are kept
//! in [`Tuning`]. It builds nothing and never calls back into preparation: the candidates are
//! built by `candidates.rs`, and the choice among families is the crate's one `Fastest`
//! (`crate::tune`), which SpMV's tuning keeps its candidates in too.

use std::time::Instant;

use cudarc::driver::CudaSlice;
use tcsparse_gpu::{Gpu, GpuError};

use crate::{Error, TuneSample};

/// A candidate whose probe is this many times slower than the best full time so far is not timed
/// in full: its probe time is recorded (marked " [probe]") and it is out of the running.
const PROBE_REJECT: f64 = 1.25;
/// Launches of a probe: untimed (only before a family's first probe: later probes run the same
/// kernel, and [`Gpu::time_launches`]'s calibration launch is untimed too), then timed (median
/// kept; short launches batched by [`Gpu::time_launches`]).
const PROBE_WARMUP: usize = 1;
const PROBE_ITERS: usize = 3;
/// Timed samples of a full timing: at most [`TUNE_ITERS`], fewer for long launches
/// ([`full_iters`]); the probe's samples count among them, so a full timing adds
/// `full_iters − PROBE_ITERS` samples (and one calibration launch), none for long launches.
const TUNE_ITERS: usize = 9;
/// Device time a full timing aims at: long launches get fewer timed samples (at least
/// [`TUNE_MIN_ITERS`]), since their median is steadier and each costs more. (H200, 959fafc: 6 ms;
/// at 4 ms rmat20's finalists of 0.9–1.1 ms take 4–5 samples instead of 6–7.)
const TUNE_BUDGET_MS: f64 = 4.0;
const TUNE_MIN_ITERS: usize = 3;
/// Timed samples of a full timing of a launch that probed at `probe_ms`: enough for about
/// [`TUNE_BUDGET_MS`] of launches, from [`TUNE_MIN_ITERS`] to [`TUNE_ITERS`].
pub fn full_iters(probe_ms: f64) -> usize {
    if probe_ms.is_nan() || probe_ms <= 0.0 {
        return TUNE_ITERS;
    }
    ((TUNE_BUDGET_MS / probe_ms).ceil() as usize).clamp(TUNE_MIN_ITERS, TUNE_ITERS)
}

/// The candidate of a family to time in full after its probes (`None` = skipped): the fastest
/// probe, when it is within [`PROBE_REJECT`] of `bound` (the best full time so far; infinite
/// before the first).
pub fn finalist(probes: &[Option<f64>], bound: f64) -> Option<usize> {
    let (i, ms) = probes
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|ms| (i, ms)))
        .min_by(|x, y| x.1.total_cmp(&y.1))?;
    (!bound.is_finite() || ms <= PROBE_REJECT * bound).then_some(i)
}

/// What a family's tuning function times its candidates on: the matrix in the order they run
/// on, the tuning's random B and its C (`n` columns, packed), and the order's name, added to the
/// candidates' names when given.
pub(super) struct Probe<'p> {
    pub a: &'p tcsparse_formats::Csr,
    pub b: &'p CudaSlice<f32>,
    pub c: &'p mut CudaSlice<f32>,
    pub n: usize,
    pub order: Option<&'p str>,
}

impl<'p> Probe<'p> {
    /// The probe of `a` with `b` and `c` at width `n`, candidates named with `order`.
    pub fn new(
        a: &'p tcsparse_formats::Csr,
        b: &'p CudaSlice<f32>,
        c: &'p mut CudaSlice<f32>,
        n: usize,
        order: Option<&'p str>,
    ) -> Self {
        Self { a, b, c, n, order }
    }

    /// `kernel`'s name among the candidates: with the order's name where one is given.
    pub fn name(&self, kernel: impl std::fmt::Display) -> String {
        match self.order {
            Some(order) => format!("{kernel} ({order})"),
            None => kernel.to_string(),
        }
    }
}

/// Measured candidates of one tuned preparation, the best full time so far and what each
/// family of candidates cost (build, upload and launches, host wall time).
pub(super) struct Tuning<'g> {
    pub(super) gpu: &'g Gpu,
    pub(super) samples: Vec<TuneSample>,
    pub(super) bound: f64,
    pub(super) costs: Vec<(&'static str, f64)>,
}

impl Tuning<'_> {
    /// Probes candidates `0..names.len()` of one family (`wanted(i, probes)` says whether `i` is
    /// probed; `launch(i)` selects candidate `i` and queues one product), then times the
    /// [`finalist`] in full. Every probe is recorded; the finalist's sample is replaced by its full
    /// time. Returns the finalist and its full time.
    pub(super) fn family(
        &mut self,
        names: &[String],
        mut wanted: impl FnMut(usize, &[Option<f64>]) -> bool,
        mut launch: impl FnMut(usize) -> Result<(), Error>,
    ) -> Result<Option<(usize, f64)>, Error> {
        let mut probes = vec![None; names.len()];
        let mut probe_samples = vec![Vec::new(); names.len()];
        let mut at = vec![usize::MAX; names.len()];
        let mut warmup = PROBE_WARMUP;
        for i in 0..names.len() {
            if !wanted(i, &probes) {
                continue;
            }
            let t_probe = Instant::now();
            let samples = time_samples(self.gpu, warmup, PROBE_ITERS, || launch(i))?;
            warmup = 0;
            let ms = median(&samples);
            tracing::debug!(
                "tuning: probe {} {ms:.3} ms per launch, {:.1} ms wall",
                names[i],
                t_probe.elapsed().as_secs_f64() * 1e3
            );
            probes[i] = Some(ms);
            probe_samples[i] = samples;
            at[i] = self.samples.len();
            self.samples.push(TuneSample {
                candidate: format!("{} [probe]", names[i]),
                ms,
            });
        }
        let Some(i) = finalist(&probes, self.bound) else {
            return Ok(None);
        };
        let mut samples = std::mem::take(&mut probe_samples[i]);
        let more = full_iters(probes[i].unwrap_or(f64::NAN)).saturating_sub(samples.len());
        if more > 0 {
            let t_full = Instant::now();
            samples.extend(time_samples(self.gpu, 0, more, || launch(i))?);
            tracing::debug!(
                "tuning: {} timed in full, {more} more launches, {:.1} ms wall",
                names[i],
                t_full.elapsed().as_secs_f64() * 1e3
            );
        }
        let ms = median(&samples);
        self.samples[at[i]] = TuneSample {
            candidate: names[i].clone(),
            ms,
        };
        self.bound = self.bound.min(ms);
        Ok(Some((i, ms)))
    }

    /// Records the host time `t` has run as the cost of `family`.
    pub(super) fn cost(&mut self, family: &'static str, t: Instant) {
        self.costs.push((family, t.elapsed().as_secs_f64() * 1e3));
    }
}

/// Values of tuning's B pattern (deterministic, in [-1, 1); timing does not depend on them).
fn tuning_pattern(len: usize) -> Vec<f32> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Values in tuning's B pattern: larger B repeats it.
const TUNING_PATTERN: usize = 1 << 20;

/// Tuning's B on the device (`len` f32): a [`TUNING_PATTERN`]-value pattern made on the host,
/// uploaded once and repeated by device copies, each doubling the filled prefix (R-MAT scale 20
/// at N = 128: 9 copies instead of 512). (Generating and uploading all of B cost 0.3–0.6 s
/// there, 512 MB, more than all the tuning launches.)
pub(super) fn tuning_b(gpu: &Gpu, len: usize) -> Result<CudaSlice<f32>, Error> {
    let pattern = gpu.upload(&tuning_pattern(len.min(TUNING_PATTERN)))?;
    if len <= TUNING_PATTERN {
        return Ok(pattern);
    }
    let mut b = gpu.alloc_zeros::<f32>(len)?;
    let stream = gpu.stream();
    stream
        .memcpy_dtod(&pattern, &mut b.slice_mut(0..TUNING_PATTERN))
        .map_err(GpuError::from)?;
    let mut filled = TUNING_PATTERN;
    while filled < len {
        let more = filled.min(len - filled);
        let (done, mut rest) = b.split_at_mut(filled);
        stream
            .memcpy_dtod(&done.slice(0..more), &mut rest.slice_mut(0..more))
            .map_err(GpuError::from)?;
        filled += more;
    }
    Ok(b)
}

/// Median of samples (ms); NaN when empty.
pub(super) fn median(samples: &[f64]) -> f64 {
    tcsparse_gpu::Timing::from_samples(samples.to_vec()).map_or(f64::NAN, |t| t.median_ms)
}

/// Timed samples (ms per launch) of `launch` after `warmup` untimed launches and
/// [`Gpu::time_launches`]'s calibration launch; `launch`'s own error is returned as it is.
pub(super) fn time_samples(
    gpu: &Gpu,
    warmup: usize,
    iters: usize,
    mut launch: impl FnMut() -> Result<(), Error>,
) -> Result<Vec<f64>, Error> {
    let mut err = None;
    let timing = gpu.time_launches(warmup, iters, || {
        launch().map_err(|e| {
            let msg = e.to_string();
            err = Some(e);
            GpuError::Invalid(msg)
        })
    });
    match (timing, err) {
        (_, Some(e)) => Err(e),
        (Ok(t), None) => Ok(t.samples),
        (Err(e), None) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fastest_probe_of_a_family_within_the_bound_is_timed_in_full() {
        // Fake probes: CSR budgets on rmat20 (cuSPARSE 1.133 ms full).
        let probes = [Some(0.891), Some(0.875), Some(0.998)];
        assert_eq!(finalist(&probes, 1.133), Some(1));
        // Acc-SpMM schedules on rmat20, all far behind the CSR kernel's 0.875 ms.
        let acc = [Some(1.445), Some(4.538), Some(8.654), Some(16.224)];
        assert_eq!(finalist(&acc, 0.875), None);
        // Within PROBE_REJECT of the bound: timed in full (its probe may be pessimistic).
        assert_eq!(finalist(&[Some(1.2)], 1.0), Some(0));
        assert_eq!(finalist(&[Some(1.26)], 1.0), None);
        // Skipped candidates are ignored; no probe at all → nothing; no bound yet → the best.
        assert_eq!(finalist(&[None, Some(3.0), None], 1.0), None);
        assert_eq!(finalist(&[None, None], 1.0), None);
        assert_eq!(finalist(&[Some(5.0), Some(4.0)], f64::INFINITY), Some(1));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn tuning_b_repeats_its_pattern_to_the_last_value() {
        let gpu = Gpu::require().expect("this test needs a CUDA GPU");
        let pattern = tuning_pattern(TUNING_PATTERN);
        for len in [
            5,
            TUNING_PATTERN,
            TUNING_PATTERN + 3,
            7 * TUNING_PATTERN / 2,
        ] {
            let b = gpu.download(&tuning_b(&gpu, len).unwrap()).unwrap();
            assert_eq!(b.len(), len);
            // (A shorter pattern is a prefix of the full one: same generator.)
            for (i, v) in b.iter().enumerate() {
                let want = pattern[i % TUNING_PATTERN];
                assert_eq!(v.to_bits(), want.to_bits(), "len {len}, element {i}");
            }
        }
    }

    #[test]
    fn long_launches_get_fewer_timed_samples() {
        assert_eq!(full_iters(0.2), TUNE_ITERS);
        assert_eq!(full_iters(1.0), 4);
        assert_eq!(full_iters(0.875), 5);
        assert_eq!(full_iters(2.0), 3);
        assert_eq!(full_iters(11.0), TUNE_MIN_ITERS);
        assert_eq!(full_iters(f64::NAN), TUNE_ITERS);
        assert_eq!(full_iters(0.0), TUNE_ITERS);
    }

    #[test]
    fn a_fake_tuning_round_times_few_launches_and_keeps_the_fastest() {
        // The families of rmat20 at N = 128 (H200 times of 836a596 as fake probes = full times):
        // cuSPARSE 1.133 full; CSR probes; then nothing else (pruned). Count launches.
        let cus = 1.133;
        let csr = [Some(0.891), Some(0.875), Some(0.998)];
        let f = finalist(&csr, cus).expect("a CSR budget within the bound");
        // One warm-up before the family's first probe; each timing has a calibration launch.
        let probe_launches = PROBE_WARMUP + csr.len() * (1 + PROBE_ITERS);
        // The finalist's probe samples count: the full timing adds the rest (and a calibration).
        let more = full_iters(csr[f].unwrap()) - PROBE_ITERS;
        let full_launches = 1 + more;
        assert_eq!(f, 1);
        // At 836a596: 3 × (2 + 1 + 9) = 36 CSR launches; at 959fafc: 3 probes of 1 + 1 + 3 and a
        // full timing of 1 + 1 + 7 (24); now 1 + 3 × (1 + 3) and 1 + 2 (16 launches, 14 ms).
        assert_eq!(probe_launches, 13);
        assert_eq!(full_launches, 3);
    }
}
