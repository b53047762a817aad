//! Every shared real matrix (`shared/datasets/*.mtx.gz`) through every layout and back: `to_csr`
//! gives the matrix back exactly and `validate()` holds. These matrices are large enough for the
//! parallel multi-chunk builder (the proptests only reach the single-chunk path). Skips with a note
//! when the folder is absent.

use std::path::PathBuf;

use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::metcf::MeTcf;
use tcsparse_formats::{Csr, mtx};

/// Same shape, pattern and value bits.
fn same(a: &Csr, b: &Csr) -> bool {
    let bits = |m: &Csr| m.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    a.shape() == b.shape()
        && a.indptr().raw_storage() == b.indptr().raw_storage()
        && a.indices() == b.indices()
        && bits(a) == bits(b)
}

fn datasets_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TCSPARSE_SHARED_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    dir.is_dir().then_some(dir)
}

#[test]
fn every_shared_matrix_round_trips_through_every_layout() {
    let Some(dir) = datasets_dir() else {
        eprintln!("note: shared/datasets not found (set TCSPARSE_SHARED_DATASETS); skipping");
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".mtx.gz"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .mtx.gz in {}", dir.display());
    for p in files {
        let a = mtx::read_matrix(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let f = BitBsr::from_csr(&a).unwrap();
        assert_eq!(f.validate(), Ok(()), "{name} bitBSR");
        assert!(same(&f.to_csr(), &a), "{name} bitBSR round trip");
        let f = BitTcf::from_csr(&a).unwrap();
        assert_eq!(f.validate(), Ok(()), "{name} BitTCF");
        assert!(same(&f.to_csr(), &a), "{name} BitTCF round trip");
        let f = MeTcf::from_csr(&a).unwrap();
        assert_eq!(f.validate(), Ok(()), "{name} ME-TCF");
        assert!(same(&f.to_csr(), &a), "{name} ME-TCF round trip");
        let f = Hrpb::from_csr(&a).unwrap();
        assert_eq!(f.validate(), Ok(()), "{name} HRPB");
        assert!(same(&f.to_csr(), &a), "{name} HRPB round trip");
        eprintln!("{name}: nnz {} ok", a.nnz());
    }
}
