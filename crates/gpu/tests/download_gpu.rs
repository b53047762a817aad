//! GPU tests of [`Gpu::download_into`] (ignored by default; run with `--include-ignored` on a GPU
//! machine). Without a GPU they FAIL (they call `Gpu::require`), never pass vacuously.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcsparse_gpu::{Gpu, STAGED_UPLOAD_BYTES, StagingLayout};

fn gpu() -> Gpu {
    Gpu::require().unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn large_downloads_through_the_staging_buffers_arrive_intact() {
    let gpu = gpu();
    gpu.warm_up_downloads().expect("download buffers");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let chunk = StagingLayout::DEFAULT.chunk_bytes;
    let ring = StagingLayout::DEFAULT.buffers;
    // Below and at the threshold, one ragged chunk, two, and more chunks than buffers (each
    // buffer refilled, a ragged last chunk).
    for bytes in [
        STAGED_UPLOAD_BYTES - 4,
        STAGED_UPLOAD_BYTES,
        chunk + 12,
        2 * chunk,
        (ring + 2) * chunk + 4,
    ] {
        let v: Vec<u32> = (0..bytes / 4).map(|_| rng.random()).collect();
        let d = gpu.upload(&v).expect("upload");
        // Into fresh (never touched) memory and into memory holding other values.
        let mut fresh = vec![0u32; v.len()];
        gpu.download_into(&d, &mut fresh).expect("download");
        assert!(fresh == v, "{bytes} bytes into fresh memory");
        let mut used: Vec<u32> = v.iter().map(|x| !x).collect();
        gpu.download_into(&d, &mut used).expect("download");
        assert!(used == v, "{bytes} bytes over old values");
        // A prefix of the buffer, ending inside a chunk.
        let mut head = vec![0u32; v.len() - 3];
        gpu.download_into(&d, &mut head).expect("prefix download");
        assert!(head[..] == v[..v.len() - 3], "{bytes} bytes, prefix");
    }
    // Element sizes other than 4, odd lengths.
    let bytes: Vec<u8> = (0..3 * chunk + 5).map(|_| rng.random()).collect();
    let mut got = vec![0u8; bytes.len()];
    gpu.download_into(&gpu.upload(&bytes).unwrap(), &mut got)
        .unwrap();
    assert!(got == bytes, "u8");
    let wide: Vec<u64> = (0..(chunk / 8) * 3 + 3).map(|_| rng.random()).collect();
    let mut got = vec![0u64; wide.len()];
    gpu.download_into(&gpu.upload(&wide).unwrap(), &mut got)
        .unwrap();
    assert!(got == wide, "u64");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_download_waits_for_the_work_queued_before_it() {
    let gpu = gpu();
    // A zeroed buffer filled by an upload queued after it on the same stream: the download
    // must see the upload's values, never the zeros.
    let len = (8 * StagingLayout::DEFAULT.chunk_bytes) / 4 + 1;
    let mut d = gpu.alloc_zeros::<f32>(len).expect("alloc");
    let v: Vec<f32> = (0..len).map(|i| i as f32 + 0.5).collect();
    gpu.stream().memcpy_htod(&v, &mut d).expect("queued copy");
    let mut got = vec![0f32; len];
    gpu.download_into(&d, &mut got).expect("download");
    assert!(got == v);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn downloads_from_a_short_buffer_are_refused() {
    let gpu = gpu();
    for len in [16usize, STAGED_UPLOAD_BYTES / 4] {
        let d = gpu.alloc_zeros::<u32>(len).expect("alloc");
        let mut dst = vec![1u32; len + 1];
        let e = gpu.download_into(&d, &mut dst).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("download of {} elements", len + 1)),
            "{e}"
        );
        assert!(dst.iter().all(|&x| x == 1), "nothing written on refusal");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn downloads_from_several_threads_at_once_arrive_intact() {
    let gpu = gpu();
    let len = (3 * StagingLayout::DEFAULT.chunk_bytes) / 4 + 7;
    let sources: Vec<Vec<u32>> = (0..4u32)
        .map(|t| {
            (0..len as u32)
                .map(|i| i.wrapping_mul(2654435761) ^ t)
                .collect()
        })
        .collect();
    let devs: Vec<_> = sources.iter().map(|v| gpu.upload(v).unwrap()).collect();
    // One thread holds the ring; the others take the driver's pageable copy meanwhile.
    std::thread::scope(|s| {
        for (v, d) in sources.iter().zip(&devs) {
            let gpu = gpu.clone();
            s.spawn(move || {
                for _ in 0..3 {
                    let mut got = vec![0u32; v.len()];
                    gpu.download_into(d, &mut got).expect("download");
                    assert!(&got == v);
                }
            });
        }
    });
}
