//! [`RetryPolicyBuilder`]: every setting of a [`RetryPolicy`], checked when it is built.

use std::sync::Arc;
use std::time::Duration;

use super::{Inner, PolicyError, RetryPolicy};
use crate::event::{GiveUpHook, RetryHook};
use crate::{
    Admission, Backoff, Classifier, GiveUpEvent, Jitter, KindSet, RetryBudget, RetryEvent,
};

/// Builds a [`RetryPolicy`]; every setting starts at its default (see [`RetryPolicy`]).
#[derive(Clone)]
pub struct RetryPolicyBuilder {
    pub(super) max_attempts: u32,
    pub(super) backoff: Backoff,
    pub(super) max_delay: Option<Duration>,
    pub(super) jitter: Jitter,
    pub(super) max_elapsed: Option<Duration>,
    pub(super) retry_on: KindSet,
    pub(super) classifier: Classifier,
    pub(super) on_retry: Option<RetryHook>,
    pub(super) on_give_up: Option<GiveUpHook>,
    pub(super) admission: Option<Admission>,
    pub(super) failover: Option<Duration>,
    /// The budget of the policy this builder came from ([`RetryPolicy::to_builder`]): a
    /// variant of a tool call's policy still draws on the call's budget.
    pub(super) scope: Option<RetryBudget>,
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
            scope: None,
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

    /// The wait curve. Nothing bounds its waits but [`max_delay`](Self::max_delay) and
    /// [`max_elapsed`](Self::max_elapsed): `Backoff::Constant(Duration::MAX)` is taken,
    /// and waits for ever.
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
    /// attempt's verdict. A panic in the hook is caught. The last failure decides: a
    /// deadlock retried, then a permanent error (a constraint on the second attempt), is an
    /// ordinary outcome, and fires nothing.
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
    /// The outage's clock starts when its first failure is judged (an attempt that takes
    /// 10 s to fail, a connect timeout, starts it 10 s after it began) and stops at the
    /// first failure of another kind (a deadlock after the new primary answers): a later
    /// outage has the whole `max_outage` again. A tool call's runners share the call's
    /// outage: a runner that gave up on it ends the call.
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
                scope: self.scope,
            }),
        })
    }
}
