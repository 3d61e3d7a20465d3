//! The ORMs' runners against the ORMs' own transactions: SeaORM and diesel-async on
//! Postgres and MariaDB, Diesel (blocking) on Postgres.

use std::sync::Arc;

use diesel::sql_types::Integer;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, AsyncPgConnection};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DbBackend, DbErr, Statement, TransactionTrait,
};
use tokio::sync::Mutex;
use txretry::RetryPolicy;

use crate::{
    AsyncTx, Settings, TABLE, blocking_rounds, measure, mysql_table, mysql_url, postgres_table,
    postgres_url,
};

/// `UPDATE … WHERE id = <param>` in the database's placeholder style.
fn update(mysql: bool) -> String {
    let param = if mysql { "?" } else { "$1" };
    format!("UPDATE {TABLE} SET v = v + 1 WHERE id = {param}")
}

/// SeaORM on `workers` pooled connections: `db.begin()`, the statement, `commit()`, raw;
/// `txretry::sea_orm::transaction` on the same `DatabaseConnection`.
pub async fn sea_orm(settings: &Settings, workers: usize, mysql: bool) -> Result<(), String> {
    let url = if mysql { mysql_url() } else { postgres_url() };
    let mut options = ConnectOptions::new(url);
    options
        .max_connections(workers as u32)
        .min_connections(workers as u32)
        .sqlx_logging(false);
    let db = Database::connect(options)
        .await
        .map_err(|e| e.to_string())?;
    let tables = if mysql {
        mysql_table().to_vec()
    } else {
        vec![postgres_table()]
    };
    for sql in tables {
        db.execute_unprepared(&sql)
            .await
            .map_err(|e| e.to_string())?;
    }
    let backend = if mysql {
        DbBackend::MySql
    } else {
        DbBackend::Postgres
    };
    let sql = update(mysql);
    let policy = RetryPolicy::default();
    let tx: AsyncTx = Arc::new(move |w, runner| {
        let (db, policy) = (db.clone(), policy.clone());
        let statement = Statement::from_sql_and_values(backend, &sql, [(w as i32).into()]);
        Box::pin(async move {
            if runner {
                txretry::sea_orm::transaction(&db, &policy, async move |txn| {
                    txn.execute_raw(statement.clone()).await?;
                    Ok::<_, DbErr>(())
                })
                .await
                .map_err(|e| e.to_string())
            } else {
                async {
                    let txn = db.begin().await?;
                    txn.execute_raw(statement).await?;
                    txn.commit().await
                }
                .await
                .map_err(|e: DbErr| e.to_string())
            }
        })
    });
    let server = if mysql { "mysql (MariaDB)" } else { "postgres" };
    let name = format!("sea-orm-{server} x{workers}");
    measure(&name, settings, workers, tx).await;
    Ok(())
}

/// diesel-async, a connection per worker (as with tokio-postgres): `conn.transaction(…)`,
/// raw; `txretry::diesel::async_transaction` on the same connection.
macro_rules! diesel_async_cell {
    ($name:ident, $conn:ty, $mysql:expr, $label:expr) => {
        pub async fn $name(settings: &Settings, workers: usize) -> Result<(), String> {
            use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
            let url = if $mysql { mysql_url() } else { postgres_url() };
            let mut conns = Vec::new();
            for w in 0..workers {
                let mut conn = <$conn>::establish(&url).await.map_err(|e| e.to_string())?;
                if w == 0 {
                    let tables = if $mysql {
                        mysql_table().to_vec()
                    } else {
                        vec![postgres_table()]
                    };
                    for sql in tables {
                        conn.batch_execute(&sql).await.map_err(|e| e.to_string())?;
                    }
                }
                conns.push(Mutex::new(conn));
            }
            let conns = Arc::new(conns);
            let policy = RetryPolicy::default();
            let tx: AsyncTx = Arc::new(move |w, runner| {
                let (conns, policy) = (conns.clone(), policy.clone());
                let id = w as i32;
                Box::pin(async move {
                    let mut conn = conns[w].lock().await;
                    if runner {
                        txretry::diesel::async_transaction(&mut *conn, &policy, async move |conn| {
                            diesel::sql_query(update($mysql))
                                .bind::<Integer, _>(id)
                                .execute(conn)
                                .await
                        })
                        .await
                        .map(drop)
                        .map_err(|e| e.to_string())
                    } else {
                        conn.transaction(async move |conn| {
                            diesel::sql_query(update($mysql))
                                .bind::<Integer, _>(id)
                                .execute(conn)
                                .await
                        })
                        .await
                        .map(drop)
                        .map_err(|e: diesel::result::Error| e.to_string())
                    }
                })
            });
            measure(&format!("{} x{workers}", $label), settings, workers, tx).await;
            Ok(())
        }
    };
}

diesel_async_cell!(
    diesel_async_postgres,
    AsyncPgConnection,
    false,
    "diesel-async-postgres"
);
diesel_async_cell!(
    diesel_async_mysql,
    AsyncMysqlConnection,
    true,
    "diesel-async-mysql (MariaDB)"
);

/// Diesel, blocking, one connection: `conn.transaction(…)`, raw;
/// `txretry::diesel::transaction` on the same connection.
pub fn diesel_postgres(settings: &Settings) -> Result<(), String> {
    use diesel::connection::SimpleConnection;
    use diesel::{Connection, PgConnection, RunQueryDsl};
    let mut conn = PgConnection::establish(&postgres_url()).map_err(|e| e.to_string())?;
    conn.batch_execute(&postgres_table())
        .map_err(|e| e.to_string())?;
    let policy = RetryPolicy::default();
    let mut tx = |runner: bool| -> Result<(), String> {
        if runner {
            txretry::diesel::transaction(&mut conn, &policy, |conn| {
                diesel::sql_query(update(false))
                    .bind::<Integer, _>(0)
                    .execute(conn)
            })
            .map(drop)
            .map_err(|e| e.to_string())
        } else {
            conn.transaction(|conn| {
                diesel::sql_query(update(false))
                    .bind::<Integer, _>(0)
                    .execute(conn)
            })
            .map(drop)
            .map_err(|e: diesel::result::Error| e.to_string())
        }
    };
    blocking_rounds("diesel-postgres x1 (blocking)", settings, &mut tx);
    Ok(())
}
