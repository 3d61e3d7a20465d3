//! `RAISE EXCEPTION 'deadlock …'` (SQLSTATE P0001) is permanent: the typed code is
//! authoritative, the word "deadlock" in the message does not make it transient — not even
//! the exact phrase Postgres prints for a real deadlock, and not even when the application
//! wraps the error so deep that the classifier's depth does not reach the code.

use txretry::{KindSet, Verdict};

use crate::common::{Seen, assert_permanent_once, code_of, policy, setup, sqlstate};

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
    assert_eq!(code_of(err.error()).as_deref(), Some("P0001"));
    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), sqlstate("P0001"));
    let c = txretry::classify(err.error());
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, sqlstate("P0001"));
}

/// The service layer's error: repeats the inner message in its own text, for its logs.
#[derive(Debug, thiserror::Error)]
#[error("order {order} failed: {source}")]
struct OrderError {
    order: i32,
    #[source]
    source: CheckoutError,
}

/// The repository layer's error: the server's message next to the driver error.
#[derive(Debug, thiserror::Error)]
#[error("database refused the checkout: {message}")]
struct CheckoutError {
    message: String,
    #[source]
    source: sqlx::Error,
}

impl From<sqlx::Error> for OrderError {
    fn from(source: sqlx::Error) -> Self {
        let message = source
            .as_database_error()
            .map_or_else(|| source.to_string(), |db| db.message().to_owned());
        OrderError {
            order: 17,
            source: CheckoutError { message, source },
        }
    }
}

/// `RAISE EXCEPTION 'deadlock detected in order %', 17`: the message holds Postgres's own
/// deadlock phrase, and the typed code (P0001) sits two levels below the error the closure
/// returns, past the default classifier's depth. The code still blocks the message
/// fallback, so a policy retrying every kind runs the closure once.
#[tokio::test]
async fn raise_exception_deadlock_detected_wrapped_two_levels_runs_once() {
    let Some((_, pool)) = setup("sqlx-postgres raise_exception wrapped", 2).await else {
        return;
    };

    let seen = Seen::default();
    let policy = policy(5, &seen)
        .to_builder()
        .retry_on(KindSet::ALL)
        .build()
        .unwrap();
    let mut calls = 0;
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        sqlx::raw_sql("DO $$ BEGIN RAISE EXCEPTION 'deadlock detected in order %', 17; END $$")
            .execute(&mut **tx)
            .await?;
        Ok::<_, OrderError>(())
    })
    .await
    .expect_err("the procedure raised");

    // The closure's error, unchanged: two levels of the application's types around sqlx's.
    let order = err.error();
    assert_eq!(order.order, 17);
    assert_eq!(order.source.message, "deadlock detected in order 17");
    assert_eq!(code_of(&order.source.source).as_deref(), Some("P0001"));
    assert!(
        err.to_string()
            .contains("database refused the checkout: deadlock detected in order 17"),
        "{err}"
    );

    assert_eq!(calls, 1, "a raised exception is not retried");
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    // The code is beyond the default depth: it decides nothing, it only blocks the phrase.
    assert_eq!(err.outcome().code(), None);
    let c = txretry::classify(err.error());
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, None);
}
