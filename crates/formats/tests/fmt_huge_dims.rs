//! Layout builders take memory in proportion to the nonzeros, not to the declared dimensions: a
//! 1 × 4,294,967,294 matrix with one nonzero (and a few other thin shapes) builds every layout and
//! converts back exactly. Before, bitBSR allocated a slot per block column (8 GB here) and the
//! compacted layouts a rank per column.

use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::metcf::MeTcf;
use tcsparse_formats::rowtile::RowTileTcf;

fn every_layout_round_trips(a: &Csr) {
    let bt = BitTcf::from_csr(a).unwrap();
    assert_eq!(bt.validate(), Ok(()));
    assert_eq!(&bt.to_csr(), a);
    for wr in [16, 32] {
        let rt = RowTileTcf::from_csr(a, wr).unwrap();
        assert_eq!(rt.validate(), Ok(()));
        assert_eq!(&rt.to_csr(), a);
    }
    let bb = BitBsr::from_csr(a).unwrap();
    assert_eq!(bb.validate(), Ok(()));
    assert_eq!(&bb.to_csr(), a);
    let me = MeTcf::from_csr(a).unwrap();
    assert_eq!(&me.to_csr(), a);
}

#[test]
fn one_row_four_billion_columns() {
    let cols = 4_294_967_294;
    for c in [0u32, 7, 8, 4_294_967_293, 2_147_483_648] {
        let a = csr_from_triplets(1, cols, &[(0, c, 1.5)]).unwrap();
        every_layout_round_trips(&a);
    }
    // Several nonzeros spread over the whole range, sharing blocks and block columns.
    let t = [
        (0, 3, 1.0),
        (0, 5, 2.0),
        (0, 4_000_000_001, 3.0),
        (0, 4_000_000_007, 4.0),
        (0, 4_294_967_293, 5.0),
    ];
    every_layout_round_trips(&csr_from_triplets(1, cols, &t).unwrap());
}

#[test]
fn thin_and_tall_with_huge_columns() {
    let cols = 3_000_000_000usize;
    let t: Vec<(u32, u32, f32)> = (0..2000u32)
        .map(|i| {
            (
                i % 37,
                (i as u64 * 1_499_999 % cols as u64) as u32,
                i as f32,
            )
        })
        .collect();
    every_layout_round_trips(&csr_from_triplets(37, cols, &t).unwrap());
}
