//! Snapshots of plans and schedules on small hand-built inputs.

use serde::Serialize;
use tcsparse_planner::{
    AccSchedule, DeviceSpec, Eq4Model, KernelChoice, MatrixFeatures, Plan, WaveSplit, plan_spmm,
};

fn rwo_of(counts: &[u32]) -> Vec<u32> {
    let mut v = vec![0u32];
    for &c in counts {
        v.push(v.last().unwrap() + c);
    }
    v
}

fn features(rows: usize, nnz: u64, n: usize, rwo: &[u32]) -> MatrixFeatures {
    let blocks = *rwo.last().unwrap() as u64;
    MatrixFeatures {
        rows,
        cols: rows,
        nnz,
        n,
        blocks_8x8: blocks,
        mean_nnz_tc: nnz as f64 / blocks.max(1) as f64,
        hrpb_alpha: None,
        metcf_blocks: None,
        ibd: None,
    }
}

#[test]
fn device_presets() {
    let all: Vec<DeviceSpec> = DeviceSpec::PRESETS
        .iter()
        .map(|p| DeviceSpec::preset(p).unwrap())
        .collect();
    insta::assert_json_snapshot!(all);
}

#[test]
fn authors_schedule_small() {
    let rwo = [0, 3, 3, 5, 45, 46, 46];
    let s = AccSchedule::balanced(&rwo, &Eq4Model::authors_code(), 128);
    s.validate(&rwo).unwrap();
    insta::assert_json_snapshot!(s);
}

#[test]
fn dense_banded_matrix_plans_acc_spmm_unbalanced() {
    // 4096 rows, 512 windows × 4 blocks of 56 nnz (a banded matrix after blocking), N = 128.
    let rwo = rwo_of(&[4; 512]);
    let f = features(4096, 512 * 4 * 56, 128, &rwo);
    let plan = plan_spmm(&f, &rwo, &DeviceSpec::h200());
    assert_eq!(plan.choice, KernelChoice::AccSpmm { balanced: false });
    let mut plan = plan;
    plan.schedule = None; // 512 TBs of one window each; checked by the property tests
    insta::assert_json_snapshot!(plan);
}

#[test]
fn scattered_matrix_falls_back_to_cusparse() {
    // 1 nonzero per block (a random graph in random order): ~11 nnz/row, 11 blocks per window.
    let rwo = rwo_of(&[88; 256]);
    let f = features(2048, 2048 * 11, 256, &rwo);
    let plan = plan_spmm(&f, &rwo, &DeviceSpec::h200());
    assert_eq!(plan.choice, KernelChoice::Cusparse);
    assert!(plan.schedule.is_none());
    insta::assert_json_snapshot!(plan);
}

#[derive(Serialize)]
struct Summary {
    choice: KernelChoice,
    reason: String,
    predicted_ms: f64,
    thread_blocks: usize,
    split_windows: usize,
    max_blocks_per_tb: u32,
}

fn summary(p: &Plan) -> Summary {
    let s = p.schedule.as_ref().unwrap();
    Summary {
        choice: p.choice,
        reason: p.reason.clone(),
        predicted_ms: p.predicted_ms,
        thread_blocks: s.work().len(),
        split_windows: s.num_split_windows(),
        max_blocks_per_tb: s.max_blocks_per_tb(),
    }
}

#[test]
fn hub_dominated_matrix_plans_balanced_packing() {
    // 2000 windows of 6 dense blocks, plus 3 hub windows of 2000 blocks: IBD ≈ 5.9 < 8.
    let mut counts = vec![6u32; 2000];
    for h in [7, 900, 1500] {
        counts[h] = 2000;
    }
    let rwo = rwo_of(&counts);
    let blocks = *rwo.last().unwrap() as u64;
    let f = features(16000, blocks * 30, 128, &rwo);
    let plan = plan_spmm(&f, &rwo, &DeviceSpec::h200());
    let imb = plan.imbalance.as_ref().unwrap();
    assert!(!imb.ibd_says_balanced && imb.balanced, "{}", imb.reason);
    assert_eq!(plan.choice, KernelChoice::AccSpmm { balanced: true });
    plan.schedule.as_ref().unwrap().validate(&rwo).unwrap();
    insta::assert_json_snapshot!(summary(&plan));
}

#[test]
fn wave_split_on_h200() {
    let mut counts = vec![2u32; 300];
    counts[17] = 400;
    counts[0] = 0;
    let w = WaveSplit::for_device(&counts, &DeviceSpec::h200(), 128).unwrap();
    let heavy: Vec<_> = w.panels.iter().filter(|v| v.atomic).collect();
    // One wave (300 panels < 660 resident TBs): mean 3.32 blocks, num_loads 120.5 → 121 pieces.
    assert_eq!(heavy.len(), 121);
    insta::assert_json_snapshot!((
        w.num_waves,
        w.concurrent_tbs,
        w.split_panels,
        heavy.len(),
        &heavy[..3]
    ));
}

#[test]
fn bad_row_window_offset_gives_cusparse_with_reason() {
    let f = features(16, 100, 64, &[0, 1, 2]);
    let plan = plan_spmm(&f, &[0, 5, 2], &DeviceSpec::h200());
    assert_eq!(plan.choice, KernelChoice::Cusparse);
    assert!(plan.reason.contains("decreases"), "{}", plan.reason);
    let round: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(round, plan);
}
