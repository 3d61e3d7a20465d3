//! `transaction_with` begins every attempt with the isolation level and access mode asked
//! for; the default options leave the server's defaults.
//!
//! MySQL/MariaDB expose no variable holding the running transaction's level
//! (`SET TRANSACTION` leaves `@@tx_isolation` alone) and InnoDB's `innodb_trx` table is a
//! cache that concurrent readers keep stale, so the level is observed by what the
//! transaction does:
//! - SERIALIZABLE: a plain `SELECT` takes a shared lock, so another session's
//!   `FOR UPDATE NOWAIT` on that row fails;
//! - READ UNCOMMITTED: it sees another session's uncommitted change;
//! - REPEATABLE READ: a row another session changed and committed mid-transaction reads the
//!   same twice;
//! - READ COMMITTED: none of the above.
//!
//! Read-only: a write fails with 1792.

use mysql_async::prelude::*;
use mysql_async::{Conn, Transaction, TxOpts};
use txretry::{Code, Isolation, Phase, RetryPolicy, StopReason, TxOptions, Verdict};

use crate::common::*;

/// The level and access mode the running transaction behaves with.
async fn probe(
    tx: &mut Transaction<'_>,
    observer: &mut Conn,
    t: &str,
) -> Result<(Isolation, bool), mysql_async::Error> {
    let read_only = match tx
        .query_drop(format!("UPDATE {t} SET v = v WHERE id = 4"))
        .await
    {
        Ok(()) => false,
        Err(e) if errno(&e) == Some(1792) => true,
        Err(e) => return Err(e),
    };
    let _: Option<i64> = tx
        .query_first(format!("SELECT v FROM {t} WHERE id = 3"))
        .await?;
    let locked = observer
        .query_drop(format!("SELECT v FROM {t} WHERE id = 3 FOR UPDATE NOWAIT"))
        .await
        .is_err();
    if locked {
        return Ok((Isolation::Serializable, read_only));
    }
    // Row 1 holds another session's uncommitted 42.
    let dirty: Option<i64> = tx
        .query_first(format!("SELECT v FROM {t} WHERE id = 1"))
        .await?;
    if dirty == Some(42) {
        return Ok((Isolation::ReadUncommitted, read_only));
    }
    let before: Option<i64> = tx
        .query_first(format!("SELECT v FROM {t} WHERE id = 2"))
        .await?;
    observer
        .query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 2"))
        .await?;
    let after: Option<i64> = tx
        .query_first(format!("SELECT v FROM {t} WHERE id = 2"))
        .await?;
    let level = if before == after {
        Isolation::RepeatableRead
    } else {
        Isolation::ReadCommitted
    };
    Ok((level, read_only))
}

/// The session's default level, as the server names it.
async fn session_default(conn: &mut Conn) -> Isolation {
    // MariaDB and MySQL 5.7 call it tx_isolation; MySQL 8 only transaction_isolation.
    let name: String = match conn
        .query_first("SELECT @@SESSION.transaction_isolation")
        .await
    {
        Ok(name) => name,
        Err(_) => conn
            .query_first("SELECT @@SESSION.tx_isolation")
            .await
            .unwrap(),
    }
    .expect("a row");
    match name.as_str() {
        "READ-UNCOMMITTED" => Isolation::ReadUncommitted,
        "READ-COMMITTED" => Isolation::ReadCommitted,
        "REPEATABLE-READ" => Isolation::RepeatableRead,
        "SERIALIZABLE" => Isolation::Serializable,
        other => panic!("unknown isolation level {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_and_read_only_are_applied() {
    let Some(url) = url("mysql_async::options") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let t = table("my_options");
    create_rows(&mut observer, &t, 4).await;
    let default = session_default(&mut observer).await;

    // Another session keeps an uncommitted change of row 1 for the whole test.
    let mut dirty = pool.get_conn().await.unwrap();
    let mut dirty_tx = dirty.start_transaction(TxOpts::default()).await.unwrap();
    dirty_tx
        .query_drop(format!("UPDATE {t} SET v = 42 WHERE id = 1"))
        .await
        .unwrap();

    let policy = RetryPolicy::default();
    let cases = [
        (TxOptions::new(), default, false),
        (
            TxOptions::new().isolation(Isolation::ReadCommitted),
            Isolation::ReadCommitted,
            false,
        ),
        (
            TxOptions::new().isolation(Isolation::RepeatableRead),
            Isolation::RepeatableRead,
            false,
        ),
        (
            TxOptions::new().isolation(Isolation::ReadUncommitted),
            Isolation::ReadUncommitted,
            false,
        ),
        (
            TxOptions::new().isolation(Isolation::Serializable),
            Isolation::Serializable,
            false,
        ),
        (
            TxOptions::new()
                .isolation(Isolation::Serializable)
                .read_only(true),
            Isolation::Serializable,
            true,
        ),
        (
            TxOptions::new()
                .isolation(Isolation::ReadCommitted)
                .read_only(true),
            Isolation::ReadCommitted,
            true,
        ),
        (TxOptions::new().read_only(true), default, true),
    ];
    for (options, isolation, read_only) in cases {
        let seen = txretry::mysql_async::transaction_with(&pool, &policy, &options, async |tx| {
            probe(tx, &mut observer, &t).await
        })
        .await
        .unwrap();
        assert_eq!(seen, (isolation, read_only), "{options:?}");
    }

    // A write in a read-only transaction fails once, permanently (1792).
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction_with(
        &pool,
        &policy,
        &TxOptions::new().read_only(true),
        async |tx| {
            attempts += 1;
            tx.query_drop(format!("UPDATE {t} SET v = 1 WHERE id = 4"))
                .await
        },
    )
    .await
    .expect_err("read-only");
    assert_eq!(attempts, 1);
    assert_eq!(errno(err.error()), Some(1792));
    let classification = txretry::classify(err.error());
    assert_eq!(classification.verdict, Verdict::Permanent);
    assert_eq!(classification.code, Some(Code::MySql(1792)));
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::MySql(1792)));

    dirty_tx.rollback().await.unwrap();
    drop(dirty);
    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
