//! `txretry-bench`: the measurements behind BENCHMARKS.md, on the lab's machinery (the
//! `txretry-lab` library), so that they measure exactly what `txretry-lab` measures.
//!
//! - `txretry-bench sweep` runs the lab's presets at several worker counts, several times
//!   each (plus pgbench on Postgres), and prints the median and range of each cell;
//!   `--plot` draws them as SVG.
//! - `txretry-bench run --processes N` runs the lab's run in N processes at once against
//!   one set of tables (one aggregated report, one invariant check).
//!
//! ```text
//! cargo run --release -p txretry-bench -- sweep
//! cargo run --release -p txretry-bench -- sweep --db postgres://postgres@127.0.0.1:5432/test \
//!     --workers 1,4,8,16,32 --policy all --duration 10s --repeat 3 --plot sweep.svg
//! cargo run --release -p txretry-bench -- run --db postgres://postgres@127.0.0.1:5432/test \
//!     --workload hot-rows --isolation repeatable-read --processes 4 --workers 8 --policy all
//! ```

mod args;
mod cell;
mod estimate;
mod faults;
mod pgbench;
mod plot;
mod processes;
mod run;
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
    /// Run the lab in several processes at once against one set of tables (the lab's
    /// flags, plus --processes N).
    Run(run::RunCommand),
}

fn main() -> ExitCode {
    match Bench::try_parse() {
        Ok(Bench {
            command: Command::Sweep(args),
        }) => sweep::main(&args),
        Ok(Bench {
            command: Command::Run(command),
        }) => run::main(&command),
        Err(e) => clap_exit(&e),
    }
}
