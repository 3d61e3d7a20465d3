//! The retry loops. Both drive the same [`RetryState`], which asks the one pure
//! [`RetryPolicy::decide`]; the async and the blocking loop differ only in how they wait.

use std::time::Duration;

use crate::event::emit;
use crate::{AsError, Classification, Decision, RetryEvent, RetryPolicy};

/// The loop state every runner shares: which attempt this is, when the first began, and
/// what to do after a failure. Runners drive it through [`retry_async!`](crate::retry_async)
/// and [`retry_blocking!`](crate::retry_blocking); it asks the one pure
/// [`RetryPolicy::decide`].
#[derive(Debug)]
pub struct RetryState<'p> {
    policy: &'p RetryPolicy,
    attempt: u32,
    /// Read only when the policy has a `max_elapsed`: the happy path skips the clock.
    start: Option<tokio::time::Instant>,
}

impl<'p> RetryState<'p> {
    /// A loop about to make its first attempt. Time is read from `tokio::time`, which is
    /// the plain monotonic clock outside a runtime and honours paused time inside one.
    #[inline]
    pub fn new(policy: &'p RetryPolicy) -> Self {
        let start = policy.max_elapsed().map(|_| tokio::time::Instant::now());
        RetryState {
            policy,
            attempt: 1,
            start,
        }
    }

    /// The attempt about to run (or running), 1-based.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The wait before the next attempt, or `None` to return the error. Fires the
    /// [`RetryEvent`] when it retries.
    pub fn after_failure<E, V>(&mut self, failure: &TxFailure<E>) -> Option<Duration>
    where
        E: AsError<V>,
    {
        if failure.final_attempt {
            return None;
        }
        let found = failure.classification;
        let elapsed = self.start.map_or(Duration::ZERO, |start| start.elapsed());
        match self
            .policy
            .decide(found.verdict, self.attempt, elapsed, fastrand::f64())
        {
            Decision::Stop(_) => None,
            Decision::RetryAfter(delay) => {
                let event = RetryEvent {
                    attempt: self.attempt,
                    max_attempts: self.policy.max_attempts(),
                    delay,
                    verdict: found.verdict,
                    code: found.code,
                    error: failure.error.as_error(),
                };
                emit(self.policy, &event);
                self.attempt += 1;
                Some(delay)
            }
        }
    }
}

/// The async retry loop, written once for every runner.
///
/// `$attempt` is an expression (usually an `async { … }` block) evaluated afresh for each
/// attempt, resolving to `Result<T, TxFailure<E>>`; the loop resolves to `Result<T, E>`.
/// It is a macro rather than a function taking a closure because rustc cannot yet prove
/// `Send` for a future that calls an async closure wrapping borrowed state
/// (rust-lang/rust#100013); expanded inline with concrete types, it can.
///
/// With `options = &TxOptions`, each attempt first waits for the policy's
/// [`Admission`](crate::Admission) on the keys the options name, and releases them when
/// the attempt ends (before any backoff wait).
#[macro_export]
macro_rules! retry_async {
    ($policy:expr, $attempt:expr) => {{
        let policy: &$crate::RetryPolicy = $policy;
        let mut state = $crate::RetryState::new(policy);
        loop {
            let outcome = $attempt.await;
            $crate::__retry_async_step!(state, outcome)
        }
    }};
    ($policy:expr, options = $options:expr, $attempt:expr) => {{
        let policy: &$crate::RetryPolicy = $policy;
        let options: &$crate::TxOptions = $options;
        let mut state = $crate::RetryState::new(policy);
        loop {
            let outcome = match $crate::__private::admission_for(policy, options) {
                ::core::option::Option::None => $attempt.await,
                ::core::option::Option::Some(admission) => {
                    let _permit = admission.await;
                    $attempt.await
                }
            };
            $crate::__retry_async_step!(state, outcome)
        }
    }};
}

/// After one async attempt: return, or wait and go round again. Part of [`retry_async!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __retry_async_step {
    ($state:ident, $outcome:ident) => {
        match $outcome {
            ::core::result::Result::Ok(value) => break ::core::result::Result::Ok(value),
            ::core::result::Result::Err(failure) => match $state.after_failure(&failure) {
                ::core::option::Option::Some(delay) => $crate::__private::sleep(delay).await,
                ::core::option::Option::None => {
                    break ::core::result::Result::Err(failure.into_error());
                }
            },
        }
    };
}

/// The blocking twin of [`retry_async!`]: the same state and decisions, waiting with
/// `std::thread::sleep`.
#[macro_export]
macro_rules! retry_blocking {
    ($policy:expr, $attempt:expr) => {{
        let mut state = $crate::RetryState::new($policy);
        loop {
            match $attempt {
                ::core::result::Result::Ok(value) => break ::core::result::Result::Ok(value),
                ::core::result::Result::Err(failure) => match state.after_failure(&failure) {
                    ::core::option::Option::Some(delay) => ::std::thread::sleep(delay),
                    ::core::option::Option::None => {
                        break ::core::result::Result::Err(failure.into_error());
                    }
                },
            }
        }
    }};
}

/// One failed attempt of a transaction runner: the caller's error and how it was judged.
/// Built by adapter runners; see [`TxFailure::in_body`] and [`TxFailure::at_commit`].
#[derive(Debug)]
pub struct TxFailure<E> {
    error: E,
    classification: Classification,
    final_attempt: bool,
}

impl<E> TxFailure<E> {
    /// A failure before COMMIT was sent (BEGIN, the caller's closure, a statement):
    /// classified as it is.
    pub fn in_body<V>(policy: &RetryPolicy, error: E) -> Self
    where
        E: AsError<V>,
    {
        let classification = policy.classify(error.as_error());
        TxFailure {
            error,
            classification,
            final_attempt: false,
        }
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
        TxFailure {
            error,
            classification,
            final_attempt: false,
        }
    }

    /// Ends the loop with this failure whatever its verdict: for a runner that cannot make
    /// another attempt (its one connection is gone and it cannot get another).
    #[must_use]
    pub fn ends_retrying(mut self) -> Self {
        self.final_attempt = true;
        self
    }

    /// How the failure was judged.
    pub fn classification(&self) -> Classification {
        self.classification
    }

    /// Whether the runner must discard the connection instead of returning it to its pool:
    /// the failure was a [`Connection`](crate::TransientKind::Connection) one, or the driver
    /// itself (not the server) reported it, so the connection's state is unknown.
    pub fn discards_connection(&self) -> bool {
        self.classification.verdict == crate::Verdict::Transient(crate::TransientKind::Connection)
            || matches!(self.classification.code, Some(crate::Code::Driver(_)))
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
    pub async fn run<T, E, V, F>(&self, mut op: F) -> Result<T, E>
    where
        F: AsyncFnMut() -> Result<T, E>,
        E: AsError<V>,
    {
        crate::retry_async!(self, async {
            op().await.map_err(|e| TxFailure::in_body(self, e))
        })
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
    pub fn run_blocking<T, E, V, F>(&self, mut op: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, E>,
        E: AsError<V>,
    {
        crate::retry_blocking!(self, op().map_err(|e| TxFailure::in_body(self, e)))
    }
}
