//! Shared setup: the server, a pool, per-test tables, and policies that record retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::mysql::{MySqlDatabaseError, MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Connection, MySqlConnection};
use txretry::{
    AttemptFailure, Backoff, Classification, Code, Jitter, Outcome, Phase, RetryEvent, RetryPolicy,
    RetryPolicyBuilder, StopReason, Verdict,
};

/// A test's server URL and pool, or `None` when the test must skip (testkit printed why).
pub async fn setup(test: &str, max_connections: u32) -> Option<(String, MySqlPool)> {
    let url = txretry_testkit::mysql_url(test)?;
    let pool = MySqlPoolOptions::new()
        .max_connections(max_connections)
        .connect(&url)
        .await
        .unwrap();
    Some((url, pool))
}

/// A plain session outside the pool (the "other" transaction).
pub async fn connect(url: &str) -> MySqlConnection {
    MySqlConnection::connect(url).await.unwrap()
}

/// A table name no concurrent test uses.
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// SQL with a table name spliced in. Names come from `unique_name` (ASCII letters, digits, `_`).
pub fn sql(text: String) -> AssertSqlSafe<String> {
    AssertSqlSafe(text)
}

/// Runs SQL (several statements allowed) on any executor.
pub async fn exec<'e>(executor: impl sqlx::MySqlExecutor<'e>, text: String) {
    sqlx::raw_sql(sql(text)).execute(executor).await.unwrap();
}

pub async fn drop_table(pool: &MySqlPool, name: &str) {
    exec(pool, format!("DROP TABLE IF EXISTS {name}")).await;
}

/// What the policy's `on_retry` hook saw: `txretry::classify` of each real error that was
/// retried, with the failed attempt's number.
/// Also what the runner itself judged each retried attempt (verdict, code, phase), and the
/// outcomes the `on_give_up` hook saw, for policies built with [`Seen::give_ups`].
#[derive(Clone, Default)]
pub struct Seen {
    classified: Arc<Mutex<Vec<(u32, Classification)>>>,
    judged: Arc<Mutex<Vec<AttemptFailure>>>,
    gave_up: Arc<Mutex<Vec<Outcome>>>,
}

impl Seen {
    pub fn all(&self) -> Vec<(u32, Classification)> {
        self.classified.lock().unwrap().clone()
    }

    /// The runner's own verdict on each retried attempt, from the `RetryEvent`.
    pub fn judged(&self) -> Vec<AttemptFailure> {
        self.judged.lock().unwrap().clone()
    }

    /// The outcomes the `on_give_up` hook reported.
    pub fn gave_up(&self) -> Vec<Outcome> {
        self.gave_up.lock().unwrap().clone()
    }

    pub fn record(&self, event: &RetryEvent<'_>) {
        self.classified
            .lock()
            .unwrap()
            .push((event.attempt, txretry::classify(event.error)));
        self.judged.lock().unwrap().push(AttemptFailure::new(
            event.verdict,
            event.code,
            event.phase,
        ));
    }

    /// `policy` with an `on_give_up` hook that records into this `Seen`.
    pub fn give_ups(&self, policy: RetryPolicyBuilder) -> RetryPolicyBuilder {
        let sink = self.gave_up.clone();
        policy.on_give_up(move |event| sink.lock().unwrap().push(event.outcome.clone()))
    }
}

/// The MySQL errno of a sqlx error, if it is a database error from MySQL / MariaDB.
pub fn errno(err: &sqlx::Error) -> Option<u16> {
    err.as_database_error()
        .and_then(|db| db.try_downcast_ref::<MySqlDatabaseError>())
        .map(MySqlDatabaseError::number)
}

/// The outcome of a failure that is the caller's to handle: permanent, before COMMIT, on
/// the first attempt, never a message match, certainly not committed.
#[track_caller]
pub fn assert_permanent_once(outcome: &Outcome) {
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Body, "{outcome:?}");
    assert_eq!(outcome.attempts(), 1, "{outcome:?}");
    assert_eq!(outcome.history().len(), 1, "{outcome:?}");
    assert_eq!(
        outcome.stop_reason(),
        StopReason::NotRetryable,
        "{outcome:?}"
    );
    assert!(!outcome.may_have_committed(), "{outcome:?}");
    assert!(
        !matches!(outcome.code(), Some(Code::Message(_))),
        "not a message match: {outcome:?}"
    );
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 20 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    let seen = seen.clone();
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .on_retry(move |event| seen.record(event))
        .build()
        .unwrap()
}

/// A guard against hangs in coordinated tests (not a timing assertion).
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("test hung")
}
