//! SQLite ends a transaction itself on some errors (`INSERT OR ROLLBACK` on a conflict, a
//! `RAISE(ROLLBACK)` trigger, a full disk at COMMIT): the COMMIT that follows fails ("cannot
//! commit - no transaction is active"), nothing committed, and the error surfaces once. The
//! connection must come back to the pool usable: the ROLLBACK sqlx queues for the failed
//! transaction fails too, and sqlx then still counts a transaction open on it, so every
//! later BEGIN on it failed with "attempted to call begin_with at non-zero transaction
//! depth".

use std::time::Duration;

use txretry::{Phase, RetryPolicy, Verdict};

use crate::common::TempDb;

#[tokio::test]
async fn the_connection_comes_back_usable() {
    let db = TempDb::new().await;
    db.exec("CREATE TABLE item (id INTEGER PRIMARY KEY); INSERT INTO item VALUES (1);")
        .await;
    // One connection: every transaction below runs on the one the first failed on.
    let pool = db.pool(1, Duration::ZERO).await;
    let policy = RetryPolicy::default();

    let mut calls = 0;
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        // "Already there" is an answer of the application's: the closure goes on, but
        // SQLite has rolled the transaction back.
        match sqlx::query("INSERT OR ROLLBACK INTO item VALUES (1)")
            .execute(&mut **tx)
            .await
        {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_database_error()
                    .is_some_and(|d| d.is_unique_violation()) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    })
    .await
    .expect_err("SQLite rolled the transaction back: COMMIT fails");
    assert_eq!(calls, 1);
    assert_eq!(err.outcome().verdict(), Verdict::Permanent, "{err:?}");
    assert_eq!(err.outcome().phase(), Phase::Commit, "{err:?}");
    assert!(!err.outcome().may_have_committed(), "{err:?}");

    for n in 2..5 {
        txretry::sqlx::transaction(&pool, &policy, async |tx| {
            sqlx::query("INSERT INTO item VALUES (?)")
                .bind(n)
                .execute(&mut **tx)
                .await
        })
        .await
        .unwrap_or_else(|e| panic!("transaction {n} after the failed COMMIT: {e:?}"));
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM item")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 4);
}
