//! The retry policy and the one pure decision function both loops share; its builder and
//! the builder's error have a file each.

mod builder;
mod error;

pub use builder::RetryPolicyBuilder;
pub use error::PolicyError;

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::event::{GiveUpHook, RetryHook};
use crate::{
    Admission, Backoff, Classification, Classifier, Jitter, KindSet, RetryBudget, Verdict,
};

/// How a transaction is retried: how many attempts, how long to wait, what counts as
/// transient. Cheap to clone (an `Arc` inside) and shareable across tasks.
///
/// # Default
/// `RetryPolicy::default()`: 2 attempts in total, linear backoff 150 ms × N (150 ms before
/// the second attempt), no jitter, no cap on the delay (exponential backoff: 10 s) or on the
/// elapsed time, retries deadlocks, lock timeouts, serialization failures and SQLite busy
/// ([`KindSet::DEFAULT`]), with [`Classifier::default()`]. Ambiguous failures (the commit
/// may have landed) are retried only for operations declared idempotent
/// ([`TxOptions::idempotent`](crate::TxOptions::idempotent)), never by the policy itself.
///
/// A policy says *how* to retry and is meant to be built once and shared; facts about one
/// operation (idempotent, the keys it contends on, isolation) go on the call, in
/// [`TxOptions`](crate::TxOptions).
///
/// ```
/// use std::time::Duration;
/// use txretry_core::{Backoff, Jitter, RetryPolicy};
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(5)
///     .backoff(Backoff::Exponential { initial: Duration::from_millis(10), factor: 2.0 })
///     .max_delay(Duration::from_secs(1))
///     .jitter(Jitter::Full)
///     .build()?;
/// assert_eq!(policy.max_attempts(), 5);
/// # Ok::<(), txretry_core::PolicyError>(())
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    max_attempts: u32,
    backoff: Backoff,
    max_delay: Option<Duration>,
    jitter: Jitter,
    max_elapsed: Option<Duration>,
    retry_on: KindSet,
    classifier: Classifier,
    on_retry: Option<RetryHook>,
    on_give_up: Option<GiveUpHook>,
    admission: Option<Admission>,
    failover: Option<Duration>,
    scope: Option<RetryBudget>,
}

/// The cap on exponential backoff when no `max_delay` is set.
const EXPONENTIAL_CAP: Duration = Duration::from_secs(10);

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Wait this long, then run the whole transaction again.
    RetryAfter(Duration),
    /// Return the error to the caller.
    Stop(StopReason),
}

/// Why the loop stopped retrying.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The failure is permanent, or a transient kind this policy does not retry, or
    /// ambiguous and the operation was not declared idempotent.
    NotRetryable,
    /// Running the operation again is not safe whatever the failure: it is declared not
    /// restart-safe, or part of the attempt already committed (an outer layer's decision).
    NotRestartable,
    /// The runner could not make another attempt: its one connection is unusable (closed,
    /// or still inside the failed transaction) and it has no pool to take another from.
    ConnectionUnusable,
    /// `max_attempts` attempts have been made.
    AttemptsExhausted,
    /// The next wait would end past `max_elapsed`.
    ElapsedExceeded,
    /// A failover or connection outage outlasted the policy's failover budget
    /// ([`RetryPolicyBuilder::failover`]).
    OutageExceeded,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::builder()
            .build()
            .unwrap_or_else(|_| unreachable!("the defaults are valid"))
    }
}

impl RetryPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::default()
    }

    /// A builder holding this policy's settings, to derive a variant (say, the default
    /// policy with an `on_retry` hook) without restating the rest. Its
    /// [budget](RetryPolicy::budget) too: a variant of a tool call's policy (txretry-tool's
    /// `ToolContext::policy`) still draws on the call's budget, through which the call
    /// learns what committed. Such a variant belongs to that call: build it in the handler,
    /// never keep it for later calls (it would spend, and report to, a call that is over).
    /// Derive a policy for the whole application from one without a budget.
    ///
    /// ```
    /// use txretry_core::RetryPolicy;
    ///
    /// let logged = RetryPolicy::default()
    ///     .to_builder()
    ///     .on_retry(|e| eprintln!("retrying after attempt {}", e.attempt))
    ///     .build()?;
    /// assert_eq!(logged.max_attempts(), 2);
    /// # Ok::<(), txretry_core::PolicyError>(())
    /// ```
    pub fn to_builder(&self) -> RetryPolicyBuilder {
        let p = &*self.inner;
        RetryPolicyBuilder {
            max_attempts: p.max_attempts,
            backoff: p.backoff,
            max_delay: p.max_delay,
            jitter: p.jitter,
            max_elapsed: p.max_elapsed,
            retry_on: p.retry_on,
            classifier: p.classifier.clone(),
            on_retry: p.on_retry.clone(),
            on_give_up: p.on_give_up.clone(),
            admission: p.admission.clone(),
            failover: p.failover,
            scope: p.scope.clone(),
        }
    }

    /// Runs the operation once and returns its result unchanged: no retry, so no retry
    /// event. A failure the default table retries still ends the loop as a give-up
    /// ([`StopReason::AttemptsExhausted`]): the `on_give_up` hook runs and `tracing` logs
    /// it, as under any policy.
    pub fn disabled() -> Self {
        RetryPolicy::builder()
            .max_attempts(1)
            .build()
            .unwrap_or_else(|_| unreachable!("valid"))
    }

    /// Attempts in total, the first one included.
    pub fn max_attempts(&self) -> u32 {
        self.inner.max_attempts
    }

    /// The limit on the time spent retrying, if any.
    pub fn max_elapsed(&self) -> Option<Duration> {
        self.inner.max_elapsed
    }

    /// The classifier this policy uses.
    pub fn classifier(&self) -> &Classifier {
        &self.inner.classifier
    }

    /// Classifies `error` with this policy's classifier.
    pub fn classify(&self, error: &(dyn Error + 'static)) -> Classification {
        self.inner.classifier.classify(error)
    }

    /// The decision after attempt `attempt` (1-based) failed with `verdict`, `elapsed` after
    /// the first attempt started; `idempotent` says whether the operation may be run again
    /// after an ambiguous failure. `unit` is a random number in `0..1` used for jitter
    /// (outside it, clamped; NaN, taken as the middle); the function is otherwise pure, and
    /// both the async and the blocking loop call it.
    ///
    /// The wait is the backoff's, capped at `max_delay` (exponential backoff without one: at
    /// 10 s), then jittered within the cap, so late retries stay spread out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use txretry_core::{Decision, RetryPolicy, StopReason, TransientKind, Verdict};
    ///
    /// let p = RetryPolicy::default();
    /// let deadlock = Verdict::Transient(TransientKind::Deadlock);
    /// assert_eq!(p.decide(deadlock, false, 1, Duration::ZERO, 0.5), Decision::RetryAfter(Duration::from_millis(150)));
    /// assert_eq!(p.decide(deadlock, false, 2, Duration::ZERO, 0.5), Decision::Stop(StopReason::AttemptsExhausted));
    /// assert_eq!(p.decide(Verdict::Permanent, true, 1, Duration::ZERO, 0.5), Decision::Stop(StopReason::NotRetryable));
    /// assert_eq!(p.decide(Verdict::Ambiguous, false, 1, Duration::ZERO, 0.5), Decision::Stop(StopReason::NotRetryable));
    /// assert!(matches!(p.decide(Verdict::Ambiguous, true, 1, Duration::ZERO, 0.5), Decision::RetryAfter(_)));
    /// ```
    pub fn decide(
        &self,
        verdict: Verdict,
        idempotent: bool,
        attempt: u32,
        elapsed: Duration,
        unit: f64,
    ) -> Decision {
        let p = &*self.inner;
        let retryable = match verdict {
            Verdict::Transient(kind) => p.retry_on.contains(kind),
            Verdict::Ambiguous => idempotent,
            Verdict::Permanent => false,
        };
        if !retryable {
            return Decision::Stop(StopReason::NotRetryable);
        }
        if attempt >= p.max_attempts {
            return Decision::Stop(StopReason::AttemptsExhausted);
        }
        let cap = p.max_delay.or(match p.backoff {
            Backoff::Exponential { initial, .. } => Some(EXPONENTIAL_CAP.max(initial)),
            _ => None,
        });
        let base = p.backoff.delay(attempt);
        let base = cap.map_or(base, |cap| base.min(cap));
        let delay = p.jitter.apply(base, cap, unit_interval(unit));
        if let Some(max) = p.max_elapsed
            && elapsed.saturating_add(delay) > max
        {
            return Decision::Stop(StopReason::ElapsedExceeded);
        }
        Decision::RetryAfter(delay)
    }

    /// This policy with a shared [`RetryBudget`]: every loop run under the returned policy draws
    /// its retries from that one budget and labels its events with the budget's labels.
    /// Cheap (one allocation); meant per operation, e.g. per tool invocation.
    #[must_use]
    pub fn with_budget(&self, budget: RetryBudget) -> RetryPolicy {
        let mut inner = (*self.inner).clone();
        inner.scope = Some(budget);
        RetryPolicy {
            inner: Arc::new(inner),
        }
    }

    /// The budget this policy's loops share, if any.
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.inner.scope.as_ref()
    }

    pub(crate) fn on_retry_hook(&self) -> Option<&RetryHook> {
        self.inner.on_retry.as_ref()
    }

    pub(crate) fn on_give_up_hook(&self) -> Option<&GiveUpHook> {
        self.inner.on_give_up.as_ref()
    }

    pub(crate) fn admission(&self) -> Option<&Admission> {
        self.inner.admission.as_ref()
    }

    pub(crate) fn failover(&self) -> Option<Duration> {
        self.inner.failover
    }

    pub(crate) fn retry_on(&self) -> KindSet {
        self.inner.retry_on
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &*self.inner;
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &p.max_attempts)
            .field("backoff", &p.backoff)
            .field("max_delay", &p.max_delay)
            .field("jitter", &p.jitter)
            .field("max_elapsed", &p.max_elapsed)
            .field("retry_on", &p.retry_on)
            .field("classifier", &p.classifier)
            .field("on_retry", &p.on_retry.is_some())
            .field("on_give_up", &p.on_give_up.is_some())
            .field("admission", &p.admission)
            .field("failover", &p.failover)
            .field("scope", &p.scope)
            .finish()
    }
}

/// `unit` as a point in `[0, 1]`, where the jitter of a wait is drawn: clamped, and NaN
/// (a broken random source) taken as the middle, never as a zero wait.
pub(crate) fn unit_interval(unit: f64) -> f64 {
    if unit.is_nan() {
        0.5
    } else {
        unit.clamp(0.0, 1.0)
    }
}
