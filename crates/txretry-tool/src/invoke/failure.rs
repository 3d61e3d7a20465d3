//! A tool call that failed after its handler ran: what the model is told, and what is kept
//! for logs.

use std::error::Error;
use std::fmt;

use txretry_core::{Code, Outcome, StopReason, TransientKind, Verdict};

use super::history::History;
use super::interrupted::NO_ERROR;
use super::run::AttemptEnd;
use super::{CallAttempt, FailureKind, ToolAttempt};
#[cfg(doc)]
use crate::ToolContext;

/// A tool call that failed after its handler ran: the kind, every attempt's error and
/// verdict (each run of the handler in [`attempts`](ToolFailure::attempts); every attempt
/// across layers, the runners' included, in [`history`](ToolFailure::history)), and the
/// call's [`Outcome`].
///
/// Its `Display` is short and meant for the model: the tool, what happened, how many
/// attempts, and for a business failure the handler's own message (with the causes that
/// add to it: tokio-postgres puts the server's message in one). Driver errors of
/// transient failures are not shown (they are in [`attempts`](ToolFailure::attempts) and
/// in `source()`, for logs).
#[derive(Debug)]
pub struct ToolFailure {
    tool: String,
    kind: FailureKind,
    attempts: Vec<ToolAttempt>,
    history: History,
    outcome: Outcome,
    retries: u32,
    /// The tool is `once`, keyed by its arguments: a repeated call (same arguments, so
    /// the same key) is safe. A key made from the call id is not the model's to repeat.
    pub(super) once: bool,
    /// The business error is an earlier call's, read from its `once` record.
    pub(super) replayed: bool,
}

impl ToolFailure {
    pub(super) fn new(
        tool: &str,
        attempts: Vec<ToolAttempt>,
        history: History,
        outcome: Outcome,
        retries: u32,
    ) -> Self {
        debug_assert_eq!(
            history.len(),
            outcome.history().len(),
            "the call's outcome lists the history's attempts"
        );
        let last = attempts.last().map_or(AttemptEnd::Returned, |a| a.end);
        let kind = match (last, outcome.verdict()) {
            (AttemptEnd::Panicked, _) => FailureKind::Panicked,
            (AttemptEnd::TimedOut, _) => FailureKind::TimedOut,
            (_, Verdict::Permanent) => FailureKind::Business,
            // The last attempt's, or an earlier one's that was retried (an idempotent or
            // `once` tool) and whose retry then failed before its COMMIT: either may have
            // landed.
            _ if outcome.may_have_committed() => FailureKind::Ambiguous,
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
            history,
            outcome,
            retries,
            once: false,
            replayed: false,
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

    /// Every run of the handler, first to last, each with its error. A run whose runner
    /// retried is one entry here; its transaction attempts are in
    /// [`history`](ToolFailure::history).
    pub fn attempts(&self) -> &[ToolAttempt] {
        &self.attempts
    }

    /// Every failed attempt made under the call's budget, first to last, across layers:
    /// within each run of the handler, the transaction attempts of the runners it called
    /// with [`ToolContext::policy`] (whether they then retried, committed or gave up), then
    /// the run's own failure when it failed outside a runner (its own error, a timeout, a
    /// panic). A run that failed with a runner's give-up ends on that runner's last
    /// attempt, which carries the handler's error.
    ///
    /// The same attempts, in the same order, as [`outcome`](ToolFailure::outcome)'s history
    /// and the toolbox's `on_give_up` event; their number is the one the failure's message
    /// gives.
    pub fn history(
        &self,
    ) -> impl ExactSizeIterator<Item = CallAttempt<'_>> + DoubleEndedIterator + '_ {
        self.history.iter(&self.attempts)
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

    /// The call's outcome: every failed attempt's verdict, code and phase across layers (the
    /// entries of [`history`](ToolFailure::history)), and why the invocation stopped.
    pub fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    /// Retries made during the call by every loop in it (the invocation's and the runners'
    /// under [`ToolContext::policy`]): the retries drawn from the call's budget. Each
    /// loop's first attempt and a retry in an outage (under a failover budget) draw none,
    /// so [`history`](ToolFailure::history) lists at least `retries + 1` attempts, and may
    /// list more.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// Whether the failure is an earlier call's business error, answered from the `once`
    /// record its key found: the handler's work did not run now. What has changed since
    /// does not change the answer; a call meant to try again needs another key.
    pub fn replayed(&self) -> bool {
        self.replayed
    }

    /// Whether something committed in the last attempt.
    pub fn committed(&self) -> bool {
        self.attempts.last().is_some_and(|a| a.committed)
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tool = &self.tool;
        let tries = self.outcome.attempts();
        let s = if tries == 1 { "" } else { "s" };
        let kind = self
            .outcome
            .verdict()
            .kind()
            .map_or("temporary failure", TransientKind::as_str);
        // What the driver said of a connection failure, which its kind alone does not.
        let kind = match self.outcome.history().last().and_then(|a| a.code) {
            Some(Code::Driver(what)) => format!("{kind}: {}", driver_note(what)),
            _ => kind.to_owned(),
        };
        match self.kind {
            FailureKind::Business if self.replayed => write!(
                f,
                "{tool}: {} (the recorded outcome of an earlier call with the same key: it was not run again; to try again, use another key)",
                crate::error_text::with_causes(self.last_error())
            ),
            FailureKind::Business => write!(
                f,
                "{tool}: {}",
                crate::error_text::with_causes(self.last_error())
            ),
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
                "{tool}: could not confirm the outcome after {tries} attempt{s}; calling again with the same arguments is safe: it returns the outcome if the change was made, or makes it"
            ),
            FailureKind::Ambiguous => write!(
                f,
                "{tool}: the connection failed while committing; the change may or may not have been made, check before trying again"
            ),
            // Work committed before the timeout, or after it (a blocking attempt runs on).
            FailureKind::TimedOut if self.committed() => write!(
                f,
                "{tool}: timed out after {tries} attempt{s}, after part of its work was committed; it was not run again, check its effects before trying again"
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

/// A driver's code as the model reads it: what the two a model meets most often mean (the
/// code names say what happened in the driver's terms, not what to make of it); others as
/// they are.
fn driver_note(code: &'static str) -> &'static str {
    match code {
        "pool timed out" => {
            "no connection from the pool in time: the database is down or unreachable, or every connection is busy"
        }
        "io" => "the connection to the database broke",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::driver_note;

    #[test]
    fn the_driver_codes_a_model_meets_most_are_said_in_words() {
        assert!(driver_note("pool timed out").contains("database is down"));
        assert_eq!(driver_note("io"), "the connection to the database broke");
        assert_eq!(driver_note("worker crashed"), "worker crashed");
    }
}
