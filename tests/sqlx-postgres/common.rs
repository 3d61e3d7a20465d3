//! Shared setup: the server, a pool, per-test tables, and policies that record retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use txretry::{
    AttemptFailure, Backoff, Classification, Code, Jitter, Outcome, Phase, RetryEvent, RetryPolicy,
    RetryPolicyBuilder, SqlState, StopReason, Verdict,
};

/// A test's server URL and pool, or `None` when the test must skip (testkit printed why).
pub async fn setup(test: &str, max_connections: u32) -> Option<(String, PgPool)> {
    let url = txretry_testkit::postgres_url(test)?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .connect(&url)
        .await
        .unwrap();
    Some((url, pool))
}

/// A plain session outside the pool (the "other" transaction).
pub async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url).await.unwrap()
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
pub async fn exec<'e>(executor: impl sqlx::PgExecutor<'e>, text: String) {
    sqlx::raw_sql(sql(text)).execute(executor).await.unwrap();
}

pub async fn drop_table(pool: &PgPool, name: &str) {
    exec(pool, format!("DROP TABLE IF EXISTS {name}")).await;
}

pub fn sqlstate(code: &str) -> Option<Code> {
    Some(Code::SqlState(SqlState::new(code).unwrap()))
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

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at `max_delay` with full jitter; records
/// retries.
pub fn policy_capped(attempts: u32, max_delay: Duration, seen: &Seen) -> RetryPolicy {
    let seen = seen.clone();
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(max_delay)
        .jitter(Jitter::Full)
        .on_retry(move |event| seen.record(event))
        .build()
        .unwrap()
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 50 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    policy_capped(attempts, Duration::from_millis(50), seen)
}

/// A guard against hangs in coordinated tests (not a timing assertion).
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("test hung")
}

/// The SQLSTATE of a sqlx error from Postgres, if it is a database error.
pub fn code_of(err: &sqlx::Error) -> Option<String> {
    err.as_database_error()
        .and_then(|db| db.code())
        .map(|code| code.into_owned())
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

/// Waits until session `pid` is blocked on a lock (`pg_stat_activity.wait_event_type =
/// 'Lock'`). Polls; panics after 30 s so a broken setup fails instead of hanging.
pub async fn wait_for_lock_wait(observer: &mut PgConnection, pid: i32) {
    for _ in 0..3000 {
        let waiting: bool = sqlx::query_scalar(
            "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1",
        )
        .bind(pid)
        .fetch_one(&mut *observer)
        .await
        .unwrap();
        if waiting {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {pid} never waited for a lock");
}
