//! Round trips, invariants, CPU products against the f64 reference, and metrics, for every layout:
//! the [`Layout`] contract through one generic check ([`contract`]), then what each layout adds.

#[path = "support/bittcf_mirror.rs"]
mod bittcf_mirror;
use bittcf_mirror::Mirror;
use proptest::prelude::*;
use tcsparse_formats::Csr;
use tcsparse_formats::bitbsr::BitBsr;
use tcsparse_formats::bittcf::{self, BitTcf, bit_rank};
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::hrpb::Hrpb;
use tcsparse_formats::layout::{FormatError, Layout};
use tcsparse_formats::metcf::MeTcf;
use tcsparse_formats::metrics::{self, Synergy, block_count};
use tcsparse_formats::normmap::{NormMap, spamm_cpu};
use tcsparse_formats::reference::{max_scaled_error, spmm_f64};
use tcsparse_formats::rowtile::RowTileTcf;

/// Pattern and values identical bit for bit (explicit zeros, -0.0 and NaN included).
fn assert_same(a: &Csr, b: &Csr) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.indptr().raw_storage(), b.indptr().raw_storage());
    assert_eq!(a.indices(), b.indices());
    let (x, y): (Vec<u32>, Vec<u32>) = (
        a.data().iter().map(|v| v.to_bits()).collect(),
        b.data().iter().map(|v| v.to_bits()).collect(),
    );
    assert_eq!(x, y);
}

fn value() -> impl Strategy<Value = f32> {
    prop_oneof![Just(0.0f32), Just(-0.0f32), -4.0f32..4.0, Just(1e30f32)]
}

/// Random matrices: any shape up to 45×45 (0 included), optional dense row, explicit zeros.
fn matrix() -> impl Strategy<Value = Csr> {
    (0usize..46, 0usize..46)
        .prop_flat_map(|(r, c)| {
            let n = if r == 0 || c == 0 { 0 } else { r * c / 3 + 1 };
            (
                Just(r),
                Just(c),
                proptest::collection::vec((0..r.max(1) as u32, 0..c.max(1) as u32, value()), 0..=n),
                proptest::option::of(0..r.max(1) as u32),
            )
        })
        .prop_map(|(r, c, mut t, dense)| {
            if r == 0 || c == 0 {
                t.clear();
            } else if let Some(d) = dense {
                t.extend((0..c as u32).map(|j| (d, j, 0.5 + j as f32)));
            }
            csr_from_triplets(r, c, &t).unwrap()
        })
}

fn dense_b(k: usize, ldb: usize, seed: u32) -> Vec<f32> {
    (0..k * ldb)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 16) % 17) as f32 / 8.0 - 1.0
        })
        .collect()
}

fn max_row_nnz(a: &Csr) -> usize {
    a.outer_iterator().map(|r| r.nnz()).max().unwrap_or(0)
}

/// f32 sequential accumulation of `len` products: |error| ≤ (len + 1)·2⁻²⁴·(|A|·|B|) ≤ (len+1)·2⁻²³.
fn check_product(a: &Csr, got: &[f32], b: &[f32], n: usize, ldb: usize) {
    let want = spmm_f64(a, b, n, ldb, false);
    let scale = spmm_f64(a, b, n, ldb, true);
    let tol = (max_row_nnz(a) + 1) as f64 * 2f64.powi(-23);
    let err = max_scaled_error(got, &want, &scale);
    assert!(err <= tol, "scaled error {err} > {tol}");
}

/// Products only make sense on finite values within range: drop the 1e30 entries.
fn finite(a: &Csr) -> Csr {
    let mut t = Vec::new();
    for (v, (r, c)) in a.iter() {
        t.push((r, c, if v.abs() > 1e20 { 1.0 } else { *v }));
    }
    csr_from_triplets(a.rows(), a.cols(), &t).unwrap()
}

/// The [`Layout`] contract for one layout and build parameter: the build validates and converts
/// back to `a` bit for bit; its entry walk visits every stored entry of `a` exactly once; its CPU
/// product (with `ldb = n + pad`) matches the f64 CSR reference; operands too short are errors.
fn contract<L: Layout>(
    a: &Csr,
    params: L::Params,
    n: usize,
    pad: usize,
) -> Result<(), TestCaseError> {
    let f = L::from_csr_with(a, params).unwrap();
    prop_assert_eq!(f.validate(), Ok(()), "{} {:?}", L::NAME, params);
    prop_assert_eq!(f.shape(), a.shape());
    prop_assert_eq!(f.nnz(), a.nnz());
    assert_same(a, &f.to_csr());
    let mut seen = Vec::with_capacity(a.nnz());
    f.for_each_entry(|r, c, v| seen.push((r, c, v.to_bits())));
    seen.sort_unstable();
    let mut want: Vec<_> = a
        .iter()
        .map(|(v, (r, c))| (r as usize, c as usize, v.to_bits()))
        .collect();
    want.sort_unstable();
    prop_assert_eq!(seen, want, "{} {:?}: entries", L::NAME, params);
    let a = finite(a);
    let f = L::from_csr_with(&a, params).unwrap();
    let ldb = n + pad;
    let b = dense_b(a.cols(), ldb, 7);
    check_product(&a, &f.spmm_cpu(&b, n, ldb).unwrap(), &b, n, ldb);
    if a.cols() > 0 {
        let short = &b[..(a.cols() - 1) * ldb + n - 1];
        prop_assert!(matches!(
            f.spmm_cpu(short, n, ldb),
            Err(FormatError::BadArgument(_))
        ));
    }
    prop_assert!(matches!(
        f.spmm_cpu(&b, n, n.saturating_sub(1)),
        Err(FormatError::BadArgument(_))
    ));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every layout keeps the [`Layout`] contract (row-tile TCF at each window height).
    #[test]
    fn every_layout_keeps_the_contract(a in matrix(), n in 1usize..20, pad in 0usize..3) {
        contract::<BitTcf>(&a, (), n, pad)?;
        contract::<MeTcf>(&a, (), n, pad)?;
        contract::<Hrpb>(&a, (), n, pad)?;
        contract::<BitBsr>(&a, (), n, pad)?;
        for wr in [8, 16, 32, 64] {
            contract::<RowTileTcf>(&a, wr, n, pad)?;
        }
    }

    /// The slot map is a permutation of the CSR positions, reads back the layout's own values,
    /// and refills the layout for new values of the same pattern exactly as a fresh build does.
    #[test]
    fn bittcf_csr_positions_refill_like_a_build(a in matrix(), seed in any::<u32>()) {
        let mut f = BitTcf::from_csr(&a).unwrap();
        let pos = BitTcf::csr_positions(&a).unwrap();
        prop_assert_eq!(pos.len(), a.nnz());
        let mut seen = vec![false; a.nnz()];
        for (i, &p) in pos.iter().enumerate() {
            prop_assert!(!seen[p as usize]);
            seen[p as usize] = true;
            prop_assert_eq!(f.values()[i].to_bits(), a.data()[p as usize].to_bits());
        }
        let mut b = a.clone();
        for (k, v) in b.data_mut().iter_mut().enumerate() {
            *v = (k as u32 ^ seed) as f32 * 0.25 - 3.0;
        }
        for (v, &p) in f.values_mut().iter_mut().zip(&pos) {
            *v = b.data()[p as usize];
        }
        prop_assert_eq!(f, BitTcf::from_csr(&b).unwrap());
    }

    #[test]
    fn bittcf_block_counts(a in matrix()) {
        let f = BitTcf::from_csr(&a).unwrap();
        prop_assert_eq!(f.num_blocks(), block_count(&a, 8, 8));
        prop_assert_eq!(f.num_windows(), a.rows().div_ceil(8));
    }

    #[test]
    fn metcf_block_counts(a in matrix()) {
        let f = MeTcf::from_csr(&a).unwrap();
        prop_assert_eq!(f.num_blocks(), block_count(&a, 16, 8));
    }

    #[test]
    fn rowtile_block_counts(a in matrix(), h in 1usize..=4) {
        let wr = [8, 16, 32, 64][h - 1];
        let f = RowTileTcf::from_csr(&a, wr).unwrap();
        prop_assert_eq!(f.num_blocks(), block_count(&a, wr, 8));
        prop_assert_eq!(f.num_windows(), a.rows().div_ceil(wr));
    }

    #[test]
    fn rowtile_16_has_metcf_blocks_and_value_order(a in matrix()) {
        // Same blocks, columns and values as ME-TCF; masks hold exactly ME-TCF's local ids.
        let f = RowTileTcf::from_csr(&a, 16).unwrap();
        let m = MeTcf::from_csr(&a).unwrap();
        prop_assert_eq!(f.row_window_offset(), m.row_window_offset());
        prop_assert_eq!(f.block_value_offset(), m.tc_offset());
        prop_assert_eq!(f.block_cols(), m.sparse_a_to_x());
        prop_assert_eq!(f.values(), m.values());
        for b in 0..m.num_blocks() {
            let mut want = [0u64; 2];
            for &id in &m.tc_local_id()[m.tc_offset()[b] as usize..m.tc_offset()[b + 1] as usize] {
                want[usize::from(id) / 64] |= 1 << (id % 64);
            }
            prop_assert_eq!(&f.masks()[2 * b..2 * b + 2], &want[..]);
        }
    }

    #[test]
    fn hrpb_block_counts_and_device_encoding(a in matrix()) {
        let f = Hrpb::from_csr(&a).unwrap();
        prop_assert_eq!(f.num_blocks(), block_count(&a, 16, 16));
        prop_assert_eq!(f.num_bricks(), block_count(&a, 16, 4));
        prop_assert!(f.size_ptr().iter().all(|s| s % 2 == 0));
        // The device encoding: valid, same bricks and values, same product bit for bit.
        let d = f.device_layout();
        prop_assert_eq!(d.validate(), Ok(()));
        prop_assert_eq!(d.num_bricks(), f.num_bricks());
        prop_assert_eq!(d.values.len(), a.nnz());
        prop_assert_eq!(*d.block_bricks.last().unwrap() as usize, d.num_bricks());
        let n = 3;
        let b: Vec<f32> = (0..a.cols() * n).map(|i| (i % 7) as f32 - 3.0).collect();
        let (x, y): (Vec<u32>, Vec<u32>) = (
            f.spmm_cpu(&b, n, n).unwrap().iter().map(|v| v.to_bits()).collect(),
            d.spmm_cpu(&b, n, n).unwrap().iter().map(|v| v.to_bits()).collect(),
        );
        prop_assert_eq!(x, y);
    }
}

#[test]
fn bit_rank_handles_bit_63() {
    assert_eq!(bit_rank(u64::MAX, 63), 64);
    assert_eq!(bit_rank(1 << 63, 63), 1);
    assert_eq!(bit_rank(0b1011, 3), 3);
    assert_eq!(bit_rank(0b1011, 0), 1);
}

#[test]
fn full_8x8_block_uses_bit_63() {
    let t: Vec<_> = (0..8u32)
        .flat_map(|r| (0..8u32).map(move |c| (r, c, (r * 8 + c) as f32)))
        .collect();
    let a = csr_from_triplets(8, 8, &t).unwrap();
    let f = BitTcf::from_csr(&a).unwrap();
    assert_eq!(f.tc_local_bit(), &[u64::MAX]);
    assert_eq!(f.values()[63], 63.0);
    let b = dense_b(8, 3, 1);
    check_product(&a, &f.spmm_cpu(&b, 3, 3).unwrap(), &b, 3, 3);
}

#[test]
fn empty_shapes() {
    for (r, c) in [(0, 0), (5, 0), (0, 5), (17, 9)] {
        let a = csr_from_triplets(r, c, &[]).unwrap();
        let bt = BitTcf::from_csr(&a).unwrap();
        assert_eq!(bt.num_blocks(), 0);
        assert_eq!(bt.row_window_offset().len(), r.div_ceil(8) + 1);
        assert_same(&a, &bt.to_csr());
        assert_same(&a, &MeTcf::from_csr(&a).unwrap().to_csr());
        assert_same(&a, &Hrpb::from_csr(&a).unwrap().to_csr());
        assert_same(&a, &BitBsr::from_csr(&a).unwrap().to_csr());
        assert_same(&a, &RowTileTcf::from_csr(&a, 32).unwrap().to_csr());
        assert_eq!(bt.spmm_cpu(&vec![1.0; c * 4], 4, 4), Ok(vec![0.0; r * 4]));
        let rep = metrics::report(&a).unwrap();
        assert_eq!(rep.alpha, 0.0);
    }
}

#[test]
fn empty_window_between_full_ones_and_sentinel_padding() {
    // Rows 0 and 16 have entries; window 1 (rows 8..16) is empty.
    let a = csr_from_triplets(20, 30, &[(0, 29, 1.0), (0, 3, 2.0), (16, 5, 3.0)]).unwrap();
    let f = BitTcf::from_csr(&a).unwrap();
    assert_eq!(f.row_window_offset(), &[0, 1, 1, 2]);
    assert_eq!(
        &f.sparse_a_to_b()[..8],
        &[
            3,
            29,
            bittcf::SENTINEL,
            u32::MAX,
            u32::MAX,
            u32::MAX,
            u32::MAX,
            u32::MAX
        ]
    );
    // A NaN in B's row 0 must not leak into padded slots.
    let mut b = vec![1.0f32; 30 * 2];
    b[0] = f32::NAN;
    b[1] = f32::NAN;
    fn product_is_finite<L: Layout<Params = ()>>(a: &Csr, b: &[f32]) -> bool {
        let c = L::from_csr_with(a, ()).unwrap().spmm_cpu(b, 2, 2).unwrap();
        c.iter().all(|v| v.is_finite())
    }
    assert!(product_is_finite::<BitTcf>(&a, &b));
    assert!(product_is_finite::<MeTcf>(&a, &b));
    assert!(product_is_finite::<Hrpb>(&a, &b));
}

#[test]
fn metrics_on_hand_built_example() {
    // One dense 8×8 block at the origin (64 nnz) and 4 nonzeros in block (1, 1).
    let mut t: Vec<_> = (0..8u32)
        .flat_map(|r| (0..8u32).map(move |c| (r, c, 1.0)))
        .collect();
    t.extend([(8, 8, 1.0), (9, 9, 1.0), (10, 10, 1.0), (11, 11, 1.0)]);
    let a = csr_from_triplets(16, 16, &t).unwrap();
    let rep = metrics::report(&a).unwrap();
    let row = |n: &str| rep.formats.iter().find(|r| r.format == n).unwrap().clone();
    assert_eq!(row("CSR").bytes, 4 * 17 + 8 * 68);
    let bt = row("BitTCF");
    assert_eq!(bt.blocks, 2);
    assert_eq!(bt.mean_nnz_per_block, 34.0);
    // (2 windows + 1) + (2 blocks + 1) + 16 column ids = 22 words, 2 masks, 68 values.
    assert_eq!(bt.bytes, 4 * 22 + 8 * 2 + 4 * 68);
    assert_eq!(bt.paper_bytes, Some((2 + 11 * 2 + 2) * 4));
    assert_eq!(row("ME-TCF").blocks, 2); // one 16-row window, 12 unique columns.
    assert_eq!(row("bitBSR").blocks, 2);
    assert_eq!(rep.spaden_classes.dense, 1);
    assert_eq!(rep.spaden_classes.sparse, 1);
    // HRPB: 12 active columns -> 3 bricks, α = 68 / (3·64).
    assert_eq!(rep.hrpb_bricks, 3);
    assert!((rep.alpha - 68.0 / 192.0).abs() < 1e-12);
    assert_eq!(rep.synergy, Synergy::High);
    assert_eq!(Synergy::from_alpha(0.125), Synergy::Medium);
    assert_eq!(Synergy::from_alpha(0.1249), Synergy::Low);
    assert_eq!(Synergy::from_alpha(0.25), Synergy::High);
    let tcf = row("TCF");
    assert_eq!(tcf.compression_vs_tcf, 1.0);
    assert!((bt.compression_vs_csr - row("CSR").bytes as f64 / bt.bytes as f64).abs() < 1e-12);
}

#[test]
fn corrupted_layouts_fail_validation_through_serde() {
    let a = csr_from_triplets(10, 12, &[(0, 1, 1.0), (3, 7, 2.0), (9, 11, 3.0)]).unwrap();
    let f = BitTcf::from_csr(&a).unwrap();
    let mut v = serde_json_like(&f);
    // Flip one mask bit: popcount no longer matches the offsets.
    v.tc_local_bit[0] ^= 1 << 9;
    assert!(rebuild(&v).is_err());
}

fn serde_json_like(f: &BitTcf) -> Mirror {
    let bytes = bincode::serde::encode_to_vec(f, bincode::config::standard()).unwrap();
    bincode::serde::decode_from_slice(&bytes, bincode::config::standard())
        .unwrap()
        .0
}

fn rebuild(m: &Mirror) -> Result<BitTcf, bincode::error::DecodeError> {
    let bytes = bincode::serde::encode_to_vec(m, bincode::config::standard()).unwrap();
    bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).map(|x| x.0)
}

#[test]
fn spamm_matches_f64_when_all_tiles_valid_and_skips_below_tau() {
    let (m, k, n, tile) = (10, 7, 9, 4);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let na = NormMap::from_dense(&a, m, k, tile).unwrap();
    let nb = NormMap::from_dense(&b, k, n, tile).unwrap();
    assert_eq!((na.tile_rows(), na.tile_cols()), (3, 2));
    // Norm of tile (0,0) of A by hand.
    let mut s = 0f64;
    for r in 0..4 {
        for c in 0..4 {
            s += (a[r * k + c] as f64).powi(2);
        }
    }
    assert!((na.get(0, 0) as f64 - s.sqrt()).abs() < 1e-5);
    let (c, ratio) = spamm_cpu(&a, &na, &b, &nb, m, k, n, tile, 0.0).unwrap();
    assert_eq!(ratio, 1.0);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|t| a[i * k + t] as f64 * b[t * n + j] as f64)
                .sum();
            assert!((c[i * n + j] as f64 - want).abs() < 1e-4);
        }
    }
    // τ exactly equal to one norm product keeps that product (≥, f32 products as the kernels),
    // drops smaller ones.
    let tau = na.get(0, 0) * nb.get(0, 0);
    let (c2, ratio2) = spamm_cpu(&a, &na, &b, &nb, m, k, n, tile, tau).unwrap();
    let mut valid = 0;
    let mut want = vec![0f64; m * n];
    for i in 0..3 {
        for j in 0..3 {
            for t in 0..2 {
                if na.get(i, t) * nb.get(t, j) >= tau {
                    valid += 1;
                    for r in i * 4..(i * 4 + 4).min(m) {
                        for cc in j * 4..(j * 4 + 4).min(n) {
                            for kk in t * 4..(t * 4 + 4).min(k) {
                                want[r * n + cc] += a[r * k + kk] as f64 * b[kk * n + cc] as f64;
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(valid >= 1);
    assert_eq!(ratio2, valid as f64 / 18.0);
    for (g, w) in c2.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-4);
    }
    assert!(spamm_cpu(&a, &na, &b, &nb, m, k, n, 3, 0.0).is_err());
    assert!(NormMap::from_dense(&a, m, k, 0).is_err());
}
