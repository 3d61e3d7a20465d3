//! `ToolContext::once` on sqlx pools: Postgres, MySQL/MariaDB, SQLite (a database file in
//! WAL mode, writers serialised by the runner's `BEGIN IMMEDIATE`).

use std::time::Duration;

use sqlx::Pool;
use txretry_tool::{BoxError, Once, Tool, ToolContext};

use crate::common::{Args, Work};
use crate::driver::{Db, OnceDriver, Record};

/// A pool for the tool, and the test's own use of it.
pub struct Sqlx<DB: sqlx::Database> {
    pool: Pool<DB>,
    url: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

/// The same for every sqlx database; `$open` and `$through` are the database's own.
macro_rules! sqlx_driver {
    ($db:ty, $kind:expr, $open:ident, $through:ident) => {
        impl OnceDriver for Sqlx<$db> {
            type Handle = Pool<$db>;
            const DB: Db = $kind;

            async fn open(test: &str) -> Option<Self> {
                $open(test).await
            }

            fn handle(&self) -> Pool<$db> {
                self.pool.clone()
            }

            fn server_url(&self) -> Option<&str> {
                self.url.as_deref()
            }

            async fn through(url: &str) -> Pool<$db> {
                $through(url).await
            }

            fn tool(pool: &Pool<$db>, name: &'static str, work: &Work) -> Tool {
                let (pool, work) = (pool.clone(), work.clone());
                Tool::new(
                    name,
                    "The test tool.",
                    move |ctx: ToolContext, args: Args| {
                        let (pool, work) = (pool.clone(), work.clone());
                        async move {
                            let w = work.clone();
                            let placed = ctx
                                .once(&pool, async move |tx| {
                                    let n = w.runs.bump();
                                    sqlx::query::<$db>(sqlx::AssertSqlSafe(
                                        w.insert_sql(args.item),
                                    ))
                                    .execute(&mut **tx)
                                    .await?;
                                    w.gate.pass().await;
                                    if w.hangs(n) {
                                        std::future::pending::<()>().await;
                                    }
                                    if let Some(sql) = w.extra_sql() {
                                        sqlx::query::<$db>(sqlx::AssertSqlSafe(sql))
                                            .execute(&mut **tx)
                                            .await?;
                                    }
                                    w.check(n, args.item)?;
                                    let effects = sqlx::query_scalar::<$db, i64>(
                                        sqlx::AssertSqlSafe(w.count_sql()),
                                    )
                                    .fetch_one(&mut **tx)
                                    .await?;
                                    Ok::<_, BoxError>(w.placed(args.item, effects))
                                })
                                .await?;
                            work.answered();
                            Ok::<_, BoxError>(placed)
                        }
                    },
                )
            }

            async fn migrate(&self, once: &Once) {
                once.migrate(&self.pool).await.unwrap();
            }

            async fn prune(&self, once: &Once, older_than: Duration) -> u64 {
                once.prune(&self.pool, older_than).await.unwrap()
            }

            async fn exec(&self, sql: String) {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&self.pool)
                    .await
                    .unwrap();
            }

            async fn scalar(&self, sql: String) -> i64 {
                sqlx::query_scalar::<$db, i64>(sqlx::AssertSqlSafe(sql))
                    .fetch_one(&self.pool)
                    .await
                    .unwrap()
            }

            async fn record(&self, records: &str, key: &str) -> Record {
                sqlx::query_as::<$db, Record>(sqlx::AssertSqlSafe(format!(
                    "SELECT status, output, error_kind, error_message FROM {records} \
                     WHERE call_key = '{key}'"
                )))
                .fetch_one(&self.pool)
                .await
                .unwrap()
            }
        }
    };
}

/// A server database's fixture: a pool of 20 (sixteen duplicates and the test's own).
async fn server<DB: sqlx::Database>(url: Option<String>) -> Option<Sqlx<DB>> {
    let url = url?;
    let pool = pool(&url, 20).await;
    Some(Sqlx {
        pool,
        url: Some(url),
        _dir: None,
    })
}

async fn pool<DB: sqlx::Database>(url: &str, max_connections: u32) -> Pool<DB> {
    sqlx::pool::PoolOptions::<DB>::new()
        .max_connections(max_connections)
        .connect(url)
        .await
        .unwrap()
}

async fn open_postgres(test: &str) -> Option<Sqlx<sqlx::Postgres>> {
    server(txretry_testkit::postgres_url(test)).await
}

async fn open_mysql(test: &str) -> Option<Sqlx<sqlx::MySql>> {
    server(txretry_testkit::mysql_url(test)).await
}

/// Through the commit-fault proxy: two connections are enough for one call at a time.
async fn proxied<DB: sqlx::Database>(url: &str) -> Pool<DB> {
    pool(url, 2).await
}

async fn open_sqlite(_test: &str) -> Option<Sqlx<sqlx::Sqlite>> {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    let dir = tempfile::tempdir().unwrap();
    let pool = SqlitePoolOptions::new()
        .max_connections(17)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(dir.path().join("once.db"))
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(20)),
        )
        .await
        .unwrap();
    Some(Sqlx {
        pool,
        url: None,
        _dir: Some(dir),
    })
}

async fn sqlite_through(_: &str) -> Pool<sqlx::Sqlite> {
    unreachable!("SQLite has no server to reach through a proxy")
}

sqlx_driver!(sqlx::Postgres, Db::Postgres, open_postgres, proxied);
sqlx_driver!(sqlx::MySql, Db::MySql, open_mysql, proxied);
sqlx_driver!(sqlx::Sqlite, Db::Sqlite, open_sqlite, sqlite_through);

mod postgres {
    crate::scenarios::once_scenarios!(super::Sqlx<sqlx::Postgres>);
    crate::scenarios::commit_fault_scenarios!(super::Sqlx<sqlx::Postgres>);
    crate::terminated::terminated_scenarios!(super::Sqlx<sqlx::Postgres>);
}

mod mysql {
    crate::scenarios::once_scenarios!(super::Sqlx<sqlx::MySql>);
    crate::scenarios::commit_fault_scenarios!(super::Sqlx<sqlx::MySql>);
}

/// No network between client and database: `commit_fault_scenarios!` is replaced by the
/// process-dying scenarios every pair runs (see `scenarios/crashes.rs`).
mod sqlite {
    crate::scenarios::once_scenarios!(super::Sqlx<sqlx::Sqlite>);
}
