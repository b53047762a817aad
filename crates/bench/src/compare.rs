//! The regression gate: `tcsparse-bench --compare BASE… [--current NEW…]`.
//!
//! Absolute times drift between machines and driver versions, so the gate compares speedup
//! ratios only: for every case it takes our backend's speedup over the vendor baseline measured in
//! the same process ([`Report::speedup`]) and divides the new speedup by the base one (`ratio`:
//! 1.00 = unchanged, 0.90 = our kernel lost 10 % against the vendor). Cases are matched by
//! (op, matrix, n, backend); each case's speedup is over the baseline of the same op, matrix and n
//! (a SpAMM case over the `cublas-tf32` case of its matrix and size; an f16 or bf16 SpMM case
//! over cuSPARSE in its type, [`crate::report::Case::baseline_backend`]), and only our backends
//! are gated: other vendor routines (`cublas-sgemm`, `cublas-f16`, `cusparse-f16`) are not. An
//! f16, bf16 or 3×TF32 run is compared only with a base of its type
//! ([`crate::numerics::check_comparable`]).
//!
//! Two thresholds, both from the H200's run-to-run spread (docs/results/README.md, "Regression
//! gate"):
//! - `tolerance` (default [`DEFAULT_TOLERANCE`]) on the geometric mean of the ratios of each
//!   (op, group, backend): a kernel that got 10 % slower moves every case of its backend, and the
//!   geomean of a group moved by less than 1 % between two runs of unchanged kernels;
//! - `case_tolerance` (default [`DEFAULT_CASE_TOLERANCE`]) on a single case: single cases of
//!   unchanged kernels moved by up to 15 % (15 µs kernels whose cuSPARSE time moved by 2 µs).
//!
//! The gate fails on a group below `1 − tolerance`, a case below `1 − case_tolerance`, any case of
//! the new run that FAILED its accuracy check, or no case in common at all.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::{Group, Op, Report};

/// Default tolerance on the geomean ratio of one (op, group, backend).
pub const DEFAULT_TOLERANCE: f64 = 0.05;
/// Default tolerance on the ratio of one case.
pub const DEFAULT_CASE_TOLERANCE: f64 = 0.20;

/// The gate's thresholds (fractions: 0.05 = 5 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances {
    /// Largest loss of a (op, group, backend) geomean ratio that passes.
    pub group: f64,
    /// Largest loss of one case's ratio that passes.
    pub case: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self {
            group: DEFAULT_TOLERANCE,
            case: DEFAULT_CASE_TOLERANCE,
        }
    }
}

/// (op, matrix, n, backend).
type Key = (Op, String, usize, String);

/// Speedups of one side, keyed by case; a case measured in several files (merged re-runs) keeps
/// the geomean of its speedups. Also the group of each case and the failed cases.
#[derive(Default)]
struct Side {
    speedups: BTreeMap<Key, (Group, Vec<f64>)>,
    failed: Vec<String>,
    devices: Vec<String>,
}

impl Side {
    fn new(reports: &[Report]) -> Self {
        let mut side = Side::default();
        for r in reports {
            let name = r.device.split(" (").next().unwrap_or(&r.device).to_string();
            if !side.devices.contains(&name) {
                side.devices.push(name);
            }
            for c in &r.cases {
                if c.failed() {
                    side.failed.push(format!(
                        "{} {} N={} {}: {}",
                        c.op,
                        c.matrix,
                        c.n,
                        c.backend,
                        match &c.status {
                            crate::report::Status::Failed { reason } => reason.as_str(),
                            _ => "",
                        }
                    ));
                }
                // Ours only: another vendor routine's ratio to the baseline (SpAMM's
                // cublas-sgemm against cublas-tf32) is no regression of ours.
                if let Some(s) = r.speedup(c).filter(|_| !c.is_vendor()) {
                    side.speedups
                        .entry((c.op, c.matrix.clone(), c.n, c.backend.clone()))
                        .or_insert_with(|| (c.group, Vec::new()))
                        .1
                        .push(s);
                }
            }
        }
        side
    }

    fn speedup(&self, k: &Key) -> Option<(Group, f64)> {
        let (g, v) = self.speedups.get(k)?;
        Some((*g, crate::report::geomean(v)?))
    }
}

/// Verdict on one compared line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within tolerance.
    Same,
    /// Better by more than the tolerance (reported, never a failure).
    Faster,
    /// Worse by more than the group tolerance but within the case tolerance (a single case: reported
    /// only).
    Slower,
    /// Fails the gate.
    Regression,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Faster => "faster",
            Verdict::Slower => "slower (within case tolerance)",
            Verdict::Regression => "REGRESSION",
        }
    }
}

/// One matched case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseLine {
    /// Operation.
    pub op: Op,
    /// Matrix group.
    pub group: Group,
    /// Matrix.
    pub matrix: String,
    /// N.
    pub n: usize,
    /// Backend.
    pub backend: String,
    /// Speedup over the vendor baseline in the base run.
    pub base: f64,
    /// Speedup over the vendor baseline in the new run.
    pub new: f64,
    /// Verdict.
    pub verdict: Verdict,
}

impl CaseLine {
    /// new / base.
    pub fn ratio(&self) -> f64 {
        self.new / self.base
    }
}

/// Geomean of the ratios of one (op, group, backend).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupLine {
    /// Operation.
    pub op: Op,
    /// Matrix group.
    pub group: Group,
    /// Backend.
    pub backend: String,
    /// Matched cases.
    pub cases: usize,
    /// Geomean of new / base over them.
    pub ratio: f64,
    /// Verdict.
    pub verdict: Verdict,
}

/// The result of comparing a run with a base.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Thresholds used.
    pub tolerances: Tolerances,
    /// Every matched case.
    pub cases: Vec<CaseLine>,
    /// One line per (op, group, backend).
    pub groups: Vec<GroupLine>,
    /// Cases of the new run that FAILED (accuracy or error): each fails the gate.
    pub failed: Vec<String>,
    /// Cases with a speedup in the base but none in the new run (not run, or not comparable).
    pub only_base: usize,
    /// Cases with a speedup in the new run but none in the base.
    pub only_new: usize,
    /// Device names of the base and new runs (a note when they differ).
    pub devices: (Vec<String>, Vec<String>),
}

fn group_name(g: Group) -> &'static str {
    g.name()
}

impl Comparison {
    /// Compares `new` with `base` (each possibly several files: different ops, runs split to fit a
    /// time limit, or re-runs).
    pub fn new(base: &[Report], new: &[Report], tolerances: Tolerances) -> Self {
        let (b, n) = (Side::new(base), Side::new(new));
        let mut cases = Vec::new();
        let mut only_base = 0;
        for k in b.speedups.keys() {
            let (Some((group, bs)), Some((_, ns))) = (b.speedup(k), n.speedup(k)) else {
                only_base += 1;
                continue;
            };
            let ratio = ns / bs;
            let verdict = if ratio < 1.0 - tolerances.case {
                Verdict::Regression
            } else if ratio < 1.0 - tolerances.group {
                Verdict::Slower
            } else if ratio > 1.0 + tolerances.group {
                Verdict::Faster
            } else {
                Verdict::Same
            };
            cases.push(CaseLine {
                op: k.0,
                group,
                matrix: k.1.clone(),
                n: k.2,
                backend: k.3.clone(),
                base: bs,
                new: ns,
                verdict,
            });
        }
        let only_new = n
            .speedups
            .keys()
            .filter(|k| !b.speedups.contains_key(*k))
            .count();
        let mut by_group: BTreeMap<(Op, Group, String), Vec<f64>> = BTreeMap::new();
        for c in &cases {
            by_group
                .entry((c.op, c.group, c.backend.clone()))
                .or_default()
                .push(c.ratio());
        }
        let groups = by_group
            .into_iter()
            .filter_map(|((op, group, backend), ratios)| {
                let ratio = crate::report::geomean(&ratios)?;
                let verdict = if ratio < 1.0 - tolerances.group {
                    Verdict::Regression
                } else if ratio > 1.0 + tolerances.group {
                    Verdict::Faster
                } else {
                    Verdict::Same
                };
                Some(GroupLine {
                    op,
                    group,
                    backend,
                    cases: ratios.len(),
                    ratio,
                    verdict,
                })
            })
            .collect();
        Comparison {
            tolerances,
            cases,
            groups,
            failed: n.failed,
            only_base,
            only_new,
            devices: (b.devices, n.devices),
        }
    }

    /// The group lines that regressed.
    pub fn regressed_groups(&self) -> impl Iterator<Item = &GroupLine> {
        self.groups
            .iter()
            .filter(|g| g.verdict == Verdict::Regression)
    }

    /// The case lines that regressed.
    pub fn regressed_cases(&self) -> impl Iterator<Item = &CaseLine> {
        self.cases
            .iter()
            .filter(|c| c.verdict == Verdict::Regression)
    }

    /// Why the gate fails, one line each; empty when it passes.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.cases.is_empty() {
            out.push("no case in common with the base: nothing was compared".to_string());
        }
        for g in self.regressed_groups() {
            out.push(format!(
                "{} {} {}: geomean ratio {:.3} over {} cases (< {:.3})",
                g.op,
                group_name(g.group),
                g.backend,
                g.ratio,
                g.cases,
                1.0 - self.tolerances.group
            ));
        }
        for c in self.regressed_cases() {
            out.push(format!(
                "{} {} N={} {}: ratio {:.3} (< {:.3})",
                c.op,
                c.matrix,
                c.n,
                c.backend,
                c.ratio(),
                1.0 - self.tolerances.case
            ));
        }
        for f in &self.failed {
            out.push(format!("FAILED {f}"));
        }
        out
    }

    /// Whether the gate passes.
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// The comparison as Markdown: header, every group line, the cases that moved beyond the
    /// group tolerance, the failed cases and the verdict.
    pub fn table(&self) -> String {
        let t = &self.tolerances;
        let pct = |r: f64| format!("{:+.1} %", (r - 1.0) * 100.0);
        let mut s = String::new();
        let _ = writeln!(s, "## Regression gate\n");
        let _ = writeln!(
            s,
            "Ratio = new speedup / base speedup over the vendor baseline (same matrix, N and process \
             on each side). Tolerance: {:.1} % on the geomean of each op, group and backend, {:.1} % \
             on a single case.\n",
            t.group * 100.0,
            t.case * 100.0
        );
        let _ = writeln!(
            s,
            "- matched cases: {}; only in the base: {}; only in the new run: {}",
            self.cases.len(),
            self.only_base,
            self.only_new
        );
        let _ = writeln!(s, "- base device: {}", self.devices.0.join(", "));
        let _ = writeln!(s, "- new device: {}", self.devices.1.join(", "));
        if self.devices.0 != self.devices.1 {
            let _ = writeln!(
                s,
                "- note: the devices differ; ratios of different GPUs are not a regression test"
            );
        }
        let _ = writeln!(
            s,
            "\n| op | group | backend | cases | geomean ratio | change | verdict |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|---|");
        for g in &self.groups {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.3} | {} | {} |",
                g.op,
                group_name(g.group),
                g.backend,
                g.cases,
                g.ratio,
                pct(g.ratio),
                g.verdict.label()
            );
        }
        let moved: Vec<&CaseLine> = self
            .cases
            .iter()
            .filter(|c| c.verdict != Verdict::Same)
            .collect();
        let _ = writeln!(
            s,
            "\nCases that moved by more than {:.1} %: {}\n",
            t.group * 100.0,
            moved.len()
        );
        if !moved.is_empty() {
            let _ = writeln!(
                s,
                "| op | matrix | N | backend | base speedup | new speedup | change | verdict |"
            );
            let _ = writeln!(s, "|---|---|---:|---|---:|---:|---:|---|");
            for c in moved {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {:.2}× | {:.2}× | {} | {} |",
                    c.op,
                    c.matrix,
                    c.n,
                    c.backend,
                    c.base,
                    c.new,
                    pct(c.ratio()),
                    c.verdict.label()
                );
            }
            let _ = writeln!(s);
        }
        if !self.failed.is_empty() {
            let _ = writeln!(s, "Failed cases in the new run: {}\n", self.failed.len());
            for f in &self.failed {
                let _ = writeln!(s, "- FAILED {}", f.replace('|', "/"));
            }
            let _ = writeln!(s);
        }
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(s, "gate: PASSED");
        } else {
            let _ = writeln!(s, "gate: FAILED ({} reasons)", failures.len());
            for f in failures {
                let _ = writeln!(s, "- {f}");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Case, Status};

    /// Deterministic jitter in [-1, 1] per (matrix, n, backend, seed): a re-run's noise.
    fn jitter(key: &str, seed: u64) -> f64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
        for b in key.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        (h % 2001) as f64 / 1000.0 - 1.0
    }

    const BACKENDS: [&str; 4] = ["tcsparse", "acc/plain", "tc32/reorder", "acc/reorder"];

    /// The synthetic runs' matrices: name, group and cuSPARSE's time at N = 128, ms.
    const MATRICES: [(&str, Group, f64); 10] = [
        ("cora", Group::Shared, 0.02),
        ("bcsstk17", Group::Shared, 0.04),
        ("mbeacxc", Group::Shared, 0.015),
        ("rajat01", Group::Shared, 0.03),
        ("c-62", Group::Shared, 0.06),
        ("cage10", Group::Shared, 0.05),
        ("copter2", Group::Shared, 0.08),
        ("rmat20-ef11", Group::Large, 1.1),
        ("banded2m-hb32", Group::Large, 2.3),
        ("reddit-like", Group::Large, 9.0),
    ];

    /// A synthetic run in the shape of docs/results/spmm-h200.json: 7 shared and 3 large matrices
    /// at N = 128/256/512. Every time carries ±`noise` of seeded jitter (the baseline's too);
    /// `slow` multiplies the times of backend `slow_backend` (1.10 = 10 % slower).
    fn run(seed: u64, noise: f64, slow_backend: &str, slow: f64) -> Report {
        let mut cases = Vec::new();
        for (mi, (m, g, base_ms)) in MATRICES.iter().enumerate() {
            for n in [128usize, 256, 512] {
                let scale = n as f64 / 128.0;
                let mut push = |backend: &str, ms: f64, op: Op| {
                    let key = format!("{m}/{n}/{backend}");
                    let mut ms = ms * (1.0 + noise * jitter(&key, seed));
                    if backend == slow_backend {
                        ms *= slow;
                    }
                    cases.push(Case {
                        ms: Some(ms),
                        bytes: Some(1 << 20),
                        rel_err: Some(1e-4),
                        scaled_err: Some(2e-4),
                        ..Case::new(op, m, *g, (1000, 1000, 10_000), n, backend, Status::Ok)
                    });
                };
                push("cusparse", base_ms * scale, Op::Spmm);
                for (bi, b) in BACKENDS.iter().enumerate() {
                    let speed = 0.6 + 0.3 * ((mi + bi) % 5) as f64;
                    push(b, base_ms * scale / speed, Op::Spmm);
                }
            }
        }
        Report {
            command: format!("synthetic seed {seed}"),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            config: None,
            baseline: None,
            cases,
        }
    }

    /// Noise of a re-run: ±3 % on every time (ours and cuSPARSE's, both runs), so single ratios
    /// move by up to ±12 %, typically 2–3 %: more than the H200's measured spread (median 1 %, 90th
    /// percentile 2.3–3.7 %, docs/results/README.md), so the gate is tested on the noisy side.
    const RERUN_NOISE: f64 = 0.03;

    /// The noisy run 0 as the base, against the noisy run `seed` in which backend `slow` takes
    /// `factor` times as long.
    fn rerun(seed: u64, slow: &str, factor: f64) -> Comparison {
        Comparison::new(
            &[run(0, RERUN_NOISE, "", 1.0)],
            &[run(seed, RERUN_NOISE, slow, factor)],
            Tolerances::default(),
        )
    }

    #[test]
    fn a_rerun_of_unchanged_code_passes() {
        for seed in 1..20 {
            let c = rerun(seed, "", 1.0);
            assert_eq!(c.cases.len(), 10 * 3 * BACKENDS.len());
            assert!(c.passed(), "seed {seed}:\n{}", c.table());
        }
    }

    #[test]
    fn a_ten_percent_slower_kernel_fails_the_gate() {
        for seed in 1..20 {
            let c = rerun(seed, "acc/plain", 1.10);
            assert!(!c.passed(), "seed {seed}:\n{}", c.table());
            let bad: Vec<_> = c.regressed_groups().map(|g| g.backend.as_str()).collect();
            // Both groups of the slowed backend, and nothing else.
            assert_eq!(bad, ["acc/plain", "acc/plain"], "seed {seed}");
        }
    }

    #[test]
    fn accuracy_failure_fails_and_no_overlap_fails() {
        let base = run(0, 0.0, "", 1.0);
        let mut new = run(0, 0.0, "", 1.0);
        new.cases[3].status = Status::Failed {
            reason: "scaled error 3.0e-1 > 2.0e-3".into(),
        };
        let c = Comparison::new(std::slice::from_ref(&base), &[new], Tolerances::default());
        assert_eq!(c.failed.len(), 1);
        assert!(!c.passed());
        assert_eq!(c.only_base, 1);
        // Only another op in the new run: nothing in common.
        let mut other = run(0, 0.0, "", 1.0);
        for k in &mut other.cases {
            k.op = Op::Spmv;
        }
        let c = Comparison::new(&[base], &[other], Tolerances::default());
        assert!(c.cases.is_empty() && !c.passed());
        assert_eq!(c.only_new, 10 * 3 * BACKENDS.len());
    }

    #[test]
    fn ops_are_matched_separately_and_files_combine() {
        // Base and new each in two files (one per op); SpAMM's baseline is cuBLAS.
        let mk = |op: Op, vendor: &str, ours_ms: f64| Report {
            command: "x".into(),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            config: None,
            baseline: None,
            cases: [(vendor, 1.0), ("ours", ours_ms)]
                .iter()
                .map(|(b, ms)| Case {
                    ms: Some(*ms),
                    ..Case::new(op, "m", Group::Large, (1, 1, 1), 64, b, Status::Ok)
                })
                .collect(),
        };
        let base = [
            mk(Op::Spmm, "cusparse", 0.5),
            mk(Op::Spamm, "cublas-tf32", 0.25),
        ];
        let new = [
            mk(Op::Spamm, "cublas-tf32", 0.5),
            mk(Op::Spmm, "cusparse", 0.5),
        ];
        let c = Comparison::new(&base, &new, Tolerances::default());
        assert_eq!(c.cases.len(), 2);
        let spamm = c.cases.iter().find(|l| l.op == Op::Spamm).unwrap();
        assert_eq!((spamm.base, spamm.new), (4.0, 2.0));
        assert_eq!(spamm.verdict, Verdict::Regression);
        let spmm = c.cases.iter().find(|l| l.op == Op::Spmm).unwrap();
        assert_eq!(spmm.verdict, Verdict::Same);
    }

    /// One result file per op, as the bench writes them (`results::write` into a folder, read
    /// back by `results::load`): SpMM (cuSPARSE, tcsparse), SpMV (cuSPARSE, tcsparse,
    /// tcsparse/f16) and SpAMM (the three cuBLAS GEMMs, the four SpAMM precisions) on shared,
    /// large and decay matrices. Every time carries ±`noise` of seeded jitter; times of backends
    /// named `slow_prefix…` are multiplied by `slow`.
    fn three_ops(seed: u64, noise: f64, slow_prefix: &str, slow: f64) -> Vec<Report> {
        let mut cases = Vec::new();
        let mut push = |op: Op, m: &str, g: Group, n: usize, backend: &str, ms: f64| {
            let key = format!("{op}/{m}/{n}/{backend}");
            let mut ms = ms * (1.0 + noise * jitter(&key, seed));
            if !slow_prefix.is_empty() && backend.starts_with(slow_prefix) {
                ms *= slow;
            }
            let dense = op == Op::Spamm;
            cases.push(Case {
                ms: Some(ms),
                bytes: (!dense).then_some(1 << 20),
                rel_err: Some(1e-6),
                norms_ms: dense.then_some(ms / 4.0),
                tau: dense.then_some(0.5),
                valid_ratio: dense.then_some(0.01),
                rel_bound: dense.then_some(1e-7),
                target: dense.then(|| "RelError(1e-5)".into()),
                ..Case::new(
                    op,
                    m,
                    g,
                    (
                        if dense { n } else { 1000 },
                        if dense { n } else { 1000 },
                        if dense { n * n } else { 10_000 },
                    ),
                    n,
                    backend,
                    Status::Ok,
                )
            });
        };
        // Four shared matrices and the three large ones.
        let sparse = MATRICES
            .iter()
            .filter(|(m, ..)| !matches!(*m, "c-62" | "cage10" | "copter2"));
        for (i, (m, g, ms)) in sparse.enumerate() {
            for n in [128, 256, 512] {
                let t = ms * n as f64 / 128.0;
                push(Op::Spmm, m, *g, n, "cusparse", t);
                push(Op::Spmm, m, *g, n, "tcsparse", t / (0.8 + 0.2 * i as f64));
            }
            for n in [1, 8] {
                let t = ms / 50.0 * n as f64;
                push(Op::Spmv, m, *g, n, "cusparse", t);
                push(Op::Spmv, m, *g, n, "tcsparse", t / (1.0 + 0.1 * i as f64));
                push(
                    Op::Spmv,
                    m,
                    *g,
                    n,
                    "tcsparse/f16",
                    t / (1.2 + 0.1 * i as f64),
                );
            }
        }
        for (i, m) in ["exp-r0.5", "exp-r0.1", "exp-r0.02", "algebraic"]
            .iter()
            .enumerate()
        {
            for n in [4096usize, 8192, 16384] {
                // The vendor times depend on n only; ours on the matrix's decay too.
                let tf32 = 20.0 * (n as f64 / 16384.0).powi(3);
                push(Op::Spamm, m, Group::Decay, n, "cublas-sgemm", 8.0 * tf32);
                push(Op::Spamm, m, Group::Decay, n, "cublas-tf32", tf32);
                push(Op::Spamm, m, Group::Decay, n, "cublas-f16", 0.6 * tf32);
                for (k, p) in ["f32", "tf32", "3xtf32", "f16"].iter().enumerate() {
                    let speedup = 2.0 + 3.0 * i as f64 + k as f64;
                    push(
                        Op::Spamm,
                        m,
                        Group::Decay,
                        n,
                        &format!("spamm-{p}"),
                        tf32 / speedup,
                    );
                }
            }
        }
        let report = Report {
            command: format!("synthetic seed {seed}"),
            device: "NVIDIA H200 (132 SMs)".into(),
            started_unix: 0,
            cases,
            config: Some("block B64, s = 1".into()),
            baseline: None,
        };
        let dir = std::env::temp_dir().join(format!(
            "tcsparse-bench-three-ops-{}-{seed}-{slow_prefix}-{}",
            std::process::id(),
            (slow * 100.0) as u32
        ));
        let written = crate::results::write(&dir, &report).unwrap();
        let names: Vec<_> = written
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .collect();
        assert_eq!(
            names,
            [
                "spmm-h200.json",
                "spmm-h200.md",
                "spmv-h200.json",
                "spmv-h200.md",
                "spamm-h200.json",
                "spamm-h200.md"
            ]
        );
        let back = crate::results::load(std::slice::from_ref(&dir)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.len(), 3);
        back
    }

    /// Matched cases of `three_ops`: SpMM 7 × 3, SpMV 7 × 2 × 2, SpAMM 4 × 3 × 4 (ours only:
    /// cuBLAS SGEMM and f16 are vendor routines, not gated).
    const THREE_OPS_CASES: usize = 21 + 28 + 48;

    #[test]
    fn every_op_a_rerun_passes_and_a_slower_spamm_fails() {
        let base = three_ops(0, RERUN_NOISE, "", 1.0);
        for seed in 1..20 {
            let c = Comparison::new(
                &base,
                &three_ops(seed, RERUN_NOISE, "", 1.0),
                Tolerances::default(),
            );
            assert_eq!(c.cases.len(), THREE_OPS_CASES, "seed {seed}");
            assert_eq!((c.only_base, c.only_new), (0, 0));
            assert!(c.passed(), "seed {seed}:\n{}", c.table());
            let slow = Comparison::new(
                &base,
                &three_ops(seed, RERUN_NOISE, "spamm-", 1.10),
                Tolerances::default(),
            );
            assert!(!slow.passed(), "seed {seed}:\n{}", slow.table());
            let bad: Vec<_> = slow
                .regressed_groups()
                .map(|g| (g.op, g.group, g.backend.as_str()))
                .collect();
            // The four SpAMM precisions, nothing of SpMM or SpMV.
            assert_eq!(
                bad,
                [
                    (Op::Spamm, Group::Decay, "spamm-3xtf32"),
                    (Op::Spamm, Group::Decay, "spamm-f16"),
                    (Op::Spamm, Group::Decay, "spamm-f32"),
                    (Op::Spamm, Group::Decay, "spamm-tf32"),
                ],
                "seed {seed}"
            );
        }
    }

    #[test]
    fn spamm_cases_compare_with_the_tf32_gemm_of_their_matrix_and_size_only() {
        let base = three_ops(0, 0.0, "", 1.0);
        // A slower cuBLAS SGEMM or f16 GEMM is no regression of ours: not even compared.
        let c = Comparison::new(
            &base,
            &three_ops(0, 0.0, "cublas-sgemm", 1.5),
            Tolerances::default(),
        );
        assert!(c.passed(), "{}", c.table());
        assert!(c.cases.iter().all(|l| !l.backend.starts_with("cublas")));
        // Each SpAMM speedup is over the cublas-tf32 case of the same matrix and n: the synthetic
        // speedups (2 + 3·matrix + precision) come back exactly, whatever n's GEMM time.
        for l in c.cases.iter().filter(|l| l.op == Op::Spamm) {
            let i = ["exp-r0.5", "exp-r0.1", "exp-r0.02", "algebraic"]
                .iter()
                .position(|m| *m == l.matrix)
                .unwrap();
            let k = ["spamm-f32", "spamm-tf32", "spamm-3xtf32", "spamm-f16"]
                .iter()
                .position(|b| *b == l.backend)
                .unwrap();
            let want = 2.0 + 3.0 * i as f64 + k as f64;
            assert!(
                (l.base - want).abs() < 1e-9 && (l.new - want).abs() < 1e-9,
                "{l:?}"
            );
        }
        // A slower TF32 GEMM makes every SpAMM case look faster, and only SpAMM's.
        let c = Comparison::new(
            &base,
            &three_ops(0, 0.0, "cublas-tf32", 1.5),
            Tolerances::default(),
        );
        assert!(c.passed());
        for l in &c.cases {
            let want = if l.op == Op::Spamm {
                Verdict::Faster
            } else {
                Verdict::Same
            };
            assert_eq!(l.verdict, want, "{l:?}");
        }
    }

    #[test]
    fn comparison_table_snapshot() {
        // Half the tests' noise, to keep the list of moved cases short.
        let base = run(0, RERUN_NOISE / 2.0, "", 1.0);
        let mut new = run(7, RERUN_NOISE / 2.0, "acc/plain", 1.10);
        // One case 30 % slower, one FAILED.
        for c in &mut new.cases {
            if c.matrix == "cage10" && c.n == 256 && c.backend == "tc32/reorder" {
                c.ms = c.ms.map(|t| t * 1.3);
            }
            if c.matrix == "cora" && c.n == 512 && c.backend == "acc/reorder" {
                c.status = Status::Failed {
                    reason: "scaled error 3.0e-1 > 2.0e-3 (rel 1.0e-1)".into(),
                };
            }
        }
        insta::assert_snapshot!(Comparison::new(&[base], &[new], Tolerances::default()).table());
    }
}
