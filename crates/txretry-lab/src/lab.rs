//! One invocation: connect to the chosen database, run each selected preset one after the
//! other on fresh tables, and report.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Type};
use tokio::sync::watch;
use txretry::TxOptions;

use crate::backend::{self, LabDb};
use crate::cli::Cli;
use crate::error::describe;
use crate::fault::FaultPlan;
use crate::hints;
use crate::json;
use crate::multi::{self, Fleet, Interrupts};
use crate::presets::Preset;
use crate::report::{self, RunReport, Setup};
use crate::run::{RunSpec, run};
use crate::server::{self, Facts};
use crate::signals::{self, CtrlC};
use crate::target::Target;

/// Why nothing (or not everything) could be measured. Messages are already scrubbed of
/// passwords.
#[derive(Debug)]
pub struct Fatal(pub String);

/// A path for the embedded SQLite file in a new temp dir; the dir (and the file) go when
/// the returned guard is dropped.
pub fn temp_sqlite_file() -> Result<(tempfile::TempDir, std::path::PathBuf), Fatal> {
    let dir = tempfile::Builder::new()
        .prefix("txretry-lab-")
        .tempdir()
        .map_err(|e| {
            Fatal(format!(
                "could not create a temp dir for the SQLite file: {e}"
            ))
        })?;
    let file = dir.path().join("lab.db");
    Ok((dir, file))
}

/// Runs the lab and returns every run's report; `faults` (checked by
/// [`FaultPlan::from_flags`]) are injected during each run.
pub async fn main(
    cli: &Cli,
    target: &Target,
    faults: Option<FaultPlan>,
) -> Result<Vec<RunReport>, Fatal> {
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
            (false, None) => report::SERVER_DEFAULT.to_owned(),
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
        faults: faults.clone(),
    };
    let presets = Preset::selected_list(&cli.policy);
    let connect_error = |e: sqlx::Error| {
        Fatal(target.scrub(&format!("could not connect to {target}: {}", describe(&e))))
    };
    if let Some(plan) = &faults {
        eprintln!(
            "faults: {} every {} through {} (the first after one interval)",
            plan.kind.as_str(),
            crate::duration::format_duration(plan.every),
            plan.cluster.display()
        );
    }
    let processes = cli.processes;
    if processes > 1
        && let Target::Sqlite(url) = target
        && (url.contains(":memory:") || url.contains("mode=memory"))
    {
        return Err(Fatal(
            "--processes needs a database the processes can share; an in-memory SQLite database lives in one process (use a file: sqlite://PATH, or plain `sqlite`)".into(),
        ));
    }
    // Several servers of one cluster: one per process; this one uses the first.
    let first_server = target.raw_url().map(|url| crate::target::servers(url)[0]);
    if processes < 2
        && target
            .raw_url()
            .is_some_and(|url| crate::target::servers(url).len() > 1)
    {
        return Err(Fatal(
            "several servers in --db need --processes 2 or more (process i connects to server i mod their number)".into(),
        ));
    }
    // With several processes this one only creates, checks and drops the tables.
    let pool_size = if processes > 1 { 1 } else { cli.workers };
    let run = |db_url: Option<String>, facts: Facts| Runs {
        target,
        setup: named_isolation(&setup, &facts),
        spec: &spec,
        presets: &presets,
        as_json: cli.json,
        fleet: db_url.map(|url| (cli, url)),
        facts,
    };
    match target {
        Target::EmbeddedSqlite => {
            let (_dir, file) = temp_sqlite_file()?;
            let pool = backend::sqlite_file(&file, pool_size)
                .await
                .map_err(connect_error)?;
            let url = (processes > 1).then(|| format!("sqlite://{}", file.display()));
            run_presets(&pool, run(url, Facts::default())).await
        }
        Target::Sqlite(url) => {
            let pool = backend::sqlite_url(url, pool_size)
                .await
                .map_err(|e| Fatal(target.scrub(&backend::sqlite_open_failure(url, &e))))?;
            run_presets(
                &pool,
                run((processes > 1).then(|| url.clone()), Facts::default()),
            )
            .await
        }
        Target::Postgres(url) => {
            let url = first_server.unwrap_or(url);
            let pool = if faults.is_some() {
                backend::postgres_ha(url, pool_size).await
            } else {
                backend::postgres(url, pool_size).await
            }
            .map_err(connect_error)?;
            let facts = server::postgres(&pool).await;
            enough_connections(&facts, cli)?;
            run_presets(&pool, run((processes > 1).then(|| url.to_owned()), facts)).await
        }
        Target::MySql(url) => {
            let pool = backend::mysql(first_server.unwrap_or(url), pool_size)
                .await
                .map_err(connect_error)?;
            let facts = server::mysql(&pool).await;
            enough_connections(&facts, cli)?;
            run_presets(&pool, run((processes > 1).then(|| url.clone()), facts)).await
        }
    }
}

/// Refuses a run that needs more connections than the server ever accepts (its workers
/// would wait out the pool's acquire timeout and fail), and warns when other clients hold
/// so many that some may.
fn enough_connections(facts: &Facts, cli: &Cli) -> Result<(), Fatal> {
    let workers = cli.workers as u64;
    let (needed, flags) = if cli.processes > 1 {
        // Every child's pool, plus the parent's one connection.
        (
            workers * cli.processes as u64 + 1,
            format!("--processes {} x --workers {}", cli.processes, cli.workers),
        )
    } else {
        (workers, format!("--workers {}", cli.workers))
    };
    if let Some(why) = server::too_many(facts, needed, &flags) {
        return Err(Fatal(why));
    }
    if let Some(warning) = server::crowded(facts, needed, 1) {
        eprintln!("{warning}");
    }
    Ok(())
}

/// `setup` with the server's default isolation named, when the run used it.
fn named_isolation(setup: &Setup, facts: &Facts) -> Setup {
    let mut setup = setup.clone();
    if let (true, Some(level)) = (
        setup.isolation == report::SERVER_DEFAULT,
        &facts.default_isolation,
    ) {
        setup.isolation = format!("{level} (server default)");
    }
    setup
}

/// What [`run_presets`] runs.
struct Runs<'a> {
    target: &'a Target,
    setup: Setup,
    spec: &'a RunSpec,
    presets: &'a [Preset],
    as_json: bool,
    /// With `--processes` above 1: the command line and the URL the children connect to.
    fleet: Option<(&'a Cli, String)>,
    /// What the server said about itself (nothing for SQLite).
    facts: Facts,
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
        preset: Preset::selected_list(&cli.policy)
            .first()
            .copied()
            .unwrap_or(Preset::Default),
        first_worker: cli
            .child_index
            .saturating_mul(u32::try_from(cli.workers).unwrap_or(u32::MAX)),
        faults: None,
    };
    let prefix = prefix.to_owned();
    let connect_error = |e: sqlx::Error| {
        Fatal(target.scrub(&format!("could not connect to {target}: {}", describe(&e))))
    };
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
        ref setup,
        spec,
        presets,
        as_json,
        ref fleet,
        ref facts,
    } = runs;
    let stop = Arc::new(AtomicBool::new(false));
    let (level_tx, level) = watch::channel(0u8);
    let ctrl_c = CtrlC::listen().map_err(|e| Fatal(format!("could not listen for Ctrl-C: {e}")))?;
    let watcher = {
        let stop = stop.clone();
        let level_tx = Arc::new(level_tx);
        let quit_tx = level_tx.clone();
        tokio::spawn(ctrl_c.watch(
            move || {
                stop.store(true, Ordering::Relaxed);
                let _ = level_tx.send(1);
            },
            // The workers see `signals::quitting()`, the children's supervisor level 2:
            // both abort what is in flight, then the tables are dropped.
            move || {
                let _ = quit_tx.send(2);
            },
        ))
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
                Ok(Some(result)) => reports.push(RunReport::new(setup, result).scrubbed(target)),
                Ok(None) => break,
                Err(fatal) => {
                    watcher.abort();
                    return Err(fatal);
                }
            }
            continue;
        }
        match run(pool, &spec, &stop).await {
            Ok(result) => reports.push(RunReport::new(setup, result).scrubbed(target)),
            Err(e) => {
                watcher.abort();
                return Err(Fatal(target.scrub(&format!(
                    "could not set up the {} tables: {}",
                    spec.workload.as_str(),
                    describe(&e)
                ))));
            }
        }
    }
    watcher.abort();
    // Connections of aborted transactions may take a moment to close; quitting does not
    // wait for them long.
    let _ = tokio::time::timeout(CLOSE_WAIT, pool.close()).await;
    if signals::quitting() {
        // The tables are dropped (run.rs, multi/); the temp dir goes when the caller
        // returns. Nothing measured is complete enough to report.
        eprintln!("quit: no report");
        return Ok(Vec::new());
    }
    print_reports(setup, &reports, facts, as_json);
    Ok(reports)
}

/// How long closing the pool may take at the end.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Human report on stdout (on stderr with `--json`, whose stdout holds only the JSON),
/// hints included.
fn print_reports(setup: &Setup, reports: &[RunReport], facts: &Facts, as_json: bool) {
    let mut human = match reports {
        [one] => report::summary(setup, one),
        many => report::table(setup, many),
    };
    for hint in hints::hints(setup, reports, facts) {
        human.push_str(&hint);
        human.push('\n');
    }
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
