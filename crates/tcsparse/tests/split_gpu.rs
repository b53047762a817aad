//! GPU tests of SpMM split over devices (ignored without a GPU; they FAIL under
//! `--include-ignored` on a machine without one): A's rows split by nonzeros, each block prepared
//! on its own device (here: on every device present, and on three streams of one device), B
//! broadcast, C gathered — against the f64 reference and against the single-GPU product.

mod split_support;

use split_support::{Reference, hub_matrix};
use tcsparse::formats::Csr;
use tcsparse::formats::reference::max_scaled_error;
use tcsparse::gpu::Gpu;
use tcsparse::{
    DeviceGroup, DeviceSet, KernelRequest, PrepareOptions, prepare_on_group, prepare_split,
};

fn gpu() -> Gpu {
    Gpu::require().expect("this test needs a CUDA GPU")
}

/// 2000 × 1500 with hub rows ([`hub_matrix`]).
fn matrix() -> Csr {
    hub_matrix(2000, 1500)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn split_spmm_matches_f64_and_the_single_gpu_product() {
    let g = gpu();
    let a = matrix();
    let n = 100;
    let r = Reference::new(&a, n);
    let (b, want, scale) = (&r.b, &r.want, &r.scale);
    for kernel in [
        KernelRequest::Auto,
        KernelRequest::Csr,
        KernelRequest::AccSpmm,
    ] {
        let opts = PrepareOptions::builder().kernel(kernel).n(n).build();
        // The single-GPU product is held to its own kernel's bound against the f64 reference,
        // not compared bit for bit with the split: the kernels tuning keeps here (split rows,
        // split panels, split windows) add partial sums with atomics, whose order changes from
        // run to run.
        let (_, bound) = r.one_gpu(&g, &a, &opts, &format!("{kernel:?}"));
        let mut splits = vec![
            prepare_on_group(DeviceGroup::streams_of(&g, 3).unwrap(), &a, &opts).unwrap(),
            prepare_split(DeviceSet::default(), &a, &opts).unwrap(),
        ];
        let count = Gpu::device_count();
        if count > 1 {
            splits.push(prepare_split(DeviceSet::first(count), &a, &opts).unwrap());
        }
        for split in &mut splits {
            let ranges = split.row_ranges();
            assert_eq!(ranges.first().map(|r| r.0), Some(0));
            assert_eq!(ranges.last().map(|r| r.1), Some(a.rows()));
            if ranges.len() == 3 {
                // The hub rows (8 × 750 nonzeros) must not all land with a third of the rows.
                let nnz = |(r0, r1): (usize, usize)| a.row_offsets()[r1] - a.row_offsets()[r0];
                let heaviest = ranges.iter().map(|&r| nnz(r)).max().unwrap();
                assert!(
                    (heaviest as usize) < a.nnz() * 6 / 10,
                    "{ranges:?}: {heaviest} of {} nonzeros",
                    a.nnz()
                );
            }
            let mut c = vec![f32::NAN; a.rows() * n];
            split.spmm(1.0, b, 0.0, &mut c).unwrap();
            // Each part tunes on its own block and may keep a TF32 kernel where the whole matrix
            // kept an f32 one (or the reverse): the bound is the loosest of the kernels run.
            let bound = split.parts().map(|p| p.error_bound()).fold(bound, f64::max);
            let err = max_scaled_error(&c, want, scale);
            assert!(
                err <= bound,
                "{kernel:?} {:?}: error {err:.3e} > bound {bound:.3e}",
                split.transport()
            );
            // Again on the resident B (no new broadcast): every row written, within the bound.
            split.run(1.0).unwrap();
            split.synchronize().unwrap();
            let mut again = vec![f32::NAN; a.rows() * n];
            split.gather(&mut again, n).unwrap();
            let err2 = max_scaled_error(&again, want, scale);
            assert!(
                err2 <= bound,
                "{kernel:?} second run: error {err2:.3e} > {bound:.3e}"
            );
            // β = 0.5 on the first product's C: C = A·B + 0.5·C ≈ 1.5·A·B, each term within the
            // bound (plus the rounding of the sum).
            split.spmm(1.0, b, 0.5, &mut again).unwrap();
            let want3: Vec<f64> = want.iter().map(|w| 1.5 * w).collect();
            let scale3: Vec<f64> = scale.iter().map(|s| 1.5 * s).collect();
            let err3 = max_scaled_error(&again, &want3, &scale3);
            assert!(
                err3 <= bound + f64::from(f32::EPSILON),
                "{kernel:?} β = 0.5: error {err3:.3e} > {bound:.3e}"
            );
        }
    }
}
