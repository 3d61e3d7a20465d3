//! `TxOptions` on SQLite: the BEGIN behaviour and the read-only switch are really applied,
//! and the read-only switch never leaks into the pool.

use std::time::Duration;

use sqlx::SqliteConnection;
use txretry::{Code, RetryPolicy, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{TempDb, assert_permanent_once, exec, within};

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
    .await
    .expect_err("a write in a read-only transaction");
    assert_eq!(
        txretry::classify(failed.error()).code,
        Some(Code::Sqlite(8)),
        "SQLITE_READONLY: {failed:?}"
    );
    assert_permanent_once(failed.outcome());
    assert_eq!(failed.outcome().code(), Some(Code::Sqlite(8)));

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

/// Whether the pool's one connection is the one that created `temp.marker` (a TEMP table
/// exists on its own connection only).
async fn same_connection(pool: &sqlx::SqlitePool) -> bool {
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM temp.marker")
        .fetch_one(pool)
        .await
        .is_ok()
}

/// A read-only transaction begins `DEFERRED` whatever `sqlite_begin` says, so it runs while
/// another connection holds the write lock (an IMMEDIATE or EXCLUSIVE begin would fail
/// with `SQLITE_BUSY` at busy_timeout 0). And `query_only` is put back as it was: left on
/// for a connection that had it on, turned off again for one that had it off.
#[tokio::test]
async fn read_only_begins_deferred_and_restores_query_only() {
    let db = TempDb::new().await;
    setup(&db).await;
    // One connection, busy_timeout 0: every transaction below runs on the same connection,
    // and a lock it cannot have fails at once.
    let pool = db.pool(1, Duration::ZERO).await;
    let policy = RetryPolicy::disabled();

    // Another connection holds the write lock, with an uncommitted change.
    let mut writer = db.connect().await;
    exec(
        &mut writer,
        "BEGIN IMMEDIATE; UPDATE t SET v = 5 WHERE id = 1;",
    )
    .await;
    for begin in [
        None,
        Some(SqliteBegin::Immediate),
        Some(SqliteBegin::Exclusive),
        Some(SqliteBegin::Deferred),
    ] {
        let mut options = TxOptions::new().read_only(true);
        if let Some(begin) = begin {
            options = options.sqlite_begin(begin);
        }
        let (flag, v) = within(txretry::sqlx::transaction_with(
            &pool,
            &policy,
            &options,
            async |tx| {
                let flag = query_only(tx).await?;
                let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
                    .fetch_one(&mut **tx)
                    .await?;
                Ok::<_, sqlx::Error>((flag, v))
            },
        ))
        .await
        .unwrap_or_else(|err| {
            panic!("{begin:?}: a read-only transaction waits for no lock: {err:?}")
        });
        assert!(flag, "{begin:?}: query_only during the transaction");
        assert_eq!(v, 0, "{begin:?}: the writer's change is not committed");
    }
    // The writer never had to wait either.
    exec(&mut writer, "COMMIT").await;

    // The pool's connection has query_only ON before the read-only transaction…
    sqlx::raw_sql("CREATE TEMP TABLE marker (x); PRAGMA query_only = ON")
        .execute(&pool)
        .await
        .unwrap();
    let read_only = TxOptions::new().read_only(true);
    let flag = txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
        query_only(tx).await
    })
    .await
    .unwrap();
    assert!(flag);
    // …and still after it, on the same connection: writes are still refused.
    assert!(
        same_connection(&pool).await,
        "the connection was pooled, not replaced"
    );
    assert!(
        query_only(&mut pool.acquire().await.unwrap())
            .await
            .unwrap()
    );
    let err = sqlx::query("UPDATE t SET v = 1")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(
        txretry::classify(&err).code,
        Some(Code::Sqlite(8)),
        "SQLITE_READONLY: {err}"
    );
    // Likewise after a read-only transaction whose closure failed.
    let failed = txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
        sqlx::query("UPDATE t SET v = 1")
            .execute(&mut **tx)
            .await
            .map(drop)
    })
    .await
    .expect_err("a write in a read-only transaction");
    assert_permanent_once(failed.outcome());
    assert_eq!(failed.outcome().code(), Some(Code::Sqlite(8)));
    assert!(same_connection(&pool).await);
    assert!(
        query_only(&mut pool.acquire().await.unwrap())
            .await
            .unwrap()
    );

    // The same connection with query_only OFF: on for the transaction, off again after.
    sqlx::raw_sql("PRAGMA query_only = OFF")
        .execute(&pool)
        .await
        .unwrap();
    let flag = txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
        query_only(tx).await
    })
    .await
    .unwrap();
    assert!(flag);
    assert!(
        same_connection(&pool).await,
        "the connection was pooled, not replaced"
    );
    assert!(
        !query_only(&mut pool.acquire().await.unwrap())
            .await
            .unwrap()
    );
    sqlx::query("UPDATE t SET v = v + 1 WHERE id = 1")
        .execute(&pool)
        .await
        .expect("the connection is writable again");
    let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(v, 6, "the writer's 5, then one more");
}
