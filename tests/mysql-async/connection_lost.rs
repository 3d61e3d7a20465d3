//! The runner's connection is killed mid-transaction. Under a policy that opts into
//! connection retries, the runner closes that connection instead of returning it to the
//! pool and retries on a fresh one; the default policy returns the error once.

use mysql_async::prelude::*;
use txretry::{Code, KindSet, Phase, RetryPolicy, StopReason, TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connection_is_discarded_and_retried_when_opted_in() {
    let Some(mut db) = Rows::start("mysql_async::connection_lost", "my_conn_lost", 1).await else {
        return;
    };
    let (pool, observer, t) = (&db.pool, &mut db.observer, &db.t);

    let (policy, seen) = recording(3);
    let policy = policy
        .retry_on(KindSet::DEFAULT.with(TransientKind::Connection))
        .build()
        .unwrap();
    let mut ids = Vec::new();
    txretry::mysql_async::transaction(pool, &policy, async |tx| {
        let id = connection_id(tx).await;
        ids.push(id);
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await?;
        if ids.len() == 1 {
            observer.query_drop(format!("KILL CONNECTION {id}")).await?;
        }
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await
    })
    .await
    .expect("the retry on a fresh connection commits");

    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "the retry ran on another connection");
    let seen = seen.retried();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // The driver noticed (an I/O error on the killed socket), not the server.
    assert!(matches!(seen[0].code, Some(Code::Driver(_))), "{seen:?}");
    assert_eq!(
        value(observer, t, 1).await,
        2,
        "the killed attempt left nothing behind"
    );

    // The default policy recognises the failure but does not retry it.
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(pool, &RetryPolicy::default(), async |tx| {
        attempts += 1;
        let id = connection_id(tx).await;
        observer.query_drop(format!("KILL CONNECTION {id}")).await?;
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await
    })
    .await
    .expect_err("the connection is gone");
    assert_eq!(attempts, 1);
    let classification = txretry::classify(err.error());
    assert_eq!(
        classification.verdict,
        Verdict::Transient(TransientKind::Connection),
        "{err:?}"
    );
    assert!(
        matches!(classification.code, Some(Code::Driver(_))),
        "{err:?}"
    );
    // Recognised as a connection failure before COMMIT (nothing committed), not retried
    // because the default policy does not opt in.
    assert_outcome(
        &err,
        Verdict::Transient(TransientKind::Connection),
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert!(
        matches!(err.outcome().code(), Some(Code::Driver(_))),
        "{err:?}"
    );
    assert_eq!(value(observer, t, 1).await, 2);
    db.finish().await;
}

/// A pool the application disconnected is permanent, as sqlx's closed pool is: no retry
/// reopens it, so even a policy that rides out outages (`high_availability()`, which
/// retries connection failures for 60 s) returns at once, after one attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnected_pool_is_permanent_even_under_high_availability() {
    let Some(url) = url("mysql_async::a_disconnected_pool_is_permanent") else {
        return;
    };
    let pool = pool(&url);
    pool.clone().disconnect().await.unwrap();
    let mut ran = 0;
    let err =
        txretry::mysql_async::transaction(&pool, &RetryPolicy::high_availability(), async |_tx| {
            ran += 1;
            Ok::<_, mysql_async::Error>(())
        })
        .await
        .expect_err("the pool is disconnected");
    assert!(
        matches!(
            err.error(),
            mysql_async::Error::Driver(mysql_async::DriverError::PoolDisconnected)
        ),
        "{err:?}"
    );
    assert_eq!(err.outcome().verdict(), Verdict::Permanent, "{err:?}");
    assert_eq!(err.outcome().attempts(), 1);
    assert_eq!(ran, 0);
}
