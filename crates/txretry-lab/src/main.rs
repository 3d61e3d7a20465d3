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
//! cargo run --release -p txretry-lab -- --db postgres://postgres@127.0.0.1:5432/test \
//!     --workload hot-rows --isolation repeatable-read --processes 4 --workers 8 --policy all
//! ```
//!
//! `--processes N` runs N processes of the lab against one set of tables, as N instances
//! of a service would (see `multi/`): one aggregated report and one invariant check.
//!
//! Exit codes: 0 all invariants held; 1 an invariant FAILED; 2 nothing was measured (bad
//! flag or value, database unreachable, tables could not be created); 130 Ctrl-C cut the
//! runs short (what ran is still reported and checked; a second, separate Ctrl-C quits
//! without a report, after cleaning up: see `signals.rs`). Passwords in `--db` never appear
//! in any output.

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use txretry_lab::cli::Cli;
use txretry_lab::target::Target;
use txretry_lab::{
    EXIT_INTERRUPTED, EXIT_INVARIANT_FAILED, EXIT_NOT_RUN, clap_exit, fault, lab, multi, runtime,
};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    if let Some(prefix) = &cli.child_tables {
        return child_main(&cli, prefix);
    }
    let target = match Target::parse(&cli.db) {
        Ok(target) => target,
        // The message never contains the value: it may hold a password.
        Err(why) => {
            return clap_exit(&Cli::command().error(
                ErrorKind::InvalidValue,
                format!("invalid value for '--db <DB>': {why}"),
            ));
        }
    };
    let rows = cli.rows.unwrap_or_else(|| cli.workload.default_rows());
    if rows < cli.workload.min_rows() {
        let message = format!(
            "--workload {} needs --rows {} or more (got {rows})",
            cli.workload.as_str(),
            cli.workload.min_rows()
        );
        return clap_exit(&Cli::command().error(ErrorKind::ValueValidation, message));
    }
    let cluster_env = std::env::var_os(fault::CLUSTER_ENV).map(std::path::PathBuf::from);
    let faults = match fault::FaultPlan::from_flags(&cli, &target, cluster_env) {
        Ok(plan) => plan,
        Err(message) => {
            return clap_exit(&Cli::command().error(ErrorKind::ArgumentConflict, message));
        }
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_NOT_RUN);
    };
    match runtime.block_on(lab::main(&cli, &target, faults)) {
        Ok(reports) if reports.iter().any(|r| !r.invariant_ok) => {
            ExitCode::from(EXIT_INVARIANT_FAILED)
        }
        Ok(reports) if reports.iter().any(|r| r.interrupted) => ExitCode::from(EXIT_INTERRUPTED),
        // Every invocation runs at least one preset: none ran, so Ctrl-C came first.
        Ok(reports) if reports.is_empty() => ExitCode::from(EXIT_INTERRUPTED),
        Ok(_) => ExitCode::SUCCESS,
        Err(lab::Fatal(message)) => {
            eprintln!("error: {}", target.scrub(&message));
            ExitCode::from(EXIT_NOT_RUN)
        }
    }
}

/// A child of a `--processes` run (see `multi/`): exit 0 once its report is out, 2
/// otherwise (the parent repeats its stderr).
fn child_main(cli: &Cli, prefix: &str) -> ExitCode {
    let Some(target) = std::env::var(multi::CHILD_DB_ENV)
        .ok()
        .and_then(|url| Target::parse(&url).ok())
    else {
        eprintln!("error: --child-tables is internal to --processes (no database was handed over)");
        return ExitCode::from(EXIT_NOT_RUN);
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_NOT_RUN);
    };
    match runtime.block_on(lab::child(cli, &target, prefix)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(lab::Fatal(message)) => {
            eprintln!("error: {}", target.scrub(&message));
            ExitCode::from(EXIT_NOT_RUN)
        }
    }
}
