//! What measuring one product gives: its time and its error against the f64 reference (the
//! text and JSON reports both read it).

use tcsparse::formats::reference::CheckedRows;

/// Error of a product against the f64 reference: (max scaled error, relative Frobenius error)
/// over the rows checked.
pub struct ErrorReport {
    /// max |C − C_ref| / (|A|·|B|) element-wise; TF32 bound ≈ 2·2⁻¹⁰.
    pub max_scaled: f64,
    /// ‖C − C_ref‖ / ‖C_ref‖.
    pub relative: f64,
    /// The rows of C compared ([`CHECK_MADDS`]).
    pub checked: CheckedRows,
}

impl ErrorReport {
    /// What the check compared, for a report line: empty where it compared every row, else
    /// ` on R of M rows (one in k, and the longest)`.
    pub fn sample_text(&self) -> String {
        let c = &self.checked;
        if c.is_all() {
            return String::new();
        }
        format!(
            " on {} of {} rows (one in {}{})",
            c.count(),
            c.rows,
            c.stride,
            if c.extra.is_some() {
                ", and the longest"
            } else {
                ", the longest among them"
            }
        )
    }
}

/// Multiply-adds (nonzeros × N) up to which the f64 check of a product compares every row of C;
/// beyond, evenly spaced rows and the longest one within about as many (R-MAT scale 20 at
/// N = 128, 1.4·10⁹ of them: every row took 0.34 s on the H200 host's 16 cores, a third of the
/// whole command; 2026-11-28, 198f393).
pub const CHECK_MADDS: usize = 1 << 27;

/// Result of timing one prepared product.
pub struct Measured {
    /// Median milliseconds per product.
    pub ms: f64,
    /// 2·nnz·N / time.
    pub gflops: f64,
    /// Error of the host-API product.
    pub error: ErrorReport,
    /// Whether the time is of the device hot path (`spmm_device`) or the host call.
    pub device_time: bool,
    /// Milliseconds of the first product: the host call that also checks the error (B in, C
    /// out, and on the GPU whatever the first launch costs); `None` where it was not timed.
    pub first_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_check_says_which_rows_it_compared() {
        let report = |checked| ErrorReport {
            max_scaled: 0.0,
            relative: 0.0,
            checked,
        };
        assert_eq!(report(CheckedRows::all(10)).sample_text(), "");
        let sampled = CheckedRows {
            rows: 10,
            stride: 3,
            extra: Some(7),
        };
        assert_eq!(
            report(sampled).sample_text(),
            " on 5 of 10 rows (one in 3, and the longest)"
        );
        let on_stride = CheckedRows {
            extra: None,
            ..sampled
        };
        assert_eq!(
            report(on_stride).sample_text(),
            " on 4 of 10 rows (one in 3, the longest among them)"
        );
    }
}
