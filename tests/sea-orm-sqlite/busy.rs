//! `SQLITE_BUSY`: two writers on one database file. The runner rolls the loser back and
//! runs its whole transaction again, re-reading what the winner committed.

use std::sync::Arc;

use sea_orm::{
    ConnectionTrait, DbErr, SqliteTransactionMode, TransactionOptions, TransactionTrait,
};
use tokio::sync::{Barrier, Notify};
use txretry::{Code, Phase, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{
    Seen, connect, counter, exec, policy, read_counter, scalar, setup, within, write_counter,
};

/// Two DEFERRED transactions read the counter, then both write it back plus one. The
/// second writer finds the write lock taken (5) or its snapshot stale (517); a
/// busy_timeout cures neither, only a restart does. Without one, the counter would end at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_writers_collide_and_the_loser_is_rerun_whole() {
    let (_dir, db) = setup(2).await;
    counter(&db).await;

    let seen = Seen::default();
    let policy = policy(20, &seen);
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let both_read = Arc::new(Barrier::new(2));
    let winner_wrote = Arc::new(Notify::new());
    let side = |winner: bool| {
        let (both_read, winner_wrote) = (both_read.clone(), winner_wrote.clone());
        let mut attempt = 0;
        tokio::spawn(txretry::sea_orm::transaction_with(
            &db,
            &policy,
            &deferred,
            async move |tx| {
                attempt += 1;
                let v = read_counter(tx).await?;
                if attempt == 1 {
                    both_read.wait().await;
                    if !winner {
                        winner_wrote.notified().await;
                    }
                }
                write_counter(tx, v + 1).await?;
                if attempt == 1 && winner {
                    winner_wrote.notify_one();
                }
                Ok::<_, DbErr>(attempt)
            },
        ))
    };
    let (winner, loser) = (side(true), side(false));
    let (winner, loser) = within(async {
        (
            winner.await.unwrap().unwrap(),
            loser.await.unwrap().unwrap(),
        )
    })
    .await;

    assert_eq!(winner, 1, "the first writer is never in the way of anyone");
    assert!(loser >= 2, "the second writer was rerun");
    let retried = seen.all();
    assert_eq!(retried.len() as u32, loser - 1, "{retried:?}");
    for (_, c) in &retried {
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy), "{c:?}");
        assert!(
            matches!(c.code, Some(Code::Sqlite(5 | 517))),
            "SQLITE_BUSY or SQLITE_BUSY_SNAPSHOT: {c:?}"
        );
    }
    let v: i64 = scalar(&db, "SELECT v FROM counter WHERE id = 1").await;
    assert_eq!(v, 2, "both increments, each once");
}

/// The runner's default begin is IMMEDIATE: with another connection holding the write
/// lock, BEGIN itself is busy; the runner retries it once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immediate_begin_is_busy_while_another_writer_holds_the_lock() {
    let (dir, db) = setup(1).await;
    exec(&db, "CREATE TABLE item (id INTEGER PRIMARY KEY)").await;
    let other = connect(&dir, 1).await;
    let holder = other
        .begin_with_options(TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..TransactionOptions::default()
        })
        .await
        .unwrap();
    exec(&holder, "INSERT INTO item VALUES (1)").await;

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let run = tokio::spawn(txretry::sea_orm::transaction(
        &db,
        &policy,
        async move |tx| {
            tx.execute_unprepared("INSERT INTO item VALUES (2)").await?;
            Ok::<_, DbErr>(())
        },
    ));
    seen.first_retry().await;
    holder.commit().await.unwrap();
    within(run)
        .await
        .unwrap()
        .expect("committed once the lock was free");

    let judged = seen.judged();
    assert!(!judged.is_empty());
    for failure in &judged {
        assert_eq!(failure.verdict, Verdict::Transient(TransientKind::Busy));
        assert_eq!(failure.code, Some(Code::Sqlite(5)));
        assert_eq!(failure.phase, Phase::Body, "BEGIN is before COMMIT");
    }
    let rows: i64 = scalar(&db, "SELECT count(*) FROM item").await;
    assert_eq!(rows, 2, "the holder's row and ours, once each");
}
