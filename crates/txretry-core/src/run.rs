//! The retry loops. Both drive the same [`RetryState`], which asks the one pure
//! [`RetryPolicy::decide`]; the async and the blocking loop differ only in how they wait.
//!
//! `RetryState`, [`TxFailure`] and the loop macros are the adapter crates' machinery: they
//! are public so the adapters can use them, and hidden from the documentation.

use std::error::Error;
use std::time::Duration;

use crate::classifier::{broken_connection, no_driver};
use crate::event::{GiveUpEvent, RetryEvent, emit_give_up, emit_retry};
use crate::{
    AsError, AttemptFailure, Classification, CodeExtractor, Decision, Outcome, Phase,
    RecordedAttempt, RetryBudget, RetryPolicy, StopReason, TxError, TxOptions, Verdict,
};

/// The loop state every runner shares: which attempt this is, when the first began, every
/// failure so far, and what to do after a failure. It owns (cheap clones of) what it needs,
/// so a runner's future holds no borrow of the caller's policy.
#[doc(hidden)]
#[derive(Debug)]
pub struct RetryState {
    policy: RetryPolicy,
    idempotent: bool,
    /// A 25006 (read-only transaction) in a transaction asked to be read-only is the
    /// caller's own write, not a standby: permanent.
    read_only: bool,
    attempt: u32,
    /// Read only when the policy has a `max_elapsed`: the happy path skips the clock.
    start: Option<tokio::time::Instant>,
    /// When the current outage (a run of failover or connection failures ridden out under
    /// the policy's failover budget) began, and how many of its attempts failed.
    outage: Option<(tokio::time::Instant, u32)>,
    /// Attempts spent inside outages: they count against no `max_attempts`.
    outage_attempts: u32,
    /// Every failed attempt, with its error's text; allocated on the first failure only.
    attempts: Vec<RecordedAttempt>,
    /// The scope's outer loop: it records its attempts itself, not in the scope.
    outer: bool,
}

impl RetryState {
    /// A loop about to make its first attempt. Time is read from `tokio::time`, which is
    /// the plain monotonic clock outside a runtime and honours paused time inside one.
    #[inline]
    pub fn new(policy: &RetryPolicy, options: &TxOptions) -> Self {
        let start = policy.max_elapsed().map(|_| tokio::time::Instant::now());
        RetryState {
            policy: policy.clone(),
            idempotent: options.is_idempotent(),
            read_only: options.is_read_only(),
            attempt: 1,
            start,
            outage: None,
            outage_attempts: 0,
            attempts: Vec::new(),
            outer: false,
        }
    }

    /// Makes this the outer loop of its policy's [`RetryBudget`]: a loop each of whose attempts
    /// runs the scope's other loops (a tool call's invocation, whose attempt is one run of
    /// the handler and its runners). It records its own failed attempts here, not in the
    /// scope, and its outcome and give-up event list the inner loops' attempts handed to it
    /// with [`inner_attempts`](RetryState::inner_attempts), so they cover every attempt
    /// made under the scope's budget.
    #[must_use]
    pub fn outer(mut self) -> Self {
        self.outer = true;
        self
    }

    /// The attempts the scope's inner loops made during the attempt about to be judged
    /// (taken with [`RetryBudget::take_attempts`]): listed before it in the outcome and the
    /// give-up event. Leave out an inner attempt that *is* this attempt's failure (a
    /// runner's give-up judged again here), or it is listed twice.
    pub fn inner_attempts(&mut self, attempts: impl IntoIterator<Item = RecordedAttempt>) {
        self.attempts.extend(attempts);
    }

    /// The policy the loop runs under.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The attempt about to run (or running), 1-based.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Records that the loop succeeded (for a runner: committed), for the scope's count.
    #[inline]
    pub fn succeeded(&self) {
        if let Some(scope) = self.policy.budget() {
            scope.succeeded();
        }
    }

    /// Records a failed attempt and decides: wait and retry (the [`RetryEvent`] has fired),
    /// or stop (call [`give_up`](RetryState::give_up) with the same failure).
    pub fn after_failure<E, Via>(&mut self, failure: &TxFailure<E>) -> Decision
    where
        E: AsError<Via>,
    {
        let mut judged = failure.failure;
        if own_read_only_write(self.read_only, judged.code) {
            // The caller's own write in a transaction it asked to be read-only.
            judged.verdict = Verdict::Permanent;
        }
        // The text is read only by a give-up hook and the scope: a loop with neither
        // formats nothing.
        let text = if self.policy.budget().is_some() || self.policy.on_give_up_hook().is_some() {
            failure.error.as_error().to_string()
        } else {
            String::new()
        };
        let recorded = RecordedAttempt::new(judged, text);
        if let Some(scope) = self.policy.budget()
            && !self.outer
        {
            scope.record(recorded.clone());
        }
        self.attempts.push(recorded);
        if let Some(reason) = failure.stop {
            return Decision::Stop(reason);
        }
        let elapsed = self.start.map_or(Duration::ZERO, |start| start.elapsed());
        let unit = fastrand::f64();
        let decision = match self.outage_decision(judged.verdict, unit) {
            Some(decision) => {
                // Within the outage budget: no attempt budget is drawn on, but the
                // loop's own time limit still holds.
                match (decision, self.policy.max_elapsed()) {
                    (Decision::RetryAfter(delay), Some(max)) if elapsed + delay > max => {
                        Decision::Stop(StopReason::ElapsedExceeded)
                    }
                    _ => decision,
                }
            }
            None => {
                self.outage = None;
                let decision = self.policy.decide(
                    judged.verdict,
                    self.idempotent,
                    self.attempt - self.outage_attempts,
                    elapsed,
                    unit,
                );
                match (decision, self.policy.budget()) {
                    // The operation this loop is part of has spent its retries elsewhere.
                    (Decision::RetryAfter(_), Some(scope)) if !scope.take_retry() => {
                        Decision::Stop(StopReason::AttemptsExhausted)
                    }
                    _ => decision,
                }
            }
        };
        if self.outage.is_some() && matches!(decision, Decision::RetryAfter(_)) {
            self.outage_attempts += 1;
        }
        if let Decision::RetryAfter(delay) = decision {
            let event = RetryEvent {
                attempt: self.attempt,
                max_attempts: self.policy.max_attempts(),
                delay,
                verdict: judged.verdict,
                code: judged.code,
                phase: judged.phase,
                error: failure.error.as_error(),
                tool: self.policy.budget().and_then(RetryBudget::tool),
                call_id: self.policy.budget().and_then(RetryBudget::call_id),
                policy_level: self.policy.budget().and_then(RetryBudget::level),
            };
            emit_retry(&self.policy, &event);
            self.attempt += 1;
        }
        decision
    }

    /// The decision under the policy's failover budget when `verdict` is part of an
    /// outage (starting or continuing one); `None` otherwise.
    fn outage_decision(&mut self, verdict: Verdict, unit: f64) -> Option<Decision> {
        if self.policy.failover().is_none() || !crate::failover::is_outage(verdict) {
            return None;
        }
        let now = tokio::time::Instant::now();
        let (began, failures) = self.outage.get_or_insert((now, 0));
        *failures += 1;
        let (began, failures) = (*began, *failures);
        let decision = self.policy.decide_in_outage(
            verdict,
            now.saturating_duration_since(began),
            failures,
            unit,
        );
        if decision.is_none() {
            self.outage = None;
        }
        decision
    }

    /// Ends the loop with `failure` (the one [`after_failure`](RetryState::after_failure)
    /// just stopped on): fires the give-up event when the failure was not a plain
    /// permanent one, and returns the caller's error with the outcome.
    pub fn give_up<E, Via>(&mut self, failure: TxFailure<E>, reason: StopReason) -> TxError<E>
    where
        E: AsError<Via>,
    {
        let attempts = std::mem::take(&mut self.attempts);
        let history = attempts.iter().map(|a| a.failure).collect();
        let outcome = Outcome::new(history, reason);
        if let Some(scope) = self.policy.budget() {
            scope.gave_up(&outcome);
        }
        if outcome.verdict() != Verdict::Permanent {
            emit_give_up(
                &self.policy,
                &GiveUpEvent {
                    outcome: &outcome,
                    attempts: &attempts,
                    max_attempts: self.policy.max_attempts(),
                    error: failure.error.as_error(),
                    tool: self.policy.budget().and_then(RetryBudget::tool),
                    call_id: self.policy.budget().and_then(RetryBudget::call_id),
                    policy_level: self.policy.budget().and_then(RetryBudget::level),
                },
            );
        }
        TxError::new(failure.error, outcome, <E as AsError<Via>>::as_error)
    }
}

/// The async retry loop, written once for every runner.
///
/// `$state` is a `mut` [`RetryState`] variable; `$attempt` an expression (usually an
/// `async { … }` block) evaluated afresh for each attempt, resolving to
/// `Result<T, TxFailure<E>>`. The loop resolves to `Result<T, TxError<E>>`. It is a macro
/// rather than a function taking a closure because rustc cannot yet prove `Send` for a
/// future that calls an async closure wrapping borrowed state (rust-lang/rust#100013);
/// expanded inline with concrete types, it can.
///
/// With `admission = $options`, each attempt first waits for the policy's
/// [`Admission`](crate::Admission) on the keys the options name, and releases them when
/// the attempt ends (before any backoff wait).
#[doc(hidden)]
#[macro_export]
macro_rules! retry_async {
    ($state:ident, $attempt:expr) => {{
        loop {
            let outcome = $attempt.await;
            $crate::__retry_async_step!($state, outcome)
        }
    }};
    ($state:ident, admission = $options:expr, $attempt:expr) => {{
        loop {
            let outcome = match $crate::__private::admission_for($state.policy(), $options) {
                ::core::option::Option::None => $attempt.await,
                ::core::option::Option::Some(admission) => {
                    let _permit = admission.await;
                    let outcome = $attempt.await;
                    // Before the permit goes: the next attempt on these keys in this
                    // process must already see a collision.
                    if let ::core::result::Result::Err(failure) = &outcome {
                        $crate::__private::note_failure(
                            $state.policy(),
                            $options,
                            failure.classification().verdict,
                        );
                    }
                    outcome
                }
            };
            $crate::__retry_async_step!($state, outcome)
        }
    }};
}

/// After one async attempt: return, or wait and go round again. Part of [`retry_async!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __retry_async_step {
    ($state:ident, $outcome:ident) => {
        match $outcome {
            ::core::result::Result::Ok(value) => {
                $state.succeeded();
                break ::core::result::Result::Ok(value);
            }
            ::core::result::Result::Err(failure) => match $state.after_failure(&failure) {
                $crate::Decision::RetryAfter(delay) => $crate::__private::sleep(delay).await,
                $crate::Decision::Stop(reason) => {
                    break ::core::result::Result::Err($state.give_up(failure, reason));
                }
            },
        }
    };
}

/// The blocking twin of [`retry_async!`]: the same state and decisions, waiting with
/// `std::thread::sleep`.
#[doc(hidden)]
#[macro_export]
macro_rules! retry_blocking {
    ($state:ident, $attempt:expr) => {{
        loop {
            match $attempt {
                ::core::result::Result::Ok(value) => {
                    $state.succeeded();
                    break ::core::result::Result::Ok(value);
                }
                ::core::result::Result::Err(failure) => match $state.after_failure(&failure) {
                    $crate::Decision::RetryAfter(delay) => ::std::thread::sleep(delay),
                    $crate::Decision::Stop(reason) => {
                        break ::core::result::Result::Err($state.give_up(failure, reason));
                    }
                },
            }
        }
    }};
}

/// `read_only_sql_transaction`.
const READ_ONLY_TRANSACTION: crate::SqlState = crate::SqlState::from_static("25006");

/// Whether a failure with `code` is the caller's own write in a transaction it asked to be
/// read-only (`read_only`): not a standby, so permanent. The one rule behind
/// [`TxFailure::under`] and the loop's check for runners that do not call it.
fn own_read_only_write(read_only: bool, code: Option<crate::Code>) -> bool {
    read_only && code == Some(crate::Code::SqlState(READ_ONLY_TRANSACTION))
}

/// One failed attempt of a transaction runner: the caller's error, how it was judged, and
/// whether the connection it ran on can still be used. Built by adapter runners with
/// [`TxFailure::in_body`] and [`TxFailure::at_commit`].
#[doc(hidden)]
#[derive(Debug)]
pub struct TxFailure<E> {
    error: E,
    failure: AttemptFailure,
    broken: bool,
    stop: Option<StopReason>,
}

impl<E> TxFailure<E> {
    /// A failure before COMMIT was sent (BEGIN, the caller's closure, a statement):
    /// classified as it is. `driver` is the adapter's own code extractor: it is consulted
    /// first, so the runner knows its driver's codes even where no registry reached it.
    pub fn in_body<Via>(policy: &RetryPolicy, driver: CodeExtractor, error: E) -> Self
    where
        E: AsError<Via>,
    {
        Self::judged(policy, driver, error, Phase::Body)
    }

    /// A failure while committing. Only the server's own "not committed" answers keep
    /// their verdict: a transient kind other than `Connection`, or a permanent code the
    /// server sent (a constraint checked at COMMIT). Everything else — no code, a
    /// driver-detected failure, a connection-class code (a pooler sends `08P01` after a
    /// COMMIT that landed) — is [`Verdict::Ambiguous`]: the commit may have happened.
    pub fn at_commit<Via>(policy: &RetryPolicy, driver: CodeExtractor, error: E) -> Self
    where
        E: AsError<Via>,
    {
        let mut failure = Self::judged(policy, driver, error, Phase::Commit);
        let answer = failure.failure;
        let server_said_not_committed = answer.code.is_some_and(crate::Code::is_from_server)
            && match answer.verdict {
                Verdict::Transient(kind) => !kind.loses_session(),
                Verdict::Permanent => !failure.broken,
                _ => false,
            };
        if !server_said_not_committed {
            failure.failure.verdict = Verdict::Ambiguous;
        }
        failure
    }

    /// A failure already judged elsewhere (an outer layer reusing the verdict a runner gave
    /// up with, read from the [`RetryBudget`]); the connection is not this layer's to discard.
    pub fn judged_as(error: E, failure: AttemptFailure) -> Self {
        TxFailure {
            error,
            failure,
            broken: false,
            stop: None,
        }
    }

    fn judged<Via>(policy: &RetryPolicy, driver: CodeExtractor, error: E, phase: Phase) -> Self
    where
        E: AsError<Via>,
    {
        let err: &(dyn Error + 'static) = error.as_error();
        let Classification { verdict, code } = policy.classifier().classify_with(err, driver);
        let broken = broken_connection(err, driver);
        TxFailure {
            error,
            failure: AttemptFailure {
                verdict,
                code,
                phase,
            },
            broken,
            stop: None,
        }
    }

    /// Applies what the transaction's options say about the failure: a `25006`
    /// (`read_only_sql_transaction`) in a transaction the caller asked to be read-only is
    /// the caller's own write, not a standby: permanent, and the connection is fine.
    #[must_use]
    pub fn under(mut self, options: &TxOptions) -> Self {
        if own_read_only_write(options.is_read_only(), self.failure.code) {
            self.failure.verdict = Verdict::Permanent;
            self.broken = false;
        }
        self
    }

    /// Ends the loop with this failure whatever its verdict: for a runner that cannot make
    /// another attempt (its one connection is gone and it cannot get another).
    #[must_use]
    pub fn ends_retrying(self) -> Self {
        self.stops(StopReason::ConnectionUnusable)
    }

    /// Ends the loop with this failure, for `reason`, whatever its verdict.
    #[must_use]
    pub fn stops(mut self, reason: StopReason) -> Self {
        self.stop = Some(reason);
        self
    }

    /// Marks the failure ambiguous: the attempt may have taken effect (it timed out while
    /// running). Retried only for idempotent operations.
    #[must_use]
    pub fn into_ambiguous(mut self) -> Self {
        self.failure.verdict = Verdict::Ambiguous;
        self
    }

    /// How the failure was judged.
    pub fn classification(&self) -> Classification {
        Classification::new(self.failure.verdict, self.failure.code)
    }

    /// Where the attempt failed.
    pub fn phase(&self) -> Phase {
        self.failure.phase
    }

    /// Whether the runner must discard the connection instead of returning it to its pool.
    /// Judged from the driver's error alone with the default table (a connection-class
    /// code, or a failure the driver detected itself), never from the user's classifier:
    /// narrowing what is retried must not put a broken connection back in the pool.
    pub fn discards_connection(&self) -> bool {
        self.broken
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
    /// `op` is an async closure, called afresh for every attempt. Its errors are classified
    /// with the policy's classifier (no COMMIT phase: use a driver's runner for
    /// transactions). The waits use `tokio::time` inside a tokio runtime (so tests can
    /// pause time) and a timer thread outside one.
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
    pub async fn run<T, E, Via, F>(&self, mut op: F) -> Result<T, E>
    where
        F: AsyncFnMut() -> Result<T, E>,
        E: AsError<Via>,
    {
        let mut state = RetryState::new(self, &TxOptions::DEFAULT);
        let result = crate::retry_async!(state, async {
            op().await
                .map_err(|e| TxFailure::in_body(self, no_driver, e))
        });
        result.map_err(TxError::into_error)
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
    ///     Err(std::io::Error::other("deadlock detected"))
    /// });
    /// assert!(result.is_err());
    /// assert_eq!(calls, 1);
    /// ```
    pub fn run_blocking<T, E, Via, F>(&self, mut op: F) -> Result<T, E>
    where
        F: FnMut() -> Result<T, E>,
        E: AsError<Via>,
    {
        let mut state = RetryState::new(self, &TxOptions::DEFAULT);
        let result = crate::retry_blocking!(
            state,
            op().map_err(|e| TxFailure::in_body(self, no_driver, e))
        );
        result.map_err(TxError::into_error)
    }
}
