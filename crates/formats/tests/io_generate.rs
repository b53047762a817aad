//! Generator invariants: shape, nnz, sorted duplicate-free rows, values, determinism, spec parsing.

use proptest::prelude::*;
use tcsparse_formats::Csr;
use tcsparse_formats::generate::{self, GenError, GeneratorSpec};

/// Checks the CSR invariants independently of sprs: offsets, sorted unique columns, bounds.
fn check_csr(m: &Csr) {
    let offsets = m.indptr().raw_storage().to_vec();
    assert_eq!(offsets.len(), m.rows() + 1);
    assert_eq!(offsets[m.rows()] as usize, m.nnz());
    for r in 0..m.rows() {
        let row = &m.indices()[offsets[r] as usize..offsets[r + 1] as usize];
        assert!(
            row.windows(2).all(|w| w[0] < w[1]),
            "row {r} sorted without duplicates"
        );
        assert!(
            row.iter().all(|&c| (c as usize) < m.cols()),
            "row {r} in bounds"
        );
    }
}

fn check_values(m: &Csr) {
    assert!(
        m.data().iter().all(|v| (-1.0..1.0).contains(v)),
        "values in [-1, 1)"
    );
    if m.nnz() > 100 {
        let distinct: std::collections::BTreeSet<u32> =
            m.data().iter().map(|v| v.to_bits()).collect();
        assert!(
            distinct.len() > m.nnz() / 2,
            "values are random, not constant"
        );
        assert!(m.data().iter().any(|&v| v < 0.0) && m.data().iter().any(|&v| v > 0.0));
    }
}

fn row_len(m: &Csr, r: usize) -> usize {
    let ip = m.indptr();
    let o = ip.raw_storage();
    (o[r + 1] - o[r]) as usize
}

#[test]
fn uniform_has_the_requested_shape_and_nnz() {
    let m = generate::uniform_random(5000, 3000, 7.5, 42).unwrap();
    assert_eq!(m.shape(), (5000, 3000));
    assert_eq!(m.nnz(), 37_500);
    check_csr(&m);
    check_values(&m);
    // Rectangular both ways, fractional averages, rows that must be clipped at `cols`.
    let m = generate::uniform_random(10, 3, 5.0, 1).unwrap();
    check_csr(&m);
    assert!(m.nnz() <= 30);
    let m = generate::uniform_random(2500, 70_000, 0.3, 1).unwrap();
    assert_eq!(m.nnz(), 750);
    check_csr(&m);
}

#[test]
fn uniform_dense_rows_use_the_dense_sampler() {
    let m = generate::uniform_random(64, 40, 30.0, 9).unwrap();
    check_csr(&m);
    assert!(m.nnz() > 64 * 25, "{}", m.nnz());
}

#[test]
fn banded_stays_in_its_band_with_full_diagonal() {
    let m = generate::banded(3000, 5, 0.5, 3).unwrap();
    check_csr(&m);
    check_values(&m);
    for r in 0..m.rows() {
        let ip = m.indptr();
        let o = ip.raw_storage();
        let row = &m.indices()[o[r] as usize..o[r + 1] as usize];
        assert!(row.contains(&(r as u32)), "diagonal present in row {r}");
        assert!(row.iter().all(|&c| (c as usize).abs_diff(r) <= 5));
    }
    // Expected nnz: n + 0.5 · (off-diagonal band cells); allow a few percent.
    let band = 3000 * 10 - 2 * 15;
    let expect = 3000.0 + 0.5 * band as f64;
    assert!(
        (m.nnz() as f64 - expect).abs() < 0.03 * expect,
        "{} vs {expect}",
        m.nnz()
    );
    let full = generate::banded(100, 3, 1.0, 0).unwrap();
    assert_eq!(full.nnz(), 100 * 7 - 2 * 6);
}

#[test]
fn clustered_respects_blocks_and_noise_rate() {
    let (n, bs) = (4000, 50);
    let m = generate::clustered_block_diagonal(n, bs, 0.2, 2.0, 5).unwrap();
    check_csr(&m);
    check_values(&m);
    let ip = m.indptr();
    let o = ip.raw_storage();
    let mut outside = 0;
    for r in 0..n {
        let row = &m.indices()[o[r] as usize..o[r + 1] as usize];
        assert!(row.contains(&(r as u32)));
        outside += row.iter().filter(|&&c| c as usize / bs != r / bs).count();
    }
    assert_eq!(
        outside,
        2 * n,
        "exactly inter_nnz_per_row off-block entries per row (integer rate)"
    );
    let inside = m.nnz() - outside;
    let expect = n as f64 + 0.2 * (n * (bs - 1)) as f64;
    assert!(
        (inside as f64 - expect).abs() < 0.05 * expect,
        "{inside} vs {expect}"
    );
    // One block covering everything: no room for noise, still valid.
    let m = generate::clustered_block_diagonal(30, 64, 1.0, 3.0, 5).unwrap();
    assert_eq!(m.nnz(), 900);
}

#[test]
fn rmat_is_power_law_and_duplicate_free() {
    let m = generate::rmat(12, 8, (0.57, 0.19, 0.19, 0.05), 11).unwrap();
    assert_eq!(m.shape(), (4096, 4096));
    check_csr(&m);
    check_values(&m);
    assert!(m.nnz() <= 8 * 4096 && m.nnz() > 4 * 4096, "{}", m.nnz());
    // Skewed degrees: the longest row is far above the average.
    let max = (0..m.rows()).map(|r| row_len(&m, r)).max().unwrap();
    assert!(max > 20 * m.nnz() / m.rows(), "max row {max}");
    // Uniform probabilities give a flat degree distribution.
    let flat = generate::rmat(12, 8, (0.25, 0.25, 0.25, 0.25), 11).unwrap();
    let max = (0..flat.rows()).map(|r| row_len(&flat, r)).max().unwrap();
    assert!(max < 30, "max row {max}");
}

#[test]
fn generators_are_deterministic_and_seed_sensitive() {
    type Gen = fn(u64) -> Csr;
    let gens: [(&str, Gen); 4] = [
        ("uniform", |s| {
            generate::uniform_random(3000, 2000, 4.0, s).unwrap()
        }),
        ("banded", |s| generate::banded(3000, 4, 0.6, s).unwrap()),
        ("clustered", |s| {
            generate::clustered_block_diagonal(3000, 32, 0.3, 1.5, s).unwrap()
        }),
        ("rmat", |s| {
            generate::rmat(11, 6, (0.57, 0.19, 0.19, 0.05), s).unwrap()
        }),
    ];
    for (name, g) in gens {
        assert_eq!(g(7), g(7), "{name}: same seed, same matrix");
        let (a, b) = (g(7), g(8));
        assert!(
            a.indices() != b.indices() || a.data() != b.data(),
            "{name}: seeds differ"
        );
    }
}

#[test]
fn output_does_not_depend_on_the_thread_count() {
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let build = || {
        (
            generate::uniform_random(5000, 5000, 3.0, 1).unwrap(),
            generate::rmat(12, 4, (0.57, 0.19, 0.19, 0.05), 1).unwrap(),
            generate::clustered_block_diagonal(5000, 40, 0.2, 1.0, 1).unwrap(),
        )
    };
    assert_eq!(one.install(build), build());
}

#[test]
fn dense_decay_matrices() {
    let n = 37;
    let a = generate::algebraic_decay_dense(n);
    assert_eq!(a.len(), n * n);
    assert_eq!(a[0], 0.1); // 0.1 / (0^0.1 + 1) on the diagonal
    for i in 0..n {
        for j in 0..n {
            let d = i.abs_diff(j) as f64;
            assert_eq!(a[i * n + j], (0.1 / (d.powf(0.1) + 1.0)) as f32);
            assert_eq!(a[i * n + j], a[j * n + i]);
        }
    }
    let e = generate::exponential_decay_dense(n, 0.5);
    assert_eq!(e[0], 1.0);
    assert_eq!(e[3], (-1.5f64).exp() as f32);
    assert!(
        e[n - 1] < 1e-7 && a[n - 1] > 0.03,
        "exponential decays much faster"
    );
    assert!(generate::algebraic_decay_dense(0).is_empty());
}

#[test]
fn bad_parameters_are_errors() {
    assert!(matches!(
        generate::banded(10, 2, 0.0, 0),
        Err(GenError::Invalid { name: "fill", .. })
    ));
    assert!(matches!(
        generate::banded(10, 2, 1.5, 0),
        Err(GenError::Invalid { name: "fill", .. })
    ));
    assert!(matches!(
        generate::uniform_random(10, 10, -1.0, 0),
        Err(GenError::Invalid { .. })
    ));
    assert!(matches!(
        generate::uniform_random(10, 0, 1.0, 0),
        Err(GenError::Invalid { .. })
    ));
    assert!(matches!(
        generate::rmat(32, 1, (0.57, 0.19, 0.19, 0.05), 0),
        Err(GenError::Invalid { .. })
    ));
    assert!(matches!(
        generate::rmat(4, 1, (0.0, 0.0, 0.0, 0.0), 0),
        Err(GenError::Invalid { .. })
    ));
    assert!(matches!(
        generate::rmat(31, 4, (0.57, 0.19, 0.19, 0.05), 0),
        Err(GenError::TooLarge(_))
    ));
    assert!(matches!(
        generate::clustered_block_diagonal(10, 0, 0.5, 1.0, 0),
        Err(GenError::Invalid {
            name: "block_size",
            ..
        })
    ));
    assert!(matches!(
        GeneratorSpec::Algebraic { n: 70_000 }.build(),
        Err(GenError::TooLarge(_))
    ));
}

#[test]
fn spec_strings_parse_with_defaults_and_aliases() {
    let s: GeneratorSpec = "rmat:scale=16,ef=11,seed=1".parse().unwrap();
    assert_eq!(
        s,
        GeneratorSpec::Rmat {
            scale: 16,
            edge_factor: 11,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            d: 0.05,
            seed: 1
        }
    );
    let s: GeneratorSpec = "uniform:n=100".parse().unwrap();
    assert_eq!(
        s,
        GeneratorSpec::Uniform {
            rows: 100,
            cols: 100,
            nnz_per_row: 16.0,
            seed: 0
        }
    );
    let s: GeneratorSpec = "banded: n=50, half_bandwidth=3, fill=0.5".parse().unwrap();
    assert_eq!(
        s,
        GeneratorSpec::Banded {
            n: 50,
            half_bandwidth: 3,
            fill: 0.5,
            seed: 0
        }
    );
    let s: GeneratorSpec = "clustered:n=64,bs=8".parse().unwrap();
    assert_eq!(s.clone().with_seed(9).seed(), Some(9));
    assert_eq!(
        "exponential:n=4".parse::<GeneratorSpec>().unwrap(),
        GeneratorSpec::Exponential { n: 4, rate: 0.5 }
    );
    for bad in [
        "",
        "rmat",
        "rmat:scale=x",
        "rmat:scale=3,bogus=1",
        "nope:n=3",
        "banded:n=3,n=4",
        "uniform:rows",
    ] {
        assert!(
            matches!(bad.parse::<GeneratorSpec>(), Err(GenError::Spec { .. })),
            "`{bad}` is rejected"
        );
    }
}

#[test]
fn spec_build_matches_the_functions_and_serde_round_trips() {
    let s: GeneratorSpec = "clustered:n=300,bs=20,density=0.4,inter=0.5,seed=3"
        .parse()
        .unwrap();
    assert_eq!(
        s.build().unwrap(),
        generate::clustered_block_diagonal(300, 20, 0.4, 0.5, 3).unwrap()
    );
    let m = "algebraic:n=6"
        .parse::<GeneratorSpec>()
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(m.nnz(), 36);
    assert_eq!(m.data(), generate::algebraic_decay_dense(6).as_slice());
    // serde: a bincode round trip (the format of the on-disk cache).
    let bytes = bincode::serde::encode_to_vec(&s, bincode::config::standard()).unwrap();
    let (back, _): (GeneratorSpec, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
    assert_eq!(back, s);
}

fn arb_spec() -> impl Strategy<Value = GeneratorSpec> {
    prop_oneof![
        (1usize..300, 1usize..300, 0.0f64..8.0, any::<u64>()).prop_map(
            |(rows, cols, nnz_per_row, seed)| GeneratorSpec::Uniform {
                rows,
                cols,
                nnz_per_row,
                seed
            }
        ),
        (0usize..300, 0usize..20, 0.01f64..=1.0, any::<u64>()).prop_map(
            |(n, half_bandwidth, fill, seed)| GeneratorSpec::Banded {
                n,
                half_bandwidth,
                fill,
                seed
            }
        ),
        (0u32..9, 1u32..8, 0.01f64..1.0, 0.01f64..1.0, any::<u64>()).prop_map(
            |(scale, edge_factor, a, b, seed)| {
                GeneratorSpec::Rmat {
                    scale,
                    edge_factor,
                    a,
                    b,
                    c: 0.2,
                    d: 0.1,
                    seed,
                }
            }
        ),
        (
            0usize..300,
            1usize..40,
            0.01f64..=1.0,
            0.0f64..4.0,
            any::<u64>()
        )
            // At most n entries per row exist off the blocks (larger values are refused, see
            // the generator's parameter checks).
            .prop_map(|(n, block_size, intra_density, inter_nnz_per_row, seed)| {
                GeneratorSpec::Clustered {
                    n,
                    block_size,
                    intra_density,
                    inter_nnz_per_row: inter_nnz_per_row.min(n as f64),
                    seed,
                }
            }),
        (0usize..20).prop_map(|n| GeneratorSpec::Algebraic { n }),
        (0usize..20, 0.0f64..3.0).prop_map(|(n, rate)| GeneratorSpec::Exponential { n, rate }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Display → FromStr is the identity, and every spec builds a valid, deterministic matrix.
    #[test]
    fn specs_round_trip_and_build_valid_matrices(spec in arb_spec()) {
        let text = spec.to_string();
        prop_assert_eq!(&text.parse::<GeneratorSpec>().unwrap(), &spec);
        let m = spec.build().unwrap();
        check_csr(&m);
        prop_assert_eq!(&m, &spec.build().unwrap());
        if let GeneratorSpec::Uniform { rows, cols, nnz_per_row, .. } = spec {
            prop_assert_eq!(m.shape(), (rows, cols));
            let target = (rows as f64 * nnz_per_row).round() as usize;
            prop_assert!(m.nnz() <= target);
            if cols >= 64 && nnz_per_row * 8.0 <= cols as f64 {
                // Clipping at `cols` is vanishingly unlikely this far below it.
                prop_assert_eq!(m.nnz(), target);
            }
        }
    }
}
