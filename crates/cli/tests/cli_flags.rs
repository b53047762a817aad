//! One flag vocabulary across the subcommands: the input is `INPUT`, the dense width `--n`, GPUs
//! `--devices`, the planner's device `--device-model`, `--iters` defaults to 20 everywhere, and
//! the old spellings (`--rhs`, `--gpus`, `--device`, `--matrix`) still work but are hidden.

mod common;

use common::run_cpu;

const SUBCOMMANDS: [&str; 9] = [
    "info", "gen", "convert", "reorder", "plan", "spmm", "spmv", "spamm", "demo",
];

#[test]
fn the_top_level_help_lists_every_subcommand() {
    let help = run_cpu(&["--help"]);
    for cmd in SUBCOMMANDS {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(cmd)),
            "{cmd} missing from\n{help}"
        );
    }
    let about = help.lines().next().unwrap();
    for cmd in SUBCOMMANDS {
        assert!(about.contains(cmd), "{cmd} missing from `{about}`");
    }
}

#[test]
fn one_name_per_concept_in_every_help() {
    for cmd in ["info", "convert", "reorder", "plan", "spmm", "spmv", "demo"] {
        let help = run_cpu(&[cmd, "--help"]);
        // (demo's INPUT is optional: `[INPUT]`.)
        assert!(
            help.contains("<INPUT>") || help.contains("[INPUT]"),
            "tcsparse {cmd} --help:\n{help}"
        );
        for old in ["<FILE>", "<IN>", "--rhs", "--gpus", "--matrix"] {
            assert!(
                !help.contains(old),
                "tcsparse {cmd} --help shows {old}:\n{help}"
            );
        }
    }
    for cmd in ["spmm", "spmv", "demo"] {
        let help = run_cpu(&[cmd, "--help"]);
        assert!(help.contains("[default: 20]"), "--iters in {cmd}:\n{help}");
        for flag in ["--n <N>", "--seed", "--precision", "--cpu"] {
            assert!(help.contains(flag), "{flag} missing from {cmd}:\n{help}");
        }
    }
    for cmd in ["spmm", "demo"] {
        let help = run_cpu(&[cmd, "--help"]);
        assert!(help.contains("--reorder <REORDER>"), "{cmd}:\n{help}");
        assert!(help.contains("[default: auto]"), "{cmd}:\n{help}");
    }
    assert!(run_cpu(&["spmv", "--help"]).contains("There is no --reorder"));
    for cmd in ["spmm", "spamm"] {
        assert!(run_cpu(&[cmd, "--help"]).contains("--devices"), "{cmd}");
    }
    let plan = run_cpu(&["plan", "--help"]);
    assert!(
        plan.contains("--device-model") && !plan.contains("--device <"),
        "{plan}"
    );
}

#[test]
fn old_spellings_still_work() {
    let m = "datasets/west0067.mtx.gz";
    let new = run_cpu(&["spmv", m, "--n", "2", "--iters", "1"]);
    let old = run_cpu(&["spmv", m, "--rhs", "2", "--iters", "1"]);
    assert!(new.contains("2 right-hand side(s)") && old.contains("2 right-hand side(s)"));
    let new = run_cpu(&["plan", m, "--device-model", "a100"]);
    let old = run_cpu(&["plan", m, "--device", "a100"]);
    assert_eq!(new, old);
    assert!(new.contains("device: a100"), "{new}");
    let new = run_cpu(&["demo", m, "--iters", "1", "--n", "4"]);
    let old = run_cpu(&["demo", "--matrix", m, "--iters", "1", "--n", "4"]);
    for out in [&new, &old] {
        assert!(out.contains("on west0067.mtx.gz"), "{out}");
    }
}
