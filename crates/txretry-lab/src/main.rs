//! `txretry-lab`: the first thing to run, and txretry's measuring instrument.
//!
//! With no arguments it runs a bank-transfer workload on an embedded SQLite file (in a temp
//! dir, WAL, transactions begun DEFERRED so that writers collide) with 4 workers, through
//! `txretry::sqlx::transaction_with`, once per retry preset for 1 second each, and prints
//! them side by side: commits, business failures, failures (with the first error of each
//! kind), retries by kind, attempts per commit, commits per second, p50/p95/p99 latency of
//! committed transactions, an invariant check (OK or FAILED), and hints.
//!
//! ```text
//! cargo run --release -p txretry-lab
//! cargo run --release -p txretry-lab -- --policy exp-jitter --duration 5s
//! cargo run --release -p txretry-lab -- --db postgres://postgres@127.0.0.1:5432/test \
//!     --workload hot-rows --rows 4 --isolation repeatable-read --workers 32 --policy all
//! cargo run --release -p txretry-lab -- --db mysql://root@127.0.0.1:3306/test --json
//! ```
//!
//! Several processes against one set of tables, as several instances of a service would
//! run, are `txretry-bench run --processes N`; sweeps, `txretry-bench sweep`.
//!
//! Exit codes: 0 all invariants held; 1 an invariant FAILED; 2 nothing was measured (bad
//! flag or value, database unreachable, tables could not be created); 130 Ctrl-C or
//! SIGTERM cut the runs short (what ran is still reported and checked; a second, separate one quits
//! without a report, after cleaning up: see `signals.rs`). Passwords in `--db` never appear
//! in any output.

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use txretry_lab::cli::Cli;
use txretry_lab::{EXIT_NOT_RUN, checked_target, clap_exit, exit_code, lab, runtime};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    let usage = |kind: ErrorKind, message: String| clap_exit(&Cli::command().error(kind, message));
    let target = match checked_target(&cli.run.db, cli.run.workload, cli.run.rows) {
        Ok(target) => target,
        Err((kind, message)) => return usage(kind, message),
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_NOT_RUN);
    };
    exit_code(
        runtime.block_on(lab::main(&cli.run, &target, &lab::InProcess)),
        &target,
    )
}
