//! `txretry-bench sweep`'s flags and the parsing of its lists (`--workers 1,4,8`,
//! `--policy none,contention` or `all`): a bad value is a usage error (exit code 2).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use txretry_lab::cli::{
    IsolationArg, MAX_WORKERS, PolicyArg, SqliteBeginArg, Workload, parse_count, parse_rows,
    parse_workers,
};
use txretry_lab::duration::parse_duration;
use txretry_lab::presets::Preset;

/// The most runs per cell `--repeat` takes.
pub const MAX_REPEAT: u32 = 100;

/// Exit codes and what a sweep prints, shown by `sweep --help`.
const AFTER_HELP: &str = "\
Each cell (a policy at a worker count) runs --repeat times on fresh tables; the table shows
the median of the runs and, with two runs or more, their range (min-max). The rounds run
one after the other (every cell once, then every cell again), and the policies take turns
going first, so a slow minute on the machine does not land on one cell only.

pgbench: on Postgres with --workload hot-rows and pgbench on PATH, each worker count also
runs the same transaction through pgbench (-M prepared --max-tries=1000, whole seconds).

Exit codes:
    0  every run finished and every invariant check passed
    1  an invariant check FAILED in some run
    2  nothing was measured: a bad flag or value, or the database could not be
       reached or set up, or the plot could not be written; or such an error
       stopped the sweep later (what ran is still reported)
  130  Ctrl-C or SIGTERM cut the sweep short (what ran is still reported, checked and drawn)";

/// Runs the policies at several worker counts, several times each, and prints the median
/// and spread of each cell: goodput, failed transactions, retries per commit, latency.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct SweepArgs {
    /// `sqlite` (a fresh file in a temp dir), `sqlite://PATH`, `postgres://…` or `mysql://…`.
    #[arg(long, default_value = "sqlite", value_name = "DB")]
    pub db: String,

    /// What every transaction does.
    #[arg(long, value_enum, default_value_t = Workload::HotRows)]
    pub workload: Workload,

    /// Accounts (transfer) or hot rows (hot-rows) [default: 8 for transfer, 4 for hot-rows].
    #[arg(long, value_name = "N", value_parser = parse_rows)]
    pub rows: Option<u32>,

    /// Worker counts, comma-separated: every policy runs at each.
    #[arg(long, value_name = "LIST", default_value = "1,4,8,16,32", value_parser = parse_worker_list, allow_hyphen_values = true)]
    pub workers: WorkerList,

    /// Presets, comma-separated, or `all` (none, default, immediate, exp-jitter,
    /// contention, database, adaptive).
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = parse_policy_list)]
    pub policy: PolicyList,

    /// Runs per cell; the table shows their median and range.
    #[arg(long, value_name = "N", default_value = "3", value_parser = parse_repeat, allow_negative_numbers = true)]
    pub repeat: u32,

    /// How long each run lasts, e.g. `500ms`, `2s`, `1m`.
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Isolation level (Postgres, MySQL); SQLite is always serializable and ignores it
    /// [default: repeatable-read: read-then-write conflicts are what a sweep is about].
    #[arg(long, value_enum)]
    pub isolation: Option<IsolationArg>,

    /// How SQLite transactions begin (ignored by other databases).
    #[arg(long, value_enum, default_value_t = SqliteBeginArg::Immediate)]
    pub sqlite_begin: SqliteBeginArg,

    /// Also draw the sweep into this SVG file: goodput and retries per commit against
    /// workers, one line per policy, the range as error bars.
    #[arg(long, value_name = "PATH.svg")]
    pub plot: Option<PathBuf>,

    /// Print one JSON object (every cell with its runs) on stdout and nothing else there.
    #[arg(long)]
    pub json: bool,
}

/// `--workers`: distinct worker counts, smallest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerList(pub Vec<usize>);

/// `--policy`: distinct presets, in the order `--policy all` runs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyList(pub Vec<Preset>);

fn parse_worker_list(text: &str) -> Result<WorkerList, String> {
    let usage = || {
        format!(
            "expected worker counts from 1 to {MAX_WORKERS}, comma-separated, e.g. 1,4,8,16,32; got {text:?}"
        )
    };
    let mut counts = text
        .split(',')
        .map(|part| parse_workers(part).map_err(|_| usage()))
        .collect::<Result<Vec<_>, _>>()?;
    counts.sort_unstable();
    counts.dedup();
    Ok(WorkerList(counts))
}

fn parse_policy_list(text: &str) -> Result<PolicyList, String> {
    let args = text
        .split(',')
        .map(|part| {
            PolicyArg::from_str(part.trim(), false).map_err(|_| {
                let names: Vec<&str> = Preset::every().map(Preset::name).collect();
                format!(
                    "unknown policy {:?}; expected `all` or some of {}, comma-separated",
                    part.trim(),
                    names.join(", ")
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // The order of `Preset::every()`, each once, whatever order the list named them in.
    Ok(PolicyList(Preset::selected_list(&args)))
}

fn parse_repeat(text: &str) -> Result<u32, String> {
    parse_count(text, MAX_REPEAT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bench, Command};
    use clap::Parser;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<SweepArgs, clap::Error> {
        let bench = Bench::try_parse_from(["txretry-bench", "sweep"].iter().chain(args))?;
        match bench.command {
            Command::Sweep(args) => Ok(args),
            Command::Run(_) => panic!("`sweep` was asked for"),
        }
    }

    #[test]
    fn defaults_are_the_issue_s_sweep() {
        let args = parse(&[]).expect("parses");
        assert_eq!(args.workers, WorkerList(vec![1, 4, 8, 16, 32]));
        assert_eq!(args.policy, PolicyList(Preset::ALL.to_vec()));
        assert_eq!(args.workload, Workload::HotRows);
        assert_eq!(args.repeat, 3);
        assert_eq!(args.db, "sqlite");
        assert_eq!(args.plot, None);
        assert!(!args.json);
    }

    #[test]
    fn lists_are_sorted_and_distinct() {
        let args =
            parse(&["--workers", "8, 1,8,4", "--policy", "contention,none,none"]).expect("parses");
        assert_eq!(args.workers, WorkerList(vec![1, 4, 8]));
        assert_eq!(
            args.policy,
            PolicyList(vec![Preset::None, Preset::Contention])
        );
        let all = parse(&["--policy", "none,all"]).expect("parses");
        assert_eq!(all.policy, PolicyList(Preset::ALL.to_vec()));
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["--workers", "0"][..],
            &["--workers", "a,b"],
            &["--workers", "1,,4"],
            &["--workers", "-1,4"],
            &["--workers", "1,100000"],
            &["--workers", ""],
            &["--policy", "none,bogus"],
            &["--policy", ""],
            &["--repeat", "0"],
            &["--repeat", "-2"],
            &["--repeat", "101"],
            &["--duration", "0s"],
            &["--rows", "0"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} must be refused"));
            assert_eq!(err.exit_code(), 2, "{args:?}");
            assert!(
                matches!(
                    err.kind(),
                    ErrorKind::ValueValidation | ErrorKind::InvalidValue
                ),
                "{args:?}: {:?}",
                err.kind()
            );
        }
        let err = parse(&["--policy", "bogus"])
            .expect_err("refused")
            .to_string();
        assert!(err.contains("exp-jitter"), "{err}");
    }

    #[test]
    fn the_benchmark_is_named() {
        let err = Bench::try_parse_from(["txretry-bench"]).expect_err("refused");
        assert_eq!(err.exit_code(), 2);
    }
}
