//! The drivers' own runners against the raw drivers: sqlx on Postgres, MariaDB and SQLite,
//! tokio-postgres, mysql_async, rusqlite.

use std::sync::Arc;
use std::time::Duration;

use txretry::RetryPolicy;

use crate::{
    AsyncTx, Settings, TABLE, blocking_rounds, measure, mysql_table, mysql_url, postgres_table,
    postgres_url,
};

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

pub async fn sqlx_postgres(settings: &Settings, workers: usize) -> Result<(), String> {
    use sqlx::postgres::PgPoolOptions;
    let pool = PgPoolOptions::new()
        .max_connections(workers as u32)
        .min_connections(workers as u32)
        .connect(&postgres_url())
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(postgres_table()))
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

pub async fn sqlx_mysql(settings: &Settings, workers: usize) -> Result<(), String> {
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
pub async fn sqlx_sqlite(
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

pub async fn tokio_postgres(settings: &Settings, workers: usize) -> Result<(), String> {
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
                .batch_execute(&postgres_table())
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

pub async fn mysql_async(settings: &Settings, workers: usize) -> Result<(), String> {
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
pub fn rusqlite_cell(settings: &Settings, dir: &std::path::Path) -> Result<(), String> {
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
    blocking_rounds("rusqlite x1 (blocking)", settings, &mut tx);
    Ok(())
}
