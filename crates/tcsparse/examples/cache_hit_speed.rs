//! A plan-cache hit's preparation time under several staging-buffer layouts (issue 19: the hit
//! of R-MAT scale 20 is bound by its 94 MB staged upload). For each generated matrix: one first
//! preparation into a fresh cache, then, layouts interleaved, `--reps` rounds of (a new ring of
//! staging buffers, warmed up: one cache hit; the three CSR arrays uploaded alone: read and
//! arrived times; one more cache hit), medians printed; and one raw copy of 64 MiB from a pinned
//! buffer (the copy engine's own rate). Needs a GPU.
//!
//! `cargo run -p tcsparse --release --example cache_hit_speed -- [--reps 7]
//!  [--layouts 2x8,4x16,...] [SPEC...]` (layout: BUFFERSxMiB; SPEC as `tcsparse gen`)

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use tcsparse::formats::generate::GeneratorSpec;
use tcsparse::gpu::StagingLayout;
use tcsparse::{Engine, PrepareOptions};

fn parse_layout(s: &str) -> Result<StagingLayout, String> {
    let (b, mib) = s
        .split_once('x')
        .ok_or_else(|| format!("{s}: expected BUFFERSxMiB"))?;
    Ok(StagingLayout {
        buffers: b.parse().map_err(|e| format!("{s}: {e}"))?,
        chunk_bytes: mib
            .parse::<usize>()
            .map_err(|e| format!("{s}: {e}"))?
            .saturating_mul(1 << 20),
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut reps = 7usize;
    let mut layouts = vec![StagingLayout::DEFAULT];
    let mut specs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--reps" => reps = args.next().ok_or("--reps N")?.parse::<usize>()?.max(1),
            "--layouts" => {
                layouts = args
                    .next()
                    .ok_or("--layouts LIST")?
                    .split(',')
                    .map(parse_layout)
                    .collect::<Result<_, _>>()?
            }
            _ => specs.push(a),
        }
    }
    if specs.is_empty() {
        specs.push("rmat:scale=20,ef=11,seed=20".into());
    }
    let engine = Engine::new();
    let gpu = engine.gpu().ok_or("no GPU")?.clone();
    engine.warm_up()?;
    println!("threads {}", rayon::current_num_threads());
    {
        // The copy engine alone: 64 MiB from one pinned buffer, five times.
        let bytes = 64usize << 20;
        // SAFETY: filled below before any copy reads it.
        let mut pinned = unsafe { gpu.context().alloc_pinned::<u8>(bytes) }?;
        pinned.as_mut_slice()?.fill(1);
        let mut dst = gpu.alloc_zeros::<u8>(bytes)?;
        let mut rates = Vec::new();
        for _ in 0..6 {
            let t = Instant::now();
            gpu.stream().memcpy_htod(&pinned, &mut dst)?;
            gpu.synchronize()?;
            rates.push(bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        rates.remove(0);
        println!("pinned copy 64 MiB: median {:.1} GB/s", median(&mut rates));
    }
    for spec in &specs {
        let a = Arc::new(GeneratorSpec::from_str(spec)?.build()?);
        let dir = std::env::temp_dir().join(format!("cache_hit_speed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let opts = PrepareOptions::builder()
            .n(128)
            .cache_dir(Some(dir.clone()))
            .build();
        let first = engine.prepare_spmm_shared(&a, &opts)?;
        println!(
            "{spec}: nnz {} first {:.1} ms, kernel {}",
            a.nnz(),
            first.report().total_s * 1e3,
            first.kernel()
        );
        drop(first);
        let mut hits = vec![Vec::new(); layouts.len()];
        let mut fresh = vec![Vec::new(); layouts.len()];
        let mut read = vec![Vec::new(); layouts.len()];
        let mut arrived = vec![Vec::new(); layouts.len()];
        for _ in 0..reps {
            for (i, l) in layouts.iter().enumerate() {
                gpu.set_staging_layout(*l)?;
                gpu.warm_up_uploads()?;
                let p = engine.prepare_spmm_shared(&a, &opts)?;
                fresh[i].push(p.report().total_s * 1e3);
                drop(p);
                let t = Instant::now();
                let bufs = (
                    gpu.upload(a.row_offsets())?,
                    gpu.upload(a.indices())?,
                    gpu.upload(a.data())?,
                );
                read[i].push(t.elapsed().as_secs_f64() * 1e3);
                gpu.synchronize()?;
                arrived[i].push(t.elapsed().as_secs_f64() * 1e3);
                drop(bufs);
                let p = engine.prepare_spmm_shared(&a, &opts)?;
                hits[i].push(p.report().total_s * 1e3);
            }
        }
        let mb = (a.row_offsets().len() * 4 + a.nnz() * 8) as f64 / 1e6;
        for (i, l) in layouts.iter().enumerate() {
            let (f, h, r, d) = (
                median(&mut fresh[i]),
                median(&mut hits[i]),
                median(&mut read[i]),
                median(&mut arrived[i]),
            );
            println!(
                "  {}x{}: hit on a new ring {f:.2} ms; after the upload: hit median {h:.2} ms (min {:.2}, max {:.2}); upload alone {mb:.0} MB read \
                 {r:.2} ms, arrived {d:.2} ms ({:.1} GB/s)",
                l.buffers,
                l.chunk_bytes >> 20,
                hits[i][0],
                hits[i][hits[i].len() - 1],
                mb / d
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
