//! `tcsparse spmm`: one prepared product on a matrix file, with time, GFLOP/s and the error against
//! the f64 reference (on the CPU reference path when there is no GPU, said plainly).

use std::path::PathBuf;

use tcsparse::{Backend, Balance, KernelRequest, PrepareOptions};

use super::demo;

/// Arguments of `tcsparse spmm`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Matrix Market file (plain or .gz).
    pub input: PathBuf,
    /// Columns of B.
    #[arg(long, default_value_t = 128)]
    pub n: usize,
    /// Kernel: auto (planner), acc (Acc-SpMM), cusparse, csr (CUDA-core CSR).
    #[arg(long, default_value = "auto", value_parser = ["auto", "acc", "cusparse", "csr"])]
    pub kernel: String,
    /// Reordering method (affinity, rabbit, lsh, degree, rcm, none) or `auto`.
    #[arg(long, default_value = "auto")]
    pub reorder: String,
    /// Acc-SpMM load balancing: auto, on, off.
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    pub balance: String,
    /// Seed of B and of randomized reorderings.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Timed repetitions.
    #[arg(long, default_value_t = 30)]
    pub iters: usize,
    /// Use the CPU reference path even when a GPU is present.
    #[arg(long)]
    pub cpu: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let engine = demo::engine(args.cpu);
    if engine.backend() == Backend::Cpu {
        println!(
            "backend   CPU reference path — {}. The time below is a CPU time, not a GPU kernel time.",
            engine.message()
        );
        if args.kernel != "auto" {
            println!(
                "note      --kernel {} needs a GPU; ignored on the CPU path",
                args.kernel
            );
        }
    } else {
        println!("backend   {}", engine.message());
    }
    let (a, read_ms) = demo::read(&args.input)?;
    println!(
        "read      {read_ms:>10.3} ms  {} × {}, {} nonzeros",
        a.rows(),
        a.cols(),
        a.nnz()
    );
    let kernel = match args.kernel.as_str() {
        "acc" => KernelRequest::AccSpmm,
        "cusparse" => KernelRequest::Cusparse,
        "csr" => KernelRequest::Csr,
        _ => KernelRequest::Auto,
    };
    let balance = match args.balance.as_str() {
        "on" => Balance::On,
        "off" => Balance::Off,
        _ => Balance::Auto,
    };
    let opts = PrepareOptions {
        reorder: demo::reorder_choice(&args.reorder),
        mode: None,
        balance,
        kernel,
        seed: args.seed,
        n: args.n,
    };
    let mut prepared = engine.prepare(&a, &opts)?;
    demo::print_prepare(&prepared);
    let b = demo::random_b(a.cols(), args.n, args.seed);
    let m = demo::measure(&engine, &mut prepared, &a, &b, args.n, args.iters)?;
    demo::print_measured(&prepared.kernel().to_string(), args.n, &m);
    Ok(())
}
