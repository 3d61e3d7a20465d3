//! The two drivers, what a driver reported for a failed attempt next to the runner's
//! judgement ([`Failure`]), and the policy whose `on_retry` hook records them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::mysql::MySqlDatabaseError;
use txretry::{Backoff, Classifier, Code, Jitter, Phase, RetryPolicy, Verdict};

/// The two drivers under test.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Driver {
    Sqlx,
    MysqlAsync,
}

/// What a driver reported for one failed attempt, next to the runner's judgement.
#[derive(Clone, Debug)]
pub(crate) struct Failure {
    pub(crate) phase: Phase,
    pub(crate) verdict: Verdict,
    pub(crate) code: Option<Code>,
    /// The driver's own view: errno, SQLSTATE, message.
    pub(crate) errno: Option<u16>,
    pub(crate) sqlstate: Option<String>,
    pub(crate) message: String,
}

/// The failures a policy's `on_retry` hook saw (shared with the hook).
#[derive(Clone, Default)]
pub(crate) struct Failures(Arc<Mutex<Vec<Failure>>>);

impl Failures {
    pub(crate) fn all(&self) -> Vec<Failure> {
        self.0.lock().unwrap().clone()
    }
}

/// The driver's own view of an error: errno, SQLSTATE, message.
pub(crate) fn driver_view(
    error: &(dyn std::error::Error + 'static),
) -> (Option<u16>, Option<String>, String) {
    if let Some(db) = error
        .downcast_ref::<sqlx::Error>()
        .and_then(sqlx::Error::as_database_error)
    {
        let errno = db
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(MySqlDatabaseError::number);
        return (
            errno,
            db.code().map(|c| c.into_owned()),
            db.message().to_owned(),
        );
    }
    if let Some(mysql_async::Error::Server(server)) = error.downcast_ref::<mysql_async::Error>() {
        return (
            Some(server.code),
            Some(server.state.clone()),
            server.message.clone(),
        );
    }
    (None, None, error.to_string())
}

/// A policy of `attempts` attempts (1 ms × 2ⁿ backoff, capped at 20 ms, full jitter) with
/// `classifier`, whose `on_retry` hook records into the returned [`Failures`].
pub(crate) fn policy(attempts: u32, classifier: Classifier) -> (RetryPolicy, Failures) {
    let failures = Failures::default();
    let sink = failures.clone();
    let policy = RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .classifier(classifier)
        .on_retry(move |event| {
            let (errno, sqlstate, message) = driver_view(event.error);
            sink.0.lock().unwrap().push(Failure {
                phase: event.phase,
                verdict: event.verdict,
                code: event.code,
                errno,
                sqlstate,
                message,
            });
        })
        .build()
        .unwrap();
    (policy, failures)
}
