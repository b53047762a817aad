//! The decay-matrix generators under the memory budget: a size too large is a typed error before
//! anything is allocated (never an abort or a `capacity overflow` panic), and the values are the
//! formula's, built in parallel.

use std::str::FromStr;

use tcsparse_formats::Limits;
use tcsparse_formats::generate::{
    GenError, GeneratorSpec, algebraic_decay_dense, exponential_decay_dense,
    try_algebraic_decay_dense, try_exponential_decay_dense,
};

#[test]
fn decay_matrices_over_the_budget_are_typed_errors() {
    let gib = Limits::new(1 << 30);
    // algebraic:n=65536 is 16 GiB of f32.
    let e = try_algebraic_decay_dense(65_536, &gib).unwrap_err();
    assert!(
        matches!(e, GenError::Budget(ref b) if b.needed == 16 << 30 && b.budget == 1 << 30),
        "{e}"
    );
    assert!(e.to_string().contains("65536 × 65536"), "{e}");
    let e = try_exponential_decay_dense(100_000, 0.5, &gib).unwrap_err();
    assert!(matches!(e, GenError::Budget(_)), "{e}");
    // n² (or 4·n²) beyond usize: too large, never an overflow.
    for n in [usize::MAX, 1 << 32, (1usize << 31) + 1] {
        let e = try_algebraic_decay_dense(n, &Limits::unlimited()).unwrap_err();
        assert!(
            matches!(e, GenError::TooLarge(_) | GenError::Budget(_)),
            "{n}: {e}"
        );
    }
    // The spec path: the same refusal.
    let spec = GeneratorSpec::from_str("algebraic:n=65536").unwrap();
    assert!(matches!(spec.build_dense(&gib), Err(GenError::Budget(_))));
    let spec = GeneratorSpec::from_str("exponential:n=4,rate=nan").unwrap();
    assert!(matches!(
        spec.build_dense(&gib),
        Err(GenError::Invalid { name: "rate", .. })
    ));
    let spec = GeneratorSpec::from_str("rmat:scale=4").unwrap();
    assert!(matches!(
        spec.build_dense(&gib),
        Err(GenError::Invalid {
            name: "generator",
            ..
        })
    ));
}

#[test]
fn decay_matrices_hold_the_formula_on_any_thread_count() {
    for n in [0usize, 1, 2, 7, 130] {
        let alg = |i: usize, j: usize| (0.1 / ((i.abs_diff(j) as f64).powf(0.1) + 1.0)) as f32;
        let exp = |i: usize, j: usize| (-0.3 * i.abs_diff(j) as f64).exp() as f32;
        let pool = |t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
        };
        for threads in [1, 3] {
            let (a, e) = pool(threads).install(|| {
                (
                    try_algebraic_decay_dense(n, &Limits::new(1 << 30)).unwrap(),
                    try_exponential_decay_dense(n, 0.3, &Limits::new(1 << 30)).unwrap(),
                )
            });
            assert_eq!(a.len(), n * n);
            for i in 0..n {
                for j in 0..n {
                    assert_eq!(
                        a[i * n + j].to_bits(),
                        alg(i, j).to_bits(),
                        "{n}: ({i}, {j})"
                    );
                    assert_eq!(
                        e[i * n + j].to_bits(),
                        exp(i, j).to_bits(),
                        "{n}: ({i}, {j})"
                    );
                }
            }
            assert_eq!(a, algebraic_decay_dense(n));
            assert_eq!(e, exponential_decay_dense(n, 0.3));
        }
        let spec = GeneratorSpec::from_str(&format!("exponential:n={n},rate=0.3")).unwrap();
        let (d, m) = spec.build_dense(&Limits::new(1 << 30)).unwrap();
        assert_eq!((d.len(), m), (n * n, n));
    }
}
