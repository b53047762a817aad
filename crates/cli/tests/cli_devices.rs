//! `--devices` of `tcsparse spmm` and `tcsparse spamm`: a malformed list is refused with a message
//! naming the problem, and a device that is not there is an error, never a panic (on this machine
//! and on a GPU machine alike: the list asks for one device more than any host has).

mod common;

use common::repo_root;

fn run(args: &[&str]) -> (bool, String) {
    let out = common::tcsparse(args, repo_root());
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn malformed_and_missing_device_lists_are_errors() {
    let spmm = ["spmm", "datasets/west0067.mtx.gz", "--n", "8", "--devices"];
    let spamm = ["spamm", "--gen", "exponential:n=64,rate=0.1", "--devices"];
    for base in [&spmm[..], &spamm[..]] {
        for (list, want) in [
            ("0,0", "listed twice"),
            ("0,x", "not a device number"),
            ("64", "below 64"),
            ("0,63", "asked for"),
        ] {
            let mut args = base.to_vec();
            args.push(list);
            let (ok, err) = run(&args);
            assert!(!ok, "{args:?} succeeded");
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
        }
    }
    let (ok, err) = run(&[
        "spamm",
        "--gen",
        "exponential:n=64,rate=0.1",
        "--gpus",
        "2",
        "--devices",
        "0,1",
    ]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}
