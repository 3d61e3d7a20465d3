//! One invocation: connect to the chosen database, run each selected preset one after the
//! other on fresh tables, and report.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Pool;
use tokio::sync::watch;

use crate::backend::{self, LabDb};
use crate::cli::RunArgs;
use crate::error::describe;
use crate::hints;
use crate::json;
use crate::presets::Preset;
use crate::report::{self, RunReport, Setup};
use crate::run::{RunResult, RunSpec, run};
use crate::server::{self, Facts};
use crate::signals::{self, StopSignals};
use crate::target::Target;

/// Why nothing (or not everything) could be measured. Messages are already scrubbed of
/// passwords.
#[derive(Debug)]
pub struct Fatal(pub String);

impl Fatal {
    /// `target` could not be reached.
    pub fn connect(target: &Target, e: &sqlx::Error) -> Fatal {
        Fatal(target.scrub(&format!("could not connect to {target}: {}", describe(e))))
    }

    /// The run's tables could not be set up on `target`.
    pub fn setup(target: &Target, spec: &RunSpec, e: &sqlx::Error) -> Fatal {
        let workload = spec.workload.as_str();
        Fatal(target.scrub(&format!(
            "could not set up the {workload} tables: {}",
            describe(e)
        )))
    }
}

/// Ctrl-C as a run sees it.
#[derive(Clone, Debug)]
pub struct Interrupts {
    /// 0, then 1 after the first Ctrl-C, 2 after the second.
    pub level: watch::Receiver<u8>,
}

/// Where each preset's run happens: here, in this process ([`InProcess`], the lab), or
/// spread over several processes (`txretry-bench run --processes N`).
pub trait Place {
    /// How many processes run the workload at once.
    fn processes(&self) -> usize;

    /// The connections this process's pool opens, for `workers` workers.
    fn pool_size(&self, workers: usize) -> usize;

    /// How long a worker waits for a pooled connection (Postgres) before its transaction
    /// fails with a connection error.
    fn acquire_timeout(&self) -> std::time::Duration {
        crate::backend::ACQUIRE_TIMEOUT
    }

    /// The connections the server must take in all for `workers` workers each, and the
    /// flags that ask for them (for the message when it cannot).
    fn connections(&self, workers: usize) -> (u64, String);

    /// Runs `spec` on fresh tables in `pool`'s database (`db_url`: how other processes
    /// connect to it) and checks them; `Ok(None)`: Ctrl-C stopped it before anything
    /// complete was measured.
    fn run<DB: LabDb>(
        &self,
        pool: &Pool<DB>,
        target: &Target,
        db_url: &str,
        spec: &RunSpec,
        stop: &Arc<AtomicBool>,
        interrupts: &Interrupts,
    ) -> impl Future<Output = Result<Option<RunResult>, Fatal>>;
}

/// The lab's own place: every run in this process, one worker per connection.
#[derive(Clone, Copy, Debug)]
pub struct InProcess;

impl Place for InProcess {
    fn processes(&self) -> usize {
        1
    }

    fn pool_size(&self, workers: usize) -> usize {
        workers
    }

    fn connections(&self, workers: usize) -> (u64, String) {
        (workers as u64, format!("--workers {workers}"))
    }

    async fn run<DB: LabDb>(
        &self,
        pool: &Pool<DB>,
        target: &Target,
        _db_url: &str,
        spec: &RunSpec,
        stop: &Arc<AtomicBool>,
        _interrupts: &Interrupts,
    ) -> Result<Option<RunResult>, Fatal> {
        let result = run(pool, spec, stop).await;
        result.map(Some).map_err(|e| Fatal::setup(target, spec, &e))
    }
}

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

/// Runs the lab and returns every run's report: each selected preset on fresh tables, in
/// `place`.
pub async fn main<P: Place>(
    args: &RunArgs,
    target: &Target,
    place: &P,
) -> Result<Vec<RunReport>, Fatal> {
    let rows = args.rows.unwrap_or_else(|| args.workload.default_rows());
    if target.is_sqlite() && args.isolation.is_some() {
        eprintln!(
            "note: --isolation is ignored on SQLite (its transactions are always serializable)"
        );
    }
    let processes = place.processes();
    let setup = Setup {
        db: target.to_string(),
        engine: target.engine(),
        workload: args.workload.as_str(),
        isolation: match (target.is_sqlite(), args.isolation) {
            (true, _) => "serializable".to_owned(),
            (false, Some(level)) => level.as_str().to_owned(),
            (false, None) => report::SERVER_DEFAULT.to_owned(),
        },
        sqlite_begin: target.is_sqlite().then(|| args.sqlite_begin.as_str()),
        rows,
        workers: args.workers,
        processes,
        duration: args.duration,
    };
    let spec = RunSpec::of(args, target, rows);
    let presets = Preset::selected_list(&args.policy);
    let connect_error = |e: sqlx::Error| Fatal::connect(target, &e);
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
            "several servers in --db are for several processes (txretry-bench run --processes N: process i connects to server i mod their number)".into(),
        ));
    }
    let pool_size = place.pool_size(args.workers);
    let run = |db_url: String, facts: Facts| Runs {
        target,
        setup: named_isolation(&setup, &facts),
        spec: &spec,
        presets: &presets,
        as_json: args.json,
        db_url,
        facts,
    };
    match target {
        Target::EmbeddedSqlite => {
            let (_dir, file) = temp_sqlite_file()?;
            let pool = backend::sqlite_file(&file, pool_size)
                .await
                .map_err(connect_error)?;
            let url = format!("sqlite://{}", file.display());
            run_presets(&pool, place, run(url, Facts::default())).await
        }
        Target::Sqlite(url) => {
            let pool = backend::sqlite_url(url, pool_size)
                .await
                .map_err(|e| Fatal(target.scrub(&backend::sqlite_open_failure(url, &e))))?;
            run_presets(&pool, place, run(url.clone(), Facts::default())).await
        }
        Target::Postgres(url) => {
            let first = first_server.unwrap_or(url);
            let pool = backend::postgres(first, pool_size, place.acquire_timeout())
                .await
                .map_err(connect_error)?;
            let facts = server::postgres(&pool).await;
            enough_connections(&facts, place.connections(args.workers))?;
            // Every server, as for MySQL: the children of `txretry-bench run --processes`
            // take server `i` mod their number from it.
            run_presets(&pool, place, run(url.clone(), facts)).await
        }
        Target::MySql(url) => {
            let pool = backend::mysql(first_server.unwrap_or(url), pool_size)
                .await
                .map_err(connect_error)?;
            let facts = server::mysql(&pool).await;
            enough_connections(&facts, place.connections(args.workers))?;
            run_presets(&pool, place, run(url.clone(), facts)).await
        }
    }
}

/// Refuses a run that needs more connections than the server ever accepts (its workers
/// would wait out the pool's acquire timeout and fail), and warns when other clients hold
/// so many that some may. `needed` and the flags that ask for them: [`Place::connections`].
fn enough_connections(facts: &Facts, (needed, flags): (u64, String)) -> Result<(), Fatal> {
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
    /// How other processes connect to the database (it may hold a password).
    db_url: String,
    /// What the server said about itself (nothing for SQLite).
    facts: Facts,
}

/// Runs the presets one after the other and prints the report.
async fn run_presets<DB: LabDb, P: Place>(
    pool: &Pool<DB>,
    place: &P,
    runs: Runs<'_>,
) -> Result<Vec<RunReport>, Fatal> {
    let Runs {
        target,
        ref setup,
        spec,
        presets,
        as_json,
        ref db_url,
        ref facts,
    } = runs;
    let stop = Arc::new(AtomicBool::new(false));
    let (level_tx, level) = watch::channel(0u8);
    let ctrl_c =
        StopSignals::listen().map_err(|e| Fatal(format!("could not listen for Ctrl-C: {e}")))?;
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
        match place
            .run(pool, target, db_url, &spec, &stop, &interrupts)
            .await
        {
            Ok(Some(result)) => reports.push(RunReport::new(setup, result).scrubbed(target)),
            Ok(None) => break,
            Err(fatal) => {
                watcher.abort();
                return Err(fatal);
            }
        }
    }
    watcher.abort();
    // Connections of aborted transactions may take a moment to close; quitting does not
    // wait for them long.
    let _ = tokio::time::timeout(CLOSE_WAIT, pool.close()).await;
    if signals::quitting() {
        // The tables are dropped (by the place's run); the temp dir goes when the caller
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
