//! `transaction_with` begins every attempt with the isolation level and access mode asked
//! for; the default options leave the server's defaults.

use txretry::{Isolation, Phase, RetryPolicy, StopReason, TxOptions, Verdict};

use crate::common::*;

async fn show(
    tx: &tokio_postgres::Transaction<'_>,
    setting: &str,
) -> Result<String, tokio_postgres::Error> {
    Ok(tx.query_one(&format!("SHOW {setting}"), &[]).await?.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_and_read_only_are_applied() {
    let Some(url) = url("tokio_postgres::options") else {
        return;
    };
    let mut client = connect(&url).await;
    let policy = RetryPolicy::default();

    let cases = [
        (TxOptions::new(), "read committed", "off"),
        (
            TxOptions::new().isolation(Isolation::RepeatableRead),
            "repeatable read",
            "off",
        ),
        (
            TxOptions::new()
                .isolation(Isolation::Serializable)
                .read_only(true),
            "serializable",
            "on",
        ),
        (
            TxOptions::new()
                .isolation(Isolation::ReadCommitted)
                .read_only(true),
            "read committed",
            "on",
        ),
        (
            TxOptions::new().isolation(Isolation::ReadUncommitted),
            "read uncommitted",
            "off",
        ),
    ];
    for (options, isolation, read_only) in cases {
        let seen =
            txretry::tokio_postgres::transaction_with(&mut client, &policy, &options, async |tx| {
                Ok::<_, tokio_postgres::Error>((
                    show(tx, "transaction_isolation").await?,
                    show(tx, "transaction_read_only").await?,
                ))
            })
            .await
            .unwrap();
        assert_eq!(
            seen,
            (isolation.to_string(), read_only.to_string()),
            "{options:?}"
        );
    }

    // A write in a read-only transaction fails once, permanently (25006).
    let t = table("tp_read_only");
    create_rows(&client, &t, 1).await;
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction_with(
        &mut client,
        &policy,
        &TxOptions::new().read_only(true),
        async |tx| {
            attempts += 1;
            tx.execute(&format!("UPDATE {t} SET v = 1"), &[]).await
        },
    )
    .await
    .expect_err("read-only");
    assert_eq!(attempts, 1);
    assert_eq!(
        err.error().code(),
        Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION)
    );
    // Out of context, 25006 is a write that reached a standby (a failover); the runner knows
    // the caller asked for a read-only transaction, so its outcome is permanent.
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(txretry::TransientKind::Failover)
    );
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.code(), Some(sqlstate("25006")));
    assert_eq!(outcome.phase(), Phase::Body);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    drop_tables(&client, &[&t]).await;
}
