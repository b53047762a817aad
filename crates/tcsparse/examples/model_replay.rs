//! The planner's model-only (untuned) kernel for each matrix of a folder at N = 128/256/512, as an
//! H200 preparation would run it (132 SMs), printed one line per case in the tuning samples'
//! naming (`<kernel> (<order>)`): the input of the model-vs-tuned replay on the bench's tuning
//! samples (docs/kernels/hrpb.md). CPU only (the reordering, the formats and the planner are all
//! host code). A tool, not a test: the bench measures the same agreement itself (`Case::model`).
//!
//! `cargo run -p tcsparse --release --example model_replay -- /path/to/mtx-folder`

use tcsparse::formats::bittcf::BitTcf;
use tcsparse::formats::metrics::block_count;
use tcsparse::planner::{DeviceSpec, MatrixFeatures, plan_spmm};
use tcsparse::{Engine, ExecKernel, PrepareOptions, model_kernel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(dir) = std::env::args_os().nth(1) else {
        return Err("usage: model_replay FOLDER (of .mtx / .mtx.gz files)".into());
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".mtx"))
        .collect();
    files.sort();
    let device = DeviceSpec::h200();
    let engine = Engine::cpu("model replay");
    for path in files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .replace(".mtx.gz", "")
            .replace(".mtx", "");
        let a = tcsparse::formats::mtx::read_matrix(&path)?;
        // The Auto reordering decision (host code, the same on every device).
        let p = engine.prepare_spmm(&a, &PrepareOptions::builder().n(128).tune(false).build())?;
        let a_re = p.matrix().clone();
        let reordered = p.permutation().is_some();
        let bittcf = BitTcf::from_csr(&a_re)?;
        let blocks = bittcf.num_blocks();
        let bricks = block_count(&a_re, 16, 4);
        for n in [128usize, 256, 512] {
            let features = MatrixFeatures {
                rows: a_re.rows(),
                cols: a_re.cols(),
                nnz: a_re.nnz() as u64,
                n,
                blocks_8x8: blocks as u64,
                mean_nnz_tc: if blocks == 0 {
                    0.0
                } else {
                    a_re.nnz() as f64 / blocks as f64
                },
                hrpb_alpha: (bricks > 0).then(|| a_re.nnz() as f64 / (64.0 * bricks as f64)),
                metcf_blocks: Some(block_count(&a_re, 16, 8) as u64),
                ibd: None,
            };
            let plan = plan_spmm(&features, bittcf.row_window_offset(), &device);
            let k = model_kernel(
                &plan,
                a_re.rows(),
                a_re.nnz(),
                a_re.longest_row(),
                features.metcf_blocks,
                features.hrpb_alpha,
                device.sm_count,
            );
            // CSR kernels drop an automatic reordering (prepare_reordered).
            let order = if reordered
                && !matches!(
                    k,
                    ExecKernel::Cusparse { .. }
                        | ExecKernel::CsrCuda { .. }
                        | ExecKernel::Staged(_)
                ) {
                "reordered"
            } else {
                "original order"
            };
            println!("REPLAY\t{name}\t{n}\t{k} ({order})\t{}", plan.reason);
        }
    }
    Ok(())
}
