//! What the runner refuses on SQLite: a read-only transaction (the read-only switch would
//! outlive the transaction on SeaORM's pooled connection). Refused before BEGIN, once,
//! permanent, and the closure never runs.

use sea_orm::{ConnectionTrait, DbErr};
use txretry::{RetryPolicy, TxOptions};
use txretry_testkit::outcome::assert_permanent_once;

use crate::common::{exec, scalar, setup};

#[tokio::test(flavor = "current_thread")]
async fn read_only_is_refused_before_begin() {
    let (_dir, db) = setup(1).await;
    exec(&db, "CREATE TABLE item (id INTEGER PRIMARY KEY)").await;
    let mut calls = 0;
    let options = TxOptions::new().read_only(true);
    let err =
        txretry::sea_orm::transaction_with(&db, &RetryPolicy::default(), &options, async |tx| {
            calls += 1;
            tx.execute_unprepared("INSERT INTO item VALUES (1)").await?;
            Ok::<_, DbErr>(())
        })
        .await
        .expect_err("refused");

    assert_eq!(calls, 0);
    assert!(
        matches!(err.error(), DbErr::BackendNotSupported { db: "SQLite", .. }),
        "{err:?}"
    );
    assert_permanent_once(err.outcome());
    // The connection is fine afterwards.
    let rows: i64 = scalar(&db, "SELECT count(*) FROM item").await;
    assert_eq!(rows, 0);
}
