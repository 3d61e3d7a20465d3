//! The runner commits with `SELECT 1; COMMIT; BEGIN` in one message. The trailing `BEGIN`
//! opens an empty transaction for the `ROLLBACK` sqlx queues when the runner's
//! `Transaction` is dropped (the pool sends it with its check of the returned connection).
//! What the closure wrote must be committed, and the connection must come back to the pool
//! outside any transaction, for sqlx and for the server.

use std::time::Duration;

use sqlx::{Connection, Row};

use crate::common::{Seen, connect, drop_table, exec, policy, setup, sql, table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_leaves_the_connection_outside_any_transaction() {
    // One connection: every call below, and the check after them, runs on the same session.
    let Some((url, pool)) = setup("sqlx-postgres commit message", 1).await else {
        return;
    };
    let mut observer = connect(&url).await;
    let t = table("commit_message");
    exec(
        &mut observer,
        format!("CREATE TABLE {t} (id int PRIMARY KEY)"),
    )
    .await;

    let seen = Seen::default();
    for id in 0..3 {
        let insert = format!("INSERT INTO {t} (id) VALUES ({id})");
        txretry::sqlx::transaction(&pool, &policy(1, &seen), async move |tx| {
            sqlx::raw_sql(sql(insert.clone())).execute(&mut **tx).await
        })
        .await
        .expect("committed");
    }
    let committed: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}")))
        .fetch_one(&mut observer)
        .await
        .unwrap();
    assert_eq!(committed, 3, "every call's row, seen from another session");

    let mut conn = pool.acquire().await.unwrap();
    assert!(!conn.is_in_transaction(), "sqlx counts no open transaction");
    // Inside a transaction begun earlier, `now()` is that transaction's start; a simple
    // query outside one starts its own transaction as the statement starts.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let own_transaction: bool = sqlx::raw_sql("SELECT now() = statement_timestamp()")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
        .get(0);
    assert!(own_transaction, "the session was left inside a transaction");
    drop(conn);
    drop_table(&pool, &t).await;
}
