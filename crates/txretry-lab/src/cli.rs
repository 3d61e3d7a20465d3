//! The command line: flags, their values, and the checks that make a bad value a usage
//! error (exit code 2) before anything connects.

use std::time::Duration;

use clap::{Args, Parser, ValueEnum};

use crate::duration::parse_duration;

/// Largest `--workers`: more would only measure the pool and the scheduler.
pub const MAX_WORKERS: usize = 1024;
/// Largest `--rows`.
pub const MAX_ROWS: u32 = 1_000_000;

/// Exit codes, also listed in `--help`.
pub const AFTER_HELP: &str = "\
Exit codes:
    0  every run finished and every invariant check passed
    1  a run finished but an invariant check FAILED (money created or lost, a ledger
       row missing or doubled, a counter off)
    2  nothing was measured: a bad flag or value, or the database could not be
       reached or set up
  130  Ctrl-C or SIGTERM cut the runs short (the transactions in flight finish
       their current attempt, none retries; what ran is still reported and checked;
       signals a few milliseconds apart count as one, and a second, separate one
       quits without a report, after dropping the lab's tables and temp files)

Several processes at once on one set of tables, and faults injected into a Postgres HA
cluster: txretry-bench run.

Passwords in --db URLs are never printed: user:pass@ shows as user:***@.";

/// Runs contention workloads against a database through txretry's sqlx runner and reports
/// what each retry policy achieved.
#[derive(Debug, Parser)]
#[command(name = "txretry-lab", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to run, and where.
    #[command(flatten)]
    pub run: RunArgs,
}

/// The flags of a run, shared by `txretry-lab` and `txretry-bench run`: the database, the
/// workload, the workers, the policies and the output.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// `sqlite` (a fresh file in a temp dir), `sqlite://PATH`, `postgres://…` or `mysql://…`.
    #[arg(long, default_value = "sqlite", value_name = "DB")]
    pub db: String,

    /// What every transaction does.
    #[arg(long, value_enum, default_value_t = Workload::Transfer)]
    pub workload: Workload,

    /// Accounts (transfer) or hot rows (hot-rows) [default: 8 for transfer, 4 for hot-rows].
    #[arg(long, value_name = "N", value_parser = parse_rows)]
    pub rows: Option<u32>,

    /// Concurrent workers; the pool holds as many connections.
    #[arg(long, value_name = "N", default_value = "4", value_parser = parse_workers, allow_negative_numbers = true)]
    pub workers: usize,

    /// How long each policy runs, e.g. `500ms`, `5s` (or `5`), `2m`.
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,

    /// Isolation level (Postgres, MySQL); SQLite is always serializable and ignores it
    /// [default: the server's].
    #[arg(long, value_enum)]
    pub isolation: Option<IsolationArg>,

    /// How SQLite transactions begin (ignored by other databases). The lab starts them
    /// DEFERRED so that writers collide and retries show; txretry's own default is IMMEDIATE.
    #[arg(long, value_enum, default_value_t = SqliteBeginArg::Deferred)]
    pub sqlite_begin: SqliteBeginArg,

    /// A retry preset, several comma-separated, or `all` to run every contention preset
    /// one after the other and compare them.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "all",
        value_name = "POLICY"
    )]
    pub policy: Vec<PolicyArg>,

    /// Print one JSON array (an object per run) on stdout and nothing else there.
    #[arg(long)]
    pub json: bool,
}

/// The transaction every worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Move money between two random accounts; refuse when funds are insufficient.
    Transfer,
    /// Read a random row of a few and add one to its counter.
    HotRows,
    /// Insert one history row keyed by a unique call id (worker, sequence) and the port of
    /// the server it ran on: afterwards every acknowledged call must be there once, an
    /// ambiguous one once or not at all (lost and doubled commits, counted exactly).
    History,
}

impl Workload {
    /// The name used in reports (the flag's value).
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Transfer => "transfer",
            Workload::HotRows => "hot-rows",
            Workload::History => "history",
        }
    }

    /// Rows when `--rows` is not given.
    pub fn default_rows(self) -> u32 {
        match self {
            Workload::Transfer => 8,
            Workload::HotRows => 4,
            // Rows are not read: each transaction adds its own.
            Workload::History => 1,
        }
    }

    /// The fewest rows the workload can run on.
    pub fn min_rows(self) -> u32 {
        match self {
            Workload::Transfer => 2,
            Workload::HotRows | Workload::History => 1,
        }
    }
}

/// `--isolation` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// READ COMMITTED.
    ReadCommitted,
    /// REPEATABLE READ.
    RepeatableRead,
    /// SERIALIZABLE.
    Serializable,
}

impl IsolationArg {
    /// The level txretry applies.
    pub fn level(self) -> txretry::Isolation {
        match self {
            IsolationArg::ReadCommitted => txretry::Isolation::ReadCommitted,
            IsolationArg::RepeatableRead => txretry::Isolation::RepeatableRead,
            IsolationArg::Serializable => txretry::Isolation::Serializable,
        }
    }

    /// The flag's value, as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            IsolationArg::ReadCommitted => "read-committed",
            IsolationArg::RepeatableRead => "repeatable-read",
            IsolationArg::Serializable => "serializable",
        }
    }
}

/// `--sqlite-begin` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SqliteBeginArg {
    /// `BEGIN IMMEDIATE`: writers queue on the busy timeout (the runner's default).
    Immediate,
    /// `BEGIN DEFERRED`: a reader that then writes can hit `SQLITE_BUSY_SNAPSHOT` and retry.
    Deferred,
}

impl SqliteBeginArg {
    /// The begin behaviour txretry applies.
    pub fn begin(self) -> txretry::SqliteBegin {
        match self {
            SqliteBeginArg::Immediate => txretry::SqliteBegin::Immediate,
            SqliteBeginArg::Deferred => txretry::SqliteBegin::Deferred,
        }
    }

    /// The flag's value, as reports show it.
    pub fn as_str(self) -> &'static str {
        match self {
            SqliteBeginArg::Immediate => "immediate",
            SqliteBeginArg::Deferred => "deferred",
        }
    }
}

/// `--policy` values: a preset, or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// No retry: `RetryPolicy::disabled()`.
    None,
    /// `RetryPolicy::default()`: 2 attempts, linear 150 ms × N.
    Default,
    /// 50 attempts, no wait between them.
    Immediate,
    /// 50 attempts, exponential backoff from 2 ms ×2 capped at 100 ms, full jitter.
    ExpJitter,
    /// exp-jitter plus per-key admission: transactions naming the same row take turns
    /// (in this process).
    Contention,
    /// contention plus database locks per key (`Admission::in_database`): transactions
    /// naming the same row take turns across processes too.
    Database,
    /// database, but the locks only for rows that collided in the last 10 s
    /// (`Admission::only_for_contended_keys`): no database lock without contention.
    Adaptive,
    /// `RetryPolicy::high_availability()`: default, plus failover and connection outages
    /// ridden out for up to 60 s (not part of `all`).
    HighAvailability,
    /// Every contention preset (all but high-availability), one after the other, in one
    /// comparison table.
    All,
}

/// A worker count from 1 to [`MAX_WORKERS`] (`--workers`, and each of `txretry-bench sweep --workers`).
pub fn parse_workers(text: &str) -> Result<usize, String> {
    parse_count(text, MAX_WORKERS)
}

/// A whole number from 1 to `max` (every count flag: `--workers`, `--rows`, `--processes`,
/// `txretry-bench sweep --repeat`); anything else, negative numbers included, gets one message.
pub fn parse_count<T>(text: &str, max: T) -> Result<T, String>
where
    T: TryFrom<i64> + PartialOrd + From<u8> + std::fmt::Display + Copy,
{
    let message = || format!("must be a whole number from 1 to {max}");
    let n: i64 = text.trim().parse().map_err(|_| message())?;
    T::try_from(n)
        .ok()
        .filter(|n| (T::from(1)..=max).contains(n))
        .ok_or_else(message)
}

/// A row count from 1 to [`MAX_ROWS`] (`--rows`).
pub fn parse_rows(text: &str) -> Result<u32, String> {
    parse_count(text, MAX_ROWS)
}
