//! The parent: create the tables, start the children together, relay Ctrl-C, merge their
//! reports, check the invariant once and drop the tables.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use sqlx::Pool;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::{JoinHandle, JoinSet};

use super::{CHILD_DB_ENV, ChildReport, GO, READY, READY_TIMEOUT, STDERR_TAIL, STOP, aggregate};
use txretry_lab::backend::LabDb;
use txretry_lab::cli::RunArgs;
use txretry_lab::duration::format_duration;
use txretry_lab::lab::{Fatal, Interrupts};
use txretry_lab::progress::Progress;
use txretry_lab::run::{RunResult, RunSpec, check};
use txretry_lab::target::Target;
use txretry_lab::workload::Schema;

/// What the children are to run, besides the preset.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fleet<'a> {
    /// The flags the parent was given.
    pub(super) args: &'a RunArgs,
    /// The database, for connecting only (it may hold a password).
    pub(super) db_url: &'a str,
    /// How many children.
    pub(super) processes: usize,
}

/// Runs `spec` in `fleet.processes` children on one set of tables, created and checked
/// and dropped here on `pool`. `Ok(None)`: Ctrl-C came before the children started, or a
/// second one killed them (the tables are dropped either way).
pub(super) async fn run_processes<DB: LabDb>(
    pool: &Pool<DB>,
    target: &Target,
    fleet: Fleet<'_>,
    spec: &RunSpec,
    interrupts: &Interrupts,
) -> Result<Option<RunResult>, Fatal> {
    let schema = Schema::new::<DB>(spec.workload, spec.rows);
    schema
        .create(pool)
        .await
        .map_err(|e| Fatal::setup(target, spec, &e))?;
    let outcome = supervise(fleet, spec, schema.prefix(), interrupts).await;
    let result = match outcome {
        Ok(Some(reports)) => match aggregate(reports) {
            Ok((all, committed_by_process)) => {
                let invariant = check(pool, &schema, &all.tally, 1).await;
                Ok(Some(RunResult {
                    committed_by_process,
                    ..RunResult::new(spec.preset, all, invariant)
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
fn child_args(
    cli: &RunArgs,
    spec: &RunSpec,
    prefix: &str,
    index: usize,
    sqlite: bool,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
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
    let servers = txretry_lab::target::servers(fleet.db_url);
    let mut procs = Vec::with_capacity(total);
    let mut stdins: Vec<ChildStdin> = Vec::with_capacity(total);
    for index in 0..total {
        let mut command = Command::new(&exe);
        command
            .args(child_args(fleet.args, spec, prefix, index, sqlite))
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
                progress.update(start.elapsed(), &format!("{total} processes, {done} reported"));
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
    use crate::{Bench, Command};
    use clap::Parser;
    use txretry_lab::presets::Preset;

    #[test]
    fn children_get_the_same_run_and_no_url() {
        let run = |args: Vec<String>| match Bench::try_parse_from(
            std::iter::once("txretry-bench".to_owned()).chain(args),
        ) {
            Ok(Bench {
                command: Command::Run(run),
            }) => run,
            other => panic!("not a run: {other:?}"),
        };
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let parent = run(words(&[
            "run",
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
        ]));
        let cli = &parent.run;
        let spec = RunSpec {
            workload: cli.workload,
            rows: 4,
            workers: 8,
            duration: cli.duration,
            options: txretry::TxOptions::new(),
            preset: Preset::Database,
            first_worker: 0,
            timed: false,
            in_flight: None,
            check_tries: 1,
        };
        let args = child_args(cli, &spec, "txlab_1_0", 3, false);
        let line = args.join(" ");
        assert!(!line.contains("secret") && !line.contains("--db"), "{line}");
        assert!(!line.contains("--processes"), "{line}");
        let child = run(args);
        assert_eq!(child.child_tables.as_deref(), Some("txlab_1_0"));
        assert_eq!(child.child_index, 3);
        assert_eq!(child.processes, None);
        let child = child.run;
        assert_eq!(child.workload, cli.workload);
        assert_eq!(child.rows, Some(4));
        assert_eq!(child.workers, 8);
        assert_eq!(child.duration, cli.duration);
        assert_eq!(child.isolation, cli.isolation);
        assert_eq!(Preset::selected_list(&child.policy), vec![Preset::Database]);
        // SQLite ignores --isolation; a child is not told it.
        let sqlite = child_args(cli, &spec, "txlab_1_0", 0, true);
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
