//! `txretry-bench run`: the lab's run (its flags, report, JSON and exit codes) in several
//! processes at once against one set of tables, as several instances of a service would
//! run them (`--processes N`, see `processes/`), or in this process with faults injected
//! into a Postgres HA cluster (`--fault`, see `faults/`). A comma-separated list of server
//! URLs in `--db` puts process `i` on server `i` mod their number (a Galera cluster's
//! nodes).

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory};

use txretry_lab::cli::{RunArgs, parse_count};
use txretry_lab::{EXIT_NOT_RUN, checked_target, clap_exit, exit_code, lab, runtime};

use crate::faults::{self, FaultFlags, FaultPlan, Faulted};
use crate::processes::{self, Processes};

/// Largest `--processes`.
pub const MAX_PROCESSES: usize = 64;

/// What `run --help` adds to the lab's flags.
const AFTER_HELP: &str = "\
N child processes (this program, run with hidden flags) run each policy at once on one set
of tables, each with --workers workers and its own pool; this process creates the tables,
checks the invariant once against every child's commits and drops the tables. A child that
cannot start or fails makes the whole run exit 2. Ctrl-C stops every child (twice: kills
them); the tables are dropped either way. SQLite files are shared too (one writer at a
time: admission across processes adds nothing there). Exit codes as txretry-lab's.

--fault instead runs each policy in this process while docker/ha/cluster switches or fails
the leader over every --fault-every, and adds each fault's timeline to the report.";

/// The lab's run in several processes at once, against one set of tables.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct RunCommand {
    /// The lab's flags.
    #[command(flatten)]
    pub run: RunArgs,

    /// Faults to inject into a Postgres HA cluster.
    #[command(flatten)]
    pub faults: FaultFlags,

    /// Processes that run the workload at once against one set of tables, each with
    /// `--workers` workers (its own pool); one aggregated report and one invariant check.
    #[arg(long, value_name = "N", value_parser = parse_processes, allow_negative_numbers = true,
          required_unless_present_any = ["child_tables", "fault"], conflicts_with = "fault")]
    pub processes: Option<usize>,

    /// Internal: run as child process of a `--processes` run on the existing tables with
    /// this name prefix (they are neither created nor dropped nor checked), and talk to the
    /// parent on stdin / stdout.
    #[arg(long, hide = true, value_name = "PREFIX", value_parser = parse_table_prefix)]
    pub child_tables: Option<String>,

    /// Internal: this child's number (0-based) among the processes of the run.
    #[arg(long, hide = true, value_name = "I", default_value = "0")]
    pub child_index: u32,
}

fn parse_processes(text: &str) -> Result<usize, String> {
    parse_count(text, MAX_PROCESSES)
}

/// A table prefix the lab made up itself (`txlab_` then digits and `_`): the only kind of
/// name a child puts into SQL.
pub fn parse_table_prefix(text: &str) -> Result<String, String> {
    let valid = text.len() <= 40
        && text.strip_prefix("txlab_").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '_')
        });
    if valid {
        Ok(text.to_owned())
    } else {
        Err("not a table prefix made by txretry-lab".to_owned())
    }
}

/// Runs `txretry-bench run` and returns the process's exit code.
pub fn main(command: &RunCommand) -> ExitCode {
    if let Some(prefix) = &command.child_tables {
        return child_main(command, prefix);
    }
    let usage = |kind: ErrorKind, message: String| {
        let mut bench = crate::Bench::command();
        // Built, the subcommand knows its full name for the usage line.
        bench.build();
        let run = bench.find_subcommand_mut("run").map(|c| c.clone());
        clap_exit(&run.unwrap_or(bench).error(kind, message))
    };
    let target = match checked_target(&command.run.db, command.run.workload, command.run.rows) {
        Ok(target) => target,
        Err((kind, message)) => return usage(kind, message),
    };
    let cluster_env = std::env::var_os(faults::CLUSTER_ENV).map(std::path::PathBuf::from);
    let plan = match FaultPlan::from_flags(&command.faults, &command.run, &target, cluster_env) {
        Ok(plan) => plan,
        Err(message) => return usage(ErrorKind::ArgumentConflict, message),
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_NOT_RUN);
    };
    let result = match plan {
        Some(plan) => {
            eprintln!(
                "faults: {} every {} through {} (the first after one interval)",
                plan.kind.as_str(),
                txretry_lab::duration::format_duration(plan.every),
                plan.cluster.display()
            );
            runtime.block_on(lab::main(&command.run, &target, &Faulted { plan }))
        }
        None => {
            let place = Processes {
                args: &command.run,
                processes: command.processes.unwrap_or(1),
            };
            runtime.block_on(lab::main(&command.run, &target, &place))
        }
    };
    exit_code(result, &target)
}

/// A child of a `--processes` run (see `processes/`): exit 0 once its report is out, 2
/// otherwise (the parent repeats its stderr).
fn child_main(command: &RunCommand, prefix: &str) -> ExitCode {
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_NOT_RUN);
    };
    match runtime.block_on(processes::child(&command.run, prefix, command.child_index)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(lab::Fatal(message)) => {
            // Already scrubbed where it names the database.
            eprintln!("error: {message}");
            ExitCode::from(EXIT_NOT_RUN)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Bench, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Bench, clap::Error> {
        Bench::try_parse_from(["txretry-bench", "run"].iter().chain(args))
    }

    #[test]
    fn processes_and_child_flags_are_checked() {
        for args in [
            &["--processes", "0"][..],
            &["--processes", "-1"],
            &["--processes", "65"],
            &[
                "--processes",
                "2",
                "--child-tables",
                "accounts; DROP TABLE x",
            ],
            &["--child-tables", "txlab_"],
            &[],
            // A fault run is one process (its timelines line up one run's events).
            &["--processes", "2", "--fault", "switchover"],
            &["--fault", "reboot"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
        let Command::Run(run) = parse(&["--processes", "4", "--workers", "8"])
            .expect("parses")
            .command
        else {
            panic!("a run")
        };
        assert_eq!(run.processes, Some(4));
        assert_eq!(run.run.workers, 8);
        assert_eq!(run.child_tables, None);
        assert_eq!(run.faults.fault, None);
        let Command::Run(run) = parse(&["--fault", "failover", "--fault-every", "3s"])
            .expect("a fault run needs no --processes")
            .command
        else {
            panic!("a run")
        };
        assert_eq!(run.faults.fault, Some(crate::faults::FaultArg::Failover));
        assert_eq!(run.processes, None);
    }
}
