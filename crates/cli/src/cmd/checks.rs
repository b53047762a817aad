//! Checks shared by the subcommands that multiply: the dense operands `--n` asks for against the
//! memory budget (before anything is allocated), and a note when the matrix holds NaN or ±inf.

use crate::out::outln;
use tcsparse::formats::Csr;

/// Checks, before anything is allocated, that the dense operands of an `a · (cols × n)` product
/// and its f64 check fit the memory budget: B and C (4 bytes an element), C again on the device
/// path, the reference and its |A|·|B| scale (8 bytes each), all with checked arithmetic.
pub fn check_n(a: &Csr, n: usize) -> anyhow::Result<()> {
    use tcsparse::formats::Limits;
    let elems = |rows: usize| (rows as u64).checked_mul(n as u64);
    let need = elems(a.cols())
        .and_then(|b| b.checked_mul(4))
        .zip(elems(a.rows()).and_then(|c| c.checked_mul(4 + 4 + 8 + 8)))
        .and_then(|(b, c)| b.checked_add(c))
        .unwrap_or(u64::MAX);
    Limits::global().check(
        || {
            format!(
                "--n {n}: B ({} × {n}), C ({} × {n}) and the f64 check",
                a.cols(),
                a.rows()
            )
        },
        need,
    )?;
    Ok(())
}

/// Checks, before anything is allocated, that `spamm`'s dense operands fit the memory budget: the
/// generated `n × n` matrix (A and B at once) when `generated` is `Some(n)`, and C (`m × n`), 4 bytes
/// an element, with checked arithmetic (a size whose square overflows is refused, not a panic).
/// Operands read from files were checked by their size when read.
pub fn check_dense(what: &str, generated: Option<usize>, m: usize, n: usize) -> anyhow::Result<()> {
    use tcsparse::formats::Limits;
    let elems = |r: usize, c: usize| (r as u64).checked_mul(c as u64);
    let gen_elems = generated.map_or(Some(0), |g| elems(g, g));
    let need = gen_elems
        .zip(elems(m, n))
        .and_then(|(g, c)| g.checked_add(c)?.checked_mul(4))
        .unwrap_or(u64::MAX);
    Limits::global().check(
        || match generated {
            Some(g) => format!("{what}: A = B ({g} × {g}) and C ({m} × {n})"),
            None => format!("{what}: C ({m} × {n})"),
        },
        need,
    )?;
    Ok(())
}

/// Says how many stored values are NaN or ±inf (accepted, as scipy accepts them, but every row of
/// the `output` (C, y) that touches one is non-finite, and so is the relative error). The same
/// policy for every product: a note, the product, exit status 0.
pub fn note_non_finite(a: &Csr, output: &str) -> anyhow::Result<()> {
    let k = a.non_finite();
    if k > 0 {
        outln!(
            "note      {k} stored values are NaN or ±inf: the rows of {output} that use them are not finite, nor is the error below"
        )?;
    }
    Ok(())
}
