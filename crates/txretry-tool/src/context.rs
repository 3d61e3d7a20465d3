//! What a handler is handed for one attempt.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use txretry_core::{RetryBudget, RetryPolicy};

use crate::once::OnceRun;

/// What a handler gets with each attempt: the invocation's policy (whose budget every runner
/// called with it shares), the tool's name, the call's id, whether this attempt was
/// cancelled, and for a [`once`](crate::Tool::once) tool the call's idempotency key and its
/// one recorded transaction ([`ToolContext::once`](crate::ToolContext#method.once), features
/// `sqlx-*`; `once_tokio_postgres`, `once_mysql_async`, and the blocking `once_rusqlite`,
/// under the drivers' features).
///
/// Cheap to clone; it owns everything, so it can be moved into `async move` blocks and
/// runner closures.
#[derive(Clone, Debug)]
pub struct ToolContext {
    policy: RetryPolicy,
    attempt: u32,
    cancelled: Arc<AtomicBool>,
    once: Option<Arc<OnceRun>>,
}

impl ToolContext {
    pub(crate) fn new(
        policy: RetryPolicy,
        attempt: u32,
        cancelled: Arc<AtomicBool>,
        once: Option<Arc<OnceRun>>,
    ) -> Self {
        ToolContext {
            policy,
            attempt,
            cancelled,
            once,
        }
    }

    /// This run's `once` state, for a tool declared `once`.
    #[cfg_attr(not(once_records), allow(dead_code))]
    pub(crate) fn once_run(&self) -> Option<&Arc<OnceRun>> {
        self.once.as_ref()
    }

    /// The call's idempotency key, for a tool declared [`once`](crate::Tool::once): the call
    /// id, or the key derived from the arguments. `None` for other tools.
    pub fn once_key(&self) -> Option<&str> {
        self.once.as_deref().map(|run| &*run.key)
    }

    /// The invocation's policy: the tool's effective policy (the tool's own, else the
    /// toolbox's, else `RetryPolicy::default()`), bound to the invocation's one retry
    /// budget ([`RetryBudget`]) and labelled with the tool's name, the call id and the level the
    /// policy came from.
    ///
    /// Pass it to every txretry runner the handler calls
    /// (`txretry_sqlx::transaction(&pool, ctx.policy(), …)`, any driver): their retries
    /// then come out of the invocation's `max_attempts`, so a transaction that deadlocks
    /// every time runs `max_attempts` times in all, never `max_attempts²`; their retry
    /// events reach the toolbox's `on_retry` hook with the tool's labels; and a commit is
    /// recorded, so the invocation never runs the handler again after one.
    ///
    /// Its `on_give_up` hook is a no-op: the invocation reports the give-up once, when it
    /// gives up itself. A variant (`ctx.policy().to_builder()…build()`) keeps the budget,
    /// so build it in the handler, for this call only; a policy built any other way has no
    /// budget, and a commit under it goes unrecorded.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    fn budget(&self) -> Option<&RetryBudget> {
        self.policy.budget()
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        self.budget()
            .and_then(RetryBudget::tool)
            .unwrap_or_default()
    }

    /// The id the caller gave this invocation.
    pub fn call_id(&self) -> &str {
        self.budget()
            .and_then(RetryBudget::call_id)
            .unwrap_or_default()
    }

    /// Where the policy came from: `"tool"`, `"toolbox"` or `"default"`.
    pub fn policy_level(&self) -> &'static str {
        self.budget()
            .and_then(RetryBudget::level)
            .unwrap_or("default")
    }

    /// This attempt's number within the invocation, 1-based (the handler's runs; the
    /// runners' own attempts are counted by them).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Retries left in the invocation's budget, for every loop in it.
    pub fn retries_left(&self) -> u32 {
        self.budget().map_or(0, RetryBudget::retries_left)
    }

    /// Whether this attempt was cancelled: it timed out, or the invocation was dropped.
    /// An async handler's future is simply dropped then; a blocking handler cannot be
    /// stopped from outside, and should check this between statements and return early.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}
