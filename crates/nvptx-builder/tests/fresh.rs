//! The committed PTX must match its sources: fails with "run `cargo xtask ptx`" when a `.cu` or an
//! included `.cuh` changed after the PTX was generated. Needs no compiler and no GPU.

use std::path::Path;

#[test]
fn committed_ptx_stamps_match_sources() {
    let dir = nvptx_builder::kernels_dir_from_crate(Path::new(env!("CARGO_MANIFEST_DIR")));
    if let Err(e) = nvptx_builder::check_fresh(&dir) {
        panic!("stale PTX in {}:\n{e}", dir.display());
    }
}

#[test]
fn every_ptx_is_stamped_for_the_pinned_flags() {
    let dir = nvptx_builder::kernels_dir_from_crate(Path::new(env!("CARGO_MANIFEST_DIR")));
    for src in nvptx_builder::discover(&dir).expect("kernels-ptx readable") {
        let text = std::fs::read_to_string(dir.join(src.ptx_name())).expect("ptx exists");
        let stamp = nvptx_builder::Stamp::parse(&text).expect("stamp present");
        let flags: Vec<&str> = stamp.flags.iter().map(String::as_str).collect();
        assert_eq!(
            flags,
            nvptx_builder::FLAGS,
            "{}: flags differ, run `cargo xtask ptx`",
            src.name
        );
        assert!(
            text.contains(".target sm_90"),
            "{}: not compiled for compute_90",
            src.name
        );
        assert!(
            !nvptx_builder::ptx::entries(&text).is_empty(),
            "{}: no .entry",
            src.name
        );
    }
}

#[test]
fn committed_cubins_match_sources_and_their_stamps() {
    let dir = nvptx_builder::kernels_dir_from_crate(Path::new(env!("CARGO_MANIFEST_DIR")));
    if let Err(e) = nvptx_builder::cubin::check_cubins_fresh(&dir) {
        panic!("stale cubins in {}:\n{e}", dir.display());
    }
}
