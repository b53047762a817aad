//! Baselines: [`Identity`], [`DegreeSort`] and reverse Cuthill–McKee ([`Rcm`]).

use crate::{Mode, Permutation, Reorder, ReorderError, check_mode, graph_for};
use tcsparse_formats::Csr;

/// Keeps the input order.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl Reorder for Identity {
    fn name(&self) -> &'static str {
        "none"
    }

    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError> {
        check_mode(a, mode)?;
        Ok(Permutation::identity(a.rows()))
    }
}

/// Rows by descending number of stored entries; equal rows keep their input order (stable).
#[derive(Clone, Copy, Debug, Default)]
pub struct DegreeSort;

impl Reorder for DegreeSort {
    fn name(&self) -> &'static str {
        "degree"
    }

    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError> {
        check_mode(a, mode)?;
        let ip = a.row_offsets();
        let mut p: Vec<u32> = (0..a.rows() as u32).collect();
        p.sort_by_key(|&r| std::cmp::Reverse(ip[r as usize + 1] - ip[r as usize]));
        Permutation::new(p)
    }
}

/// Reverse Cuthill–McKee on the symmetrized pattern (square) or the bipartite row/column graph
/// (rectangular, rows kept in their BFS order). Each component starts from its lowest-degree
/// vertex (no pseudo-peripheral search); neighbours are queued by ascending degree, ties by index.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rcm;

impl Reorder for Rcm {
    fn name(&self) -> &'static str {
        "rcm"
    }

    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError> {
        let g = graph_for(a, mode)?;
        let n = g.n();
        let mut starts: Vec<u32> = (0..n as u32).collect();
        starts.sort_unstable_by_key(|&v| (g.degree(v as usize), v));
        let mut visited = vec![false; n];
        let mut order: Vec<u32> = Vec::with_capacity(n);
        let mut buf: Vec<u32> = Vec::new();
        for &s in &starts {
            if visited[s as usize] {
                continue;
            }
            visited[s as usize] = true;
            let mut head = order.len();
            order.push(s);
            while head < order.len() {
                let v = order[head] as usize;
                head += 1;
                buf.clear();
                buf.extend(
                    g.neighbors(v)
                        .iter()
                        .copied()
                        .filter(|&u| !visited[u as usize]),
                );
                buf.sort_unstable_by_key(|&u| (g.degree(u as usize), u));
                for &u in &buf {
                    visited[u as usize] = true;
                }
                order.extend_from_slice(&buf);
            }
        }
        let rows = a.rows() as u32;
        Permutation::new(order.into_iter().rev().filter(|&v| v < rows).collect())
    }
}
