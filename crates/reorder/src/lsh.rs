//! DTC-SpMM-style LSH reordering: MinHash row signatures, banded LSH buckets, greedy Jaccard
//! clustering into fixed-size row groups, then the same again on the groups (clusters of clusters).

use crate::{Mode, Permutation, Reorder, ReorderError, check_mode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use tcsparse_formats::Csr;

/// LSH reordering.
///
/// Every non-empty row gets a MinHash signature of its column set (`bands · rows_per_band` hashes
/// `h(c) = (a·(c+1) + b) >> 32` with seeded random odd `a`). For each band the rows are sorted by
/// a 64-bit key of their band (ties by row index); rows with an equal band that lie within `window` positions of
/// each other are candidates (so a huge bucket costs `O(window)` per row, not its size). Rows are
/// then taken in input order as seeds; a seed's group is itself plus its `group − 1` unassigned
/// candidates of highest estimated Jaccard similarity (fraction of equal signature entries). The
/// groups are clustered again the same way, with the element-wise minimum of their members'
/// signatures (= MinHash of the union), into groups of `group` groups. Empty rows go last.
#[derive(Clone, Copy, Debug)]
pub struct Lsh {
    /// Seed of the hash functions.
    pub seed: u64,
    /// Number of LSH bands.
    pub bands: usize,
    /// Signature entries per band.
    pub rows_per_band: usize,
    /// Rows per group (and groups per super-group).
    pub group: usize,
    /// Neighbours on each side within a sorted band that count as candidates.
    pub window: usize,
}

impl Default for Lsh {
    fn default() -> Self {
        Self {
            seed: 0x7c5_0e5d,
            bands: 8,
            rows_per_band: 2,
            group: 16,
            window: 3,
        }
    }
}

impl Reorder for Lsh {
    fn name(&self) -> &'static str {
        "lsh"
    }

    fn permutation(&self, a: &Csr, mode: Mode) -> Result<Permutation, ReorderError> {
        check_mode(a, mode)?;
        let bands = self.bands.max(1);
        let rpb = self.rows_per_band.max(1);
        let h = bands * rpb;
        let group = self.group.max(1);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let coef: Vec<(u64, u64)> = (0..h)
            .map(|_| (rng.random::<u64>() | 1, rng.random::<u64>()))
            .collect();
        let ip = a.row_offsets();
        let nonempty: Vec<u32> = (0..a.rows() as u32)
            .filter(|&r| ip[r as usize + 1] > ip[r as usize])
            .collect();
        let mut sig = vec![u32::MAX; nonempty.len() * h];
        sig.par_chunks_mut(h)
            .zip(nonempty.par_iter())
            .for_each(|(s, &r)| {
                for &c in &a.indices()[ip[r as usize] as usize..ip[r as usize + 1] as usize] {
                    let x = c as u64 + 1;
                    for (sj, &(ca, cb)) in s.iter_mut().zip(&coef) {
                        let v = (ca.wrapping_mul(x).wrapping_add(cb) >> 32) as u32;
                        *sj = (*sj).min(v);
                    }
                }
            });
        let params = Params {
            h,
            bands,
            rpb,
            group,
            window: self.window.max(1),
        };
        // Level 1: rows into groups; level 2: groups into super-groups.
        let groups = cluster(&sig, nonempty.len(), &params);
        let mut gsig = vec![u32::MAX; groups.len() * h];
        gsig.par_chunks_mut(h)
            .zip(groups.par_iter())
            .for_each(|(s, members)| {
                for &i in members {
                    for (sj, &v) in s.iter_mut().zip(&sig[i as usize * h..(i as usize + 1) * h]) {
                        *sj = (*sj).min(v);
                    }
                }
            });
        let supers = cluster(&gsig, groups.len(), &params);
        let mut out = Vec::with_capacity(a.rows());
        for sg in &supers {
            for &g in sg {
                out.extend(groups[g as usize].iter().map(|&i| nonempty[i as usize]));
            }
        }
        out.extend((0..a.rows() as u32).filter(|&r| ip[r as usize + 1] == ip[r as usize]));
        Permutation::new(out)
    }
}

/// One band: `(key, item)` sorted, and each item's position in it.
type BandIndex = (Vec<(u64, u32)>, Vec<u32>);

struct Params {
    h: usize,
    bands: usize,
    rpb: usize,
    group: usize,
    window: usize,
}

/// Greedy grouping of `n` items with signatures `sig` (`n × h`); groups in formation order.
fn cluster(sig: &[u32], n: usize, p: &Params) -> Vec<Vec<u32>> {
    let h = p.h;
    // Per band: (band key, item) sorted, and each item's position there. The key packs the band's
    // first two entries exactly and folds the rest in with a multiplicative hash.
    let key = |i: u32, b: usize| {
        let band = &sig[i as usize * h + b * p.rpb..i as usize * h + (b + 1) * p.rpb];
        band.iter().fold(0u64, |k, &x| {
            k.rotate_left(32).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ x as u64
        })
    };
    let sorted: Vec<BandIndex> = (0..p.bands)
        .into_par_iter()
        .map(|b| {
            let mut s: Vec<(u64, u32)> = (0..n as u32).map(|i| (key(i, b), i)).collect();
            s.sort_unstable();
            let mut pos = vec![0u32; n];
            for (i, &(_, x)) in s.iter().enumerate() {
                pos[x as usize] = i as u32;
            }
            (s, pos)
        })
        .collect();
    let mut assigned = vec![false; n];
    let mut groups = Vec::with_capacity(n / p.group + 1);
    let mut cands: Vec<(u32, u32)> = Vec::new();
    for seed in 0..n as u32 {
        if assigned[seed as usize] {
            continue;
        }
        assigned[seed as usize] = true;
        cands.clear();
        if p.group > 1 {
            for (s, pos) in &sorted {
                let at = pos[seed as usize] as usize;
                let lo = at.saturating_sub(p.window);
                let hi = (at + p.window + 1).min(n);
                let k = s[at].0;
                for &(ku, u) in &s[lo..hi] {
                    if ku == k && !assigned[u as usize] {
                        cands.push((0, u));
                    }
                }
            }
        }
        cands.sort_unstable_by_key(|&(_, u)| u);
        cands.dedup_by_key(|&mut (_, u)| u);
        let ss = &sig[seed as usize * h..(seed as usize + 1) * h];
        for c in cands.iter_mut() {
            let us = &sig[c.1 as usize * h..(c.1 as usize + 1) * h];
            c.0 = ss.iter().zip(us).filter(|(x, y)| x == y).count() as u32;
        }
        cands.sort_unstable_by_key(|&(score, u)| (std::cmp::Reverse(score), u));
        let mut g = Vec::with_capacity(p.group);
        g.push(seed);
        for &(_, u) in cands.iter().take(p.group - 1) {
            assigned[u as usize] = true;
            g.push(u);
        }
        groups.push(g);
    }
    groups
}
