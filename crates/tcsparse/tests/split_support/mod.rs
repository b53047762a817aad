//! Operands the split and distributed GPU tests share.

use tcsparse::formats::Csr;

/// `rows × cols` with hub rows at the start (so a row split by count would be unbalanced), empty
/// rows and banded rows; the same on every call (and so on every rank).
pub fn hub_matrix(rows: usize, cols: usize) -> Csr {
    let mut t = Vec::new();
    for r in 0..rows {
        if r < 8 {
            for c in (0..cols).step_by(2) {
                t.push((r as u32, c as u32, 0.01 * (c % 7) as f32 - 0.02));
            }
        } else if r % 97 != 0 {
            for k in 0..(r % 9 + 1) {
                t.push((
                    r as u32,
                    ((r * 3 / 4 + k * 5) % cols) as u32,
                    0.25 - 0.05 * k as f32,
                ));
            }
        }
    }
    tcsparse::formats::csr::csr_from_triplets(rows, cols, &t).unwrap()
}

/// A deterministic dense `k × n` operand in [-1, 1).
pub fn b_matrix(k: usize, n: usize) -> Vec<f32> {
    (0..k * n)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}
