//! One tool call: the gate, the arguments, and the invocation loop (core's `RetryState`, one
//! attempt = one run of the handler) with its typed result.
//!
//! - `run.rs`: running one attempt (in place or on the blocking pool, with its timeout);
//! - `interrupted.rs`: the errors of attempts that did not return ([`TimedOut`],
//!   [`Panicked`]);
//! - `attempt.rs`, `failure.rs`, `kind.rs`: what a failed call reports ([`ToolAttempt`],
//!   [`ToolFailure`], [`FailureKind`]);
//! - `history.rs`: every attempt of a failed call across layers, the runners' included
//!   ([`CallAttempt`]);
//! - `error.rs`: why a call did not return a result ([`InvokeError`]).

mod attempt;
mod error;
mod failure;
mod history;
mod interrupted;
mod kind;
mod run;

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::Value;
use txretry_core::{
    AttemptFailure, Code, Decision, Phase, RecordedAttempt, RetryBudget, RetryState, StopReason,
    TxFailure, TxOptions, Verdict,
};

pub use self::attempt::ToolAttempt;
pub use self::error::InvokeError;
pub use self::failure::ToolFailure;
pub use self::history::CallAttempt;
use self::history::{History, before_run_failure};
pub use self::interrupted::{Panicked, TimedOut};
pub use self::kind::FailureKind;
use self::run::{AttemptEnd, run_attempt};
use crate::once::OnceRun;
use crate::tool::AttemptError;
use crate::{Caller, Once, OnceRefused, ToolContext, Toolbox};

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
    ///    [`RetryBudget`] of `max_attempts - 1` retries shared with every runner the handler calls
    ///    with [`ToolContext::policy`]). Before each attempt the gate runs again. An attempt
    ///    is one run of the handler (with the per-attempt timeout, if any). Then:
    ///    - `Ok`: its JSON is returned untouched (whatever it contains);
    ///    - a panic: [`FailureKind::Panicked`], never retried;
    ///    - `Err`: judged by the runner that gave up on it when one did in this attempt,
    ///      else classified with the policy's classifier; a timeout is ambiguous (retried
    ///      only for idempotent tools). It is retried when the policy says so, the budget
    ///      has a retry left, the tool is restart-safe and nothing committed during the
    ///      attempt; otherwise the call fails with every attempt's error
    ///      ([`InvokeError::Failed`]): each run of the handler, and every transaction
    ///      attempt of the runners inside ([`ToolFailure::history`]), which the toolbox's
    ///      `on_give_up` event lists too.
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
        self.invoke_counted(caller, name, args, call_id)
            .await
            .map(|answered| answered.output)
    }

    /// [`invoke`](Toolbox::invoke), also answering how many attempts the call took in all
    /// (the runners' included: the budget's retries spent, plus one), and whether its
    /// output was an earlier call's, replayed from a `once` record.
    pub(crate) async fn invoke_counted(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
        call_id: &str,
    ) -> Result<Answered, InvokeError> {
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

        let scope =
            RetryBudget::for_policy(&entry.loop_policy).labelled(tool, call_id, entry.level);
        let budget = scope.retries_left();
        let handler_policy = entry.handler_policy.with_budget(scope.clone());
        // The invocation loop's own state is made when the first attempt fails (the happy
        // path never needs it), or at once when the policy limits the elapsed time (its
        // clock starts with the first attempt).
        let new_state = || {
            // A once tool's record says whether an ambiguous attempt landed: running it again
            // is safe.
            let options =
                TxOptions::new().idempotent(entry.descriptor.idempotent || entry.once.is_some());
            RetryState::new(&entry.loop_policy.with_budget(scope.clone()), &options).outer()
        };
        let mut state = entry.loop_policy.max_elapsed().map(|_| new_state());
        let mut earlier: Vec<ToolAttempt> = Vec::new();
        let mut history = History::default();

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

            let (end, result) = run_attempt(attempt, entry.timeout, &cancelled).await;
            if let Some(reason) = once_run.as_deref().and_then(OnceRun::verdict) {
                return Err(InvokeError::OnceRefused {
                    tool: tool.to_owned(),
                    reason,
                });
            }
            let business = once_run.as_deref().is_some_and(OnceRun::business);
            let error = match result {
                Ok(output) => {
                    // Every attempt: the failed ones of earlier runs and of this run's
                    // runners (outage retries included, which draw nothing from the
                    // budget), and the one that committed.
                    let failed_here = scope.take_attempts().len()
                        + once_run
                            .as_deref()
                            .map_or(0, |run| run.take_kept_attempts().len());
                    let retries = budget.saturating_sub(scope.retries_left()) as usize;
                    let attempts = (history.len() + failed_here).max(retries) + 1;
                    return Ok(Answered {
                        output,
                        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                        replayed: once_run.as_deref().is_some_and(OnceRun::replayed),
                    });
                }
                Err(AttemptError::Output(error)) => {
                    return Err(InvokeError::InvalidOutput {
                        tool: tool.to_owned(),
                        error,
                    });
                }
                Err(AttemptError::Handler(error)) => error,
            };

            let runner_outcome = match end {
                AttemptEnd::Returned => scope.take_last_give_up(),
                _ => None,
            };
            // Every attempt the runners made in this run, before its own failure.
            let mut inner = (once_run.as_deref())
                .map(OnceRun::take_kept_attempts)
                .unwrap_or_default();
            inner.extend(scope.take_attempts());
            let text = error.to_string();
            let mut runner_failure = None;
            let mut failure = match (
                &end,
                runner_outcome.as_ref().and_then(|o| o.history().last()),
            ) {
                (AttemptEnd::Panicked, _) => TxFailure::judged_as(
                    error,
                    AttemptFailure::new(Verdict::Permanent, None, Phase::Body),
                ),
                (AttemptEnd::TimedOut, _) => {
                    TxFailure::in_body(&handler_policy, no_code, error).into_ambiguous()
                }
                // The once transaction committed a business error (or replayed one): the
                // call's answer, whatever the error's text looks like.
                (AttemptEnd::Returned, _) if business => TxFailure::judged_as(
                    error,
                    AttemptFailure::new(Verdict::Permanent, None, Phase::Body),
                ),
                (AttemptEnd::Returned, Some(judged)) => {
                    runner_failure = Some(*judged);
                    TxFailure::judged_as(error, *judged)
                }
                (AttemptEnd::Returned, None) => TxFailure::in_body(&handler_policy, no_code, error),
            };
            let committed = scope.successes() != successes;
            // A `once` tool's only commit is its recorded transaction (any other is refused
            // above): running it again replays the record, as a blocking attempt that
            // committed after its timeout needs.
            let committed_unrecorded = committed && once_run.is_none();
            let judged = failure.classification();
            let judged = AttemptFailure::new(judged.verdict, judged.code, failure.phase());
            let verdict = judged.verdict;
            if verdict != Verdict::Permanent
                && (committed_unrecorded || !entry.descriptor.restart_safe)
            {
                failure = failure.stops(StopReason::NotRestartable);
            } else if runner_outcome
                .as_ref()
                .is_some_and(|o| o.stop_reason() == StopReason::OutageExceeded)
            {
                // A runner rode the outage out for the whole failover budget: that was the
                // call's budget (`ctx.policy()`), and this loop would start its clock again.
                failure = failure.stops(StopReason::OutageExceeded);
            }

            // The run's failure is listed after the runners' attempts; one a runner gave up
            // with is the run's failure itself, listed once.
            let inner = before_run_failure(inner, runner_failure);
            history.push_run(
                earlier.len(),
                inner.clone(),
                RecordedAttempt::new(judged, text),
            );

            // (The handler's policy classifies like the loop's: only the hooks differ.)
            let state = state.get_or_insert_with(new_state);
            state.inner_attempts(inner);
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
                    let mut failure = ToolFailure::new(tool, earlier, history, outcome, retries);
                    failure.once = entry.once.as_ref().is_some_and(Once::is_keyed_by_args);
                    failure.replayed =
                        business && once_run.as_deref().is_some_and(OnceRun::replayed);
                    return Err(InvokeError::Failed(failure));
                }
            }
        }
    }
}

/// A call that committed, as the MCP server answers it.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The handler's output.
    pub(crate) output: Value,
    /// Attempts in all, the runners' included.
    pub(crate) attempts: u32,
    /// The output is an earlier call's, read from its `once` record: nothing ran now.
    pub(crate) replayed: bool,
}

fn no_code(_: &(dyn Error + 'static)) -> Option<Code> {
    None
}
