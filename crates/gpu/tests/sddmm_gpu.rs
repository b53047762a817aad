//! GPU test of the SDDMM kernel (ignored by default; run with `--include-ignored` on a GPU machine,
//! e.g. through `cargo xtask gpu-bundle`). Without a GPU it FAILS (it calls `Gpu::require`).
//!
//! Every output is compared with the f64 CPU reference [`tcsparse_formats::sddmm::sddmm`]:
//! |out − ref| ≤ k·2⁻²³·(|left_i|·|right_j|) (f32 FMAs over k terms, then a 32-way tree).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_formats::csr::csr_from_triplets;
use tcsparse_formats::sddmm::sddmm;
use tcsparse_gpu::Gpu;
use tcsparse_gpu::sddmm::SddmmPattern;

#[test]
#[ignore = "needs a CUDA GPU"]
fn sddmm_matches_the_f64_reference() {
    let gpu = Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    for &(rows, cols, per_row, k, pad) in &[
        (1usize, 1usize, 1usize, 1usize, 0usize),
        (300, 200, 6, 5, 3),
        (2000, 1500, 12, 128, 0),
        (513, 4000, 40, 33, 7),
        (64, 64, 0, 16, 0),
    ] {
        let mut t = Vec::new();
        for i in 0..rows {
            let len = if i % 5 == 2 {
                0
            } else {
                rng.random_range(0..=per_row)
            };
            for _ in 0..len {
                t.push((i as u32, rng.random_range(0..cols as u32), 1.0f32));
            }
        }
        let a = csr_from_triplets(rows, cols, &t).expect("valid");
        let (ldl, ldr) = (k + pad, k + 2 * pad);
        let left: Vec<f32> = (0..rows * ldl)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let right: Vec<f32> = (0..cols * ldr)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let compact = |m: &[f32], n: usize, ld: usize| -> Vec<f32> {
            m.chunks(ld).take(n).flat_map(|r| r[..k].to_vec()).collect()
        };
        let (lc, rc) = (compact(&left, rows, ldl), compact(&right, cols, ldr));
        let want = sddmm(&a, &lc, &rc, k).expect("shapes");
        let abs_l: Vec<f64> = lc.iter().map(|&x| (x as f64).abs()).collect();
        let abs_r: Vec<f64> = rc.iter().map(|&x| (x as f64).abs()).collect();
        let scale = sddmm(&a, &abs_l, &abs_r, k).expect("shapes");

        let p = SddmmPattern::new(&gpu, &a).expect("upload");
        let (dl, dr) = (gpu.upload(&left).unwrap(), gpu.upload(&right).unwrap());
        let mut out = gpu.upload(&vec![f32::NAN; a.nnz().max(1)]).unwrap();
        let alpha = -1.5f32;
        p.launch(alpha, &dl, ldl, &dr, ldr, k, &mut out)
            .expect("launch");
        let got = gpu.download(&out).unwrap();
        let bound = k as f64 * 2f64.powi(-23);
        for (q, (&g, (&w, &s))) in got.iter().zip(want.iter().zip(&scale)).enumerate() {
            let w = alpha as f64 * w;
            assert!(
                (g as f64 - w).abs() <= bound * 1.5 * s + f64::MIN_POSITIVE,
                "{rows}x{cols} k={k}: out[{q}] = {g}, want {w} (scale {s})"
            );
        }
        // Shapes are checked before any launch (k above the leading dimension).
        assert!(
            p.launch(1.0, &dl, ldl, &dr, ldr, ldl + 1, &mut out)
                .is_err()
        );
    }
}
