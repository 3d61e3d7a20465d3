//! Runner cost on a real round trip (issue 22, item 6): the same one-statement transaction
//! (`UPDATE … SET v = v + 1 WHERE id = <worker>`, each worker on its own row, so nothing
//! contends but SQLite's one writer) run through the raw driver and through the txretry
//! runner, side by side in one run, at 1 and 8 connections (rusqlite: 1, blocking).
//!
//! The raw side is what an application writes without txretry: BEGIN (the runner's default
//! BEGIN on SQLite, `BEGIN IMMEDIATE`), the statement, COMMIT, on the same pool or client
//! the runner uses, so both sides share connections and statement caches. Each round runs
//! both sides for the same time, in alternating order (raw first in even rounds, runner
//! first in odd ones) to cancel drift; a round's ratio is runner ÷ raw commits/s of that
//! round. Printed per cell: the mean commits/s of each side, the median of the rounds'
//! ratios, the middle half of them (25th–75th percentile) and their min–max. Many short
//! rounds, not a few long ones: on a shared machine the load comes in bursts, and a short
//! round gives both sides nearly the same burst. Nothing is asserted.
//!
//! ```sh
//! cargo bench --features sqlx-postgres,sqlx-mysql,sqlx-sqlite,tokio-postgres,mysql_async,rusqlite \
//!     --bench runner_cost [-- <cell filter>…]
//! ```
//!
//! Servers: `TXRETRY_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`) and
//! `TXRETRY_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`); a cell whose server does
//! not answer is skipped with a message. `TXRETRY_BENCH_SECONDS` (default 0.25) per side per
//! round, `TXRETRY_BENCH_ROUNDS` (default 40). A filter keeps the cells whose name contains
//! it (`sqlx-postgres`, `x8`, …).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use txretry::RetryPolicy;

/// The table every cell updates (one row per worker; a Postgres or MariaDB table of this name
/// is dropped and created again).
const TABLE: &str = "txretry_bench_runner_cost";

/// Each side runs this long before a cell's rounds: connections opened, statements prepared,
/// caches filled.
const WARM_UP: Duration = Duration::from_secs(1);

/// Sets up and measures one cell (a driver at a connection count).
type Cell<'a> = Box<dyn Fn() -> Result<(), String> + 'a>;

type TxFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// One transaction of worker `w`, raw (`false`) or through the runner (`true`).
type AsyncTx = Arc<dyn Fn(usize, bool) -> TxFuture + Send + Sync>;

struct Settings {
    side: Duration,
    rounds: usize,
    filters: Vec<String>,
}

impl Settings {
    fn from_env() -> Self {
        let number = |name: &str, default: f64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(default)
        };
        let filters = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--"))
            .collect();
        Self {
            side: Duration::from_secs_f64(number("TXRETRY_BENCH_SECONDS", 0.25)),
            rounds: number("TXRETRY_BENCH_ROUNDS", 40.0) as usize,
            filters,
        }
    }

    fn wants(&self, cell: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| cell.contains(f.as_str()))
    }
}

/// What one side did in one round.
#[derive(Clone, Copy)]
struct Sample {
    per_second: f64,
    errors: u64,
}

/// Runs `workers` loops of `tx` for `time`; commits per second over the whole run (the
/// transactions in flight at the deadline finish and count).
async fn run_async(tx: &AsyncTx, workers: usize, runner: bool, time: Duration) -> Sample {
    let start = Instant::now();
    let deadline = start + time;
    let loops: Vec<_> = (0..workers)
        .map(|w| {
            let tx = tx.clone();
            tokio::spawn(async move {
                let (mut done, mut errors) = (0u64, 0u64);
                while Instant::now() < deadline {
                    match tx(w, runner).await {
                        Ok(()) => done += 1,
                        Err(e) => {
                            if errors == 0 {
                                eprintln!("  worker {w}: {e}");
                            }
                            errors += 1;
                        }
                    }
                }
                (done, errors)
            })
        })
        .collect();
    let (mut done, mut errors) = (0, 0);
    for handle in loops {
        let (d, e) = handle.await.expect("a worker panicked");
        done += d;
        errors += e;
    }
    Sample {
        per_second: done as f64 / start.elapsed().as_secs_f64(),
        errors,
    }
}

fn run_blocking(
    tx: &mut dyn FnMut(bool) -> Result<(), String>,
    runner: bool,
    time: Duration,
) -> Sample {
    let start = Instant::now();
    let (mut done, mut errors) = (0u64, 0u64);
    while start.elapsed() < time {
        match tx(runner) {
            Ok(()) => done += 1,
            Err(e) => {
                if errors == 0 {
                    eprintln!("  {e}");
                }
                errors += 1;
            }
        }
    }
    Sample {
        per_second: done as f64 / start.elapsed().as_secs_f64(),
        errors,
    }
}

/// The rounds of one cell: `side(runner)` measures one side for the given time.
async fn rounds<F, Fut>(name: &str, settings: &Settings, mut side: F)
where
    F: FnMut(bool, Duration) -> Fut,
    Fut: Future<Output = Sample>,
{
    let warm = WARM_UP;
    side(false, warm).await;
    side(true, warm).await;
    let mut raw = Vec::new();
    let mut runner = Vec::new();
    for round in 0..settings.rounds {
        let (first, second) = if round % 2 == 0 {
            (false, true)
        } else {
            (true, false)
        };
        let a = side(first, settings.side).await;
        let b = side(second, settings.side).await;
        let (r, t) = if first { (b, a) } else { (a, b) };
        raw.push(r);
        runner.push(t);
    }
    report(name, &raw, &runner);
}

/// The rounds of a cell whose transactions `tx` runs on `workers` tasks.
async fn measure(name: &str, settings: &Settings, workers: usize, tx: AsyncTx) {
    rounds(name, settings, |runner, time| {
        let tx = tx.clone();
        async move { run_async(&tx, workers, runner, time).await }
    })
    .await;
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn report(name: &str, raw: &[Sample], runner: &[Sample]) {
    let mut ratios: Vec<f64> = raw
        .iter()
        .zip(runner)
        .map(|(r, t)| t.per_second / r.per_second)
        .collect();
    let mean = |samples: &[Sample]| {
        samples.iter().map(|s| s.per_second).sum::<f64>() / samples.len() as f64
    };
    let errors: u64 = raw.iter().chain(runner).map(|s| s.errors).sum();
    let ratio = median(&mut ratios);
    let quartile = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    println!(
        "| {name} | {:.0} | {:.0} | **{ratio:.3}** | {:.3}–{:.3} | {:.3}–{:.3} |{}",
        mean(raw),
        mean(runner),
        quartile(0.25),
        quartile(0.75),
        ratios[0],
        ratios[ratios.len() - 1],
        if errors > 0 {
            format!(" {errors} errors")
        } else {
            String::new()
        },
    );
}

fn postgres_url() -> String {
    std::env::var("TXRETRY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn mysql_url() -> String {
    std::env::var("TXRETRY_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// The statements that make the table afresh on MariaDB, one per query.
fn mysql_table() -> [String; 3] {
    [
        format!("DROP TABLE IF EXISTS {TABLE}"),
        format!("CREATE TABLE {TABLE} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB"),
        format!("INSERT INTO {TABLE} VALUES (0,0),(1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0)"),
    ]
}

/// The one-statement transaction on the sqlx pool `$pool`, raw or through the runner.
/// A macro, not a generic function: sqlx's bounds for a query generic over the database are
/// longer than the three copies it replaces.
macro_rules! sqlx_tx {
    ($pool:expr, $sql:expr, $begin:expr) => {{
        let pool = $pool;
        let policy = RetryPolicy::default();
        let tx: AsyncTx = Arc::new(move |w, runner| {
            let pool = pool.clone();
            let policy = policy.clone();
            let id = w as i32;
            Box::pin(async move {
                if runner {
                    txretry::sqlx::transaction(&pool, &policy, async move |tx| {
                        sqlx::query($sql).bind(id).execute(&mut **tx).await?;
                        Ok::<_, sqlx::Error>(())
                    })
                    .await
                    .map_err(|e| e.to_string())
                } else {
                    async {
                        let mut tx = match $begin {
                            Some(begin) => pool.begin_with(begin).await?,
                            None => pool.begin().await?,
                        };
                        sqlx::query($sql).bind(id).execute(&mut *tx).await?;
                        tx.commit().await
                    }
                    .await
                    .map_err(|e: sqlx::Error| e.to_string())
                }
            })
        });
        tx
    }};
}

async fn sqlx_postgres(settings: &Settings, workers: usize) -> Result<(), String> {
    use sqlx::postgres::PgPoolOptions;
    let pool = PgPoolOptions::new()
        .max_connections(workers as u32)
        .min_connections(workers as u32)
        .connect(&postgres_url())
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (id int PRIMARY KEY, v bigint NOT NULL);
         INSERT INTO {TABLE} SELECT g, 0 FROM generate_series(0, 7) g"
    )))
    .execute(&pool)
    .await
    .map_err(|e| e.to_string())?;
    let tx = sqlx_tx!(
        pool,
        "UPDATE txretry_bench_runner_cost SET v = v + 1 WHERE id = $1",
        None::<&'static str>
    );
    measure(&format!("sqlx-postgres x{workers}"), settings, workers, tx).await;
    Ok(())
}

async fn sqlx_mysql(settings: &Settings, workers: usize) -> Result<(), String> {
    use sqlx::mysql::MySqlPoolOptions;
    let pool = MySqlPoolOptions::new()
        .max_connections(workers as u32)
        .min_connections(workers as u32)
        .connect(&mysql_url())
        .await
        .map_err(|e| e.to_string())?;
    for sql in mysql_table() {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .map_err(|e| e.to_string())?;
    }
    let tx = sqlx_tx!(
        pool,
        "UPDATE txretry_bench_runner_cost SET v = v + 1 WHERE id = ?",
        None::<&'static str>
    );
    measure(
        &format!("sqlx-mysql (MariaDB) x{workers}"),
        settings,
        workers,
        tx,
    )
    .await;
    Ok(())
}

/// A SQLite file in WAL mode with `synchronous = NORMAL` (no fsync per commit: the disk is
/// shared with other work on the machine and would swamp the difference measured).
async fn sqlx_sqlite(
    settings: &Settings,
    workers: usize,
    dir: &std::path::Path,
) -> Result<(), String> {
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let options = SqliteConnectOptions::new()
        .filename(dir.join(format!("sqlx-{workers}.db")))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .max_connections(workers as u32)
        .min_connections(workers as u32)
        .connect_with(options)
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS txretry_bench_runner_cost (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
         INSERT OR IGNORE INTO txretry_bench_runner_cost VALUES (0,0),(1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0)",
    )
    .execute(&pool)
    .await
    .map_err(|e| e.to_string())?;
    let tx = sqlx_tx!(
        pool,
        "UPDATE txretry_bench_runner_cost SET v = v + 1 WHERE id = ?",
        Some("BEGIN IMMEDIATE")
    );
    measure(&format!("sqlx-sqlite x{workers}"), settings, workers, tx).await;
    Ok(())
}

async fn tokio_postgres(settings: &Settings, workers: usize) -> Result<(), String> {
    use tokio::sync::Mutex;
    use tokio_postgres::NoTls;
    let mut clients = Vec::new();
    for w in 0..workers {
        let (client, connection) = tokio_postgres::connect(&postgres_url(), NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        if w == 0 {
            client
                .batch_execute(&format!(
                    "DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (id int PRIMARY KEY, v bigint NOT NULL);
                     INSERT INTO {TABLE} SELECT g, 0 FROM generate_series(0, 7) g"
                ))
                .await
                .map_err(|e| e.to_string())?;
        }
        let update = client
            .prepare(&format!("UPDATE {TABLE} SET v = v + 1 WHERE id = $1"))
            .await
            .map_err(|e| e.to_string())?;
        clients.push(Mutex::new((client, update)));
    }
    let clients = Arc::new(clients);
    let policy = RetryPolicy::default();
    let tx: AsyncTx = Arc::new(move |w, runner| {
        let clients = clients.clone();
        let policy = policy.clone();
        let id = w as i32;
        Box::pin(async move {
            let mut held = clients[w].lock().await;
            let (client, update) = &mut *held;
            if runner {
                let update = update.clone();
                txretry::tokio_postgres::transaction(client, &policy, async move |tx| {
                    tx.execute(&update, &[&id]).await
                })
                .await
                .map(drop)
                .map_err(|e| e.to_string())
            } else {
                async {
                    let tx = client.transaction().await?;
                    tx.execute(&*update, &[&id]).await?;
                    tx.commit().await
                }
                .await
                .map_err(|e: tokio_postgres::Error| e.to_string())
            }
        })
    });
    measure(&format!("tokio-postgres x{workers}"), settings, workers, tx).await;
    Ok(())
}

async fn mysql_async(settings: &Settings, workers: usize) -> Result<(), String> {
    use mysql_async::prelude::Queryable;
    use mysql_async::{Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, TxOpts};
    let opts = Opts::from_url(&mysql_url()).map_err(|e| e.to_string())?;
    let constraints = PoolConstraints::new(workers, workers).expect("min ≤ max");
    let pool = Pool::new(
        OptsBuilder::from_opts(opts).pool_opts(PoolOpts::default().with_constraints(constraints)),
    );
    {
        let mut conn = pool.get_conn().await.map_err(|e| e.to_string())?;
        for sql in mysql_table() {
            conn.query_drop(sql).await.map_err(|e| e.to_string())?;
        }
    }
    const UPDATE: &str = "UPDATE txretry_bench_runner_cost SET v = v + 1 WHERE id = ?";
    let policy = RetryPolicy::default();
    let tx: AsyncTx = Arc::new(move |w, runner| {
        let pool = pool.clone();
        let policy = policy.clone();
        let id = w as i32;
        Box::pin(async move {
            if runner {
                txretry::mysql_async::transaction(&pool, &policy, async move |tx| {
                    tx.exec_drop(UPDATE, (id,)).await
                })
                .await
                .map_err(|e| e.to_string())
            } else {
                async {
                    let mut conn = pool.get_conn().await?;
                    let mut tx = conn.start_transaction(TxOpts::default()).await?;
                    tx.exec_drop(UPDATE, (id,)).await?;
                    tx.commit().await
                }
                .await
                .map_err(|e: mysql_async::Error| e.to_string())
            }
        })
    });
    measure(
        &format!("mysql_async (MariaDB) x{workers}"),
        settings,
        workers,
        tx,
    )
    .await;
    Ok(())
}

/// rusqlite, blocking, one connection, on the same kind of file as [`sqlx_sqlite`].
fn rusqlite_cell(settings: &Settings, dir: &std::path::Path) -> Result<(), String> {
    use rusqlite::TransactionBehavior;
    const UPDATE: &str = "UPDATE txretry_bench_runner_cost SET v = v + 1 WHERE id = ?1";
    let mut conn =
        rusqlite::Connection::open(dir.join("rusqlite.db")).map_err(|e| e.to_string())?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE txretry_bench_runner_cost (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
         INSERT INTO txretry_bench_runner_cost VALUES (0, 0);",
    )
    .map_err(|e| e.to_string())?;
    let policy = RetryPolicy::default();
    let mut tx = |runner: bool| -> Result<(), String> {
        if runner {
            txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
                tx.prepare_cached(UPDATE)?.execute([0])
            })
            .map(drop)
            .map_err(|e| e.to_string())
        } else {
            (|| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.prepare_cached(UPDATE)?.execute([0])?;
                tx.commit()
            })()
            .map_err(|e: rusqlite::Error| e.to_string())
        }
    };
    let warm = WARM_UP;
    run_blocking(&mut tx, false, warm);
    run_blocking(&mut tx, true, warm);
    let mut raw = Vec::new();
    let mut runner = Vec::new();
    for round in 0..settings.rounds {
        let first = round % 2 == 1;
        let a = run_blocking(&mut tx, first, settings.side);
        let b = run_blocking(&mut tx, !first, settings.side);
        let (r, t) = if first { (b, a) } else { (a, b) };
        raw.push(r);
        runner.push(t);
    }
    report("rusqlite x1 (blocking)", &raw, &runner);
    Ok(())
}

fn main() {
    let settings = Settings::from_env();
    let dir = tempfile::tempdir().expect("a temporary directory");
    println!(
        "runner cost: {} rounds of {:.1} s per side, sides alternating; ratio = runner ÷ raw commits/s",
        settings.rounds,
        settings.side.as_secs_f64()
    );
    println!();
    println!(
        "| cell | raw commits/s | runner commits/s | ratio (median of rounds) | middle half | min–max |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    for workers in [1, 8] {
        let cells: [(&str, Cell); 5] = [
            (
                "sqlx-postgres",
                Box::new(|| rt.block_on(sqlx_postgres(&settings, workers))),
            ),
            (
                "tokio-postgres",
                Box::new(|| rt.block_on(tokio_postgres(&settings, workers))),
            ),
            (
                "sqlx-mysql",
                Box::new(|| rt.block_on(sqlx_mysql(&settings, workers))),
            ),
            (
                "mysql_async",
                Box::new(|| rt.block_on(mysql_async(&settings, workers))),
            ),
            (
                "sqlx-sqlite",
                Box::new(|| rt.block_on(sqlx_sqlite(&settings, workers, dir.path()))),
            ),
        ];
        for (driver, cell) in cells {
            let name = format!("{driver} x{workers}");
            if !settings.wants(&name) {
                continue;
            }
            if let Err(e) = cell() {
                eprintln!("{name}: skipped: {e}");
            }
        }
        if workers == 1
            && settings.wants("rusqlite x1")
            && let Err(e) = rusqlite_cell(&settings, dir.path())
        {
            eprintln!("rusqlite: skipped: {e}");
        }
    }
}
