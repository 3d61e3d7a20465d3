//! `--processes N`: several processes run the workload at once against one set of tables,
//! as several instances of a service would.
//!
//! The parent creates the tables, starts N copies of its own binary as children (hidden
//! `--child-tables PREFIX --child-index I` flags, the same workload, policy, duration and
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

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Type};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::backend::LabDb;
use crate::cli::Cli;
use crate::duration::format_duration;
use crate::error;
use crate::lab::Fatal;
use crate::presets::Preset;
use crate::progress::Progress;
use crate::run::{Measured, RunResult, RunSpec, drive};
use crate::stats::{Latencies, RetryCounter, Tally};
use crate::target::Target;
use crate::workload::{Invariant, Schema};

/// The environment variable that hands a child the database URL (a URL may hold a
/// password, and command lines are visible to every user of the machine).
pub const CHILD_DB_ENV: &str = "TXRETRY_LAB_CHILD_DB";
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
pub const FAIL_CHILD_ENV: &str = "TXRETRY_LAB_FAIL_CHILD";
/// How much of a failed child's stderr the parent repeats.
const STDERR_TAIL: usize = 2000;

/// Ctrl-C as the parent sees it.
#[derive(Clone, Debug)]
pub struct Interrupts {
    /// 0, then 1 after the first Ctrl-C, 2 after the second.
    pub level: watch::Receiver<u8>,
}

/// What one child measured, as it prints it (one line of JSON on stdout).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    /// The preset's name.
    pub policy: String,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions refused for a business reason.
    pub business_failed: u64,
    /// Transactions whose database error surfaced, by verdict.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// The first error message of each failed kind (scrubbed by the parent).
    #[serde(default)]
    pub first_errors: BTreeMap<String, String>,
    /// Every attempt.
    pub attempts: u64,
    /// Retries by kind.
    pub retries_by_kind: BTreeMap<String, u64>,
    /// When its first transaction started, microseconds since the Unix epoch.
    pub started_unix_us: u64,
    /// How long it ran, microseconds.
    pub elapsed_us: u64,
    /// Whether a stop request cut it short.
    pub interrupted: bool,
    /// Latency of each commit, microseconds, as a histogram (base64 of its V2 encoding):
    /// the parent merges the children's and takes percentiles over all of them.
    pub latencies: Latencies,
    /// One key per commit, for the invariant check (transfer ids or row ids).
    pub committed_keys: Vec<i64>,
    /// One key per transaction whose COMMIT may have landed.
    #[serde(default)]
    pub maybe_committed_keys: Vec<i64>,
}

impl ChildReport {
    /// The report of `measured`, run with `preset`.
    pub fn new(preset: Preset, measured: Measured) -> ChildReport {
        let t = measured.tally;
        ChildReport {
            policy: preset.name().to_owned(),
            committed: t.committed,
            business_failed: t.business_failed,
            failed_by_kind: t.failed_by_kind,
            first_errors: t.first_errors,
            attempts: t.attempts,
            retries_by_kind: measured.retries.by_kind(),
            started_unix_us: micros(
                measured
                    .started
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default(),
            ),
            elapsed_us: micros(measured.elapsed),
            interrupted: measured.interrupted,
            latencies: t.latencies,
            committed_keys: t.committed_keys,
            maybe_committed_keys: t.maybe_committed_keys,
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Several children's reports merged into one run's numbers.
#[derive(Debug)]
pub struct Aggregate {
    /// Every child's counts, samples and committed keys.
    pub tally: Tally,
    /// Every child's retries.
    pub retries: RetryCounter,
    /// From the earliest child's start to the latest child's end.
    pub elapsed: Duration,
    /// Whether any child was cut short.
    pub interrupted: bool,
    /// Each child's commits, in the order of the reports.
    pub committed_by_process: Vec<u64>,
}

/// Merges the children's reports: counts add up, latency histograms merge and committed keys
/// are pooled (percentiles are then computed over all of them, not averaged), and the elapsed
/// time is the span from the first child's start to the last one's end, by the wall
/// clock they share (or the longest child's own time, should the clock have been stepped
/// meanwhile: a span shorter than that, or over twice it).
pub fn aggregate(reports: Vec<ChildReport>) -> Result<Aggregate, String> {
    let mut tally = Tally::default();
    let retries = RetryCounter::default();
    let mut interrupted = false;
    let mut first_start = u64::MAX;
    let mut last_end = 0u64;
    let mut longest = 0u64;
    let committed_by_process = reports.iter().map(|r| r.committed).collect();
    for r in reports {
        retries.add_by_kind(&r.retries_by_kind)?;
        interrupted |= r.interrupted;
        first_start = first_start.min(r.started_unix_us);
        last_end = last_end.max(r.started_unix_us.saturating_add(r.elapsed_us));
        longest = longest.max(r.elapsed_us);
        tally.merge(Tally {
            committed: r.committed,
            business_failed: r.business_failed,
            failed_by_kind: r.failed_by_kind,
            first_errors: r.first_errors,
            attempts: r.attempts,
            latencies: r.latencies,
            committed_keys: r.committed_keys,
            maybe_committed_keys: r.maybe_committed_keys,
            // Only a `--fault` run (one process) uses them.
            commits: Vec::new(),
        });
    }
    let span = last_end.saturating_sub(first_start);
    let elapsed = if (longest..=longest.saturating_mul(2)).contains(&span) {
        span
    } else {
        longest
    };
    Ok(Aggregate {
        tally,
        retries,
        elapsed: Duration::from_micros(elapsed),
        interrupted,
        committed_by_process,
    })
}

// ---------------------------------------------------------------------------------------
// The child.

/// Runs this process as child `cli.child_index` of a `--processes` run on the tables
/// named `prefix`, on `pool` (one connection per worker).
pub async fn child<DB>(
    pool: Pool<DB>,
    spec: RunSpec,
    prefix: String,
    index: u32,
) -> Result<(), Fatal>
where
    DB: LabDb,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let schema = Arc::new(Schema::named::<DB>(spec.workload, spec.rows, prefix));
    let stop = Arc::new(AtomicBool::new(false));
    let (go_tx, go_rx) = oneshot::channel::<()>();
    {
        // A plain thread: a blocking read of stdin must not hold up the runtime's exit.
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut go = Some(go_tx);
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match line.trim() {
                    GO => {
                        if let Some(go) = go.take() {
                            let _ = go.send(());
                        }
                    }
                    STOP => {
                        stop.store(true, Ordering::Relaxed);
                        // Before the start: do not start at all.
                        go = None;
                    }
                    _ => {}
                }
            }
            // Stdin closed: the parent is gone (or gave up); stop.
            stop.store(true, Ordering::Relaxed);
            drop(go);
        });
    }
    {
        // Ctrl-C sent to this process itself: stop like the parent's `stop`.
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.store(true, Ordering::Relaxed);
            }
        });
    }
    let fail = std::env::var(FAIL_CHILD_ENV).unwrap_or_default();
    let fail_here = |stage: &str| fail == format!("{index}{stage}");
    if fail_here("") {
        eprintln!("error: failing at the start, as {FAIL_CHILD_ENV} asks");
        std::process::exit(3);
    }
    say(READY);
    if go_rx.await.is_err() {
        return Err(Fatal(
            "stopped before the start (the parent process said stop or went away)".into(),
        ));
    }
    if fail_here(":run") {
        tokio::time::sleep(Duration::from_millis(200)).await;
        eprintln!("error: failing during the run, as {FAIL_CHILD_ENV} asks");
        std::process::exit(3);
    }
    let measured = drive(&pool, &schema, &spec, &stop, spec.preset.name()).await;
    pool.close().await;
    let report = ChildReport::new(spec.preset, measured);
    let line = serde_json::to_string(&report)
        .map_err(|e| Fatal(format!("could not serialize the report: {e}")))?;
    say(&line);
    Ok(())
}

/// One line on stdout, flushed at once (the parent waits for it).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

// ---------------------------------------------------------------------------------------
// The parent.

/// What the children are to run, besides the preset.
#[derive(Clone, Copy, Debug)]
pub struct Fleet<'a> {
    /// The command line the parent was given.
    pub cli: &'a Cli,
    /// The database, for connecting only (it may hold a password).
    pub db_url: &'a str,
    /// How many children.
    pub processes: usize,
}

/// Runs `spec` in `fleet.processes` children on one set of tables, created and checked
/// and dropped here on `pool`. `Ok(None)`: Ctrl-C came before the children started, or a
/// second one killed them (the tables are dropped either way).
pub async fn run_processes<DB>(
    pool: &Pool<DB>,
    target: &Target,
    fleet: Fleet<'_>,
    spec: &RunSpec,
    interrupts: &Interrupts,
) -> Result<Option<RunResult>, Fatal>
where
    DB: LabDb,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let schema = Schema::new::<DB>(spec.workload, spec.rows);
    if let Err(e) = schema.create(pool).await {
        let _ = schema.drop_tables(pool).await;
        return Err(Fatal(target.scrub(&format!(
            "could not set up the {} tables: {}",
            spec.workload.as_str(),
            error::describe(&e)
        ))));
    }
    let outcome = supervise(fleet, spec, schema.prefix(), interrupts).await;
    let result = match outcome {
        Ok(Some(reports)) => match aggregate(reports) {
            Ok(all) => {
                let invariant = match schema
                    .check(
                        pool,
                        &all.tally.committed_keys,
                        &all.tally.maybe_committed_keys,
                    )
                    .await
                {
                    Ok(invariant) => invariant,
                    Err(e) => Invariant {
                        counts: None,
                        ok: false,
                        detail: format!("could not check the tables: {}", error::describe(&e)),
                    },
                };
                Ok(Some(RunResult {
                    preset: spec.preset,
                    tally: all.tally,
                    retries: all.retries,
                    elapsed: all.elapsed,
                    invariant,
                    interrupted: all.interrupted,
                    committed_by_process: all.committed_by_process,
                    faults: Vec::new(),
                }))
            }
            Err(why) => Err(Fatal(format!(
                "a child sent a report this lab cannot read: {why}"
            ))),
        },
        Ok(None) => Ok(None),
        Err(Stopped::Failed(why)) => Err(Fatal(target.scrub(&why))),
        Err(Stopped::Killed) => {
            // The caller reports nothing and exits 130 (its temp dir goes on the way out).
            match tokio::time::timeout(Duration::from_secs(10), schema.drop_tables(pool)).await {
                Ok(Ok(())) => eprintln!(
                    "the child processes were killed and this run's tables ({}_*) dropped",
                    schema.prefix()
                ),
                _ => eprintln!(
                    "the child processes were killed; could not drop this run's tables ({}_*) in time",
                    schema.prefix()
                ),
            }
            return Ok(None);
        }
    };
    // Best effort, as in a single-process run.
    let _ = schema.drop_tables(pool).await;
    result
}

/// Why the children did not all report.
#[derive(Debug)]
enum Stopped {
    /// One failed; the message says which and how (not yet scrubbed).
    Failed(String),
    /// The second Ctrl-C killed them.
    Killed,
}

/// A started child and its pipes.
struct Proc {
    /// 0-based.
    index: usize,
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: JoinHandle<String>,
}

impl Proc {
    /// Waits for the child to exit (killing it if it takes more than a few seconds) and
    /// says how it ended, with the end of its stderr.
    async fn ended(mut self, total: usize) -> String {
        let status = match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
            Ok(Ok(status)) => describe(status),
            Ok(Err(e)) => format!("could not be waited for ({e})"),
            Err(_) => {
                let _ = self.child.kill().await;
                "did not exit and was killed".to_owned()
            }
        };
        let stderr = self.stderr.await.unwrap_or_default();
        format!(
            "child process {} of {total} {status}{}",
            self.index + 1,
            tail(&stderr)
        )
    }
}

fn describe(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exited with code {code}"),
        None => format!("was ended by a signal ({status})"),
    }
}

/// The end of a child's stderr, indented, or nothing.
fn tail(stderr: &str) -> String {
    let text = stderr.trim();
    if text.is_empty() {
        return " (nothing on stderr)".to_owned();
    }
    let start = text
        .char_indices()
        .map(|(i, _)| i)
        .find(|&i| text.len() - i <= STDERR_TAIL)
        .unwrap_or(0);
    let shown: Vec<String> = text[start..]
        .lines()
        .map(|l| format!("\n    {l}"))
        .collect();
    format!(":{}", shown.concat())
}

/// The arguments of child `index`.
fn child_args(cli: &Cli, spec: &RunSpec, prefix: &str, index: usize, sqlite: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "--child-tables",
        prefix,
        "--child-index",
        &index.to_string(),
        "--workload",
        spec.workload.as_str(),
        "--rows",
        &spec.rows.to_string(),
        "--workers",
        &spec.workers.to_string(),
        "--duration",
        &format_duration(spec.duration),
        "--policy",
        spec.preset.name(),
        "--sqlite-begin",
        cli.sqlite_begin.as_str(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if let (false, Some(level)) = (sqlite, cli.isolation) {
        args.extend(["--isolation".to_owned(), level.as_str().to_owned()]);
    }
    args
}

/// Starts the children, starts them together, and collects their reports. `Ok(None)`:
/// Ctrl-C came before they started.
async fn supervise(
    fleet: Fleet<'_>,
    spec: &RunSpec,
    prefix: &str,
    interrupts: &Interrupts,
) -> Result<Option<Vec<ChildReport>>, Stopped> {
    let total = fleet.processes;
    let exe = std::env::current_exe().map_err(|e| {
        Stopped::Failed(format!(
            "could not find this program to start the child processes: {e}"
        ))
    })?;
    let sqlite = fleet.db_url.to_ascii_lowercase().starts_with("sqlite");
    let servers = crate::target::servers(fleet.db_url);
    let mut procs = Vec::with_capacity(total);
    let mut stdins: Vec<ChildStdin> = Vec::with_capacity(total);
    for index in 0..total {
        let mut command = Command::new(&exe);
        command
            .args(child_args(fleet.cli, spec, prefix, index, sqlite))
            // One server of several (a cluster's nodes) per process, round robin.
            .env(CHILD_DB_ENV, servers[index % servers.len()])
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A group of its own: a Ctrl-C typed at the terminal reaches the parent only,
        // which relays it (see the module's documentation).
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(|e| {
            Stopped::Failed(format!(
                "could not start child process {} of {total} ({}): {e}",
                index + 1,
                exe.display()
            ))
        })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Stopped::Failed("a child process has no pipes".into()));
        };
        stdins.push(stdin);
        procs.push(Proc {
            index,
            child,
            stdout: BufReader::new(stdout).lines(),
            stderr: tokio::spawn(async move {
                let mut text = String::new();
                let _ = stderr.read_to_string(&mut text).await;
                text
            }),
        });
    }
    // Everyone connects; nobody starts before everyone is ready.
    let mut level = interrupts.level.clone();
    for proc in &mut procs {
        let line = tokio::select! {
            line = tokio::time::timeout(READY_TIMEOUT, proc.stdout.next_line()) => line,
            // (An error, the watcher gone, disables this branch instead of stopping.)
            Ok(_) = level.wait_for(|l| *l >= 1) => {
                return Ok(None); // dropping the children kills them
            }
        };
        match line {
            Ok(Ok(Some(line))) if line.trim() == READY => {}
            Ok(_) => {
                let index = proc.index;
                let proc =
                    procs.swap_remove(procs.iter().position(|p| p.index == index).unwrap_or(0));
                return Err(Stopped::Failed(format!(
                    "{} before it was ready",
                    proc.ended(total).await
                )));
            }
            Err(_) => {
                return Err(Stopped::Failed(format!(
                    "child process {} of {total} was not ready within {}s",
                    proc.index + 1,
                    READY_TIMEOUT.as_secs()
                )));
            }
        }
    }
    for stdin in &mut stdins {
        // A child that died meanwhile shows up below, when it sends no report.
        let _ = stdin.write_all(format!("{GO}\n").as_bytes()).await;
        let _ = stdin.flush().await;
    }
    let label = format!("{} x{total}", spec.preset.name());
    let progress = Progress::new(&label, spec.duration);
    let start = tokio::time::Instant::now();
    let mut running = JoinSet::new();
    for proc in procs {
        running.spawn(finish(proc, total));
    }
    let mut reports: Vec<Option<ChildReport>> = vec![None; total];
    let mut stop_sent = false;
    let mut watching = true;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    let outcome = loop {
        let now = *level.borrow();
        if now >= 2 {
            running.abort_all();
            break Err(Stopped::Killed);
        }
        if now >= 1 && !stop_sent {
            stop_sent = true;
            for stdin in &mut stdins {
                let _ = stdin.write_all(format!("{STOP}\n").as_bytes()).await;
                let _ = stdin.flush().await;
            }
        }
        tokio::select! {
            joined = running.join_next() => match joined {
                None => break Ok(()),
                Some(Ok((index, Ok(report)))) => reports[index] = Some(report),
                Some(Ok((_, Err(why)))) => {
                    running.abort_all();
                    break Err(Stopped::Failed(why));
                }
                Some(Err(e)) => {
                    running.abort_all();
                    break Err(Stopped::Failed(format!("a child process's supervisor stopped: {e}")));
                }
            },
            changed = level.changed(), if watching => watching = changed.is_ok(),
            _ = ticker.tick() => {
                let done = reports.iter().filter(|r| r.is_some()).count();
                progress.update_time(start.elapsed(), &format!("{total} processes, {done} reported"));
            }
        }
    };
    progress.finish();
    // Abort kills what still runs (kill_on_drop); wait for the tasks to be gone.
    while running.join_next().await.is_some() {}
    drop(stdins);
    outcome?;
    Ok(Some(reports.into_iter().flatten().collect()))
}

/// Waits for child `proc`'s report and exit.
async fn finish(mut proc: Proc, total: usize) -> (usize, Result<ChildReport, String>) {
    let index = proc.index;
    let line = proc.stdout.next_line().await;
    let status = proc.child.wait().await;
    let report = match (line, status) {
        (Ok(Some(line)), Ok(status)) if status.success() => {
            serde_json::from_str(&line).map_err(|e| {
                format!(
                    "child process {} of {total} sent an unreadable report ({e})",
                    index + 1
                )
            })
        }
        _ => Err(proc.ended(total).await),
    };
    (index, report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn report(
        start: u64,
        elapsed: u64,
        committed: u64,
        latencies: Vec<u64>,
        keys: Vec<i64>,
    ) -> ChildReport {
        let retries = RetryCounter::default();
        retries.record(Some(txretry::TransientKind::SerializationFailure));
        retries.record(None);
        ChildReport {
            policy: "database".into(),
            committed,
            business_failed: 1,
            failed_by_kind: [("serialization_failure".to_owned(), 2)].into(),
            first_errors: [(
                "serialization_failure".to_owned(),
                format!("could not serialize ({committed})"),
            )]
            .into(),
            attempts: committed + 3,
            retries_by_kind: retries.by_kind(),
            started_unix_us: start,
            elapsed_us: elapsed,
            interrupted: false,
            latencies: latencies.into_iter().collect(),
            committed_keys: keys,
            maybe_committed_keys: Vec::new(),
        }
    }

    #[test]
    fn two_children_merge_into_one_run() {
        let a = report(
            1_000_000,
            5_000_000,
            3,
            vec![1_000, 2_000, 3_000],
            vec![1, 2, 2],
        );
        let mut b = report(1_010_000, 5_000_000, 2, vec![10_000, 4_000], vec![3, 1]);
        b.interrupted = true;
        b.failed_by_kind.insert("permanent".into(), 1);
        let all = aggregate(vec![a, b]).expect("merges");
        let t = &all.tally;
        assert_eq!(t.committed, 5);
        assert_eq!(t.business_failed, 2);
        assert_eq!(t.attempts, 11);
        assert_eq!(t.failed_by_kind["serialization_failure"], 4);
        assert_eq!(t.failed_by_kind["permanent"], 1);
        // The first child's message of a kind both had.
        assert_eq!(
            t.first_errors["serialization_failure"],
            "could not serialize (3)"
        );
        assert_eq!(t.failed(), 5);
        let by_kind = all.retries.by_kind();
        assert_eq!(by_kind["serialization_failure"], 2);
        assert_eq!(by_kind[crate::stats::AMBIGUOUS], 2);
        assert_eq!(all.retries.total(), 4);
        assert!(all.interrupted);
        assert_eq!(all.committed_by_process, vec![3, 2]);
        // From the first start to the last end.
        assert_eq!(all.elapsed, Duration::from_micros(5_010_000));
        assert_eq!(t.committed_keys.len(), 5);
        // Percentiles over every sample together, not the average of each child's.
        let p = crate::stats::Percentiles::of(&t.latencies);
        assert_eq!(p.p50, Some(3.0));
        assert_eq!(p.max, Some(10.0));
        assert_eq!(p.p95, Some(10.0));
    }

    #[test]
    fn a_stepped_clock_falls_back_to_the_longest_child() {
        let a = report(1_000_000, 2_000_000, 1, vec![1], vec![1]);
        let b = report(900_000_000, 2_500_000, 1, vec![1], vec![1]);
        assert_eq!(
            aggregate(vec![a.clone(), b]).expect("merges").elapsed,
            Duration::from_micros(2_500_000)
        );
        assert_eq!(
            aggregate(vec![a]).expect("merges").elapsed,
            Duration::from_secs(2)
        );
        assert_eq!(aggregate(Vec::new()).expect("empty").tally.committed, 0);
    }

    #[test]
    fn reports_survive_their_json_line() {
        let a = report(1, 2, 3, vec![4, 5, 6], vec![7, 8, 9]);
        let line = serde_json::to_string(&a).expect("serializes");
        assert!(!line.contains('\n'));
        assert_eq!(
            serde_json::from_str::<ChildReport>(&line).expect("parses"),
            a
        );
        let mut bogus = a;
        bogus.retries_by_kind.insert("bogus".into(), 1);
        assert!(aggregate(vec![bogus]).is_err());
    }

    #[test]
    fn children_get_the_same_run_and_no_url() {
        let cli = Cli::try_parse_from([
            "txretry-lab",
            "--db",
            "postgres://u:secret@h/db",
            "--workload",
            "hot-rows",
            "--isolation",
            "repeatable-read",
            "--processes",
            "4",
            "--workers",
            "8",
            "--duration",
            "1.5s",
        ])
        .expect("parses");
        let spec = RunSpec {
            workload: cli.workload,
            rows: 4,
            workers: 8,
            duration: cli.duration,
            options: txretry::TxOptions::new(),
            preset: Preset::Database,
            first_worker: 0,
            faults: None,
        };
        let args = child_args(&cli, &spec, "txlab_1_0", 3, false);
        let line = args.join(" ");
        assert!(!line.contains("secret") && !line.contains("--db"), "{line}");
        assert!(!line.contains("--processes"), "{line}");
        let child = Cli::try_parse_from(std::iter::once("txretry-lab".to_owned()).chain(args))
            .expect("a child's arguments parse");
        assert_eq!(child.child_tables.as_deref(), Some("txlab_1_0"));
        assert_eq!(child.child_index, 3);
        assert_eq!(child.workload, cli.workload);
        assert_eq!(child.rows, Some(4));
        assert_eq!(child.workers, 8);
        assert_eq!(child.duration, cli.duration);
        assert_eq!(child.isolation, cli.isolation);
        assert_eq!(child.processes, 1);
        assert_eq!(Preset::selected_list(&child.policy), vec![Preset::Database]);
        // SQLite ignores --isolation; a child is not told it.
        let sqlite = child_args(&cli, &spec, "txlab_1_0", 0, true);
        assert!(!sqlite.contains(&"--isolation".to_owned()));
    }

    #[test]
    fn stderr_tails_are_short_and_indented() {
        assert_eq!(tail(""), " (nothing on stderr)");
        assert_eq!(tail("error: no\n"), ":\n    error: no");
        let long = "x".repeat(10_000);
        assert!(tail(&long).len() < STDERR_TAIL + 10);
    }
}
