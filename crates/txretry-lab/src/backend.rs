//! The little that differs per database: placeholders, one cast, running a query, and how
//! to connect. Everything else in the lab is written once, generic over [`LabDb`].

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySql, MySqlConnectOptions};
use sqlx::pool::PoolOptions;
use sqlx::postgres::{PgConnectOptions, Postgres};
use sqlx::sqlite::{Sqlite, SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, Pool, Row, SqlStr};

/// How long SQLite waits for a lock before answering `SQLITE_BUSY`.
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a worker waits for a pooled connection before its transaction fails.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the first connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A database the lab runs on: one of sqlx's, with the few facts that differ, and the
/// three ways the lab talks to it. Every lab query binds BIGINTs and reads BIGINTs, so
/// these methods are all the generic code needs: it is written against `DB: LabDb` alone,
/// and the sqlx bounds that running a query takes (executor, arguments, `i64` encoding,
/// column index) are stated once, in the impls below, for each concrete database.
pub trait LabDb: txretry::sqlx::Backend {
    /// Whether placeholders are numbered (`$1`: Postgres, SQLite) or not (`?`: MySQL).
    const NUMBERED_PLACEHOLDERS: bool;

    /// An SQL expression for the port of the server a session runs on, as a BIGINT (0
    /// where there is none): through a proxy, the node's port.
    const SERVER_PORT: &'static str;

    /// Runs `sql` unprepared (DDL, or a batch of literal rows the lab made up).
    fn batch(
        conn: &mut Self::Connection,
        sql: SqlStr,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Runs `sql` with `binds` for its placeholders, in order; the rows it changed.
    fn execute(
        conn: &mut Self::Connection,
        sql: SqlStr,
        binds: &[i64],
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Runs `sql` with `binds`; the first `N` columns of every row it returns, each a
    /// BIGINT.
    fn fetch<const N: usize>(
        conn: &mut Self::Connection,
        sql: SqlStr,
        binds: &[i64],
    ) -> impl Future<Output = Result<Vec<[i64; N]>, sqlx::Error>> + Send;

    /// [`LabDb::fetch`] of a query that returns one row (`RowNotFound` when it returns
    /// none).
    fn fetch_one<const N: usize>(
        conn: &mut Self::Connection,
        sql: SqlStr,
        binds: &[i64],
    ) -> impl Future<Output = Result<[i64; N], sqlx::Error>> + Send {
        let rows = Self::fetch::<N>(conn, sql, binds);
        async move {
            rows.await?
                .into_iter()
                .next()
                .ok_or(sqlx::Error::RowNotFound)
        }
    }

    /// Placeholder number `n` (1-based).
    fn placeholder(n: usize) -> String {
        if Self::NUMBERED_PLACEHOLDERS {
            format!("${n}")
        } else {
            "?".to_owned()
        }
    }
}

/// [`LabDb`] for one of sqlx's databases: the same code for each, which only compiles
/// for a concrete one.
macro_rules! lab_db {
    ($db:ty, numbered: $numbered:expr, port: $port:expr) => {
        impl LabDb for $db {
            const NUMBERED_PLACEHOLDERS: bool = $numbered;
            const SERVER_PORT: &'static str = $port;

            async fn batch(conn: &mut Self::Connection, sql: SqlStr) -> Result<(), sqlx::Error> {
                sqlx::raw_sql(sql).execute(conn).await.map(drop)
            }

            fn execute(
                conn: &mut Self::Connection,
                sql: SqlStr,
                binds: &[i64],
            ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send {
                let query = binds.iter().fold(sqlx::query(sql), |q, &b| q.bind(b));
                async move { Ok(query.execute(conn).await?.rows_affected()) }
            }

            fn fetch<const N: usize>(
                conn: &mut Self::Connection,
                sql: SqlStr,
                binds: &[i64],
            ) -> impl Future<Output = Result<Vec<[i64; N]>, sqlx::Error>> + Send {
                let query = binds.iter().fold(sqlx::query(sql), |q, &b| q.bind(b));
                async move {
                    let mut rows = Vec::new();
                    for row in query.fetch_all(conn).await? {
                        let mut columns = [0; N];
                        for (i, column) in columns.iter_mut().enumerate() {
                            *column = row.try_get(i)?;
                        }
                        rows.push(columns);
                    }
                    Ok(rows)
                }
            }
        }
    };
}

lab_db!(Postgres, numbered: true,
    // NULL over a Unix socket.
    port: "CAST(COALESCE(inet_server_port(), 0) AS BIGINT)");
lab_db!(MySql, numbered: false, port: "CAST(@@port AS SIGNED)");
lab_db!(Sqlite, numbered: true, port: "0");

/// Pool settings shared by every database: one connection per worker, no liveness ping
/// before each acquire (the lab measures transactions, not the pool; pgbench pings
/// nothing either).
fn pool_options<DB: sqlx::Database>(workers: usize, acquire: Duration) -> PoolOptions<DB> {
    let size = u32::try_from(workers).unwrap_or(u32::MAX);
    PoolOptions::new()
        .max_connections(size)
        .min_connections(0)
        .acquire_timeout(acquire)
        .test_before_acquire(false)
}

/// Opens one connection first, so that a wrong URL, password or host fails at once with
/// the driver's own reason (the pool would retry a refused connection until it timed out
/// and then only say "timed out"), then builds the pool; its workers wait at most
/// `acquire` for a connection.
async fn pool<DB: sqlx::Database>(
    options: <DB::Connection as Connection>::Options,
    workers: usize,
    acquire: Duration,
) -> Result<Pool<DB>, sqlx::Error> {
    first_connection::<DB>(options.clone()).await?;
    Ok(pool_options::<DB>(workers, acquire).connect_lazy_with(options))
}

/// Opens and closes one connection, within [`CONNECT_TIMEOUT`].
async fn first_connection<DB: sqlx::Database>(
    options: <DB::Connection as Connection>::Options,
) -> Result<(), sqlx::Error> {
    let first = tokio::time::timeout(CONNECT_TIMEOUT, options.connect())
        .await
        .map_err(|_| {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting timed out",
            ))
        })??;
    first.close().await
}

/// As for one host, a cluster none of whose hosts takes a connection at all fails at
/// once, with each host's reason: the search for a primary would wait out the acquire
/// timeout for hosts that may come back, which a cluster in a failover needs but a
/// mistyped port or a stopped cluster does not.
async fn any_host_answers(hosts: &[PgConnectOptions]) -> Result<(), sqlx::Error> {
    let mut tries = tokio::task::JoinSet::new();
    for (i, host) in hosts.iter().cloned().enumerate() {
        tries.spawn(async move { (i, first_connection::<Postgres>(host).await) });
    }
    let mut reasons = vec![String::new(); hosts.len()];
    while let Some(joined) = tries.join_next().await {
        let Ok((i, result)) = joined else {
            // A try that panicked or was cancelled: no reason to give for it.
            continue;
        };
        let Err(e) = result else {
            return Ok(());
        };
        let why = match &e {
            sqlx::Error::Io(io) => io.to_string(),
            other => crate::error::describe(other),
        };
        reasons[i] = format!("{}:{} {why}", hosts[i].get_host(), hosts[i].get_port());
    }
    Err(sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!("no host took a connection: {}", reasons.join("; ")),
    )))
}

/// A Postgres pool for `url` whose workers wait at most `acquire` for a connection.
pub async fn postgres(
    url: &str,
    workers: usize,
    acquire: Duration,
) -> Result<Pool<Postgres>, sqlx::Error> {
    if txretry::sqlx::PrimaryPool::is_multi_host(url) {
        // sqlx connects to one host: a PrimaryPool follows the one that accepts writes.
        let hosts: Vec<PgConnectOptions> = txretry::sqlx::PrimaryPool::hosts(url)
            .map_err(|e| sqlx::Error::Configuration(Box::new(e)))?
            .into_iter()
            .map(|host| host.application_name("txretry-lab"))
            .collect();
        any_host_answers(&hosts).await?;
        let primary =
            txretry::sqlx::PrimaryPool::connect_hosts(pool_options(workers, acquire), hosts)
                .await
                .map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))?;
        return Ok(primary.detach());
    }
    let options = PgConnectOptions::from_str(url)?.application_name("txretry-lab");
    pool(options, workers, acquire).await
}

/// A MySQL / MariaDB pool for `url`.
pub async fn mysql(url: &str, workers: usize) -> Result<Pool<MySql>, sqlx::Error> {
    let options = MySqlConnectOptions::from_str(url)?;
    pool(options, workers, ACQUIRE_TIMEOUT).await
}

/// An SQLite pool on the file at `path` (created if missing), in WAL mode.
pub async fn sqlite_file(path: &Path, workers: usize) -> Result<Pool<Sqlite>, sqlx::Error> {
    sqlite(SqliteConnectOptions::new().filename(path), workers).await
}

/// An SQLite pool for a `sqlite:` URL (created if missing), in WAL mode.
pub async fn sqlite_url(url: &str, workers: usize) -> Result<Pool<Sqlite>, sqlx::Error> {
    sqlite(SqliteConnectOptions::from_str(url)?, workers).await
}

/// Why an SQLite database at `url` could not be opened, naming the path: the driver only
/// says "unable to open database file".
pub fn sqlite_open_failure(url: &str, e: &sqlx::Error) -> String {
    let Ok(options) = SqliteConnectOptions::from_str(url) else {
        return crate::error::describe(e);
    };
    let path = options.get_filename();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let why = if path.is_dir() {
        "it is a directory".to_owned()
    } else if !dir.is_dir() {
        format!("the directory {} does not exist", dir.display())
    } else if std::fs::metadata(dir).is_ok_and(|m| m.permissions().readonly()) {
        format!("the directory {} is read-only", dir.display())
    } else {
        crate::error::describe(e)
    };
    format!(
        "could not open the SQLite database {}: {why}",
        path.display()
    )
}

async fn sqlite(
    options: SqliteConnectOptions,
    workers: usize,
) -> Result<Pool<Sqlite>, sqlx::Error> {
    let options = options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT);
    pool(options, workers, ACQUIRE_TIMEOUT).await
}
