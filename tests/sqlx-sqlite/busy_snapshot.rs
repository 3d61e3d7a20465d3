//! SQLITE_BUSY_SNAPSHOT (517): a DEFERRED transaction reads (taking a WAL snapshot),
//! another connection commits a write, then the transaction tries to write from its stale
//! snapshot. No busy timeout helps; only restarting the whole transaction does.

use std::time::Duration;

use txretry::{Code, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{Seen, TempDb, exec, policy, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_wal_snapshot_is_retried_with_a_fresh_read() {
    let db = TempDb::new().await;
    let mut other = db.connect().await;
    exec(
        &mut other,
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL); INSERT INTO t VALUES (1, 0);",
    )
    .await;
    // A generous busy timeout on the runner's side: it does not cure 517.
    let pool = db.pool(1, Duration::from_secs(5)).await;

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let options = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let mut attempts = 0;
    let mut in_closure = None;
    let read = within(txretry::sqlx::transaction_with(
        &pool,
        &policy,
        &options,
        async |tx| {
            attempts += 1;
            let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
                .fetch_one(&mut **tx)
                .await?;
            if attempts == 1 {
                // Another connection commits while this transaction holds its snapshot.
                exec(&mut other, "UPDATE t SET v = v + 1 WHERE id = 1").await;
            }
            let r = sqlx::query("UPDATE t SET v = ? WHERE id = 1")
                .bind(v + 10)
                .execute(&mut **tx)
                .await;
            if attempts == 1 {
                let err = r.as_ref().expect_err("the snapshot is stale");
                in_closure = Some(txretry::classify(err));
            }
            r?;
            Ok::<_, sqlx::Error>(v)
        },
    ))
    .await
    .unwrap();

    assert_eq!(attempts, 2);
    let c = in_closure.unwrap();
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy));
    assert_eq!(c.code, Some(Code::Sqlite(517)));
    let seen = seen.all();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].1.code, Some(Code::Sqlite(517)));
    // The retry read the other writer's value, and wrote on top of it once.
    assert_eq!(read, 1);
    let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(v, 11);
}
