//! TC-GNN's TCF (ATC'23), kept only as far as the Acc-SpMM Fig. 12 compression ratios need it
//! ([`tcf_bytes`]).
//!
//! TCF stores CSR plus, per nonzero, its row (`edgeToRow`) and its compacted column inside its
//! 16-row window (`edgeToColumn`), plus the number of 16×8 blocks per window (`blockPartition`).
//! All entries are 4 bytes, so `bytes = 4·(M+1) + 4·nnz·4 + 4·⌈M/16⌉` (nodePointer, edgeList,
//! values, edgeToColumn, edgeToRow, blockPartition).

use crate::Csr;
/// The layout error and padding column, at the path they have always had.
pub use crate::layout::{FormatError, SENTINEL};

/// Rows per TC-GNN window.
pub const TCF_WINDOW_ROWS: usize = 16;

/// Bytes TC-GNN's TCF needs for `csr` (see the module docs for the formula).
pub fn tcf_bytes(csr: &Csr) -> usize {
    let windows = csr.rows().div_ceil(TCF_WINDOW_ROWS);
    4 * (csr.rows() + 1) + 16 * csr.nnz() + 4 * windows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::csr_from_triplets;

    #[test]
    fn tcf_bytes_formula() {
        let a = csr_from_triplets(17, 5, &[(0, 0, 1.0), (16, 4, 2.0)]).unwrap();
        assert_eq!(tcf_bytes(&a), 4 * 18 + 16 * 2 + 4 * 2);
    }
}
