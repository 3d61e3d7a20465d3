//! Serialization failure (40001): write skew under SERIALIZABLE. Two doctors are on call;
//! each transaction goes off call if it sees at least two on call. Under SERIALIZABLE one
//! of them fails, and its retry sees the other's commit: exactly one doctor stays on call.

use std::sync::Arc;

use tokio::sync::Barrier;
use txretry::{Isolation, TransientKind, TxOptions, Verdict};

use crate::common::{Seen, drop_table, exec, policy, setup, sql, sqlstate, table, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_skew_under_serializable_is_retried() {
    let Some((_, pool)) = setup("sqlx-postgres serialization", 4).await else {
        return;
    };
    let t = table("oncall");
    exec(&pool, format!("CREATE TABLE {t} (id int PRIMARY KEY, on_call bool NOT NULL); INSERT INTO {t} VALUES (1, true), (2, true)")).await;

    let seen = Seen::default();
    let policy = policy(10, &seen);
    let options = TxOptions::new().isolation(Isolation::Serializable);
    let barrier = Arc::new(Barrier::new(2));
    let doctor = |me: i32| {
        let (t, barrier) = (t.clone(), barrier.clone());
        let mut attempt = 0;
        tokio::spawn(txretry::sqlx::transaction_with(
            &pool,
            &policy,
            &options,
            async move |tx| {
                attempt += 1;
                let on_call: i64 =
                    sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t} WHERE on_call")))
                        .fetch_one(&mut **tx)
                        .await?;
                if attempt == 1 {
                    // Both have read before either writes.
                    barrier.wait().await;
                }
                if on_call >= 2 {
                    sqlx::query(sql(format!("UPDATE {t} SET on_call = false WHERE id = $1")))
                        .bind(me)
                        .execute(&mut **tx)
                        .await?;
                }
                Ok::<_, sqlx::Error>(())
            },
        ))
    };
    let (a, b) = (doctor(1), doctor(2));
    within(async {
        a.await.unwrap().unwrap();
        b.await.unwrap().unwrap();
    })
    .await;

    // The failure may come at the UPDATE or at COMMIT; either way the server answered
    // 40001, so the runner retried it.
    let seen = seen.all();
    assert!(!seen.is_empty(), "one of the two must have failed");
    for (_, c) in &seen {
        assert_eq!(
            c.verdict,
            Verdict::Transient(TransientKind::SerializationFailure)
        );
        assert_eq!(c.code, sqlstate("40001"));
    }
    let on_call: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t} WHERE on_call")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(on_call, 1, "no write skew");
    drop_table(&pool, &t).await;
}
