//! Every shared real matrix (`shared/datasets/*.mtx.gz`) through every layout and back: `to_csr`
//! gives the matrix back exactly and `validate()` holds. These matrices are large enough for the
//! parallel multi-chunk builder (the proptests only reach the single-chunk path). Fails when the
//! folder is absent unless the run allows the skip (`common::shared_dir`).

mod common;

use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::layout::Layout;
use tcsparse_formats::metcf::MeTcf;

/// Same shape, pattern and value bits.
fn same(a: &Csr, b: &Csr) -> bool {
    let bits = |m: &Csr| m.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    a.shape() == b.shape()
        && a.indptr().raw_storage() == b.indptr().raw_storage()
        && a.indices() == b.indices()
        && bits(a) == bits(b)
}

/// Layout `L` built from `a` (the matrix `name`) validates and converts back to `a` bit for bit.
fn round_trips<L: Layout<Params = ()>>(a: &Csr, name: &str) {
    let f = L::from_csr_with(a, ()).unwrap();
    assert_eq!(f.validate(), Ok(()), "{name} {}", L::NAME);
    assert!(same(&f.to_csr(), a), "{name} {} round trip", L::NAME);
}

#[test]
fn every_shared_matrix_round_trips_through_every_layout() {
    common::for_each_shared_matrix(|name, a| {
        round_trips::<BitBsr>(a, name);
        round_trips::<BitTcf>(a, name);
        round_trips::<MeTcf>(a, name);
        round_trips::<Hrpb>(a, name);
        eprintln!("{name}: nnz {} ok", a.nnz());
    });
}
