//! Value parsers shared by every subcommand, so one option means one thing and one range
//! everywhere, and a bad number is refused by clap (exit 2, with the option's name and the
//! expected range) before any file is read or any work is done.

use std::ops::RangeInclusive;

/// `--iters` when not given, for every subcommand that times something.
pub const DEFAULT_ITERS: usize = 20;
/// The largest `--iters`: more samples than this only make the run longer, not the median better.
pub const MAX_ITERS: usize = 10_000;
/// Right-hand sides an SpMV takes (`spmv --n`).
pub const SPMV_N: RangeInclusive<usize> = 1..=8;
/// The largest `spamm --s` (strided balance; beyond the number of tiles it changes nothing).
pub const MAX_STRIDE: usize = 1024;

fn int_in(s: &str, range: RangeInclusive<usize>, what: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(v) if range.contains(&v) => Ok(v),
        _ if *range.end() == usize::MAX => Err(format!(
            "expected {what}, at least {}, got `{s}`",
            range.start()
        )),
        _ => Err(format!(
            "expected {what} from {} to {}, got `{s}`",
            range.start(),
            range.end()
        )),
    }
}

/// `--iters`: 1 to [`MAX_ITERS`] (the cap).
pub fn iters(s: &str) -> Result<usize, String> {
    int_in(s, 1..=MAX_ITERS, "a number of timed samples (capped)")
        .map_err(|e| format!("{e}; more samples do not make the median better"))
}

/// `--n` of SpMM and plan: the dense width, at least 1 (what it costs in memory is checked
/// against the memory budget once the matrix's shape is known).
pub fn dense_width(s: &str) -> Result<usize, String> {
    int_in(s, 1..=usize::MAX, "a number of columns")
}

/// `--n` of SpMV: right-hand sides, [`SPMV_N`].
pub fn spmv_width(s: &str) -> Result<usize, String> {
    int_in(s, SPMV_N, "a number of right-hand sides")
}

/// `spamm --gpus`: 1 to 64 (the most a `DeviceSet` holds).
pub fn gpu_count(s: &str) -> Result<usize, String> {
    int_in(s, 1..=64, "a number of GPUs")
}

/// `spamm --s`: 1 to [`MAX_STRIDE`].
pub fn stride(s: &str) -> Result<usize, String> {
    int_in(s, 1..=MAX_STRIDE, "a stride")
}

fn finite_f64(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("expected a finite number, got `{s}`")),
    }
}

/// `--tau`: a finite τ ≥ 0 that f32 holds (0 computes every tile product).
pub fn tau(s: &str) -> Result<f32, String> {
    let v = finite_f64(s).map_err(|_| format!("expected a finite τ ≥ 0, got `{s}`"))?;
    if v < 0.0 || v > f64::from(f32::MAX) {
        return Err(format!(
            "expected τ from 0 to {:e} (f32), got `{s}`",
            f32::MAX
        ));
    }
    Ok(v as f32)
}

/// `--valid-ratio`: a share in (0, 1].
pub fn ratio(s: &str) -> Result<f64, String> {
    let v = finite_f64(s)?;
    if v <= 0.0 || v > 1.0 {
        return Err(format!("expected a share in (0, 1], got `{s}`"));
    }
    Ok(v)
}

/// `--target-error`: a relative error in (0, 1].
pub fn rel_error(s: &str) -> Result<f64, String> {
    let v = finite_f64(s)?;
    if v <= 0.0 || v > 1.0 {
        return Err(format!("expected a relative error in (0, 1], got `{s}`"));
    }
    Ok(v)
}

/// `--reorder`: `auto`, `none` or a method of `tcsparse_reorder::METHODS`.
pub fn reorder(s: &str) -> Result<String, String> {
    use tcsparse::reorder::METHODS;
    if s == "auto" || METHODS.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "expected auto or a method ({}), got `{s}`",
            METHODS.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_range_parse_and_the_rest_say_the_range() {
        assert_eq!(iters("1"), Ok(1));
        assert_eq!(iters("10000"), Ok(10_000));
        for bad in ["0", "10001", "100000000", "-1", "1.5", "", "NaN"] {
            let e = iters(bad).unwrap_err();
            assert!(e.contains("from 1 to 10000") && e.contains(bad), "{e}");
        }
        assert_eq!(dense_width("128"), Ok(128));
        assert!(dense_width("0").unwrap_err().contains("at least 1"));
        assert_eq!(spmv_width("8"), Ok(8));
        assert!(spmv_width("9").unwrap_err().contains("from 1 to 8"));
        assert_eq!(stride("4"), Ok(4));
        assert!(stride("0").is_err() && stride("1025").is_err());
    }

    #[test]
    fn non_finite_and_out_of_range_reals_are_refused() {
        assert_eq!(tau("0"), Ok(0.0));
        assert_eq!(tau("1e-3"), Ok(1e-3));
        for bad in ["NaN", "nan", "inf", "-inf", "-1", "1e39", "x"] {
            assert!(tau(bad).is_err(), "{bad}");
        }
        assert_eq!(ratio("1"), Ok(1.0));
        for bad in ["0", "1.5", "NaN", "inf", "-0.5"] {
            assert!(ratio(bad).is_err(), "{bad}");
        }
        assert_eq!(rel_error("1e-5"), Ok(1e-5));
        for bad in ["0", "NaN", "inf", "-1e-5", "2"] {
            assert!(rel_error(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Whatever the text, a parser returns a value in its range or an error naming the text.
        #[test]
        fn any_text_parses_into_range_or_is_refused(s in "\\PC{0,24}") {
            let quoted = format!("`{s}`");
            for r in [iters(&s), dense_width(&s), spmv_width(&s), stride(&s), gpu_count(&s)] {
                match r {
                    Ok(v) => proptest::prop_assert!(v >= 1),
                    Err(e) => proptest::prop_assert!(e.contains(&quoted), "{}", e),
                }
            }
            if let Ok(v) = iters(&s) { proptest::prop_assert!(v <= MAX_ITERS); }
            if let Ok(v) = spmv_width(&s) { proptest::prop_assert!(SPMV_N.contains(&v)); }
            if let Ok(t) = tau(&s) { proptest::prop_assert!(t.is_finite() && t >= 0.0); }
            for x in [ratio(&s), rel_error(&s)].into_iter().flatten() {
                proptest::prop_assert!(x > 0.0 && x <= 1.0);
            }
        }

        /// Every f64 printed as text: τ is accepted exactly when finite, ≥ 0 and within f32.
        #[test]
        fn tau_accepts_exactly_the_finite_non_negative_f32_range(x in proptest::num::f64::ANY) {
            let ok = x.is_finite() && x >= 0.0 && x <= f64::from(f32::MAX);
            proptest::prop_assert_eq!(tau(&x.to_string()).is_ok(), ok, "{}", x);
        }
    }

    #[test]
    fn reorder_names_are_checked() {
        for ok in ["auto", "none", "affinity", "rcm"] {
            assert_eq!(reorder(ok).as_deref(), Ok(ok));
        }
        let e = reorder("foo").unwrap_err();
        assert!(e.contains("affinity") && e.contains("`foo`"), "{e}");
    }
}
