//! `tcsparse plan INPUT --n 128 [--device-model h200] [--json]`: the plan the planner chooses for a matrix.

use crate::out::outln;
use anyhow::Context;
use std::path::PathBuf;
use tcsparse::formats::Csr;
use tcsparse::planner::{DeviceSpec, MatrixFeatures, plan_spmm};

/// Arguments of `tcsparse plan`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix file: Matrix Market (.mtx, .mtx.gz), SciPy sparse (.npz) or a layout file written by
    /// `convert`.
    pub input: PathBuf,
    /// Columns of B (and C).
    #[arg(long, default_value_t = 128, value_parser = crate::args::dense_width)]
    pub n: usize,
    /// Device model the plan is made for: h200, h100, a100, rtx4090.
    #[arg(long, alias = "device", default_value = "h200")]
    pub device_model: String,
    /// Also consider cuTeSpMM (HRPB), with α computed from the matrix.
    #[arg(long)]
    pub with_hrpb: bool,
    /// Print one JSON document instead of text (schema: docs/cli-json.md).
    #[arg(long)]
    pub json: bool,
}

/// BitTCF row_window_offset (8-row windows, sorted unique columns cut into groups of 8) and
/// cuTeSpMM's α (16-row panels, 16×4 bricks over compacted columns: α = nnz / (bricks · 64)).
/// A local helper until the formats crate's metrics are wired through the facade.
fn blocking(csr: &Csr) -> (Vec<u32>, f64) {
    let indptr = csr.indptr();
    let indptr = indptr.raw_storage();
    let indices = csr.indices();
    let unique_cols = |r0: usize, r1: usize, buf: &mut Vec<u32>| {
        buf.clear();
        buf.extend_from_slice(&indices[indptr[r0] as usize..indptr[r1] as usize]);
        buf.sort_unstable();
        buf.dedup();
        buf.len()
    };
    let rows = csr.rows();
    let mut buf = Vec::new();
    let mut rwo = vec![0u32];
    for w in 0..rows.div_ceil(8) {
        let u = unique_cols(w * 8, (w * 8 + 8).min(rows), &mut buf);
        rwo.push(rwo.last().copied().unwrap_or(0) + u.div_ceil(8) as u32);
    }
    let bricks: usize = (0..rows.div_ceil(16))
        .map(|p| unique_cols(p * 16, (p * 16 + 16).min(rows), &mut buf).div_ceil(4))
        .sum();
    let alpha = if bricks == 0 {
        0.0
    } else {
        csr.nnz() as f64 / (bricks as f64 * 64.0)
    };
    (rwo, alpha)
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let device = DeviceSpec::preset(&args.device_model).with_context(|| {
        format!(
            "unknown --device-model {:?}; known: {}",
            args.device_model,
            DeviceSpec::PRESETS.join(", ")
        )
    })?;
    let csr = crate::input::read_matrix(&args.input)?;
    let (rwo, alpha) = blocking(&csr);
    let blocks = rwo.last().copied().unwrap_or(0) as u64;
    let features = MatrixFeatures {
        rows: csr.rows(),
        cols: csr.cols(),
        nnz: csr.nnz() as u64,
        n: args.n,
        blocks_8x8: blocks,
        mean_nnz_tc: if blocks == 0 {
            0.0
        } else {
            csr.nnz() as f64 / blocks as f64
        },
        // HRPB is planned only where the caller has (or will build) that layout: --with-hrpb.
        hrpb_alpha: (args.with_hrpb && alpha > 0.0).then_some(alpha),
        metcf_blocks: None,
        ibd: None,
    };
    let plan = plan_spmm(&features, &rwo, &device);
    if args.json {
        use crate::json::{self, Candidate, Features, Schedule};
        return json::emit(
            "plan",
            &json::Plan {
                input: args.input.display().to_string(),
                device_model: json::kind_with(
                    &args.device_model,
                    "source",
                    device.source.to_string(),
                ),
                n: args.n,
                features: Features {
                    rows: features.rows,
                    cols: features.cols,
                    nnz: features.nnz,
                    row_windows: rwo.len() - 1,
                    blocks_8x8: blocks,
                    mean_nnz_tc: features.mean_nnz_tc,
                    hrpb_alpha: alpha,
                },
                choice: json::tagged(&plan.choice),
                predicted_ms: plan.predicted_ms,
                reason: plan.reason.clone(),
                candidates: plan
                    .predictions
                    .iter()
                    .map(|p| Candidate {
                        kernel: json::tagged(&p.kernel),
                        ms: p.ms,
                        gflops: p.gflops,
                    })
                    .collect(),
                imbalance: plan
                    .imbalance
                    .as_ref()
                    .map(serde_json::to_value)
                    .transpose()?,
                schedule: plan.schedule.as_ref().map(|s| Schedule {
                    thread_blocks: s.work().len(),
                    split_windows: s.num_split_windows(),
                    max_blocks_per_tb: s.max_blocks_per_tb() as usize,
                }),
            },
        );
    }
    outln!(
        "matrix: {} × {}, {} nnz, {} row windows, {} TC blocks (8×8), MeanNNZTC {:.2}, HRPB α {:.3}",
        features.rows,
        features.cols,
        features.nnz,
        rwo.len() - 1,
        blocks,
        features.mean_nnz_tc,
        alpha
    )?;
    outln!(
        "device: {} ({}), N = {}",
        device.name,
        device.source,
        args.n
    )?;
    outln!(
        "choice: {:?}  (predicted {:.4} ms)",
        plan.choice,
        plan.predicted_ms
    )?;
    outln!("reason: {}", plan.reason)?;
    outln!("candidates:")?;
    for p in &plan.predictions {
        outln!(
            "  {:<32} {:>10.4} ms {:>9.0} GFLOP/s",
            format!("{:?}", p.kernel),
            p.ms,
            p.gflops
        )?;
    }
    if let Some(d) = &plan.imbalance {
        outln!(
            "imbalance: IBD {:.2}, max/mean {:.1}, critical ratio {:.2}, gain {:.2}, resident TBs {} → {}",
            d.ibd,
            d.max_over_mean,
            d.critical_ratio,
            d.gain,
            d.concurrent_tbs,
            if d.balanced {
                "balanced"
            } else {
                "one TB per window"
            }
        )?;
    }
    if let Some(s) = &plan.schedule {
        outln!(
            "schedule: {} thread blocks, {} split windows (atomic), at most {} blocks per TB",
            s.work().len(),
            s.num_split_windows(),
            s.max_blocks_per_tb()
        )?;
    }
    Ok(())
}
