//! A runner dropped while its statement waits for a lock (a timeout around it, a request
//! cancelled): the server runs that statement on, holding the attempt's locks, until the
//! wait ends. The runner drops the dropped attempt's connection at once, so Postgres'
//! `client_connection_check_interval` (14+) ends the statement: the server notices the
//! client gone, rolls back, and the attempt's locks go. (The runner used to close it
//! gracefully, which over TLS waited out sqlx's 5 s bound first.) Without the setting they
//! stay, whatever the client did: the remedy the troubleshooting guide gives.

use std::str::FromStr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use txretry::RetryPolicy;

use crate::common::{code_of, connect, drop_table, exec, setup, sql, table, wait_for_lock_wait};

/// Drops a runner whose attempt updated row 1 and then waits for row 2's lock (held by
/// another session), with `client_connection_check_interval` set to `check_interval` on
/// its connection; returns whether a third session then takes row 1 within 3 s.
async fn row_one_freed_after_the_drop(check_interval: &str) -> Option<bool> {
    let (url, direct) = setup("sqlx-postgres dropped", 2).await?;
    let name = table("dropped");
    exec(
        &direct,
        format!("CREATE TABLE {name} (id INT PRIMARY KEY, n INT NOT NULL); INSERT INTO {name} VALUES (1, 0), (2, 0)"),
    )
    .await;
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .options([("client_connection_check_interval", check_interval)]);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();

    let mut holder = connect(&url).await;
    exec(
        &mut holder,
        format!("BEGIN; UPDATE {name} SET n = n + 1 WHERE id = 2"),
    )
    .await;
    let run = txretry::sqlx::transaction(&pool, &RetryPolicy::default(), async |tx| {
        for id in [1, 2] {
            sqlx::query(sql(format!("UPDATE {name} SET n = n + 1 WHERE id = $1")))
                .bind(id)
                .execute(&mut **tx)
                .await?;
        }
        Ok::<_, sqlx::Error>(())
    });
    let mut observer = connect(&url).await;
    tokio::select! {
        done = run => panic!("the runner ended while row 2 was held: {done:?}"),
        () = wait_for_lock_wait(&mut observer, pid) => {} // `run` is dropped here
    }

    // Row 1 is the dropped attempt's until its statement ends.
    let mut other = connect(&url).await;
    let taken = sqlx::raw_sql(sql(format!(
        "SET lock_timeout = '3s'; UPDATE {name} SET n = n + 10 WHERE id = 1"
    )))
    .execute(&mut other)
    .await;
    let freed = match taken {
        Ok(_) => true,
        Err(e) if code_of(&e).as_deref() == Some("55P03") => false,
        Err(e) => panic!("{e}"),
    };

    exec(&mut holder, "ROLLBACK".to_owned()).await;
    for conn in [holder, observer, other] {
        conn.close().await.unwrap();
    }
    pool.close().await;
    drop_table(&direct, &name).await;
    Some(freed)
}

#[tokio::test]
async fn a_dropped_runner_s_locks_go_once_the_server_checks_its_client() {
    let Some(freed) = row_one_freed_after_the_drop("500ms").await else {
        return;
    };
    assert!(
        freed,
        "row 1 still held 3 s after the drop, with client_connection_check_interval = 500ms"
    );
}

/// The contrast: the same drop with the check off (set so, whatever the server's default)
/// leaves the attempt's statement waiting on the server, row 1 locked.
#[tokio::test]
async fn without_the_check_a_dropped_runner_s_statement_runs_on_holding_its_locks() {
    let Some(freed) = row_one_freed_after_the_drop("0").await else {
        return;
    };
    assert!(
        !freed,
        "row 1 was free although nothing ended the statement"
    );
}
