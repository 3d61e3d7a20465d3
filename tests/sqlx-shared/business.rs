//! A business error inside the closure surfaces once, unchanged, and its writes roll back —
//! even when its text mentions a deadlock. For sqlx on PostgreSQL, MySQL and SQLite (each
//! binary's `dialect` module says how they differ).

use txretry::{KindSet, RetryPolicy, TxError, Verdict};

use crate::common::{Seen, assert_permanent_once, drop_table, exec, policy, setup, sql, table};
use crate::dialect::{DRIVER, Pool, SERIAL_KEY, TABLE_OPTIONS, TEXT};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("order {0} not found")]
    NotFound(i64),
    #[error("refund {0} refused: customer reports a deadlock at checkout")]
    RefundRefused(i64),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// What became of a call whose closure inserted `what` into a new table, then failed with
/// `error`.
struct Failed {
    err: TxError<AppError>,
    /// How many times the runner ran the closure.
    calls: u32,
    /// The rows in the table afterwards.
    rows: i64,
}

/// Runs, under `policy`, a closure that inserts a row into a new table (named after
/// `prefix`) and then returns `error`; drops the table afterwards.
async fn insert_then_fail(
    pool: &Pool,
    policy: &RetryPolicy,
    prefix: &str,
    what: &str,
    error: fn() -> AppError,
) -> Failed {
    let t = table(prefix);
    exec(
        pool,
        format!("CREATE TABLE {t} (id {SERIAL_KEY}, what {TEXT} NOT NULL){TABLE_OPTIONS}"),
    )
    .await;
    let mut calls = 0;
    let err = txretry::sqlx::transaction(pool, policy, async |tx| {
        calls += 1;
        sqlx::query(sql(format!("INSERT INTO {t} (what) VALUES ('{what}')")))
            .execute(&mut **tx)
            .await?;
        Err::<(), _>(error())
    })
    .await
    .expect_err("the closure failed");
    let rows = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}")))
        .fetch_one(pool)
        .await
        .unwrap();
    drop_table(pool, &t).await;
    Failed { err, calls, rows }
}

#[tokio::test]
async fn business_error_runs_once_and_rolls_back() {
    // `_db`: the server's URL, or the SQLite database, which must outlive the pool.
    let Some((_db, pool)) = setup(&format!("{DRIVER} business"), 2).await else {
        return;
    };
    let seen = Seen::default();
    let policy = policy(10, &seen);
    let Failed { err, calls, rows } =
        insert_then_fail(&pool, &policy, "audit", "looked up", || {
            AppError::NotFound(42)
        })
        .await;

    assert!(matches!(err.error(), AppError::NotFound(42)), "{err:?}");
    assert_eq!(err.to_string(), "order 42 not found", "transparent Display");
    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), None);
    let c = txretry::classify(err.error());
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, None);
    assert_eq!(rows, 0, "the insert before the error was rolled back");
}

/// The word "deadlock" in the application's own error text is not a server's deadlock:
/// no typed code, no driver phrase, so a policy retrying every kind runs it once.
#[tokio::test]
async fn business_error_mentioning_deadlock_runs_once() {
    let Some((_db, pool)) = setup(&format!("{DRIVER} business deadlock text"), 2).await else {
        return;
    };
    let seen = Seen::default();
    let policy = policy(5, &seen)
        .to_builder()
        .retry_on(KindSet::ALL)
        .build()
        .unwrap();
    let Failed { err, calls, rows } =
        insert_then_fail(&pool, &policy, "refunds", "refund 17", || {
            AppError::RefundRefused(17)
        })
        .await;

    assert!(
        matches!(err.error(), AppError::RefundRefused(17)),
        "{err:?}"
    );
    assert!(err.to_string().contains("deadlock"), "{err}");
    assert_eq!(calls, 1, "a business error is not retried");
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), None);
    assert_eq!(txretry::classify(err.error()).verdict, Verdict::Permanent);
    assert_eq!(rows, 0, "the insert before the error was rolled back");
}
