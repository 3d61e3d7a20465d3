//! `RAISE EXCEPTION 'deadlock …'` (SQLSTATE P0001) is permanent: the typed code is
//! authoritative, the word "deadlock" in the message does not make it transient.

use txretry::Verdict;

use crate::common::{Seen, policy, setup, sqlstate};

#[tokio::test]
async fn raise_exception_mentioning_deadlock_is_permanent() {
    let Some((_, pool)) = setup("sqlx-postgres raise_exception", 2).await else {
        return;
    };

    let seen = Seen::default();
    let policy = policy(10, &seen);
    let mut calls = 0;
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        sqlx::raw_sql("DO $$ BEGIN RAISE EXCEPTION 'deadlock in order %', 42; END $$")
            .execute(&mut **tx)
            .await?;
        Ok::<_, sqlx::Error>(())
    })
    .await
    .unwrap_err();

    assert!(err.to_string().contains("deadlock in order 42"), "{err}");
    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    let c = txretry::classify(&err);
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, sqlstate("P0001"));
}
