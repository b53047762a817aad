//! GPU tests of the device group (ignored by default; they FAIL without a GPU, never pass
//! vacuously): NCCL broadcast on one device (a one-rank communicator) and on every device present,
//! and SpAMM split over the devices present and over several streams of one device against the
//! single-GPU result. With `TCSPARSE_REQUIRE_NCCL=1` a missing libnccl.so fails the NCCL tests
//! instead of skipping the NCCL part (the GPU machine's run script sets it).

use tcsparse_formats::generate::exponential_decay_dense;
use tcsparse_gpu::Gpu;
use tcsparse_gpu::multi::{DeviceGroup, DeviceSet, Transport, nccl_available};
use tcsparse_gpu::spamm::{
    SpammBlock, SpammConfig, SpammPrecision, TauTarget, spamm_group, spamm_host,
};

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

/// True when the NCCL part must run (library present, or required by the environment).
fn want_nccl() -> bool {
    let required = std::env::var("TCSPARSE_REQUIRE_NCCL").is_ok_and(|v| v == "1");
    assert!(
        nccl_available() || !required,
        "TCSPARSE_REQUIRE_NCCL=1 but libnccl.so is not on the library path"
    );
    nccl_available()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn broadcast_reaches_every_member_on_every_transport() {
    let g = gpu();
    let data: Vec<f32> = (0..100_003).map(|i| (i as f32).sin()).collect();
    let root = g.upload(&data).unwrap();
    let mut groups = vec![
        DeviceGroup::open(DeviceSet::default()).unwrap(),
        DeviceGroup::streams_of(&g, 3).unwrap(),
    ];
    if want_nccl() {
        let one = DeviceGroup::with_nccl(vec![Gpu::open_device(0).unwrap()]).unwrap();
        assert_eq!(one.transport(), &Transport::Nccl);
        groups.push(one);
    }
    let count = Gpu::device_count();
    if count > 1 {
        let all = DeviceGroup::open(DeviceSet::first(count)).unwrap();
        assert_eq!(all.len(), count);
        groups.push(all);
    }
    for group in &groups {
        // The root buffer must be on the group's first member.
        let root = if group.transport() == &Transport::Nccl || group.len() == 1 {
            group.gpus()[0].upload(&data).unwrap()
        } else {
            root.clone()
        };
        let out = group.broadcast(root).unwrap();
        assert_eq!(out.len(), group.len());
        group.synchronize().unwrap();
        for (i, (buf, g)) in out.iter().zip(group.gpus()).enumerate() {
            assert_eq!(
                g.download(buf).unwrap(),
                data,
                "{:?} member {i}",
                group.transport()
            );
        }
    }
    // Two ranks on one device are refused with an error, not a crash.
    let e = DeviceGroup::with_nccl(vec![g.clone(), g.with_new_stream().unwrap()]).unwrap_err();
    assert!(e.to_string().contains("one rank per device"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn spamm_split_over_the_devices_equals_the_single_gpu_product() {
    let g = gpu();
    let n = 900;
    let a = exponential_decay_dense(n, 0.1);
    let cfg = SpammConfig {
        precision: SpammPrecision::Tf32x3,
        block: SpammBlock::B64,
        s: 1,
        target: TauTarget::RelError(1e-5),
    };
    let (c1, r1) = spamm_host(std::slice::from_ref(&g), &a, &a, n, n, n, &cfg).unwrap();
    let mut groups = vec![DeviceGroup::streams_of(&g, 3).unwrap()];
    let count = Gpu::device_count();
    if count > 1 {
        groups.push(DeviceGroup::open(DeviceSet::first(count)).unwrap());
    }
    for group in &groups {
        let (c, r) = spamm_group(group, &a, &a, n, n, n, &cfg).unwrap();
        assert_eq!(r.row_ranges.len(), group.len());
        assert_eq!(r.row_ranges.first().map(|x| x.0), Some(0));
        assert_eq!(r.row_ranges.last().map(|x| x.1), Some(n));
        assert_eq!((r.tau, r.valid_products), (r1.tau, r1.valid_products));
        // Same tiles, same order of accumulation per C element: the same bits.
        assert_eq!(c, c1, "{:?}", group.transport());
    }
}
