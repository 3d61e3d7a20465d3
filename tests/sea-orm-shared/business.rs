//! A business error inside the closure surfaces once, unchanged, and its writes roll back —
//! even when its text mentions a deadlock. For SeaORM on PostgreSQL and on MySQL (each
//! binary's `dialect` module says how they differ).

use sea_orm::{ConnectionTrait, DbErr};
use txretry::{KindSet, RetryPolicy, Verdict};

use crate::common::{Seen, assert_permanent_once, drop_table, exec, policy, scalar, setup, table};
use crate::dialect::{DRIVER, TABLE_OPTIONS, TEXT};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("refund {0} refused: customer reports a deadlock at checkout")]
    RefundRefused(i64),
    #[error(transparent)]
    Db(#[from] DbErr),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_error_surfaces_once_and_its_writes_roll_back() {
    let Some((_, db)) = setup(&format!("{DRIVER} business"), 2).await else {
        return;
    };
    let t = table("business");
    exec(
        &db,
        format!("CREATE TABLE {t} (what {TEXT} NOT NULL){TABLE_OPTIONS}"),
    )
    .await;
    let seen = Seen::default();
    // Every kind retried: still, a business error is not a transient failure.
    let policy = seen
        .retries(
            RetryPolicy::builder()
                .max_attempts(5)
                .retry_on(KindSet::ALL),
        )
        .build()
        .unwrap();
    let mut calls = 0;
    let err = txretry::sea_orm::transaction(&db, &policy, async |tx| {
        calls += 1;
        exec(tx, format!("INSERT INTO {t} (what) VALUES ('refund 7')")).await;
        Err::<(), _>(AppError::RefundRefused(7))
    })
    .await
    .expect_err("the closure failed");

    assert_eq!(calls, 1, "run once");
    assert!(matches!(err.error(), AppError::RefundRefused(7)), "{err:?}");
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), None, "no code, and no message match");
    assert!(seen.all().is_empty(), "never retried");
    let rows: i64 = scalar(&db, format!("SELECT count(*) FROM {t}")).await;
    assert_eq!(rows, 0, "the insert was rolled back");
    drop_table(&db, &t).await;
}

/// A constraint the server enforces: SeaORM's `DbErr` with the server's code, permanent,
/// run once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_violation_is_permanent_with_the_servers_code() {
    let Some((_, db)) = setup(&format!("{DRIVER} unique"), 2).await else {
        return;
    };
    let t = table("unique");
    exec(
        &db,
        format!("CREATE TABLE {t} (id int PRIMARY KEY){TABLE_OPTIONS}"),
    )
    .await;
    let mut calls = 0;
    let err = txretry::sea_orm::transaction(&db, &policy(5, &Seen::default()), async |tx| {
        calls += 1;
        tx.execute_unprepared(&format!("INSERT INTO {t} VALUES (1), (2), (1)"))
            .await?;
        Ok::<_, DbErr>(())
    })
    .await
    .expect_err("duplicate key");

    assert_eq!(calls, 1);
    assert_permanent_once(err.outcome());
    assert_eq!(
        err.outcome().code(),
        crate::dialect::unique_violation_code()
    );
    assert_eq!(txretry::classify(err.error()).verdict, Verdict::Permanent);
    let rows: i64 = scalar(&db, format!("SELECT count(*) FROM {t}")).await;
    assert_eq!(rows, 0);
    drop_table(&db, &t).await;
}
