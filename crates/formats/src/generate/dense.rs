//! Dense decay matrices (cuSpAMM's test matrices), as dense arrays or as CSR with every entry
//! stored.

use super::*;

/// Dense `n × n` row-major matrix with algebraic decay (cuSpAMM's test matrix):
/// `a_ij = 0.1 / (|i − j|^0.1 + 1)`. It decays slowly; see [`exponential_decay_dense`].
///
/// # Panics
/// When `n²` floats do not fit the address space (an allocation abort when they do not fit
/// memory). For a size a user gives, call [`try_algebraic_decay_dense`], which checks the
/// memory budget first.
pub fn algebraic_decay_dense(n: usize) -> Vec<f32> {
    match try_algebraic_decay_dense(n, &Limits::unlimited()) {
        Ok(v) => v,
        Err(e) => panic!("algebraic_decay_dense({n}): {e}"),
    }
}

/// Dense `n × n` row-major matrix with exponential decay: `a_ij = exp(−rate · |i − j|)` (1 on the
/// diagonal). A `rate` of 0.5 makes entries 8 off the diagonal about 0.018.
///
/// # Panics
/// As [`algebraic_decay_dense`]; for a size a user gives, call [`try_exponential_decay_dense`].
pub fn exponential_decay_dense(n: usize, rate: f64) -> Vec<f32> {
    match dense(n, &Limits::unlimited(), |d| (-rate * d as f64).exp()) {
        Ok(v) => v,
        Err(e) => panic!("exponential_decay_dense({n}, {rate}): {e}"),
    }
}

/// [`algebraic_decay_dense`] with its `4·n²` bytes checked against `limits` (and the address
/// space) before anything is allocated: a size too large is a [`GenError::Budget`], never an abort
/// or a `capacity overflow` panic.
pub fn try_algebraic_decay_dense(n: usize, limits: &Limits) -> Result<Vec<f32>, GenError> {
    dense(n, limits, |d| 0.1 / ((d as f64).powf(0.1) + 1.0))
}

/// [`exponential_decay_dense`] with its `4·n²` bytes checked against `limits` first, and `rate`
/// checked (finite, ≥ 0).
pub fn try_exponential_decay_dense(
    n: usize,
    rate: f64,
    limits: &Limits,
) -> Result<Vec<f32>, GenError> {
    check_rate(rate)?;
    dense(n, limits, |d| (-rate * d as f64).exp())
}

pub(super) fn check_rate(rate: f64) -> Result<(), GenError> {
    if !(rate.is_finite() && rate >= 0.0) {
        return Err(invalid(
            "rate",
            format!("must be finite and >= 0, got {rate}"),
        ));
    }
    Ok(())
}

/// `a_ij = f(|i − j|)` as a dense row-major `n × n` matrix, budget checked first. `f` is evaluated
/// once per distance (n times); the rows are then copied from that table in parallel, so the
/// work is a memory write of the matrix.
pub(super) fn dense(
    n: usize,
    limits: &Limits,
    f: impl Fn(usize) -> f64 + Sync,
) -> Result<Vec<f32>, GenError> {
    // 4·n² bytes, saturating: a size past the address space is over any budget (the check also
    // caps an allocation at isize::MAX bytes), so n * n below cannot overflow.
    let need = crate::limits::bytes_of(crate::limits::bytes_of(n as u64, n as u64), 4);
    limits.check(|| format!("a dense {n} × {n} matrix (f32)"), need)?;
    let len = n * n;
    let table: Vec<f32> = (0..n).into_par_iter().map(|d| f(d) as f32).collect();
    let mut out = vec![0f32; len];
    if n == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
        // row[j] = table[|i − j|]: table[i], …, table[1] before the diagonal, table[0..] after.
        for (v, &t) in row[..i].iter_mut().zip(table[1..=i].iter().rev()) {
            *v = t;
        }
        row[i..].copy_from_slice(&table[..n - i]);
    });
    Ok(out)
}

/// Checks that a dense `n × n` matrix stored as CSR fits u32 indices (before allocating it).
pub(super) fn check_dense(n: usize) -> Result<(), GenError> {
    let nnz = (n as u64).checked_mul(n as u64);
    match nnz {
        Some(nnz) if nnz <= u32::MAX as u64 => {}
        _ => return Err(GenError::TooLarge(format!("nnz = {n}²"))),
    }
    // The dense values, their CSR copy and the column indices.
    check_output(n, (n as f64) * (n as f64) * 1.5)?;
    Ok(())
}

/// Converts a dense row-major `n × n` matrix to CSR keeping every entry (zeros included).
pub(super) fn dense_to_csr(n: usize, values: Vec<f32>) -> Result<Csr, GenError> {
    check_dense(n)?;
    let indptr = (0..=n).map(|i| (i * n) as u32).collect();
    let mut indices = vec![0u32; n * n];
    if n > 0 {
        indices.par_chunks_mut(n).for_each(|row| {
            for (j, x) in row.iter_mut().enumerate() {
                *x = j as u32;
            }
        });
    }
    csr_from_parts(n, n, indptr, indices, values).map_err(|e| GenError::TooLarge(e.to_string()))
}
