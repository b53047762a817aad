//! GPU tests of the device group (ignored by default; they FAIL without a GPU, never pass
//! vacuously): NCCL broadcast on one device (a one-rank communicator) and on every device present
//! (SpAMM split over the devices is tested by the facade, `tcsparse/tests/spamm_gpu.rs`). With `TCSPARSE_REQUIRE_NCCL=1` a missing libnccl.so fails the NCCL tests
//! instead of skipping the NCCL part (the GPU machine's run script sets it).

mod nccl_support;

use nccl_support::want_nccl;
use tcsparse_gpu::Gpu;
use tcsparse_gpu::multi::{DeviceGroup, DeviceSet, Transport};

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
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
