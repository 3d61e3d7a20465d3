//! One invocation: connect to the chosen database, run each selected preset one after the
//! other on fresh tables, and report.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Type};
use tokio::sync::watch;
use txretry::TxOptions;

use crate::backend::{self, LabDb};
use crate::cli::Cli;
use crate::json;
use crate::multi::{self, Fleet, Interrupts};
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
        processes: cli.processes,
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
        first_worker: 0,
    };
    let presets = Preset::selected(cli.policy);
    let connect_error =
        |e: sqlx::Error| Fatal(target.scrub(&format!("could not connect to {target}: {e}")));
    let processes = cli.processes;
    if processes > 1
        && let Target::Sqlite(url) = target
        && (url.contains(":memory:") || url.contains("mode=memory"))
    {
        return Err(Fatal(
            "--processes needs a database the processes can share; an in-memory SQLite database lives in one process (use a file: sqlite://PATH, or plain `sqlite`)".into(),
        ));
    }
    // With several processes this one only creates, checks and drops the tables.
    let pool_size = if processes > 1 { 1 } else { cli.workers };
    let run = |db_url: Option<String>| Runs {
        target,
        setup: &setup,
        spec: &spec,
        presets: &presets,
        as_json: cli.json,
        fleet: db_url.map(|url| (cli, url)),
    };
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
            let file = dir.path().join("lab.db");
            let pool = backend::sqlite_file(&file, pool_size)
                .await
                .map_err(connect_error)?;
            let url = (processes > 1).then(|| format!("sqlite://{}", file.display()));
            run_presets(&pool, run(url)).await
        }
        Target::Sqlite(url) => {
            let pool = backend::sqlite_url(url, pool_size)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, run((processes > 1).then(|| url.clone()))).await
        }
        Target::Postgres(url) => {
            let pool = backend::postgres(url, pool_size)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, run((processes > 1).then(|| url.clone()))).await
        }
        Target::MySql(url) => {
            let pool = backend::mysql(url, pool_size)
                .await
                .map_err(connect_error)?;
            run_presets(&pool, run((processes > 1).then(|| url.clone()))).await
        }
    }
}

/// What [`run_presets`] runs.
struct Runs<'a> {
    target: &'a Target,
    setup: &'a Setup,
    spec: &'a RunSpec,
    presets: &'a [Preset],
    as_json: bool,
    /// With `--processes` above 1: the command line and the URL the children connect to.
    fleet: Option<(&'a Cli, String)>,
}

/// Runs this process as a child of a `--processes` run (see [`multi`]): the tables named
/// `prefix` exist; the database URL comes from the environment.
pub async fn child(cli: &Cli, target: &Target, prefix: &str) -> Result<(), Fatal> {
    let rows = cli.rows.unwrap_or_else(|| cli.workload.default_rows());
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
        preset: Preset::selected(cli.policy)
            .first()
            .copied()
            .unwrap_or(Preset::Default),
        first_worker: cli
            .child_index
            .saturating_mul(u32::try_from(cli.workers).unwrap_or(u32::MAX)),
    };
    let prefix = prefix.to_owned();
    let connect_error =
        |e: sqlx::Error| Fatal(target.scrub(&format!("could not connect to {target}: {e}")));
    match target {
        Target::EmbeddedSqlite => Err(Fatal("a child needs the parent's database".into())),
        Target::Sqlite(url) => {
            let pool = backend::sqlite_url(url, cli.workers)
                .await
                .map_err(connect_error)?;
            multi::child(pool, spec, prefix, cli.child_index).await
        }
        Target::Postgres(url) => {
            let pool = backend::postgres(url, cli.workers)
                .await
                .map_err(connect_error)?;
            multi::child(pool, spec, prefix, cli.child_index).await
        }
        Target::MySql(url) => {
            let pool = backend::mysql(url, cli.workers)
                .await
                .map_err(connect_error)?;
            multi::child(pool, spec, prefix, cli.child_index).await
        }
    }
}

/// Runs the presets one after the other and prints the report.
async fn run_presets<DB>(pool: &Pool<DB>, runs: Runs<'_>) -> Result<Vec<RunReport>, Fatal>
where
    DB: LabDb,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let Runs {
        target,
        setup,
        spec,
        presets,
        as_json,
        ref fleet,
    } = runs;
    let stop = Arc::new(AtomicBool::new(false));
    let (level_tx, level) = watch::channel(0u8);
    let several = fleet.is_some();
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "\ninterrupted: finishing the transactions in flight, then reporting (Ctrl-C again to quit now)"
                );
                stop.store(true, Ordering::Relaxed);
                let _ = level_tx.send(1);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                if several {
                    // The children are killed and the tables dropped (multi.rs), then exit.
                    let _ = level_tx.send(2);
                    std::future::pending::<()>().await;
                }
                // This run's tables (txlab_<pid>_…) stay behind; they harm nothing.
                std::process::exit(130);
            }
        })
    };
    let interrupts = Interrupts { level };
    let mut reports = Vec::new();
    for &preset in presets {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let spec = RunSpec {
            preset,
            ..spec.clone()
        };
        if let Some((cli, url)) = fleet {
            let fleet = Fleet {
                cli,
                db_url: url,
                processes: setup.processes,
            };
            match multi::run_processes(pool, target, fleet, &spec, &interrupts).await {
                Ok(Some(result)) => reports.push(RunReport::new(setup, result)),
                Ok(None) => break,
                Err(fatal) => {
                    watcher.abort();
                    return Err(fatal);
                }
            }
            continue;
        }
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
