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
//! cargo bench --features sqlx-postgres,sqlx-mysql,sqlx-sqlite,tokio-postgres,mysql_async,rusqlite,\
//! sea-orm-postgres,sea-orm-mysql,diesel-postgres,diesel-async-postgres,diesel-async-mysql \
//!     --bench runner_cost [-- <cell filter>…]
//! ```
//!
//! The drivers' cells are in `drivers.rs`, the ORMs' (SeaORM, diesel-async, Diesel) in
//! `orms.rs`; here, how a cell is measured and reported.
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

mod drivers;
mod orms;

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

/// The rounds of a blocking cell: `tx(runner)` runs one transaction on the one connection.
fn blocking_rounds(
    name: &str,
    settings: &Settings,
    tx: &mut dyn FnMut(bool) -> Result<(), String>,
) {
    run_blocking(tx, false, WARM_UP);
    run_blocking(tx, true, WARM_UP);
    let mut raw = Vec::new();
    let mut runner = Vec::new();
    for round in 0..settings.rounds {
        let first = round % 2 == 1;
        let a = run_blocking(tx, first, settings.side);
        let b = run_blocking(tx, !first, settings.side);
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

/// The Postgres server: `TXRETRY_POSTGRES_URL`, else the local one.
pub(crate) fn postgres_url() -> String {
    std::env::var("TXRETRY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The MariaDB server: `TXRETRY_MYSQL_URL`, else the local one.
pub(crate) fn mysql_url() -> String {
    std::env::var("TXRETRY_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

/// The statements that make the table afresh on MariaDB, one per query.
pub(crate) fn mysql_table() -> [String; 3] {
    [
        format!("DROP TABLE IF EXISTS {TABLE}"),
        format!("CREATE TABLE {TABLE} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB"),
        format!("INSERT INTO {TABLE} VALUES (0,0),(1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0)"),
    ]
}

/// The statements that make the table afresh on Postgres, as one batch.
pub(crate) fn postgres_table() -> String {
    format!(
        "DROP TABLE IF EXISTS {TABLE}; CREATE TABLE {TABLE} (id int PRIMARY KEY, v bigint NOT NULL);
         INSERT INTO {TABLE} SELECT g, 0 FROM generate_series(0, 7) g"
    )
}

fn main() {
    let settings = Settings::from_env();
    let dir = tempfile::tempdir().expect("a temporary directory");
    println!(
        "runner cost: {} rounds of {:.2} s per side, sides alternating; ratio = runner ÷ raw commits/s",
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
        let cells: [(&str, Cell); 9] = [
            (
                "sqlx-postgres",
                Box::new(|| rt.block_on(drivers::sqlx_postgres(&settings, workers))),
            ),
            (
                "tokio-postgres",
                Box::new(|| rt.block_on(drivers::tokio_postgres(&settings, workers))),
            ),
            (
                "sqlx-mysql",
                Box::new(|| rt.block_on(drivers::sqlx_mysql(&settings, workers))),
            ),
            (
                "mysql_async",
                Box::new(|| rt.block_on(drivers::mysql_async(&settings, workers))),
            ),
            (
                "sqlx-sqlite",
                Box::new(|| rt.block_on(drivers::sqlx_sqlite(&settings, workers, dir.path()))),
            ),
            (
                "sea-orm-postgres",
                Box::new(|| rt.block_on(orms::sea_orm(&settings, workers, false))),
            ),
            (
                "sea-orm-mysql",
                Box::new(|| rt.block_on(orms::sea_orm(&settings, workers, true))),
            ),
            (
                "diesel-async-postgres",
                Box::new(|| rt.block_on(orms::diesel_async_postgres(&settings, workers))),
            ),
            (
                "diesel-async-mysql",
                Box::new(|| rt.block_on(orms::diesel_async_mysql(&settings, workers))),
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
            && let Err(e) = drivers::rusqlite_cell(&settings, dir.path())
        {
            eprintln!("rusqlite: skipped: {e}");
        }
        if workers == 1
            && settings.wants("diesel-postgres x1")
            && let Err(e) = orms::diesel_postgres(&settings)
        {
            eprintln!("diesel-postgres: skipped: {e}");
        }
    }
}
