//! `TxOptions` on Postgres through SeaORM: the isolation level and read-only mode are
//! really applied, as the server reports them from inside the closure, and a write in a
//! read-only transaction is the caller's own error, not a standby's.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr};
use txretry::{Isolation, RetryPolicy, TxOptions};

use crate::common::{assert_permanent_once, column, drop_table, exec, scalar, setup, table};
use crate::dialect::{code_of, sqlstate};

/// What the server says the transaction is: isolation level, read-only.
async fn show(db: &DatabaseConnection, options: &TxOptions) -> (String, String) {
    txretry::sea_orm::transaction_with(db, &RetryPolicy::disabled(), options, async |tx| {
        let isolation: String = scalar(tx, "SHOW transaction_isolation".into()).await;
        let read_only: String = scalar(tx, "SHOW transaction_read_only".into()).await;
        Ok::<_, DbErr>((isolation, read_only))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_and_read_only_are_applied() {
    // One pooled connection throughout: options must last for their transaction only.
    let Some((_, db)) = setup("sea-orm-postgres options", 1).await else {
        return;
    };
    let plain = ("read committed".to_owned(), "off".to_owned());
    assert_eq!(show(&db, &TxOptions::new()).await, plain);
    for (level, shown) in [
        (Isolation::ReadUncommitted, "read uncommitted"),
        (Isolation::ReadCommitted, "read committed"),
        (Isolation::RepeatableRead, "repeatable read"),
        (Isolation::Serializable, "serializable"),
    ] {
        let options = TxOptions::new().isolation(level).read_only(true);
        assert_eq!(
            show(&db, &options).await,
            (shown.into(), "on".into()),
            "{level:?}"
        );
    }
    assert_eq!(show(&db, &TxOptions::new()).await, plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_in_read_only_transaction_is_permanent() {
    let Some((_, db)) = setup("sea-orm-postgres read only", 1).await else {
        return;
    };
    let t = table("read_only");
    exec(&db, format!("CREATE TABLE {t} (id int PRIMARY KEY)")).await;
    let mut calls = 0;
    let options = TxOptions::new().read_only(true);
    let err =
        txretry::sea_orm::transaction_with(&db, &RetryPolicy::default(), &options, async |tx| {
            calls += 1;
            tx.execute_unprepared(&format!("INSERT INTO {t} VALUES (1)"))
                .await
                .map(drop)
        })
        .await
        .expect_err("a write in a read-only transaction");

    assert_eq!(calls, 1);
    assert_eq!(code_of(err.error()).as_deref(), Some("25006"), "{err:?}");
    // 25006 alone could be a standby (a failover); asked for read-only, it is ours.
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), sqlstate("25006"));
    let ids: Vec<i32> = column(&db, format!("SELECT id FROM {t}")).await;
    assert!(ids.is_empty());
    drop_table(&db, &t).await;
}
