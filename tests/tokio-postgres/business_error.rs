//! A business error from the closure surfaces once, unchanged, and what the closure wrote
//! before it is rolled back — even when its text says "deadlock".

use txretry::{KindSet, Phase, RetryPolicy, StopReason, TxOptions, Verdict};

use crate::common::*;

#[derive(Debug, thiserror::Error)]
enum TransferError {
    #[error("insufficient funds: {0} available")]
    InsufficientFunds(i64),
    #[error("refund {0} refused: customer reports a deadlock at checkout")]
    RefundRefused(i32),
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
}

/// The service layer's error: repeats the inner message in its own text, as many
/// applications do for their logs.
#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("order {order} failed: {source}")]
    Checkout {
        order: i32,
        #[source]
        source: CheckoutError,
    },
}

/// The repository layer's error: keeps the server's message next to the driver error.
#[derive(Debug, thiserror::Error)]
enum CheckoutError {
    #[error("database refused the checkout: {message}")]
    Db {
        message: String,
        #[source]
        source: tokio_postgres::Error,
    },
}

impl From<tokio_postgres::Error> for OrderError {
    fn from(source: tokio_postgres::Error) -> Self {
        let message = source
            .as_db_error()
            .map_or_else(|| source.to_string(), |db| db.message().to_owned());
        OrderError::Checkout {
            order: 17,
            source: CheckoutError::Db { message, source },
        }
    }
}

/// A policy that retries every kind, five attempts, and records what it retried.
fn retry_everything() -> (RetryPolicy, Seen) {
    let (builder, seen) = recording(5);
    (builder.retry_on(KindSet::ALL).build().unwrap(), seen)
}

/// The outcome of a business error: permanent, in the body, first attempt, no code (so
/// certainly not a message match).
fn assert_business_outcome(outcome: &txretry::Outcome) {
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Body, "{outcome:?}");
    assert_eq!(outcome.attempts(), 1, "{outcome:?}");
    assert_eq!(
        outcome.stop_reason(),
        StopReason::NotRetryable,
        "{outcome:?}"
    );
    assert!(!outcome.may_have_committed());
    // No typed code within the classifier's depth, and no message match: a business
    // message is not a driver phrase.
    assert_eq!(outcome.code(), None, "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_error_runs_once_and_rolls_back() {
    let Some(url) = url("tokio_postgres::business_error") else {
        return;
    };
    let mut client = connect(&url).await;
    let t = table("tp_business");
    create_rows(&client, &t, 1).await;

    // Even a policy that retries every kind, on a call that retries ambiguous failures
    // too, runs it once.
    let (policy, seen) = retry_everything();
    let options = TxOptions::new().idempotent(true);
    let mut attempts = 0;
    let err =
        txretry::tokio_postgres::transaction_with(&mut client, &policy, &options, async |tx| {
            attempts += 1;
            tx.execute(&format!("UPDATE {t} SET v = v - 100 WHERE id = 1"), &[])
                .await?;
            let balance: i64 = tx
                .query_one(&format!("SELECT v FROM {t} WHERE id = 1"), &[])
                .await?
                .get(0);
            if balance < 0 {
                return Err(TransferError::InsufficientFunds(balance + 100));
            }
            Ok(())
        })
        .await
        .expect_err("insufficient funds");

    assert!(
        matches!(err.error(), TransferError::InsufficientFunds(0)),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "insufficient funds: 0 available",
        "transparent Display"
    );
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_business_outcome(err.outcome());
    assert_eq!(
        txretry::classify(err.error()).verdict,
        txretry::Verdict::Permanent
    );
    assert_eq!(value(&client, &t, 1).await, 0, "the UPDATE was rolled back");
    // The client is still usable after the explicit ROLLBACK.
    assert!(!client.is_closed());
    drop_tables(&client, &[&t]).await;
}

/// A business error whose text mentions a deadlock is not a deadlock: under a policy of
/// five attempts that retries every kind it runs once, as an `anyhow::Error` and as a
/// `thiserror` variant. (Before exact driver phrases, "deadlock" anywhere in a message was
/// retried.) Nor is a Postgres `RAISE EXCEPTION 'deadlock detected …'` (P0001) wrapped two
/// levels deep in the user's own types, whose messages repeat the driver phrase: the
/// default classifier (depth 1) sees only the two user links, but the typed code deeper
/// down still blocks the message fallback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_error_mentioning_deadlock_runs_once() {
    let Some(url) = url("tokio_postgres::business_error_deadlock_text") else {
        return;
    };
    let mut client = connect(&url).await;
    let t = table("tp_business_deadlock");
    create_rows(&client, &t, 1).await;
    let (policy, seen) = retry_everything();

    // anyhow.
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
            .await?;
        Err::<(), _>(anyhow::anyhow!(
            "refund 17 refused: customer reports a deadlock at checkout"
        ))
    })
    .await
    .expect_err("refused");
    assert_eq!(attempts, 1, "{err:?}");
    assert_eq!(
        err.error().to_string(),
        "refund 17 refused: customer reports a deadlock at checkout"
    );
    assert_business_outcome(err.outcome());

    // thiserror.
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
            .await?;
        Err::<(), _>(TransferError::RefundRefused(17))
    })
    .await
    .expect_err("refused");
    assert_eq!(attempts, 1, "{err:?}");
    assert!(matches!(err.error(), TransferError::RefundRefused(17)));
    assert_business_outcome(err.outcome());

    // `?` into anyhow keeps the message (TxError is a transparent std Error).
    let as_anyhow: anyhow::Error = err.into();
    assert_eq!(
        as_anyhow.to_string(),
        "refund 17 refused: customer reports a deadlock at checkout"
    );

    // RAISE EXCEPTION 'deadlock detected in order %' (P0001), two user levels deep.
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
            .await?;
        tx.batch_execute(crate::raise_exception::RAISE).await?;
        Ok::<_, OrderError>(())
    })
    .await
    .expect_err("the raised exception");
    assert_eq!(attempts, 1, "{err:?}");
    assert_eq!(
        err.to_string(),
        "order 17 failed: database refused the checkout: deadlock detected in order 17"
    );
    // The chain really is user → user → tokio-postgres (P0001), beyond the default depth.
    let OrderError::Checkout {
        source: CheckoutError::Db { source: db_err, .. },
        ..
    } = err.error();
    assert_eq!(
        db_err.code(),
        Some(&tokio_postgres::error::SqlState::RAISE_EXCEPTION)
    );
    assert_business_outcome(err.outcome());
    assert_eq!(txretry::classify(err.error()).verdict, Verdict::Permanent);

    assert!(seen.retried().is_empty(), "nothing was retried");
    assert_eq!(
        value(&client, &t, 1).await,
        0,
        "every UPDATE was rolled back"
    );
    assert!(!client.is_closed());
    drop_tables(&client, &[&t]).await;
}
