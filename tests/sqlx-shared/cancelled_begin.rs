//! A runner's future dropped while its BEGIN awaits the server's answer, for sqlx on
//! PostgreSQL and on MySQL: the server has opened a transaction that no `Transaction` knows
//! of, so the connection must be closed, never pooled. Pooled, the next plain write on it
//! ran inside that transaction: `Ok`, and never committed. The proxy holds the server's
//! answers, so the drop lands inside BEGIN every time.

use std::time::Duration;

use txretry::{RetryPolicy, TxOptions};
use txretry_testkit::CommitFaultProxy;

use crate::common::{drop_table, exec, setup, sql, table};
use crate::dialect::{DRIVER, PoolOptions, TABLE_OPTIONS};

#[tokio::test]
async fn a_runner_dropped_inside_begin_does_not_pool_its_connection() {
    let Some((url, direct)) = setup(&format!("{DRIVER}::cancelled_begin"), 1).await else {
        return;
    };
    let t = table("cancelled_begin");
    exec(
        &direct,
        format!("CREATE TABLE {t} (id INT PRIMARY KEY){TABLE_OPTIONS}"),
    )
    .await;
    let proxy = CommitFaultProxy::start(&url).unwrap();
    let pool = PoolOptions::new()
        .max_connections(1)
        .connect(proxy.url())
        .await
        .unwrap();

    proxy.hold_replies_from_next_begin();
    let run = txretry::sqlx::transaction_with(
        &pool,
        &RetryPolicy::default(),
        &TxOptions::new(),
        async |tx| {
            sqlx::query(sql(format!("INSERT INTO {t} VALUES (1)")))
                .execute(&mut **tx)
                .await
        },
    );
    let dropped = tokio::time::timeout(Duration::from_millis(300), run).await;
    assert!(
        dropped.is_err(),
        "BEGIN was answered while held: {dropped:?}"
    );
    proxy.release_replies();

    // A plain write through the pool, in autocommit: it must be there for everyone.
    sqlx::query(sql(format!("INSERT INTO {t} VALUES (2)")))
        .execute(&pool)
        .await
        .unwrap();
    let seen: Vec<i32> = sqlx::query_scalar(sql(format!("SELECT id FROM {t} ORDER BY id")))
        .fetch_all(&direct)
        .await
        .unwrap();
    assert_eq!(
        seen,
        [2],
        "the write after the dropped BEGIN is not committed"
    );
    pool.close().await;
    drop_table(&direct, &t).await;
}
