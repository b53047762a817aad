//! Kernel choice per matrix and N from a bytes/FLOPs roofline model against a [`DeviceSpec`].
//!
//! Model (all kernels are memory-bound at the densities seen in practice):
//! * Acc-SpMM (BitTCF): every TC block gathers 8 rows of B (8 · N · 4 B), plus the compressed A
//!   (8 B mask + 32 B column ids + 4 B offset per block, 4 B per nonzero) and C written once
//!   (4 B · rows · N), plus read-modify-write traffic for the extra segments of split windows.
//!   Time = max(bytes / bandwidth, the heaviest TB's bytes × concurrent TBs / bandwidth) + launch.
//!   On the H200 this reproduces the measured 11–15 TFLOP/s at ~56 nnz per block and
//!   0.6–2 TFLOP/s at ~8 nnz per block (2·nnz_per_block·N flops per 32·N bytes).
//! * cuSPARSE SpMM (CSR, f32): the rate measured on the H200 as a function of nnz per row, fitted
//!   by `r(x) = 3.52 · x / (x + 6.6)` TFLOP/s (1.1 at 3 nnz/row, 2.2 at 11, 3.5 at 450: the measured
//!   0.9–1.3, 2.1–2.3 and 2.4–4.4), scaled by the device's bandwidth relative to the H200's 3.9
//!   TB/s, with a floor of nnz × N gathered f32 at most once per nonzero through L2 not assumed.
//! * cuTeSpMM (HRPB, our kernel `hrpb_spmm`): bricks = nnz / (64 α), each gathering 4 B rows
//!   (active B rows per 16-row panel ≈ nnz / (16 α)); A = 4 B per nonzero + a 32 B record per brick
//!   (no 512-byte padding); C once; at [`HRPB_EFFICIENCY`] of the bandwidth. α's synergy class
//!   (cuTeSpMM Table 1) gates the tensor cores: with α known and Low (< 12.5 %) the plan is cuSPARSE
//!   (the facade's CUDA-core CSR kernel competes with it when tuning), whatever the tensor-core
//!   predictions; Medium and High let HRPB compete.
//! * DTC-SpMM (ME-TCF): from the ME-TCF 16×8 block count when the facade supplies it.
//! * DTC-SpMM (ME-TCF): 16×8 blocks, 8 B rows each, at 0.8× our efficiency (it measured 1.00× vs
//!   Acc-SpMM's 1.20× cuSPARSE geomean).
//!
//! A tensor-core kernel is chosen only if it is predicted at least [`TC_MARGIN`] faster than
//! cuSPARSE: tcsparse should never be slower than the vendor library.

use crate::acc::{AccSchedule, Eq4Model};
use crate::imbalance::{ImbalanceDecision, decide_imbalance};
use crate::{DeviceSpec, KernelResources};
use serde::{Deserialize, Serialize};
use tcsparse_formats::metrics::Synergy;

/// A tensor-core kernel must be predicted this many times faster than cuSPARSE to be chosen.
pub const TC_MARGIN: f64 = 1.10;
/// Fraction of the device bandwidth the HRPB model assumes (uncalibrated: the released cuTeSpMM
/// measured 1.28× cuSPARSE geomean on the H200 but ran below it on scattered graphs at N ≥ 128).
pub const HRPB_EFFICIENCY: f64 = 0.6;
/// Fixed time per launch of our kernels, microseconds (assumed).
pub const LAUNCH_US: f64 = 5.0;
/// Fixed time per cuSPARSE SpMM call, microseconds (the H200 SpMV floor is 11–15 µs; assumed 10).
pub const CUSPARSE_CALL_US: f64 = 10.0;
/// Fitted cuSPARSE SpMM peak on the H200, TFLOP/s.
pub const CUSPARSE_H200_TFLOPS_MAX: f64 = 3.52;
/// nnz per row at which the fitted cuSPARSE rate reaches half its peak.
pub const CUSPARSE_HALF_NNZ_ROW: f64 = 6.6;
/// Bandwidth the cuSPARSE fit was measured at, GB/s.
pub const CUSPARSE_FIT_BANDWIDTH_GBS: f64 = 3900.0;

/// The kernel a plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KernelChoice {
    /// Acc-SpMM on BitTCF; `balanced` selects the Eq. 4 packed schedule.
    AccSpmm {
        /// Eq. 4 packed schedule with atomics on split windows.
        balanced: bool,
    },
    /// cuTeSpMM on HRPB.
    HrpbSpmm,
    /// DTC-SpMM on ME-TCF.
    MeTcfSpmm,
    /// cuSPARSE SpMM on CSR (the fallback).
    Cusparse,
}

/// What the planner knows about a matrix (filled by the facade from the formats crate).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixFeatures {
    /// Rows of A.
    pub rows: usize,
    /// Columns of A.
    pub cols: usize,
    /// Stored nonzeros of A (after de-duplication).
    pub nnz: u64,
    /// Columns of B and C.
    pub n: usize,
    /// BitTCF TC blocks (8-row windows, 8 compacted columns).
    pub blocks_8x8: u64,
    /// MeanNNZTC: nnz / blocks_8x8 (0 when there is no block).
    pub mean_nnz_tc: f64,
    /// cuTeSpMM's α (mean density of a 16×4 brick column), when HRPB was built.
    pub hrpb_alpha: Option<f64>,
    /// ME-TCF 16×8 blocks, when ME-TCF was built.
    pub metcf_blocks: Option<u64>,
    /// Acc-SpMM IBD if already known (otherwise computed from `row_window_offset`).
    pub ibd: Option<f64>,
}

/// The modeled cost of one candidate kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelPrediction {
    /// Which kernel.
    pub kernel: KernelChoice,
    /// Predicted time per product, milliseconds.
    pub ms: f64,
    /// 2 · nnz · N / time, GFLOP/s.
    pub gflops: f64,
    /// Bytes the model moves through device memory (0 for the cuSPARSE rate fit).
    pub bytes: f64,
}

/// The execution plan for one matrix, N and device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The chosen kernel.
    pub choice: KernelChoice,
    /// Why, in words with the numbers.
    pub reason: String,
    /// Columns of B.
    pub n: usize,
    /// Device preset name the plan was made for.
    pub device: String,
    /// Predicted time of the chosen kernel, milliseconds.
    pub predicted_ms: f64,
    /// Every candidate that was modeled, fastest first.
    pub predictions: Vec<KernelPrediction>,
    /// The balancing decision for Acc-SpMM (absent when `row_window_offset` was unusable).
    pub imbalance: Option<ImbalanceDecision>,
    /// The BitTCF schedule when the choice is Acc-SpMM.
    pub schedule: Option<AccSchedule>,
}

/// Bytes the HRPB model moves for `nnz` nonzeros at brick density `alpha`, B rows of `b_row`
/// bytes and `c_bytes` of C: every brick (nnz / (64 α)) gathers 4 B rows and reads its 32-byte
/// record, every nonzero its 4-byte value, C is written once.
pub fn hrpb_bytes(nnz: f64, alpha: f64, b_row: f64, c_bytes: f64) -> f64 {
    let bricks = nnz / (64.0 * alpha);
    bricks * (4.0 * b_row + 32.0) + 4.0 * nnz + c_bytes
}

/// Fitted cuSPARSE SpMM rate on `device`, TFLOP/s, at `nnz_per_row`.
pub fn cusparse_tflops(device: &DeviceSpec, nnz_per_row: f64) -> f64 {
    let x = nnz_per_row.max(0.0);
    CUSPARSE_H200_TFLOPS_MAX * x / (x + CUSPARSE_HALF_NNZ_ROW) * device.mem_bandwidth_gbs
        / CUSPARSE_FIT_BANDWIDTH_GBS
}

fn ms_of(seconds: f64, overhead_us: f64) -> f64 {
    seconds * 1e3 + overhead_us * 1e-3
}

fn prediction(kernel: KernelChoice, ms: f64, flops: f64, bytes: f64) -> KernelPrediction {
    let gflops = if ms > 0.0 {
        flops / (ms * 1e-3) / 1e9
    } else {
        0.0
    };
    KernelPrediction {
        kernel,
        ms,
        gflops,
        bytes,
    }
}

/// Predicted Acc-SpMM time for a schedule: bytes over the device, or the heaviest TB's bytes at its
/// share of the bandwidth, whichever is longer.
fn predict_acc(
    f: &MatrixFeatures,
    rwo: &[u32],
    sched: &AccSchedule,
    device: &DeviceSpec,
) -> KernelPrediction {
    let n = f.n as f64;
    let blocks = rwo.last().copied().unwrap_or(0) as f64;
    let b_row = 4.0 * n;
    let a_bytes = blocks * 44.0 + f.nnz as f64 * 4.0;
    let c_bytes = f.rows as f64 * b_row;
    // Extra segments of split windows: read-modify-write of 8 rows each (+ the β pre-scale).
    let mut segments = 0f64;
    let mut worst_tb = 0f64;
    for t in sched.work() {
        let wins = (t.window_end - t.window_begin) as f64;
        segments += wins;
        let tb_bytes = (t.block_end - t.block_begin) as f64 * 8.0 * b_row + wins * 8.0 * b_row;
        worst_tb = worst_tb.max(tb_bytes);
    }
    let windows = sched.window_split().len() as f64;
    let atomic_bytes = (segments - windows).max(0.0) * 8.0 * b_row * 2.0
        + sched.num_split_windows() as f64 * 8.0 * b_row * 2.0;
    let bytes = blocks * 8.0 * b_row + a_bytes + c_bytes + atomic_bytes;
    let bw = device.bytes_per_s();
    let p = device.concurrent_blocks(&KernelResources::acc_spmm(f.n)) as f64;
    let flops_tc = blocks * 2.0 * 64.0 * n;
    let t = (bytes / bw)
        .max(worst_tb * p / bw)
        .max(flops_tc / (device.tf32_tflops * 1e12));
    let flops = 2.0 * f.nnz as f64 * n;
    prediction(
        KernelChoice::AccSpmm {
            balanced: sched.is_balanced(),
        },
        ms_of(t, LAUNCH_US),
        flops,
        bytes,
    )
}

/// Plans C = A·B for a matrix described by `features` and its BitTCF `row_window_offset`, with the
/// paper's Eq. 4 model on `device` (cap 32 blocks per TB).
pub fn plan_spmm(
    features: &MatrixFeatures,
    row_window_offset: &[u32],
    device: &DeviceSpec,
) -> Plan {
    plan_spmm_with(
        features,
        row_window_offset,
        device,
        &Eq4Model::paper(device),
    )
}

/// [`plan_spmm`] with an explicit Eq. 4 model.
#[tracing::instrument(name = "plan", level = "info", skip_all, fields(n = features.n))]
pub fn plan_spmm_with(
    features: &MatrixFeatures,
    row_window_offset: &[u32],
    device: &DeviceSpec,
    model: &Eq4Model,
) -> Plan {
    let f = features;
    let n = f.n;
    let flops = 2.0 * f.nnz as f64 * n as f64;
    let fallback = |reason: String| Plan {
        choice: KernelChoice::Cusparse,
        reason,
        n,
        device: device.name.clone(),
        predicted_ms: 0.0,
        predictions: Vec::new(),
        imbalance: None,
        schedule: None,
    };
    if let Err(e) = device.validate() {
        return fallback(format!("cuSPARSE: {e}"));
    }
    if n == 0 || f.nnz == 0 {
        return fallback(format!(
            "cuSPARSE: nothing to compute (nnz = {}, N = {n})",
            f.nnz
        ));
    }
    let nnz_row = f.nnz as f64 / f.rows.max(1) as f64;
    let cus_rate = cusparse_tflops(device, nnz_row);
    let cus = prediction(
        KernelChoice::Cusparse,
        ms_of(flops / (cus_rate * 1e12), CUSPARSE_CALL_US),
        flops,
        0.0,
    );
    let mut preds = vec![cus.clone()];

    let (imbalance, schedule, acc_note) =
        match decide_imbalance(row_window_offset, n, device, model) {
            Ok(d) => {
                let sched = if d.balanced {
                    AccSchedule::balanced(row_window_offset, model, n)
                } else {
                    AccSchedule::unbalanced(row_window_offset)
                };
                match sched.validate(row_window_offset) {
                    Ok(()) => {
                        preds.push(predict_acc(f, row_window_offset, &sched, device));
                        (Some(d), Some(sched), String::new())
                    }
                    Err(e) => (Some(d), None, format!("; Acc-SpMM skipped: {e}")),
                }
            }
            Err(e) => (None, None, format!("; Acc-SpMM skipped: {e}")),
        };
    let bw = device.bytes_per_s();
    let b_row = 4.0 * n as f64;
    let c_bytes = f.rows as f64 * b_row;
    let alpha = f.hrpb_alpha.filter(|a| a.is_finite() && *a > 0.0);
    let synergy = alpha.map(Synergy::from_alpha);
    if let Some(alpha) = alpha {
        let bytes = hrpb_bytes(f.nnz as f64, alpha, b_row, c_bytes);
        preds.push(prediction(
            KernelChoice::HrpbSpmm,
            ms_of(bytes / (HRPB_EFFICIENCY * bw), LAUNCH_US),
            flops,
            bytes,
        ));
    }
    if let Some(blocks) = f.metcf_blocks {
        let bytes = blocks as f64 * (8.0 * b_row + 36.0) + f.nnz as f64 * 5.0 + c_bytes;
        preds.push(prediction(
            KernelChoice::MeTcfSpmm,
            ms_of(bytes / (0.8 * bw), LAUNCH_US),
            flops,
            bytes,
        ));
    }
    preds.sort_by(|a, b| a.ms.total_cmp(&b.ms));
    let best_tc = preds
        .iter()
        .find(|p| p.kernel != KernelChoice::Cusparse)
        .cloned();
    let (chosen, verdict) = match best_tc {
        Some(tc) if synergy == Some(Synergy::Low) => {
            let v = format!(
                "cuSPARSE: HRPB α = {:.3} is Low TCU synergy (< 12.5 % of a 16×4 brick column filled), so \
                 no tensor-core kernel (best {:?} predicted {:.4} ms vs cuSPARSE {:.4} ms)",
                alpha.unwrap_or(0.0),
                tc.kernel,
                tc.ms,
                cus.ms
            );
            (cus.clone(), v)
        }
        Some(tc) if tc.ms * TC_MARGIN <= cus.ms => {
            let v = format!(
                "{:?} predicted {:.4} ms ({:.0} GFLOP/s) vs cuSPARSE {:.4} ms ({:.0} GFLOP/s at {nnz_row:.1} nnz/row): \
                 {:.2}× faster",
                tc.kernel,
                tc.ms,
                tc.gflops,
                cus.ms,
                cus.gflops,
                cus.ms / tc.ms
            );
            (tc, v)
        }
        Some(tc) => {
            let v = format!(
                "cuSPARSE: best tensor-core kernel {:?} predicted {:.4} ms vs cuSPARSE {:.4} ms ({nnz_row:.1} nnz/row), \
                 not {TC_MARGIN}× faster",
                tc.kernel, tc.ms, cus.ms
            );
            (cus.clone(), v)
        }
        None => (
            cus.clone(),
            "cuSPARSE: no tensor-core layout available".to_string(),
        ),
    };
    let density = format!(
        "; MeanNNZTC = {:.2} nnz per 8×8 block over {} blocks (the BitTCF kernel gathers 8 B rows per block, so it \
         needs roughly ≥ 9–10 nnz per block to beat cuSPARSE)",
        f.mean_nnz_tc, f.blocks_8x8
    );
    let imb = match (&imbalance, chosen.kernel) {
        (Some(d), KernelChoice::AccSpmm { .. }) => format!("; {}", d.reason),
        _ => String::new(),
    };
    let schedule = match chosen.kernel {
        KernelChoice::AccSpmm { .. } => schedule,
        _ => None,
    };
    Plan {
        choice: chosen.kernel,
        reason: format!("{verdict}{density}{imb}{acc_note}"),
        n,
        device: device.name.clone(),
        predicted_ms: chosen.ms,
        predictions: preds,
        imbalance,
        schedule,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cusparse_fit_matches_measured_points() {
        let h = DeviceSpec::h200();
        assert!((0.9..=1.3).contains(&cusparse_tflops(&h, 3.0)));
        assert!((2.1..=2.3).contains(&cusparse_tflops(&h, 11.0)));
        assert!((2.4..=4.4).contains(&cusparse_tflops(&h, 450.0)));
    }

    fn feats(alpha: Option<f64>, metcf_blocks: Option<u64>) -> MatrixFeatures {
        // 65536 rows, 16 nnz/row, N = 256, dense 8×8 blocks (so Acc-SpMM is modeled too).
        let nnz = 65536 * 16;
        MatrixFeatures {
            rows: 65536,
            cols: 65536,
            nnz,
            n: 256,
            blocks_8x8: nnz / 40,
            mean_nnz_tc: 40.0,
            hrpb_alpha: alpha,
            metcf_blocks,
            ibd: None,
        }
    }

    fn rwo() -> Vec<u32> {
        (0..=8192u32).map(|w| w * 3).collect()
    }

    #[test]
    fn low_synergy_keeps_cusparse_whatever_the_tensor_core_model_says() {
        let h = DeviceSpec::h200();
        let r = rwo();
        let f = feats(None, None);
        let tc = plan_spmm(&f, &r, &h);
        assert_ne!(tc.choice, KernelChoice::Cusparse, "{}", tc.reason);
        let low = plan_spmm(&feats(Some(0.08), None), &r, &h);
        assert_eq!(low.choice, KernelChoice::Cusparse);
        assert!(low.reason.contains("Low TCU synergy"), "{}", low.reason);
        assert!(
            low.predictions
                .iter()
                .any(|p| p.kernel == KernelChoice::HrpbSpmm)
        );
    }

    #[test]
    fn high_synergy_lets_hrpb_compete_and_its_bytes_shrink_with_alpha() {
        let h = DeviceSpec::h200();
        let r = rwo();
        let p = plan_spmm(&feats(Some(0.6), None), &r, &h);
        let ms = |k: KernelChoice| p.predictions.iter().find(|q| q.kernel == k).unwrap().ms;
        assert!(ms(KernelChoice::HrpbSpmm) * TC_MARGIN < ms(KernelChoice::Cusparse));
        assert_ne!(p.choice, KernelChoice::Cusparse, "{}", p.reason);
        // Medium: still a candidate.
        let m = plan_spmm(&feats(Some(0.2), None), &r, &h);
        assert!(
            m.predictions
                .iter()
                .any(|q| q.kernel == KernelChoice::HrpbSpmm)
        );
        assert!(hrpb_bytes(1e6, 0.5, 512.0, 0.0) < hrpb_bytes(1e6, 0.25, 512.0, 0.0));
        // 1e6 nnz at α = 0.25: 62500 bricks × (4·512 + 32) B + 4 MB.
        assert_eq!(hrpb_bytes(1e6, 0.25, 512.0, 0.0), 62500.0 * 2080.0 + 4e6);
        // The ME-TCF block count is modeled when given.
        let q = plan_spmm(&feats(Some(0.2), Some(20_000)), &r, &h);
        assert!(
            q.predictions
                .iter()
                .any(|x| x.kernel == KernelChoice::MeTcfSpmm)
        );
    }
}
