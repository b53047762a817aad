//! One module per subcommand: each has `Args` (clap) and `run(Args) -> anyhow::Result<()>`.

pub mod checks;
pub mod convert;
pub mod demo;
pub mod distributed;
pub mod formats_table;
pub mod gen_cmd;
pub mod info;
pub mod plan;
pub mod reorder;
pub mod reorder_table;
pub mod spamm;
pub mod spmm;
pub mod spmv;

/// A spinner on stderr with `message` while long work runs, when `show` and stderr is a terminal
/// (never in pipes, logs or tests); `finish_and_clear` it when the work ends.
pub fn spinner(show: bool, message: String) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    (show && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.set_message(message);
        b.enable_steady_tick(std::time::Duration::from_millis(120));
        b
    })
}
