//! The worked 10×12 example of `docs/formats/*.md` as insta snapshots (the shared datasets' round
//! trips are in `fmt_datasets.rs`).

use std::fmt::Write;
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::BitTcf;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::layout::SENTINEL;
use tcsparse_formats::metcf::MeTcf;
use tcsparse_formats::normmap::NormMap;
use tcsparse_formats::rowtile::RowTileTcf;
use tcsparse_formats::staged::{StagedCsr, StagedSpec};

/// The documented example: 10×12, 15 entries (one explicit zero at (9, 7)).
fn example() -> Csr {
    let t = [
        (0, 0, 1.0),
        (0, 5, 2.0),
        (1, 1, 3.0),
        (1, 8, 4.0),
        (2, 11, 5.0),
        (3, 5, 6.0),
        (4, 2, 7.0),
        (5, 9, 8.0),
        (6, 3, 9.0),
        (7, 4, 10.0),
        (7, 10, 11.0),
        (8, 6, 12.0),
        (9, 0, 13.0),
        (9, 7, 0.0),
        (9, 11, 14.0),
    ];
    csr_from_triplets(10, 12, &t).unwrap()
}

fn cols(v: &[u32]) -> String {
    let s: Vec<String> = v
        .iter()
        .map(|&c| {
            if c == u32::MAX {
                "S".into()
            } else {
                c.to_string()
            }
        })
        .collect();
    format!("[{}]", s.join(", "))
}

fn masks(v: &[u64]) -> String {
    let s: Vec<String> = v.iter().map(|m| format!("{m:#018x}")).collect();
    format!("[{}]", s.join(", "))
}

#[test]
fn bittcf_example() {
    let f = BitTcf::from_csr(&example()).unwrap();
    let mut s = String::new();
    writeln!(s, "row_window_offset  = {:?}", f.row_window_offset()).unwrap();
    writeln!(s, "sparse_a_to_b      = {}", cols(f.sparse_a_to_b())).unwrap();
    writeln!(s, "tc_local_bit       = {}", masks(f.tc_local_bit())).unwrap();
    writeln!(s, "block_value_offset = {:?}", f.block_value_offset()).unwrap();
    writeln!(s, "values             = {:?}", f.values()).unwrap();
    insta::assert_snapshot!("fmt_bittcf_example", s);
}

#[test]
fn metcf_example() {
    let f = MeTcf::from_csr(&example()).unwrap();
    let mut s = String::new();
    writeln!(s, "row_window_offset = {:?}", f.row_window_offset()).unwrap();
    writeln!(s, "tc_offset         = {:?}", f.tc_offset()).unwrap();
    writeln!(s, "sparse_a_to_x     = {}", cols(f.sparse_a_to_x())).unwrap();
    writeln!(s, "tc_local_id       = {:?}", f.tc_local_id()).unwrap();
    writeln!(s, "values            = {:?}", f.values()).unwrap();
    writeln!(s, "block_window      = {:?}", f.block_window()).unwrap();
    insta::assert_snapshot!("fmt_metcf_example", s);
}

#[test]
fn rowtile_example() {
    let f = RowTileTcf::from_csr(&example(), 32).unwrap();
    let mut s = String::new();
    writeln!(s, "window_rows        = {}", f.window_rows()).unwrap();
    writeln!(s, "row_window_offset  = {:?}", f.row_window_offset()).unwrap();
    writeln!(s, "block_value_offset = {:?}", f.block_value_offset()).unwrap();
    writeln!(s, "block_cols         = {}", cols(f.block_cols())).unwrap();
    writeln!(s, "masks              = {}", masks(f.masks())).unwrap();
    writeln!(s, "values             = {:?}", f.values()).unwrap();
    insta::assert_snapshot!("fmt_rowtile_example", s);
}

#[test]
fn hrpb_example() {
    let f = Hrpb::from_csr(&example()).unwrap();
    let mut s = String::new();
    writeln!(s, "blocked_row_ptr = {:?}", f.blocked_row_ptr()).unwrap();
    writeln!(s, "active_cols     = {}", cols(f.active_cols())).unwrap();
    writeln!(s, "size_ptr        = {:?}", f.size_ptr()).unwrap();
    let p = f.packed_blocks();
    writeln!(s, "packed header   = {:?}", &p[..6]).unwrap();
    let blk = f.block(0);
    let pats: Vec<u64> = (0..blk.num_bricks()).map(|i| blk.pattern(i)).collect();
    writeln!(s, "patterns        = {}", masks(&pats)).unwrap();
    let vals: Vec<f32> = blk.value_bits.iter().map(|&b| f32::from_bits(b)).collect();
    writeln!(s, "values          = {vals:?}").unwrap();
    writeln!(s, "packed words    = {}", p.len()).unwrap();
    insta::assert_snapshot!("fmt_hrpb_example", s);
}

/// The device encoding of the example (docs/formats/hrpb.md): 3 bricks, values offsets 0 / 5 / 10.
#[test]
fn hrpb_device_layout_of_the_example() {
    let d = Hrpb::from_csr(&example()).unwrap().device_layout();
    assert_eq!(d.validate(), Ok(()));
    assert_eq!(d.panel_bricks, [0, 3]);
    assert_eq!(d.block_bricks, [0, 3]);
    assert_eq!(d.num_bricks(), 3);
    assert_eq!(d.pattern(0), 0x0000_0010_0804_0021);
    assert_eq!(&d.bricks[2..8], &[0, 0, 0, 1, 2, 3]);
    assert_eq!(&d.bricks[10..16], &[5, 0, 4, 5, 6, 7]);
    assert_eq!(&d.bricks[18..24], &[10, 0, 8, 9, 10, 11]);
    assert_eq!(d.values[..5], [1.0, 3.0, 7.0, 9.0, 13.0]);
    // A bad offset and a bit in a sentinel column are refused.
    let mut bad = d.clone();
    bad.bricks[10] = 4;
    assert!(bad.validate().is_err());
    let mut bad = d.clone();
    bad.bricks[16 + 4 + 3] = SENTINEL;
    assert!(bad.validate().is_err());
}

#[test]
fn bitbsr_example() {
    let f = BitBsr::from_csr(&example()).unwrap();
    let mut s = String::new();
    writeln!(s, "block_row_ptr = {:?}", f.block_row_ptr()).unwrap();
    writeln!(s, "block_col     = {:?}", f.block_col()).unwrap();
    writeln!(s, "bitmap        = {}", masks(f.bitmap())).unwrap();
    writeln!(s, "value_offset  = {:?}", f.value_offset()).unwrap();
    writeln!(s, "values        = {:?}", f.values()).unwrap();
    insta::assert_snapshot!("fmt_bitbsr_example", s);
}

#[test]
fn normmap_example() {
    let a = example().to_dense();
    let dense: Vec<f32> = a.iter().copied().collect();
    let m = NormMap::from_dense(&dense, 10, 12, 4).unwrap();
    let s = format!(
        "tiles = {}x{}\nnorms = {:?}\n",
        m.tile_rows(),
        m.tile_cols(),
        m.norms()
    );
    insta::assert_snapshot!("fmt_normmap_example", s);
}

/// Windows of at most 3 rows and 4 staged columns: rows 0–1 (their four columns fill the cap, so
/// row 2's column 11 opens the next), 2–4 and 5–7 (three rows each), 8–9.
#[test]
fn staged_example() {
    let spec = StagedSpec {
        max_window_rows: 3,
        slot_cap: 4,
    };
    let f = StagedCsr::build(&example(), &spec).unwrap();
    let s = format!(
        "window_rows    = {:?}\nunique_offsets = {:?}\nunique_cols    = {:?}\nslots          = {:?}\n",
        f.window_rows(),
        f.unique_offsets(),
        f.unique_cols(),
        f.slots()
    );
    insta::assert_snapshot!("fmt_staged_example", s);
}
