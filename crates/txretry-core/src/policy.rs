//! The retry policy, its builder, and the one pure decision function both loops share.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::event::{GiveUpHook, RetryHook};
use crate::{
    Admission, Backoff, Classification, Classifier, GiveUpEvent, Jitter, KindSet, RetryBudget,
    RetryEvent, Verdict,
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
    /// policy with an `on_retry` hook) without restating the rest.
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
        }
    }

    /// Runs the operation once and returns its result unchanged: no retry, no event.
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
    /// after an ambiguous failure. `unit` is a random number in `0..1` used for jitter; the
    /// function is otherwise pure, and both the async and the blocking loop call it.
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
        let delay = p.jitter.apply(base, cap, unit.clamp(0.0, 1.0));
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

/// Builds a [`RetryPolicy`]; every setting starts at its default (see [`RetryPolicy`]).
#[derive(Clone)]
pub struct RetryPolicyBuilder {
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
}

impl Default for RetryPolicyBuilder {
    fn default() -> Self {
        RetryPolicyBuilder {
            max_attempts: 2,
            backoff: Backoff::Linear(Duration::from_millis(150)),
            max_delay: None,
            jitter: Jitter::None,
            max_elapsed: None,
            retry_on: KindSet::DEFAULT,
            classifier: Classifier::default(),
            on_retry: None,
            on_give_up: None,
            admission: None,
            failover: None,
        }
    }
}

impl RetryPolicyBuilder {
    /// Attempts in total, the first included; at least 1.
    ///
    /// # Default
    /// 2.
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The wait curve.
    ///
    /// # Default
    /// `Backoff::Linear(150 ms)`.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// An upper bound on every wait; not below the first wait. Jitter is applied within
    /// it, so waits that reached the cap still spread out.
    ///
    /// # Default
    /// None for constant and linear backoff; 10 s (or the first wait, if longer) for
    /// exponential backoff.
    #[must_use]
    pub fn max_delay(mut self, max: Duration) -> Self {
        self.max_delay = Some(max);
        self
    }

    /// Randomisation of each wait.
    ///
    /// # Default
    /// `Jitter::None`.
    #[must_use]
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Stop retrying when the next wait would end later than this after the first attempt
    /// started.
    ///
    /// # Default
    /// None.
    #[must_use]
    pub fn max_elapsed(mut self, max: Duration) -> Self {
        self.max_elapsed = Some(max);
        self
    }

    /// Which transient kinds are retried; the others are returned at once (they keep their
    /// verdict in the [`Outcome`](crate::Outcome)). This is the one knob for narrowing or
    /// widening *what* is retried; the classifier only says what an error *is*.
    ///
    /// # Default
    /// [`KindSet::DEFAULT`]: deadlock, lock timeout, serialization failure, busy.
    #[must_use]
    pub fn retry_on(mut self, kinds: impl Into<KindSet>) -> Self {
        self.retry_on = kinds.into();
        self
    }

    /// The classifier.
    ///
    /// # Default
    /// [`Classifier::default()`].
    #[must_use]
    pub fn classifier(mut self, classifier: Classifier) -> Self {
        self.classifier = classifier;
        self
    }

    /// Called before every wait with the failed attempt's [`RetryEvent`]. A panic in the
    /// hook is caught and does not stop the loop.
    ///
    /// # Default
    /// None (the event still goes to `tracing`, at debug level).
    #[must_use]
    pub fn on_retry<F>(mut self, hook: F) -> Self
    where
        F: Fn(&RetryEvent<'_>) + Send + Sync + 'static,
    {
        self.on_retry = Some(Arc::new(hook));
        self
    }

    /// Called once when the loop stops on a failure that was not a plain permanent one
    /// (retries or time ran out, a kind not retried, an ambiguous commit), with every
    /// attempt's verdict. A panic in the hook is caught.
    ///
    /// # Default
    /// None (the event still goes to `tracing`, at warn level).
    #[must_use]
    pub fn on_give_up<F>(mut self, hook: F) -> Self
    where
        F: Fn(&GiveUpEvent<'_>) + Send + Sync + 'static,
    {
        self.on_give_up = Some(Arc::new(hook));
        self
    }

    /// Contention-aware admission: async runners make transactions that name the same key
    /// (see [`TxOptions::contends_on`](crate::TxOptions::contends_on)) take turns instead of
    /// colliding. See [`Admission`].
    ///
    /// # Default
    /// None: every attempt starts at once.
    #[must_use]
    pub fn admission(mut self, admission: Admission) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Rides out a failover or a server restart: adds [`TransientKind::Failover`] and
    /// [`TransientKind::Connection`] to the kinds retried (a later
    /// [`retry_on`](RetryPolicyBuilder::retry_on) replaces the set), and retries them for
    /// as long as an outage lasts, up to `max_outage` from its first failure, whatever
    /// `max_attempts` says. The waits start at 50 ms and double up to 500 ms (±20%
    /// jitter), so the first attempt after the new primary accepts writes comes within
    /// half a second. Retries within an outage draw on no attempt budget (neither
    /// `max_attempts` nor a tool call's [`RetryBudget`]); `max_elapsed`, when set, still bounds
    /// the whole loop.
    ///
    /// What stays safe: a failure before COMMIT was sent means the server rolled the
    /// attempt back, and the runners discard the connection so the next attempt connects
    /// anew (to the new primary, through a proxy or a multi-host URL). A failure *at*
    /// COMMIT is [`Verdict::Ambiguous`](crate::Verdict::Ambiguous) as always: never run
    /// again unless the call is idempotent.
    ///
    /// # Default
    /// None: `RetryPolicy::default()` does not retry failover or connection failures. An
    /// outage lasts seconds; a default that waits that long inside every call would change
    /// the latency of every caller that never asked for it, and a service usually has its
    /// own deadline. Pick [`RetryPolicy::high_availability`] (60 s) or set it here.
    ///
    /// [`TransientKind::Failover`]: crate::TransientKind::Failover
    /// [`TransientKind::Connection`]: crate::TransientKind::Connection
    #[must_use]
    pub fn failover(mut self, max_outage: Duration) -> Self {
        self.failover = Some(max_outage);
        self.retry_on = self
            .retry_on
            .with(crate::TransientKind::Failover)
            .with(crate::TransientKind::Connection);
        self
    }

    /// Checks the settings and builds the policy.
    pub fn build(self) -> Result<RetryPolicy, PolicyError> {
        if self.max_attempts == 0 {
            return Err(PolicyError::ZeroAttempts);
        }
        if let Backoff::Exponential { factor, .. } = self.backoff
            && !(factor >= 1.0 && factor.is_finite())
        {
            return Err(PolicyError::Factor(factor));
        }
        if let Jitter::Proportional(f) = self.jitter
            && !(0.0..=1.0).contains(&f)
        {
            return Err(PolicyError::Jitter(f));
        }
        if let Some(max) = self.max_delay
            && max < self.backoff.initial()
        {
            return Err(PolicyError::MaxDelayBelowInitial {
                max_delay: max,
                initial: self.backoff.initial(),
            });
        }
        if self
            .admission
            .as_ref()
            .is_some_and(Admission::contended_without_database)
        {
            return Err(PolicyError::ContendedKeysWithoutDatabase);
        }
        Ok(RetryPolicy {
            inner: Arc::new(Inner {
                max_attempts: self.max_attempts,
                backoff: self.backoff,
                max_delay: self.max_delay,
                jitter: self.jitter,
                max_elapsed: self.max_elapsed,
                retry_on: self.retry_on,
                classifier: self.classifier,
                on_retry: self.on_retry,
                on_give_up: self.on_give_up,
                admission: self.admission,
                failover: self.failover,
                scope: None,
            }),
        })
    }
}

/// A setting [`RetryPolicyBuilder::build`] rejected. The message names the setting.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolicyError {
    /// `max_attempts` was 0.
    ZeroAttempts,
    /// The exponential `factor` was below 1, infinite or NaN.
    Factor(f64),
    /// The proportional `jitter` was outside `0..=1` or NaN.
    Jitter(f64),
    /// `max_delay` was below the first wait.
    MaxDelayBelowInitial {
        /// The cap asked for.
        max_delay: Duration,
        /// The first wait of the backoff.
        initial: Duration,
    },
    /// The admission was [`only_for_contended_keys`](crate::Admission::only_for_contended_keys)
    /// without [`in_database`](crate::Admission::in_database): there are no database locks
    /// to take only for contended keys.
    ContendedKeysWithoutDatabase,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::ZeroAttempts => f.write_str("max_attempts must be at least 1 (got 0)"),
            PolicyError::Factor(x) => {
                write!(
                    f,
                    "backoff factor must be a finite number of at least 1 (got {x})"
                )
            }
            PolicyError::Jitter(x) => write!(f, "jitter must be within 0..=1 (got {x})"),
            PolicyError::MaxDelayBelowInitial { max_delay, initial } => write!(
                f,
                "max_delay ({max_delay:?}) must not be below the initial backoff delay ({initial:?})"
            ),
            PolicyError::ContendedKeysWithoutDatabase => f.write_str(
                "admission: only_for_contended_keys needs in_database (there are no database locks to limit)",
            ),
        }
    }
}

impl Error for PolicyError {}
