//! One retry budget shared by every loop that runs as part of one larger operation — an
//! agent's tool call whose handler runs several transactions, through any runner of any
//! driver — so attempts never multiply across layers.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::{Outcome, RecordedAttempt};

/// A shared retry budget with the labels its events carry. Attach it to a policy with
/// [`RetryPolicy::with_budget`](crate::RetryPolicy::with_budget); every loop run under that
/// policy (a runner's, `policy.run`'s, an outer layer's) then draws its retries from the
/// one budget, counts its successes here, records each failed attempt here, and leaves its
/// last give-up here for the outer layer to read (typed, never parsed from text).
///
/// Clones share the same budget.
///
/// ```
/// use txretry_core::{RetryPolicy, RetryBudget};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
/// let scope = RetryBudget::for_policy(&policy).labelled("transfer", "call-17", "tool");
/// let scoped = policy.with_budget(scope.clone());
///
/// // Two loops under one budget of 3 attempts: 3 attempts in all, not 3 + 3.
/// let mut calls = 0;
/// for _ in 0..2 {
///     let _: Result<(), std::io::Error> = scoped
///         .run(async || {
///             calls += 1;
///             Err(std::io::Error::other("deadlock detected"))
///         })
///         .await;
/// }
/// assert_eq!(calls, 4); // the first loop: 3 attempts; the second: its first, no retry left
/// assert_eq!(scope.retries_left(), 0);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    retries_left: AtomicU32,
    successes: AtomicU32,
    tool: Option<Arc<str>>,
    call_id: Option<Arc<str>>,
    level: Option<&'static str>,
    last_give_up: Mutex<Option<Outcome>>,
    attempts: Mutex<Vec<RecordedAttempt>>,
}

impl RetryBudget {
    /// A budget of `retries` retries (attempts beyond each loop's first).
    pub fn new(retries: u32) -> Self {
        RetryBudget {
            inner: Arc::new(Inner {
                retries_left: AtomicU32::new(retries),
                successes: AtomicU32::new(0),
                tool: None,
                call_id: None,
                level: None,
                last_give_up: Mutex::new(None),
                attempts: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The budget `policy` allows one operation: `max_attempts - 1` retries.
    pub fn for_policy(policy: &crate::RetryPolicy) -> Self {
        RetryBudget::new(policy.max_attempts().saturating_sub(1))
    }

    /// Labels for the events of every loop in the scope: the tool's name, the call's id
    /// and where the policy came from (`"tool"`, `"toolbox"`, `"default"`). Label it
    /// before sharing it: a scope that already has clones comes back as a new budget with
    /// the same counts, which those clones do not share.
    #[must_use]
    pub fn labelled(mut self, tool: &str, call_id: &str, level: &'static str) -> Self {
        let (tool, call_id) = (Some(Arc::from(tool)), Some(Arc::from(call_id)));
        // Not shared yet (the usual case: labelled right after it was made): no new budget
        // to allocate.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            (inner.tool, inner.call_id, inner.level) = (tool, call_id, Some(level));
            return self;
        }
        let inner = &*self.inner;
        RetryBudget {
            inner: Arc::new(Inner {
                retries_left: AtomicU32::new(inner.retries_left.load(Ordering::Acquire)),
                successes: AtomicU32::new(inner.successes.load(Ordering::Acquire)),
                tool,
                call_id,
                level: Some(level),
                last_give_up: Mutex::new(None),
                attempts: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Takes one retry from the budget; `false` when none is left.
    pub fn take_retry(&self) -> bool {
        self.inner
            .retries_left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Retries left.
    pub fn retries_left(&self) -> u32 {
        self.inner.retries_left.load(Ordering::Acquire)
    }

    /// How many loops in the scope have succeeded (for a runner: committed). An outer layer
    /// compares it before and after a step to learn whether the step committed anything.
    pub fn successes(&self) -> u32 {
        self.inner.successes.load(Ordering::Acquire)
    }

    /// The outcome of the last loop in the scope that gave up, taken (so the next read
    /// sees only newer ones).
    pub fn take_last_give_up(&self) -> Option<Outcome> {
        self.inner
            .last_give_up
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Every failed attempt of the scope's loops since the last call, first to last, with
    /// its verdict, phase, code and error text; taken (so the next call sees only newer
    /// ones). Every loop run under the scope's policy records its attempts here, whether it
    /// then retried, succeeded or gave up; a tool call's invocation loop records its own
    /// runs itself and takes these after each run. They accumulate until taken.
    pub fn take_attempts(&self) -> Vec<RecordedAttempt> {
        std::mem::take(
            &mut *self
                .inner
                .attempts
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The tool label, if any.
    pub fn tool(&self) -> Option<&str> {
        self.inner.tool.as_deref()
    }

    /// The call-id label, if any.
    pub fn call_id(&self) -> Option<&str> {
        self.inner.call_id.as_deref()
    }

    /// Where the policy came from, if labelled.
    pub fn level(&self) -> Option<&'static str> {
        self.inner.level
    }

    pub(crate) fn succeeded(&self) {
        self.inner.successes.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn record(&self, attempt: RecordedAttempt) {
        self.inner
            .attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(attempt);
    }

    pub(crate) fn gave_up(&self, outcome: &Outcome) {
        *self
            .inner
            .last_give_up
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(outcome.clone());
    }
}
