//! CPU test: each kernel entry our launch code uses exists in the embedded PTX with exactly the
//! parameter list (count and PTX types) the launch code passes.

use tcsparse_gpu::spmm::{acc, csr, hrpb, row_tile, staged};
use tcsparse_gpu::{KernelModule, KernelSignature, permute, schedule, sddmm, spamm, spmv};

fn check(sigs: &[KernelSignature]) {
    for s in sigs {
        let entries = nvptx_builder::ptx::entries(s.module.ptx());
        let e = entries
            .iter()
            .find(|e| e.name == s.name)
            .unwrap_or_else(|| {
                panic!(
                    "{:?}: no .entry {} in {} (entries: {:?}); run `cargo xtask ptx`",
                    s.module,
                    s.name,
                    s.module.file_name(),
                    entries.iter().map(|e| &e.name).collect::<Vec<_>>()
                )
            });
        let got: Vec<(&str, Option<usize>)> =
            e.params.iter().map(|p| (p.ty.as_str(), p.array)).collect();
        let want: Vec<(&str, Option<usize>)> =
            s.params.iter().map(|p| (p.ptx_type(), None)).collect();
        assert_eq!(
            got, want,
            "{:?}::{}: PTX parameters differ from the launch code",
            s.module, s.name
        );
    }
}

/// Every signature table of the launch code, each entry checked against its module's PTX, and
/// every kernel module launched from at least one entry.
#[test]
fn every_signature_table_matches_ptx() {
    let tables = [
        csr::SIGNATURES,
        acc::SIGNATURES,
        schedule::SIGNATURES,
        permute::SIGNATURES,
        sddmm::SIGNATURES,
        row_tile::SIGNATURES,
        spamm::SIGNATURES,
        spmv::SIGNATURES,
        spmv::csr::SIGNATURES,
        hrpb::SIGNATURES,
        staged::SIGNATURES,
    ];
    for sigs in tables {
        check(sigs);
    }
    for m in KernelModule::ALL {
        assert!(
            tables.iter().flat_map(|t| t.iter()).any(|s| s.module == m),
            "{m:?}: no signature table entry launches from this module"
        );
    }
}

#[test]
fn every_module_has_entries() {
    for m in KernelModule::ALL {
        assert!(
            !nvptx_builder::ptx::entries(m.ptx()).is_empty(),
            "{m:?}: embedded PTX has no .entry"
        );
    }
}

#[test]
fn probe_never_panics_and_reports_no_driver_without_libcuda() {
    let status = tcsparse_gpu::Gpu::probe();
    println!("probe: {status:?}");
    // SAFETY: only tries to dlopen libcuda.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    if !driver {
        assert!(
            matches!(status, tcsparse_gpu::GpuStatus::NoDriver(_)),
            "{status:?}"
        );
        let err = tcsparse_gpu::Gpu::require().expect_err("no GPU here");
        assert!(err.to_string().contains("no NVIDIA driver"), "{err}");
    }
}
