//! `TxOptions` on SQLite: the BEGIN behaviour and the read-only switch are really applied,
//! and the read-only switch never leaks into the pool.

use std::time::Duration;

use sqlx::SqliteConnection;
use txretry::{Code, RetryPolicy, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{TempDb, exec, within};

async fn setup(db: &TempDb) {
    db.exec(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL); INSERT INTO t VALUES (1, 0);",
    )
    .await;
}

/// Whether another connection can take the write lock right now (busy_timeout 0).
async fn other_can_write(other: &mut SqliteConnection) -> bool {
    match sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *other).await {
        Ok(_) => {
            exec(other, "ROLLBACK").await;
            true
        }
        Err(err) => {
            let c = txretry::classify(&err);
            assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy), "{err}");
            assert_eq!(c.code, Some(Code::Sqlite(5)));
            false
        }
    }
}

#[tokio::test]
async fn begin_behaviour_is_applied() {
    let db = TempDb::new().await;
    setup(&db).await;
    let pool = db.pool(1, Duration::ZERO).await;
    let mut other = db.connect().await;
    let policy = RetryPolicy::disabled();

    // Default: BEGIN IMMEDIATE holds the write lock before the closure's first statement.
    let blocked = txretry::sqlx::transaction(&pool, &policy, async |_tx| {
        Ok::<_, sqlx::Error>(!other_can_write(&mut other).await)
    })
    .await
    .unwrap();
    assert!(blocked, "default begin is IMMEDIATE");

    for (begin, locks) in [
        (SqliteBegin::Deferred, false),
        (SqliteBegin::Immediate, true),
        (SqliteBegin::Exclusive, true),
    ] {
        let options = TxOptions::new().sqlite_begin(begin);
        let blocked = txretry::sqlx::transaction_with(&pool, &policy, &options, async |_tx| {
            Ok::<_, sqlx::Error>(!other_can_write(&mut other).await)
        })
        .await
        .unwrap();
        assert_eq!(blocked, locks, "{begin:?}");
    }
}

async fn query_only(conn: &mut SqliteConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("PRAGMA query_only")
        .fetch_one(conn)
        .await
}

#[tokio::test]
async fn read_only_applies_to_the_transaction_only() {
    let db = TempDb::new().await;
    setup(&db).await;
    // One connection: every transaction below runs on the same pooled connection.
    let pool = db.pool(1, Duration::ZERO).await;
    let policy = RetryPolicy::disabled();
    let read_only = TxOptions::new().read_only(true);

    let (flag, write) = txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
        let flag = query_only(tx).await?;
        let write = sqlx::query("UPDATE t SET v = 1")
            .execute(&mut **tx)
            .await
            .map(drop);
        Ok::<_, sqlx::Error>((flag, write))
    })
    .await
    .unwrap();
    assert!(flag);
    let err = write.unwrap_err();
    let c = txretry::classify(&err);
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, Some(Code::Sqlite(8)), "SQLITE_READONLY: {err}");

    // A read-only transaction whose closure fails resets the switch too.
    let failed = txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
        sqlx::query("UPDATE t SET v = 1")
            .execute(&mut **tx)
            .await
            .map(drop)
    })
    .await;
    assert!(failed.is_err());

    let flag = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        let flag = query_only(tx).await?;
        sqlx::query("UPDATE t SET v = 2").execute(&mut **tx).await?;
        Ok::<_, sqlx::Error>(flag)
    })
    .await
    .unwrap();
    assert!(!flag, "the pooled connection is writable again");
    let v: i64 = sqlx::query_scalar("SELECT v FROM t")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(v, 2);
}

/// Dropping the runner's future in the middle of a read-only transaction closes the
/// connection rather than pooling it with `query_only` still on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_read_only_transaction_does_not_leak_query_only() {
    let db = TempDb::new().await;
    setup(&db).await;
    let pool = db.pool(1, Duration::ZERO).await;
    let policy = RetryPolicy::disabled();
    let read_only = TxOptions::new().read_only(true);

    let (inside_tx, inside_rx) = tokio::sync::oneshot::channel();
    let mut inside_tx = Some(inside_tx);
    let run = txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
        assert!(query_only(tx).await?);
        if let Some(inside) = inside_tx.take() {
            let _ = inside.send(());
        }
        std::future::pending::<()>().await;
        Ok::<_, sqlx::Error>(())
    });
    tokio::select! {
        _ = run => unreachable!("the closure never finishes"),
        _ = inside_rx => {} // drops `run` mid-transaction
    }

    let flag = within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        let flag = query_only(tx).await?;
        sqlx::query("UPDATE t SET v = 3").execute(&mut **tx).await?;
        Ok::<_, sqlx::Error>(flag)
    }))
    .await
    .unwrap();
    assert!(!flag);
}
