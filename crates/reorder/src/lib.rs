//! `tcsparse-reorder`: permutations that pack nonzeros into dense tensor-core blocks.
//!
//! Will own: `Permutation` (validated bijection), the `Reorder` trait and its report, data-affinity
//! reordering (Acc-SpMM §3.2), Rabbit order, DTC-style LSH, and the degree / RCM / identity baselines.
//! Never touches CUDA.
