//! `txretry-bench`: the sweeps behind BENCHMARKS.md. `txretry-bench sweep` runs the lab's
//! presets at several worker counts, several times each (plus pgbench on Postgres), and
//! prints the median and range of each cell; `--plot` draws them as SVG.
//!
//! Every run goes through the lab's own machinery (the `txretry-lab` library), so a cell
//! measures exactly what `txretry-lab --workers N --policy P` measures.
//!
//! ```text
//! cargo run --release -p txretry-bench -- sweep
//! cargo run --release -p txretry-bench -- sweep --db postgres://postgres@127.0.0.1:5432/test \
//!     --workers 1,4,8,16,32 --policy all --duration 10s --repeat 3 --plot sweep.svg
//! ```

mod args;
mod cell;
mod estimate;
mod pgbench;
mod plot;
mod runner;
mod sweep;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use txretry_lab::clap_exit;

/// Measures txretry's retry presets side by side, the way BENCHMARKS.md reports them.
#[derive(Debug, Parser)]
#[command(name = "txretry-bench", version, about)]
struct Bench {
    #[command(subcommand)]
    command: Command,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the policies at several worker counts, several times each (plus pgbench on
    /// Postgres); print the median and range of each, and draw them with --plot.
    Sweep(args::SweepArgs),
}

fn main() -> ExitCode {
    match Bench::try_parse() {
        Ok(Bench {
            command: Command::Sweep(args),
        }) => sweep::main(&args),
        Err(e) => clap_exit(&e),
    }
}
