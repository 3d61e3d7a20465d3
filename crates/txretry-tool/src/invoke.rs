//! One tool call: the gate, the arguments, and the invocation loop (core's `RetryState`, one
//! attempt = one run of the handler) with its typed result.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::Value;
use txretry_core::{
    AttemptFailure, Code, Decision, Outcome, Phase, RetryState, Scope, StopReason, TransientKind,
    TxFailure, TxOptions, Verdict,
};

use crate::once::OnceRun;
use crate::tool::{Attempt, AttemptError, AttemptResult, BoxError};
use crate::{Caller, OnceRefused, ToolContext, Toolbox};

impl Toolbox {
    /// Runs the tool `name` for `caller` with JSON `args`; `call_id` labels its events (use
    /// the model's tool-call id).
    ///
    /// In order:
    /// 1. **the gate**: an unknown tool and a tool not offered to `caller` (see
    ///    [`offered`](Toolbox::offered)) get the same [`InvokeError::Refused`], so a caller
    ///    cannot probe which tools exist; the handler never runs;
    /// 2. **the arguments** are deserialized once: invalid ones get
    ///    [`InvokeError::InvalidArguments`] naming the problem; never retried, the handler
    ///    never runs;
    /// 3. **the attempts**, under the tool's effective policy bound to one budget (a
    ///    [`Scope`] of `max_attempts - 1` retries shared with every runner the handler calls
    ///    with [`ToolContext::policy`]). Before each attempt the gate runs again. An attempt
    ///    is one run of the handler (with the per-attempt timeout, if any). Then:
    ///    - `Ok`: its JSON is returned untouched (whatever it contains);
    ///    - a panic: [`FailureKind::Panicked`], never retried;
    ///    - `Err`: judged by the runner that gave up on it when one did in this attempt,
    ///      else classified with the policy's classifier; a timeout is ambiguous (retried
    ///      only for idempotent tools). It is retried when the policy says so, the budget
    ///      has a retry left, the tool is restart-safe and nothing committed during the
    ///      attempt; otherwise the call fails with every attempt's error
    ///      ([`InvokeError::Failed`]).
    ///
    /// For a [`once`](crate::Tool::once) tool, the idempotency key is made before the first
    /// attempt (the call id, or the key function's; [`InvokeError::OnceRefused`] if it
    /// cannot be), timeouts and ambiguous commits are retried as for an idempotent tool, a
    /// recorded (or replayed) business error is judged permanent as it is, and a run that
    /// broke the one-transaction rule ends the call with [`InvokeError::OnceRefused`].
    ///
    /// Dropping the returned future cancels the running attempt (its future is dropped;
    /// a blocking attempt is marked cancelled and its thread runs on by itself). Must be
    /// polled inside a tokio runtime with the time driver (`#[tokio::main]` has it).
    ///
    /// ```
    /// use schemars::JsonSchema;
    /// use serde::{Deserialize, Serialize};
    /// use serde_json::json;
    /// use txretry_tool::{BoxError, Caller, FailureKind, InvokeError, Tool, ToolContext, Toolbox};
    ///
    /// #[derive(Deserialize, JsonSchema)]
    /// struct Transfer { from: i64, to: i64, cents: i64 }
    ///
    /// #[derive(Serialize)]
    /// struct Receipt { moved: i64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let toolbox = Toolbox::builder()
    ///     .tool(Tool::new("transfer", "Move money between two accounts.", |_ctx: ToolContext, t: Transfer| async move {
    ///         if t.cents <= 0 {
    ///             return Err::<Receipt, BoxError>("the amount must be positive".into());
    ///         }
    ///         Ok(Receipt { moved: t.cents })
    ///     }))
    ///     .build()?;
    /// let caller = Caller::new(["teller"]);
    ///
    /// let receipt = toolbox.invoke(&caller, "transfer", json!({"from": 1, "to": 2, "cents": 500}), "call-1").await?;
    /// assert_eq!(receipt, json!({"moved": 500}));
    ///
    /// match toolbox.invoke(&caller, "transfer", json!({"from": 1, "to": 2, "cents": 0}), "call-2").await {
    ///     Err(InvokeError::Failed(failure)) => {
    ///         assert_eq!(failure.kind(), FailureKind::Business);
    ///         assert_eq!(failure.attempts().len(), 1); // surfaced once
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    ///
    /// let err = toolbox.invoke(&caller, "transfer", json!({"from": 1}), "call-3").await.unwrap_err();
    /// assert!(matches!(err, InvokeError::InvalidArguments { .. }), "{err}");
    ///
    /// let unknown = toolbox.invoke(&caller, "drop_tables", json!({}), "call-4").await.unwrap_err();
    /// assert!(matches!(unknown, InvokeError::Refused { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn invoke(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
        call_id: &str,
    ) -> Result<Value, InvokeError> {
        let inner = &*self.inner;
        let Some(index) = inner.gate(caller, name) else {
            return Err(InvokeError::refused(name));
        };
        let entry = &inner.tools[index];
        let tool = entry.descriptor.name.as_str();
        let mut start =
            (entry.prepare)(&args).map_err(|message| InvokeError::InvalidArguments {
                tool: tool.to_owned(),
                message,
            })?;

        let once_key = (entry.once.as_ref())
            .map(|once| once.key_for(call_id, &args))
            .transpose()
            .map_err(|why| InvokeError::OnceRefused {
                tool: tool.to_owned(),
                reason: OnceRefused::InvalidKey(why),
            })?;

        let scope = Scope::for_policy(&entry.loop_policy).labelled(tool, call_id, entry.level);
        let budget = scope.retries_left();
        let handler_policy = entry.handler_policy.with_scope(scope.clone());
        // The invocation loop's own state is made when the first attempt fails (the happy
        // path never needs it), or at once when the policy limits the elapsed time (its
        // clock starts with the first attempt).
        let new_state = || {
            // A once tool's record says whether an ambiguous attempt landed: running it again
            // is safe.
            let options =
                TxOptions::new().idempotent(entry.descriptor.idempotent || entry.once.is_some());
            RetryState::new(&entry.loop_policy.with_scope(scope.clone()), &options)
        };
        let mut state = entry.loop_policy.max_elapsed().map(|_| new_state());
        let mut earlier: Vec<ToolAttempt> = Vec::new();

        loop {
            if !inner.allows(caller, index) {
                return Err(InvokeError::refused(name));
            }
            // A give-up left over from an earlier attempt says nothing about this one.
            drop(scope.take_last_give_up());
            let successes = scope.successes();
            let cancelled = Arc::new(AtomicBool::new(false));
            let number = state.as_ref().map_or(1, RetryState::attempt);
            let once_run = (entry.once.as_ref().zip(once_key.as_ref()))
                .map(|(once, key)| Arc::new(OnceRun::new(once.clone(), Arc::clone(key), &scope)));
            let ctx = ToolContext::new(
                handler_policy.clone(),
                number,
                Arc::clone(&cancelled),
                once_run.clone(),
            );
            let attempt = start(ctx, &args).map_err(|message| InvokeError::InvalidArguments {
                tool: tool.to_owned(),
                message,
            })?;

            let ended = run(attempt, entry.timeout, &cancelled).await;
            if let Some(reason) = once_run.as_deref().and_then(OnceRun::verdict) {
                return Err(InvokeError::OnceRefused {
                    tool: tool.to_owned(),
                    reason,
                });
            }
            let business = once_run.as_deref().is_some_and(OnceRun::business);
            let (error, end) = match ended {
                Ended::Done(Ok(output)) => return Ok(output),
                Ended::Done(Err(AttemptError::Output(error))) => {
                    return Err(InvokeError::InvalidOutput {
                        tool: tool.to_owned(),
                        error,
                    });
                }
                Ended::Done(Err(AttemptError::Handler(error))) => (error, End::Returned),
                Ended::TimedOut(limit) => (Box::new(TimedOut(limit)) as BoxError, End::TimedOut),
                Ended::Panicked(message) => {
                    (Box::new(Panicked(message)) as BoxError, End::Panicked)
                }
            };

            let runner_outcome = match end {
                End::Returned => scope.take_last_give_up(),
                _ => None,
            };
            let mut failure = match (
                &end,
                runner_outcome.as_ref().and_then(|o| o.history().last()),
            ) {
                (End::Panicked, _) => TxFailure::judged_as(
                    error,
                    AttemptFailure::new(Verdict::Permanent, None, Phase::Body),
                ),
                (End::TimedOut, _) => {
                    TxFailure::in_body(&handler_policy, no_code, error).into_ambiguous()
                }
                // The once transaction committed a business error (or replayed one): the
                // call's answer, whatever the error's text looks like.
                (End::Returned, _) if business => TxFailure::judged_as(
                    error,
                    AttemptFailure::new(Verdict::Permanent, None, Phase::Body),
                ),
                (End::Returned, Some(judged)) => TxFailure::judged_as(error, *judged),
                (End::Returned, None) => TxFailure::in_body(&handler_policy, no_code, error),
            };
            let committed = scope.successes() != successes;
            let judged = failure.classification();
            let judged = AttemptFailure::new(judged.verdict, judged.code, failure.phase());
            let verdict = judged.verdict;
            if verdict != Verdict::Permanent && (committed || !entry.descriptor.restart_safe) {
                failure = failure.stops(StopReason::NotRestartable);
            }

            // (The handler's policy classifies like the loop's: only the hooks differ.)
            let state = state.get_or_insert_with(new_state);
            match state.after_failure(&failure) {
                Decision::RetryAfter(delay) => {
                    earlier.push(ToolAttempt {
                        error: failure.into_error(),
                        failure: judged,
                        end,
                        committed,
                        runner_outcome,
                    });
                    tokio::time::sleep(delay).await;
                }
                Decision::Stop(reason) => {
                    let (error, outcome) = state.give_up(failure, reason).into_parts();
                    earlier.push(ToolAttempt {
                        error,
                        failure: judged,
                        end,
                        committed,
                        runner_outcome,
                    });
                    let retries = budget.saturating_sub(scope.retries_left());
                    let mut failure = ToolFailure::new(tool, earlier, outcome, retries);
                    failure.once = entry.once.is_some();
                    return Err(InvokeError::Failed(failure));
                }
            }
        }
    }
}

fn no_code(_: &(dyn Error + 'static)) -> Option<Code> {
    None
}

/// How an attempt ended, before it is judged.
enum Ended {
    Done(AttemptResult),
    TimedOut(Duration),
    Panicked(String),
}

/// Runs one attempt: polls an async one in place (catching a panic), or hands a blocking
/// one to tokio's blocking pool; enforces the per-attempt timeout. Returns only once the
/// attempt is over: an async attempt's future is dropped, a blocking attempt's thread has
/// returned.
async fn run(attempt: Attempt, timeout: Option<Duration>, cancelled: &AtomicBool) -> Ended {
    // Marks the attempt cancelled when the invocation is dropped mid-attempt.
    let guard = CancelOnDrop(Some(cancelled));
    let ended = match attempt {
        Attempt::Async(future) => {
            let attempt = CatchUnwind(future);
            match timeout {
                None => attempt.await,
                Some(limit) => {
                    // `attempt` is moved into the timeout, which is dropped at the end of
                    // this statement: a timed-out attempt is gone before anything else.
                    let result = tokio::time::timeout(limit, attempt).await;
                    match result {
                        Ok(ended) => ended,
                        Err(_) => {
                            cancelled.store(true, Ordering::Release);
                            Ended::TimedOut(limit)
                        }
                    }
                }
            }
        }
        Attempt::Blocking(job) => {
            let mut handle = tokio::task::spawn_blocking(job);
            let joined = match timeout {
                None => (&mut handle).await,
                Some(limit) => match tokio::time::timeout(limit, &mut handle).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        cancelled.store(true, Ordering::Release);
                        // The thread cannot be stopped: wait for it, so that two attempts
                        // never run at once. Its result no longer counts.
                        drop(handle.await);
                        guard.disarm();
                        return Ended::TimedOut(limit);
                    }
                },
            };
            match joined {
                Ok(result) => Ended::Done(result),
                Err(error) if error.is_panic() => {
                    Ended::Panicked(panic_message(&*error.into_panic()))
                }
                Err(error) => Ended::Done(Err(AttemptError::Handler(Box::new(error)))),
            }
        }
    };
    guard.disarm();
    ended
}

struct CancelOnDrop<'a>(Option<&'a AtomicBool>);

impl CancelOnDrop<'_> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self.0 {
            flag.store(true, Ordering::Release);
        }
    }
}

/// Polls the handler's future, turning a panic into [`Ended::Panicked`]. The future is
/// never polled again after it panicked.
struct CatchUnwind(Pin<Box<dyn Future<Output = AttemptResult> + Send>>);

impl Future for CatchUnwind {
    type Output = Ended;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ended> {
        let future = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => Poll::Ready(Ended::Done(result)),
            Err(payload) => Poll::Ready(Ended::Panicked(panic_message(&*payload))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// How an attempt ended: returned an error, ran out of time, or panicked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Returned,
    TimedOut,
    Panicked,
}

/// The error recorded for an attempt that ran out of time.
#[derive(Debug)]
pub struct TimedOut(Duration);

impl TimedOut {
    /// The per-attempt limit that was reached.
    pub fn limit(&self) -> Duration {
        self.0
    }
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the attempt did not finish within {:?}", self.0)
    }
}

impl Error for TimedOut {}

/// The error recorded for an attempt whose handler panicked, with the panic's message.
#[derive(Debug)]
pub struct Panicked(String);

impl Panicked {
    /// The panic's message.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Panicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the tool's handler panicked: {}", self.0)
    }
}

impl Error for Panicked {}

/// Why a tool call did not return a result.
#[non_exhaustive]
#[derive(Debug)]
pub enum InvokeError {
    /// The tool does not exist, or is not offered to this caller; which of the two is not
    /// said, on purpose. The handler did not run.
    Refused {
        /// The name the caller asked for (cut to 64 characters).
        tool: String,
    },
    /// The arguments do not fit the tool's schema. The handler did not run.
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, and where (`items[2].qty: invalid type: …`).
        message: String,
    },
    /// The handler ran and the call failed: see [`ToolFailure`].
    Failed(ToolFailure),
    /// The handler returned `Ok` (and may have committed), but its output could not be
    /// serialized to JSON. Not retried.
    InvalidOutput {
        /// The tool.
        tool: String,
        /// serde_json's error.
        error: serde_json::Error,
    },
    /// A [`once`](crate::Tool::once) tool's call was refused: its idempotency key could not
    /// be had (the handler did not run), or the handler broke the one-transaction rule (see
    /// [`OnceRefused`]). Not retried.
    OnceRefused {
        /// The tool.
        tool: String,
        /// Why.
        reason: OnceRefused,
    },
}

impl InvokeError {
    fn refused(name: &str) -> Self {
        let tool = match name.char_indices().nth(64) {
            Some((cut, _)) => format!("{}…", &name[..cut]),
            None => name.to_owned(),
        };
        InvokeError::Refused { tool }
    }

    /// The failure, when the handler ran and failed.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match self {
            InvokeError::Failed(failure) => Some(failure),
            _ => None,
        }
    }
}

impl fmt::Display for InvokeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvokeError::Refused { tool } => write!(f, "tool {tool:?} is not available"),
            InvokeError::InvalidArguments { tool, message } => {
                write!(f, "{tool}: invalid arguments: {message}")
            }
            InvokeError::Failed(failure) => fmt::Display::fmt(failure, f),
            InvokeError::InvalidOutput { tool, .. } => write!(
                f,
                "{tool}: the tool ran but its result could not be encoded; it may have taken effect"
            ),
            InvokeError::OnceRefused { tool, reason } => write!(f, "{tool}: {reason}"),
        }
    }
}

impl Error for InvokeError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            InvokeError::Failed(failure) => failure.source(),
            InvokeError::InvalidOutput { error, .. } => Some(error),
            InvokeError::OnceRefused { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// What kind of failure ended a tool call: what a model (or an MCP client) needs to decide
/// what to do next.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A real outcome ("order not found", a constraint): the handler's error, surfaced
    /// once. Trying again will fail again.
    Business,
    /// A transient failure (deadlock, lock timeout, serialization failure, busy) persisted
    /// until the budget or the time ran out. Nothing was committed; trying later may work.
    RetriesExhausted,
    /// A transient failure of a kind the policy does not retry (`retry_on`). Nothing was
    /// committed.
    NotRetried,
    /// The connection failed while committing: the change may or may not have been made,
    /// and the tool is not idempotent, so it was not run again.
    Ambiguous,
    /// The last attempt ran out of time and was cancelled; it may or may not have taken
    /// effect (retried only for idempotent tools).
    TimedOut,
    /// A transient failure that was not retried because the handler must not run again:
    /// part of its work had committed in that attempt, or the tool is not restart-safe.
    NotRestartable,
    /// The handler panicked. Never retried.
    Panicked,
}

impl FailureKind {
    /// A short stable name: `business`, `retries_exhausted`, `not_retried`, `ambiguous`,
    /// `timed_out`, `not_restartable`, `panicked`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Business => "business",
            FailureKind::RetriesExhausted => "retries_exhausted",
            FailureKind::NotRetried => "not_retried",
            FailureKind::Ambiguous => "ambiguous",
            FailureKind::TimedOut => "timed_out",
            FailureKind::NotRestartable => "not_restartable",
            FailureKind::Panicked => "panicked",
        }
    }

    /// Whether the call may have changed something despite failing (ambiguous, timed out,
    /// or stopped after a commit), so a caller must check before doing it again.
    pub fn may_have_taken_effect(self) -> bool {
        matches!(
            self,
            FailureKind::Ambiguous | FailureKind::TimedOut | FailureKind::NotRestartable
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run of the handler that failed: its error, unchanged, and how it was judged.
#[derive(Debug)]
pub struct ToolAttempt {
    error: BoxError,
    failure: AttemptFailure,
    end: End,
    committed: bool,
    runner_outcome: Option<Outcome>,
}

impl ToolAttempt {
    /// The handler's error, as it returned it (downcast it to your own type, or to a
    /// runner's `TxError<E>`); for a timeout a [`TimedOut`], for a panic a [`Panicked`].
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The error, owned.
    pub fn into_error(self) -> BoxError {
        self.error
    }

    /// How the attempt was judged: verdict, code, phase. When a runner under
    /// [`ToolContext::policy`] gave up in this attempt, its verdict on its last
    /// transaction attempt.
    pub fn failure(&self) -> AttemptFailure {
        self.failure
    }

    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        self.failure.verdict
    }

    /// The transient kind, if the verdict is transient.
    pub fn kind(&self) -> Option<TransientKind> {
        self.failure.kind()
    }

    /// The code that decided the verdict, if any.
    pub fn code(&self) -> Option<Code> {
        self.failure.code
    }

    /// Where the failing transaction was (body or commit).
    pub fn phase(&self) -> Phase {
        self.failure.phase
    }

    /// Whether the attempt ran out of time (and was cancelled).
    pub fn timed_out(&self) -> bool {
        self.end == End::TimedOut
    }

    /// Whether the handler panicked.
    pub fn panicked(&self) -> bool {
        self.end == End::Panicked
    }

    /// Whether something committed during the attempt (a runner under
    /// [`ToolContext::policy`] succeeded).
    pub fn committed(&self) -> bool {
        self.committed
    }

    /// When a runner under [`ToolContext::policy`] gave up in this attempt: its outcome,
    /// with every transaction attempt's verdict.
    pub fn runner_outcome(&self) -> Option<&Outcome> {
        self.runner_outcome.as_ref()
    }
}

/// A tool call that failed after its handler ran: the kind, every attempt's error and
/// verdict, and the invocation loop's [`Outcome`].
///
/// Its `Display` is short and meant for the model: the tool, what happened, how many
/// attempts, and for a business failure the handler's own message. Driver errors of
/// transient failures are not shown (they are in [`attempts`](ToolFailure::attempts) and
/// in `source()`, for logs).
#[derive(Debug)]
pub struct ToolFailure {
    tool: String,
    kind: FailureKind,
    attempts: Vec<ToolAttempt>,
    outcome: Outcome,
    retries: u32,
    /// The tool is `once`: a repeated call with the same key is safe.
    once: bool,
}

impl ToolFailure {
    fn new(tool: &str, attempts: Vec<ToolAttempt>, outcome: Outcome, retries: u32) -> Self {
        let last = attempts.last().map_or(End::Returned, |a| a.end);
        let kind = match (last, outcome.verdict()) {
            (End::Panicked, _) => FailureKind::Panicked,
            (End::TimedOut, _) => FailureKind::TimedOut,
            (_, Verdict::Permanent) => FailureKind::Business,
            (_, Verdict::Ambiguous) => FailureKind::Ambiguous,
            _ => match outcome.stop_reason() {
                StopReason::NotRestartable => FailureKind::NotRestartable,
                StopReason::NotRetryable => FailureKind::NotRetried,
                _ => FailureKind::RetriesExhausted,
            },
        };
        ToolFailure {
            tool: tool.to_owned(),
            kind,
            attempts,
            outcome,
            retries,
            once: false,
        }
    }

    /// The tool.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// Every run of the handler, first to last, each with its error.
    pub fn attempts(&self) -> &[ToolAttempt] {
        &self.attempts
    }

    /// The attempts, owned.
    pub fn into_attempts(self) -> Vec<ToolAttempt> {
        self.attempts
    }

    /// The last attempt's error: the one the call failed with.
    pub fn last_error(&self) -> &(dyn Error + Send + Sync + 'static) {
        match self.attempts.last() {
            Some(attempt) => attempt.error(),
            None => &NO_ERROR,
        }
    }

    /// The invocation loop's outcome: one history entry per run of the handler, and why it
    /// stopped.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// Retries made during the call by every loop in it (the invocation's and the runners'
    /// under [`ToolContext::policy`]): attempts of the failing work beyond the first.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Whether something committed in the last attempt.
    pub fn committed(&self) -> bool {
        self.attempts.last().is_some_and(|a| a.committed)
    }
}

static NO_ERROR: Panicked = Panicked(String::new());

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tool = &self.tool;
        let tries = self.retries.saturating_add(1);
        let s = if tries == 1 { "" } else { "s" };
        let kind = self
            .outcome
            .verdict()
            .kind()
            .map_or("temporary failure", TransientKind::as_str);
        match self.kind {
            FailureKind::Business => write!(f, "{tool}: {}", self.last_error()),
            FailureKind::RetriesExhausted => write!(
                f,
                "{tool}: still failing after {tries} attempt{s} ({kind}); nothing was committed, try again later"
            ),
            FailureKind::NotRetried => write!(
                f,
                "{tool}: temporary database failure ({kind}); nothing was committed, try again later"
            ),
            FailureKind::Ambiguous | FailureKind::TimedOut if self.once => write!(
                f,
                "{tool}: could not confirm the outcome after {tries} attempt{s}; calling again with the same key is safe: it returns the outcome if the change was made, or makes it"
            ),
            FailureKind::Ambiguous => write!(
                f,
                "{tool}: the connection failed while committing; the change may or may not have been made, check before trying again"
            ),
            FailureKind::TimedOut => write!(
                f,
                "{tool}: timed out after {tries} attempt{s}; it may or may not have taken effect, check before trying again"
            ),
            FailureKind::NotRestartable if self.committed() => write!(
                f,
                "{tool}: failed ({kind}) after part of its work was committed; it was not run again, check its effects before trying again"
            ),
            FailureKind::NotRestartable => write!(
                f,
                "{tool}: failed ({kind}); this tool is not run again automatically, nothing was committed"
            ),
            FailureKind::Panicked => write!(f, "{tool}: internal error in the tool"),
        }
    }
}

impl Error for ToolFailure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.attempts
            .last()
            .map(|a| &*a.error as &(dyn Error + 'static))
    }
}
