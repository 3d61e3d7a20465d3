//! One invocation: connect to the chosen database, run each selected preset one after the
//! other on fresh tables, and report.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Type};
use txretry::TxOptions;

use crate::backend::{self, LabDb};
use crate::cli::Cli;
use crate::json;
use crate::presets::Preset;
use crate::report::{self, RunReport, Setup};
use crate::run::{RunSpec, run};
use crate::target::Target;

/// Why nothing (or not everything) could be measured. Messages are already scrubbed of
/// passwords.
#[derive(Debug)]
pub struct Fatal(pub String);

/// Runs the lab and returns every run's report.
pub async fn main(cli: &Cli, target: &Target) -> Result<Vec<RunReport>, Fatal> {
    let rows = cli.rows.unwrap_or_else(|| cli.workload.default_rows());
    if target.is_sqlite() && cli.isolation.is_some() {
        eprintln!(
            "note: --isolation is ignored on SQLite (its transactions are always serializable)"
        );
    }
    let setup = Setup {
        db: target.to_string(),
        engine: target.engine(),
        workload: cli.workload.as_str(),
        isolation: match (target.is_sqlite(), cli.isolation) {
            (true, _) => "serializable".to_owned(),
            (false, Some(level)) => level.as_str().to_owned(),
            (false, None) => "server-default".to_owned(),
        },
        sqlite_begin: target.is_sqlite().then(|| cli.sqlite_begin.as_str()),
        rows,
        workers: cli.workers,
        duration: cli.duration,
    };
    let mut options = TxOptions::new().sqlite_begin(cli.sqlite_begin.begin());
    if let (false, Some(level)) = (target.is_sqlite(), cli.isolation) {
        options = options.isolation(level.level());
    }
    let spec = RunSpec {
        workload: cli.workload,
        rows,
        workers: cli.workers,
        duration: cli.duration,
        options,
        preset: Preset::Default,
    };
    let presets = Preset::selected(cli.policy);
    let connect_error =
        |e: sqlx::Error| Fatal(target.scrub(&format!("could not connect to {target}: {e}")));
    match target {
        Target::EmbeddedSqlite => {
            let dir = tempfile::Builder::new()
                .prefix("txretry-lab-")
                .tempdir()
                .map_err(|e| {
                    Fatal(format!(
                        "could not create a temp dir for the SQLite file: {e}"
                    ))
                })?;
            let pool = backend::sqlite_file(&dir.path().join("lab.db"), cli.workers)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, target, &setup, &spec, &presets, cli.json).await
        }
        Target::Sqlite(url) => {
            let pool = backend::sqlite_url(url, cli.workers)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, target, &setup, &spec, &presets, cli.json).await
        }
        Target::Postgres(url) => {
            let pool = backend::postgres(url, cli.workers)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, target, &setup, &spec, &presets, cli.json).await
        }
        Target::MySql(url) => {
            let pool = backend::mysql(url, cli.workers)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, target, &setup, &spec, &presets, cli.json).await
        }
    }
}

/// Runs the presets one after the other and prints the report.
async fn run_presets<DB>(
    pool: &Pool<DB>,
    target: &Target,
    setup: &Setup,
    spec: &RunSpec,
    presets: &[Preset],
    as_json: bool,
) -> Result<Vec<RunReport>, Fatal>
where
    DB: LabDb,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "\ninterrupted: finishing the transactions in flight, then reporting (Ctrl-C again to quit now)"
                );
                stop.store(true, Ordering::Relaxed);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                // This run's tables (txlab_<pid>_…) stay behind; they harm nothing.
                std::process::exit(130);
            }
        })
    };
    let mut reports = Vec::new();
    for &preset in presets {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let spec = RunSpec {
            preset,
            ..spec.clone()
        };
        match run(pool, &spec, &stop).await {
            Ok(result) => reports.push(RunReport::new(setup, result)),
            Err(e) => {
                watcher.abort();
                return Err(Fatal(target.scrub(&format!(
                    "could not set up the {} tables: {e}",
                    spec.workload.as_str()
                ))));
            }
        }
    }
    watcher.abort();
    pool.close().await;
    print_reports(setup, &reports, as_json);
    Ok(reports)
}

/// Human report on stdout (on stderr with `--json`, whose stdout holds only the JSON).
fn print_reports(setup: &Setup, reports: &[RunReport], as_json: bool) {
    let human = match reports {
        [one] => report::summary(setup, one),
        many => report::table(setup, many),
    };
    if as_json {
        if std::io::stderr().is_terminal() {
            eprint!("{human}");
        }
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", json::render(reports));
    } else {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "{human}");
    }
}
