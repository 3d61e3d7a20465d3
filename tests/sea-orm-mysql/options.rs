//! `TxOptions` on MariaDB through SeaORM (which sends `SET TRANSACTION …` before
//! `START TRANSACTION`): SERIALIZABLE and read-only are in force inside the closure
//! (observed by behaviour, against a second session), a write there is the caller's own
//! permanent error, and the settings last for that one transaction only.

use sea_orm::{ConnectionTrait, TransactionTrait};
use txretry::{Code, Isolation, RetryPolicy, TxOptions};

use crate::common::{assert_permanent_once, column, connect, drop_table, exec, setup, table};
use crate::dialect::errno;

/// ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
const READ_ONLY: u16 = 1792;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serializable_read_only_is_in_force_for_one_transaction() {
    // One pooled connection throughout: the next transaction runs on the same session.
    let Some((url, db)) = setup("sea-orm-mysql options", 1).await else {
        return;
    };
    let t = table("options");
    exec(
        &db,
        format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL) ENGINE=InnoDB"),
    )
    .await;
    exec(&db, format!("INSERT INTO {t} VALUES (1, 0)")).await;
    let other = connect(&url, 1).await;

    let options = TxOptions::new()
        .isolation(Isolation::Serializable)
        .read_only(true);
    let mut locked = None;
    let mut calls = 0;
    let err =
        txretry::sea_orm::transaction_with(&db, &RetryPolicy::default(), &options, async |tx| {
            calls += 1;
            // SERIALIZABLE turns this plain read into a locking one…
            tx.execute_unprepared(&format!("SELECT v FROM {t} WHERE id = 1"))
                .await?;
            // …which another session's NOWAIT lock then runs into.
            let probe = other.begin().await?;
            let taken = probe
                .execute_unprepared(&format!("SELECT v FROM {t} WHERE id = 1 FOR UPDATE NOWAIT"))
                .await;
            probe.rollback().await?;
            locked = Some(taken.is_err());
            // Read-only: the server refuses the write.
            tx.execute_unprepared(&format!("UPDATE {t} SET v = 1 WHERE id = 1"))
                .await
                .map(drop)
        })
        .await
        .expect_err("a write in a read-only transaction");

    assert_eq!(
        locked,
        Some(true),
        "the read took a shared lock: SERIALIZABLE"
    );
    assert_eq!(calls, 1);
    assert_eq!(errno(err.error()), Some(READ_ONLY), "{err:?}");
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), Some(Code::MySql(READ_ONLY)));

    // The next transaction on the same session has neither setting.
    txretry::sea_orm::transaction(&db, &RetryPolicy::default(), async |tx| {
        tx.execute_unprepared(&format!("SELECT v FROM {t} WHERE id = 1"))
            .await?;
        let probe = other.begin().await?;
        probe
            .execute_unprepared(&format!("SELECT v FROM {t} WHERE id = 1 FOR UPDATE NOWAIT"))
            .await?;
        probe.rollback().await?;
        tx.execute_unprepared(&format!("UPDATE {t} SET v = 2 WHERE id = 1"))
            .await
            .map(drop)
    })
    .await
    .expect("a plain read does not lock, and the write is allowed");
    let v: Vec<i32> = column(&db, format!("SELECT v FROM {t}")).await;
    assert_eq!(v, [2]);
    drop_table(&db, &t).await;
}
