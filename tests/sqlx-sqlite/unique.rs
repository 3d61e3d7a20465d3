//! A unique violation is permanent: it surfaces once, with its extended code.

use std::time::Duration;

use txretry::{Code, Verdict};

use crate::common::{Seen, TempDb, assert_permanent_once, policy};

#[tokio::test]
async fn unique_violation_is_permanent() {
    let db = TempDb::new().await;
    db.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL UNIQUE); INSERT INTO users (email) VALUES ('a@example.com');").await;
    let pool = db.pool(2, Duration::ZERO).await;

    let seen = Seen::default();
    let policy = policy(10, &seen);
    let mut calls = 0;
    // anyhow::Error as the closure's error type.
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        sqlx::query("INSERT INTO users (email) VALUES ('a@example.com')")
            .execute(&mut **tx)
            .await?;
        Ok::<_, anyhow::Error>(())
    })
    .await
    .unwrap_err();

    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(2067)), "{err:?}");
    let err = err.into_error();
    let c = txretry::classify(err.as_ref());
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(
        c.code,
        Some(Code::Sqlite(2067)),
        "SQLITE_CONSTRAINT_UNIQUE: {err}"
    );
    let sqlx_err = err
        .downcast_ref::<sqlx::Error>()
        .expect("the sqlx error, unchanged");
    assert!(
        sqlx_err
            .as_database_error()
            .is_some_and(|e| e.is_unique_violation())
    );
}
