//! SQLite ends a transaction itself on some errors (`INSERT OR ROLLBACK` on a conflict that
//! the closure takes as an answer): the COMMIT that follows fails, nothing committed, and
//! the error surfaces once. The pool's connection must come back usable (the sqlx runner
//! once returned such a connection still counted inside a transaction).

use sea_orm::{ConnectionTrait, DbErr};
use txretry::{Phase, RetryPolicy, Verdict};

use crate::common::{exec, scalar, setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_comes_back_usable() {
    // One connection: every transaction below runs on the one the first failed on.
    let (_dir, db) = setup(1).await;
    exec(&db, "CREATE TABLE item (id INTEGER PRIMARY KEY)").await;
    exec(&db, "INSERT INTO item VALUES (1)").await;
    let policy = RetryPolicy::default();

    let mut calls = 0;
    let err = txretry::sea_orm::transaction(&db, &policy, async |tx| {
        calls += 1;
        let inserted = tx
            .execute_unprepared("INSERT OR ROLLBACK INTO item VALUES (1)")
            .await;
        Ok::<_, DbErr>(inserted.is_ok())
    })
    .await
    .expect_err("SQLite rolled the transaction back: COMMIT fails");
    assert_eq!(calls, 1);
    assert_eq!(err.outcome().verdict(), Verdict::Permanent, "{err:?}");
    assert_eq!(err.outcome().phase(), Phase::Commit, "{err:?}");

    for n in 2..5 {
        txretry::sea_orm::transaction(&db, &policy, async |tx| {
            tx.execute_unprepared(&format!("INSERT INTO item VALUES ({n})"))
                .await
        })
        .await
        .unwrap_or_else(|e| panic!("transaction {n} after the failed COMMIT: {e:?}"));
    }
    let rows: i64 = scalar(&db, "SELECT count(*) FROM item").await;
    assert_eq!(rows, 4);
}
