//! `tcsparse gen`: write a generated matrix as Matrix Market.

use crate::out::errln;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use tcsparse::formats::generate::GeneratorSpec;

/// Arguments of `tcsparse gen`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Generate a seeded test matrix and write it as Matrix Market (coordinate real general, \
1-based; gzip when OUT ends in .gz). The same SPEC and seed always give the same matrix, whatever the \
number of threads. Nonzero values are uniform in [-1, 1); the dense decay matrices store every entry.\n\n\
SPEC is NAME:key=value,... (defaults in brackets, aliases after |):\n  \
uniform:rows|n=R,cols=[R],avg|nnz_per_row=[16],seed=[0]\n  \
banded:n=N,hb|half_bandwidth=[8],fill=[1],seed=[0]\n  \
rmat:scale=S,ef|edge_factor=[16],a=[0.57],b=[0.19],c=[0.19],d=[0.05],seed=[0]\n  \
clustered:n=N,bs|block_size=[64],density|intra_density=[0.5],inter|inter_nnz_per_row=[1],seed=[0]\n  \
algebraic:n=N              a_ij = 0.1/(|i-j|^0.1 + 1), dense\n  \
exponential:n=N,rate=[0.5] a_ij = exp(-rate |i-j|), dense\n\n\
Example: tcsparse gen rmat:scale=16,ef=11,seed=1 -o rmat16.mtx.gz"
)]
pub struct Args {
    /// Generator spec, e.g. `rmat:scale=16,ef=11,seed=1` (see --help for every generator).
    #[arg(value_name = "SPEC")]
    pub spec: String,
    /// Output file (.mtx, or .mtx.gz for gzip).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Seed, overriding any `seed=` in SPEC.
    #[arg(long)]
    pub seed: Option<u64>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut spec: GeneratorSpec = args.spec.parse()?;
    if let Some(seed) = args.seed {
        spec = spec.with_seed(seed);
    }
    let start = Instant::now();
    let csr = spec.build().with_context(|| format!("generating {spec}"))?;
    let generated = start.elapsed().as_secs_f64();
    tracing::info!(%spec, nnz = csr.nnz(), seconds = generated, "generated");
    crate::output::write_matrix(&args.output, &csr)?;
    errln!(
        "wrote {}: {}x{}, {} nnz ({spec}; generated in {generated:.2} s, total {:.2} s)",
        args.output.display(),
        csr.rows(),
        csr.cols(),
        csr.nnz(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
