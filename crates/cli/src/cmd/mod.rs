//! One module per subcommand: each has `Args` (clap) and `run(Args) -> anyhow::Result<()>`.

pub mod checks;
pub mod convert;
pub mod demo;
pub mod formats_table;
pub mod gen_cmd;
pub mod info;
pub mod plan;
pub mod reorder;
pub mod reorder_table;
pub mod spamm;
pub mod spmm;
pub mod spmv;
