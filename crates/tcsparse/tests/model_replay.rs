//! The planner's model-only (untuned) kernel for each matrix of a folder at N = 128/256/512, as an
//! H200 preparation would run it (132 SMs), printed one line per case in the tuning samples'
//! naming (`<kernel> (<order>)`): the input of the model-vs-tuned replay on the bench's tuning
//! samples (docs/kernels/hrpb.md). CPU only (the reordering, the formats and the planner are all
//! host code); ignored because it reads real matrices:
//!
//! `TCSPARSE_REPLAY_DIR=/path/to/mtx cargo test -p tcsparse --release --test model_replay -- \
//!  --ignored --nocapture`

use tcsparse::formats::bittcf::BitTcf;
use tcsparse::formats::metrics::block_count;
use tcsparse::planner::{DeviceSpec, MatrixFeatures, plan_spmm};
use tcsparse::{Engine, ExecKernel, PrepareOptions, model_kernel};

#[test]
#[ignore = "reads the matrices of $TCSPARSE_REPLAY_DIR"]
fn model_only_choices() {
    let Some(dir) = std::env::var_os("TCSPARSE_REPLAY_DIR") else {
        panic!("set TCSPARSE_REPLAY_DIR to a folder of .mtx / .mtx.gz files");
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(".mtx"))
        .collect();
    files.sort();
    let device = DeviceSpec::h200();
    let engine = Engine::cpu("model replay");
    for path in files {
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(".mtx.gz", "")
            .replace(".mtx", "");
        let a = tcsparse::formats::mtx::read_matrix(&path).expect("read matrix");
        // The Auto reordering decision (host code, the same on every device).
        let p = engine
            .prepare(&a, &PrepareOptions::builder().n(128).tune(false).build())
            .expect("prepare");
        let a_re = p.matrix().clone();
        let reordered = p.permutation().is_some();
        let bittcf = BitTcf::from_csr(&a_re).unwrap();
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
                a_re.nnz(),
                features.metcf_blocks,
                features.hrpb_alpha,
                device.sm_count,
            );
            // CSR kernels drop an automatic reordering (prepare_reordered).
            let order =
                if reordered && !matches!(k, ExecKernel::Cusparse | ExecKernel::CsrCuda { .. }) {
                    "reordered"
                } else {
                    "original order"
                };
            println!("REPLAY\t{name}\t{n}\t{k} ({order})\t{}", plan.reason);
        }
    }
}
