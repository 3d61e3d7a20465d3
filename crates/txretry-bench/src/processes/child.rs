//! A child process: connect, say ready, start on `go`, run, report on stdout.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Pool;
use tokio::sync::oneshot;

use super::{CHILD_DB_ENV, ChildReport, FAIL_CHILD_ENV, GO, READY, STOP};
use txretry_lab::backend::{self, LabDb};
use txretry_lab::cli::RunArgs;
use txretry_lab::lab::Fatal;
use txretry_lab::run::{RunSpec, drive};
use txretry_lab::target::Target;
use txretry_lab::workload::Schema;

/// Runs this process as child `index` of a `--processes` run on the tables named `prefix`
/// (they exist; the database URL comes from the environment), with `args`'s workload,
/// workers and first policy.
pub async fn main(args: &RunArgs, prefix: &str, index: u32) -> Result<(), Fatal> {
    let Some(target) = std::env::var(CHILD_DB_ENV)
        .ok()
        .and_then(|url| Target::parse(&url).ok())
    else {
        return Err(Fatal(
            "--child-tables is internal to --processes (no database was handed over)".into(),
        ));
    };
    let rows = args.rows.unwrap_or_else(|| args.workload.default_rows());
    let spec = RunSpec {
        first_worker: index.saturating_mul(u32::try_from(args.workers).unwrap_or(u32::MAX)),
        ..RunSpec::of(args, &target, rows)
    };
    let prefix = prefix.to_owned();
    let connect_error = |e: sqlx::Error| Fatal::connect(&target, &e);
    match &target {
        Target::EmbeddedSqlite => Err(Fatal("a child needs the parent's database".into())),
        Target::Sqlite(url) => {
            let pool = backend::sqlite_url(url, args.workers)
                .await
                .map_err(connect_error)?;
            run(pool, spec, prefix, index).await
        }
        Target::Postgres(url) => {
            let pool = backend::postgres(url, args.workers, backend::ACQUIRE_TIMEOUT)
                .await
                .map_err(connect_error)?;
            run(pool, spec, prefix, index).await
        }
        Target::MySql(url) => {
            let pool = backend::mysql(url, args.workers)
                .await
                .map_err(connect_error)?;
            run(pool, spec, prefix, index).await
        }
    }
}

/// Runs child `index` on `pool` (one connection per worker): ready, go, run, report.
async fn run<DB: LabDb>(
    pool: Pool<DB>,
    spec: RunSpec,
    prefix: String,
    index: u32,
) -> Result<(), Fatal> {
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
