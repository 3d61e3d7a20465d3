//! The retry loops. Both drive the same [`Attempts`] state, which asks the one pure
//! [`RetryPolicy::decide`]; the async and the blocking loop differ only in how they wait.

use std::error::Error;
use std::time::Duration;

use crate::event::emit;
use crate::{AsError, Classification, Decision, RetryEvent, RetryPolicy};

/// The loop state shared by every runner: which attempt this is, and what to do after a
/// failure.
pub(crate) struct Attempts<'p> {
    policy: &'p RetryPolicy,
    attempt: u32,
}

impl<'p> Attempts<'p> {
    pub(crate) fn new(policy: &'p RetryPolicy) -> Self {
        Attempts { policy, attempt: 1 }
    }

    /// The wait before the next attempt, or `None` to return the error. Fires the event
    /// when it retries.
    pub(crate) fn after_failure(
        &mut self,
        found: Classification,
        error: &(dyn Error + 'static),
        elapsed: Duration,
    ) -> Option<Duration> {
        match self.policy.decide(found.verdict, self.attempt, elapsed, fastrand::f64()) {
            Decision::Stop(_) => None,
            Decision::RetryAfter(delay) => {
                let event = RetryEvent {
                    attempt: self.attempt,
                    max_attempts: self.policy.max_attempts(),
                    delay,
                    verdict: found.verdict,
                    code: found.code,
                    error,
                };
                emit(self.policy, &event);
                self.attempt += 1;
                Some(delay)
            }
        }
    }
}

/// One failed attempt of a transaction runner: the caller's error and how it was judged.
/// Built by adapter runners; see [`TxFailure::in_body`] and [`TxFailure::at_commit`].
#[derive(Debug)]
pub struct TxFailure<E> {
    error: E,
    classification: Classification,
}

impl<E> TxFailure<E> {
    /// A failure before COMMIT was sent (BEGIN, the caller's closure, a statement):
    /// classified as it is.
    pub fn in_body<V>(policy: &RetryPolicy, error: E) -> Self
    where
        E: AsError<V>,
    {
        let classification = policy.classify(error.as_error());
        TxFailure { error, classification }
    }

    /// A failure while committing. Unless the server answered with a code, nobody knows
    /// whether the commit landed, so the verdict becomes ambiguous (never retried unless
    /// the policy says the operation is idempotent).
    pub fn at_commit<V>(policy: &RetryPolicy, error: E) -> Self
    where
        E: AsError<V>,
    {
        let mut classification = policy.classify(error.as_error());
        if !classification.code.is_some_and(crate::Code::is_from_server) {
            classification.verdict = crate::Verdict::Ambiguous;
        }
        TxFailure { error, classification }
    }

    /// How the failure was judged; runners use it to decide whether to discard the
    /// connection (a [`Connection`](crate::TransientKind::Connection) failure).
    pub fn classification(&self) -> Classification {
        self.classification
    }

    /// The caller's error.
    pub fn into_error(self) -> E {
        self.error
    }
}

impl RetryPolicy {
    /// Runs `op` until it succeeds, fails with an error this policy does not retry, or the
    /// attempts or time run out; returns the last error unchanged.
    ///
    /// `op` is an async closure, called afresh for every attempt. The waits use
    /// `tokio::time`, so tests can run them under paused time.
    ///
    /// ```
    /// use txretry_core::RetryPolicy;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let policy = RetryPolicy::default();
    /// let mut calls = 0;
    /// let result: Result<u32, std::io::Error> = policy
    ///     .run(async || {
    ///         calls += 1;
    ///         if calls == 1 {
    ///             Err(std::io::Error::other("Deadlock found when trying to get lock"))
    ///         } else {
    ///             Ok(42)
    ///         }
    ///     })
    ///     .await;
    /// assert_eq!(result.unwrap(), 42);
    /// assert_eq!(calls, 2);
    /// # }
    /// ```
    pub async fn run<T, E, V, F>(&self, op: F) -> Result<T, E>
    where
        F: AsyncFnMut() -> Result<T, E>,
        E: AsError<V>,
    {
        self.retry_loop(op, TxFailure::in_body).await
    }

    /// The blocking twin of [`run`](RetryPolicy::run): same decisions, waits with
    /// `std::thread::sleep`.
    ///
    /// ```
    /// use txretry_core::RetryPolicy;
    ///
    /// let mut calls = 0;
    /// let result: Result<(), std::io::Error> = RetryPolicy::disabled().run_blocking(|| {
    ///     calls += 1;
    ///     Err(std::io::Error::other("deadlock"))
    /// });
    /// assert!(result.is_err());
    /// assert_eq!(calls, 1);
    /// ```
    pub fn run_blocking<T, E, V, F>(&self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, E>,
        E: AsError<V>,
    {
        self.retry_loop_blocking(op, TxFailure::in_body)
    }

    /// The loop behind every async transaction runner: like [`run`](RetryPolicy::run), but
    /// each attempt reports a [`TxFailure`] that already carries its classification.
    pub async fn run_transaction<T, E, V, F>(&self, attempt: F) -> Result<T, E>
    where
        F: AsyncFnMut() -> Result<T, TxFailure<E>>,
        E: AsError<V>,
    {
        self.retry_loop(attempt, |_, failure| failure).await
    }

    /// The blocking twin of [`run_transaction`](RetryPolicy::run_transaction).
    pub fn run_transaction_blocking<T, E, V, F>(&self, attempt: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, TxFailure<E>>,
        E: AsError<V>,
    {
        self.retry_loop_blocking(attempt, |_, failure| failure)
    }

    /// The async loop. `judge` turns an attempt's error into a classified [`TxFailure`];
    /// it is a plain function so the loop's future stays `Send` when `op`'s is.
    async fn retry_loop<T, R, E, V, F>(
        &self,
        mut op: F,
        judge: fn(&RetryPolicy, R) -> TxFailure<E>,
    ) -> Result<T, E>
    where
        F: AsyncFnMut() -> Result<T, R>,
        E: AsError<V>,
    {
        let start = tokio::time::Instant::now();
        let mut attempts = Attempts::new(self);
        loop {
            let failure = match op().await {
                Ok(value) => return Ok(value),
                Err(error) => judge(self, error),
            };
            match attempts.after_failure(failure.classification, failure.error.as_error(), start.elapsed()) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return Err(failure.error),
            }
        }
    }

    /// The blocking loop: the same steps as [`retry_loop`](Self::retry_loop), waiting with
    /// `std::thread::sleep`.
    fn retry_loop_blocking<T, R, E, V, F>(
        &self,
        mut op: F,
        judge: fn(&RetryPolicy, R) -> TxFailure<E>,
    ) -> Result<T, E>
    where
        F: FnMut() -> Result<T, R>,
        E: AsError<V>,
    {
        let start = std::time::Instant::now();
        let mut attempts = Attempts::new(self);
        loop {
            let failure = match op() {
                Ok(value) => return Ok(value),
                Err(error) => judge(self, error),
            };
            match attempts.after_failure(failure.classification, failure.error.as_error(), start.elapsed()) {
                Some(delay) => std::thread::sleep(delay),
                None => return Err(failure.error),
            }
        }
    }
}
