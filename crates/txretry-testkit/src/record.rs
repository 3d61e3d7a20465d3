//! Recording what a policy's hooks saw, for assertions on what the runner retried.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use txretry_core::{
    AttemptFailure, Backoff, Classification, Jitter, Outcome, RetryEvent, RetryPolicy,
    RetryPolicyBuilder,
};

use crate::wait::within;

/// What a policy's hooks saw: for each retried attempt, `txretry::classify` of the real
/// error (with the failed attempt's number) and the runner's own judgement from the
/// [`RetryEvent`] (verdict, code, phase); and the outcomes an `on_give_up` hook reported,
/// for policies built with [`Seen::give_ups`].
///
/// Clones share one record, so a clone can go into a hook while the test keeps another.
#[derive(Clone, Default)]
pub struct Seen {
    classified: Arc<Mutex<Vec<(u32, Classification)>>>,
    judged: Arc<Mutex<Vec<AttemptFailure>>>,
    gave_up: Arc<Mutex<Vec<Outcome>>>,
    retried: Arc<Notify>,
}

impl Seen {
    /// The failed attempt's number and the default classification of each retried error.
    pub fn all(&self) -> Vec<(u32, Classification)> {
        self.classified.lock().unwrap().clone()
    }

    /// The default classification of each retried error.
    pub fn retried(&self) -> Vec<Classification> {
        self.all().into_iter().map(|(_, c)| c).collect()
    }

    /// The runner's own verdict on each retried attempt, from the `RetryEvent`.
    pub fn judged(&self) -> Vec<AttemptFailure> {
        self.judged.lock().unwrap().clone()
    }

    /// The outcomes the `on_give_up` hook reported.
    pub fn gave_up(&self) -> Vec<Outcome> {
        self.gave_up.lock().unwrap().clone()
    }

    /// Records one retry event (what an `on_retry` hook calls).
    pub fn record(&self, event: &RetryEvent<'_>) {
        self.classified
            .lock()
            .unwrap()
            .push((event.attempt, txretry_core::classify(event.error)));
        self.judged.lock().unwrap().push(AttemptFailure::new(
            event.verdict,
            event.code,
            event.phase,
        ));
        self.retried.notify_one();
    }

    /// Resolves once the runner has failed at least once (and is about to retry). Panics
    /// if that takes longer than [`within`] allows.
    pub async fn first_retry(&self) {
        within(self.retried.notified()).await;
    }

    /// `policy` with an `on_retry` hook that records into this `Seen`.
    pub fn retries(&self, policy: RetryPolicyBuilder) -> RetryPolicyBuilder {
        let sink = self.clone();
        policy.on_retry(move |event| sink.record(event))
    }

    /// `policy` with an `on_give_up` hook that records into this `Seen`.
    pub fn give_ups(&self, policy: RetryPolicyBuilder) -> RetryPolicyBuilder {
        let sink = Arc::clone(&self.gave_up);
        policy.on_give_up(move |event| sink.lock().unwrap().push(event.outcome.clone()))
    }
}

/// A policy builder of `max_attempts` attempts with a constant 10 ms backoff whose
/// `on_retry` hook records into the returned [`Seen`].
pub fn recording(max_attempts: u32) -> (RetryPolicyBuilder, Seen) {
    let seen = Seen::default();
    let builder = RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::Constant(Duration::from_millis(10)));
    (seen.retries(builder), seen)
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at `max_delay` with full jitter; records
/// retries into `seen`.
pub fn jittered(attempts: u32, max_delay: Duration, seen: &Seen) -> RetryPolicy {
    seen.retries(
        RetryPolicy::builder()
            .max_attempts(attempts)
            .backoff(Backoff::Exponential {
                initial: Duration::from_millis(1),
                factor: 2.0,
            })
            .max_delay(max_delay)
            .jitter(Jitter::Full),
    )
    .build()
    .unwrap()
}
