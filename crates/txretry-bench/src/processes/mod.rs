//! `txretry-bench run --processes N`: several processes run the lab's workload at once
//! against one set of tables, as several instances of a service would.
//!
//! The parent creates the tables, starts N copies of its own binary as children (`run` with
//! the hidden `--child-tables PREFIX --child-index I` flags, the same workload, policy, duration and
//! `--workers`; the database URL goes in the environment, never on a command line), and
//! talks to each over its stdin and stdout:
//!
//! 1. the child connects, then prints `ready`;
//! 2. once every child is ready, the parent writes `go` to each, so they start together;
//! 3. the child runs until its duration is up (or until the parent writes `stop`, or
//!    closes its stdin: the parent is gone), then prints one line of JSON, a
//!    [`ChildReport`] with its counts and its latency histogram, and exits 0.
//!
//! The parent merges the reports ([`aggregate`]: sums, and percentiles computed over every
//! child's latency histograms merged, never averaged), checks the invariant once against
//! every commit of every child, and drops the tables.
//!
//! Children run in a process group of their own (Unix), so a Ctrl-C typed at the terminal
//! reaches only the parent, which relays it (see `signals.rs`): the first writes `stop` to
//! every child (they finish the transactions in flight and report; the run is reported
//! and checked as interrupted), a second, separate one kills them and nothing is
//! reported; the tables are dropped either way. A child that
//! cannot start, exits non-zero or sends no report fails the whole run (exit code 2),
//! with what it printed on stderr.

mod child;
mod parent;
mod report;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sqlx::Pool;
use txretry_lab::backend::LabDb;
use txretry_lab::cli::RunArgs;
use txretry_lab::lab::{Fatal, Interrupts, Place};
use txretry_lab::run::{RunResult, RunSpec};
use txretry_lab::target::Target;

use parent::{Fleet, run_processes};

pub use child::main as child;

pub use report::{ChildReport, aggregate};

/// The environment variable that hands a child the database URL (a URL may hold a
/// password, and command lines are visible to every user of the machine).
pub const CHILD_DB_ENV: &str = "TXRETRY_BENCH_CHILD_DB";
/// A child's first line on stdout: connected, waiting for [`GO`].
const READY: &str = "ready";
/// The parent's line that starts every child at once.
const GO: &str = "go";
/// The parent's line that asks a child to finish the transactions in flight and report.
const STOP: &str = "stop";
/// How long a child may take to connect and say [`READY`].
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Tests only: `I` makes child `I` fail before it is ready, `I:run` once it has started
/// (exit code 3 either way), to check how the parent copes.
pub const FAIL_CHILD_ENV: &str = "TXRETRY_BENCH_FAIL_CHILD";
/// How much of a failed child's stderr the parent repeats.
const STDERR_TAIL: usize = 2000;

/// The lab's runs in `processes` child processes at once, each with `args`'s workers and
/// its own pool; this process only creates, checks and drops the tables (one connection).
#[derive(Clone, Copy, Debug)]
pub struct Processes<'a> {
    /// The flags the children run with.
    pub args: &'a RunArgs,
    /// How many children.
    pub processes: usize,
}

impl Place for Processes<'_> {
    fn processes(&self) -> usize {
        self.processes
    }

    fn pool_size(&self, _workers: usize) -> usize {
        1
    }

    fn connections(&self, workers: usize) -> (u64, String) {
        // Every child's pool, plus the parent's one connection.
        (
            workers as u64 * self.processes as u64 + 1,
            format!("--processes {} x --workers {workers}", self.processes),
        )
    }

    async fn run<DB: LabDb>(
        &self,
        pool: &Pool<DB>,
        target: &Target,
        db_url: &str,
        spec: &RunSpec,
        _stop: &Arc<AtomicBool>,
        interrupts: &Interrupts,
    ) -> Result<Option<RunResult>, Fatal> {
        let fleet = Fleet {
            args: self.args,
            db_url,
            processes: self.processes,
        };
        run_processes(pool, target, fleet, spec, interrupts).await
    }
}
