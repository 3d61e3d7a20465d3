//! A source's connection pool: SQLite, MySQL/MariaDB, Postgres, or a multi-host Postgres URL
//! (a [`PrimaryPool`] that follows the primary through a failover).

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection};
use txretry_sqlx::PrimaryPool;

use crate::config::{Engine, Source};

/// How long opening a source may take: `check` and `serve` report a source that does not
/// answer after this, instead of the pool's own 30 s of retries.
pub const OPEN_WAIT: Duration = Duration::from_secs(10);

/// How long a call waits for a connection of a multi-host source's pool, and how long
/// opening it searches for the primary. Short, as the high-availability guide advises: a
/// connect refused during a failover comes back to the call's policy (its `failover`
/// budget does the waiting, with short pauses) instead of sqlx's own backoff, which grows
/// to a fifth of this timeout; and a search that finds no primary ends, each host's reason
/// in hand, within [`OPEN_WAIT`].
pub const PRIMARY_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long closing a pool may take. Over TLS a connection's close waits for the server's
/// answer, which a database gone silent (a partition, a frozen host) never sends: past
/// this the process goes without it, and the server sees the connections end.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// An open source.
pub enum Pool {
    /// A Postgres server, or a proxy that routes to the primary.
    Postgres(PgPool),
    /// A multi-host Postgres URL: the pool follows the host that accepts writes.
    Primary(PrimaryPool),
    /// MySQL or MariaDB.
    MySql(MySqlPool),
    /// SQLite.
    Sqlite(SqlitePool),
}

impl Pool {
    /// Opens the source's pool and checks that it answers (one connection), waiting at most
    /// [`OPEN_WAIT`] for it. A multi-host URL's search bounds itself
    /// ([`PRIMARY_ACQUIRE_TIMEOUT`], then one last round of the hosts) and says why each
    /// host was passed over.
    ///
    /// # Errors
    /// The driver's error, when the URL is refused or the database does not answer.
    pub async fn open(source: &Source) -> Result<Pool, Box<dyn std::error::Error + Send + Sync>> {
        if source.engine == Engine::Postgres && PrimaryPool::is_multi_host(&source.url) {
            let options = PgPoolOptions::new()
                .max_connections(source.max_connections)
                .acquire_timeout(PRIMARY_ACQUIRE_TIMEOUT);
            return Ok(Pool::Primary(
                PrimaryPool::connect(options, &source.url).await?,
            ));
        }
        match tokio::time::timeout(OPEN_WAIT, Pool::connect(source)).await {
            Ok(opened) => opened,
            Err(_) => Err(format!("no answer within {OPEN_WAIT:?}").into()),
        }
    }

    async fn connect(source: &Source) -> Result<Pool, Box<dyn std::error::Error + Send + Sync>> {
        let n = source.max_connections;
        Ok(match source.engine {
            Engine::Postgres => {
                let options = PgConnectOptions::from_str(&source.url)?;
                answers(&options).await?;
                let pool = PgPoolOptions::new().max_connections(n);
                Pool::Postgres(pool.connect_with(options).await?)
            }
            Engine::MySql => {
                let options = MySqlConnectOptions::from_str(&source.url)?;
                answers(&options).await?;
                let pool = MySqlPoolOptions::new().max_connections(n);
                Pool::MySql(pool.connect_with(options).await?)
            }
            Engine::Sqlite => {
                // sqlx's default busy timeout (5 s) stays: a writer waits for the lock
                // before SQLITE_BUSY, which the policy then retries.
                let url = txretry_sqlx::database_url::for_sqlx(&source.url);
                let options = SqliteConnectOptions::from_str(&url)?;
                let pool = SqlitePoolOptions::new()
                    .max_connections(n)
                    .connect_with(options)
                    .await?;
                Pool::Sqlite(pool)
            }
        })
    }

    /// Closes the pool, waiting for connections in use to come back, for at most
    /// [`CLOSE_WAIT`]; `false` when that ran out.
    pub async fn close(&self) -> bool {
        let close = async {
            match self {
                Pool::Postgres(pool) => pool.close().await,
                Pool::Primary(pool) => pool.close().await,
                Pool::MySql(pool) => pool.close().await,
                Pool::Sqlite(pool) => pool.close().await,
            }
        };
        tokio::time::timeout(CLOSE_WAIT, close).await.is_ok()
    }
}

/// Opens one connection and closes it: a refused connection, a wrong password or a
/// missing database fails at once with the driver's reason, where the pool would retry a
/// refused connection until [`OPEN_WAIT`] and then say only that nothing answered.
async fn answers<O>(options: &O) -> Result<(), sqlx::Error>
where
    O: ConnectOptions,
    O::Connection: Sized,
{
    options.connect().await?.close().await
}
