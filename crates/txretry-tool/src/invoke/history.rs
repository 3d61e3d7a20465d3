//! Every attempt of a failed call, across layers: the runners' transaction attempts inside
//! each run of the handler, and each run that failed outside a runner, flattened in order.

use std::error::Error;

use txretry_core::{AttemptFailure, Code, Phase, RecordedAttempt, TransientKind, Verdict};

use super::ToolAttempt;
#[cfg(doc)]
use super::ToolFailure;
#[cfg(doc)]
use crate::ToolContext;

/// One failed attempt of a tool call, at any layer: a transaction attempt of a runner the
/// handler called with [`ToolContext::policy`], or a run of the handler that failed outside
/// any runner (its own error, a timeout, a panic). See [`ToolFailure::history`].
#[derive(Clone, Copy, Debug)]
pub struct CallAttempt<'a> {
    recorded: &'a RecordedAttempt,
    run: u32,
    /// The handler's run, when this attempt is the one it failed with.
    ended: Option<&'a ToolAttempt>,
}

impl<'a> CallAttempt<'a> {
    /// How the attempt was judged: verdict, code, phase.
    pub fn failure(&self) -> AttemptFailure {
        self.recorded.failure
    }

    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        self.recorded.failure.verdict
    }

    /// The transient kind, if the verdict is transient.
    pub fn kind(&self) -> Option<TransientKind> {
        self.recorded.failure.kind()
    }

    /// The code that decided the verdict, if any.
    pub fn code(&self) -> Option<Code> {
        self.recorded.failure.code
    }

    /// Where the failing transaction was (body or commit).
    pub fn phase(&self) -> Phase {
        self.recorded.failure.phase
    }

    /// The attempt's error, as its `Display` shows it. Kept for every attempt, including a
    /// runner's earlier ones, whose error values the runner dropped when it retried.
    pub fn message(&self) -> &'a str {
        &self.recorded.error
    }

    /// The error itself, for the attempt a run of the handler failed with: what the handler
    /// returned (as [`ToolAttempt::error`]). `None` for a runner's earlier attempts: only
    /// their [`message`](CallAttempt::message) is kept.
    pub fn error(&self) -> Option<&'a (dyn Error + Send + Sync + 'static)> {
        self.ended.map(ToolAttempt::error)
    }

    /// The run of the handler it was made in, 1-based (as [`ToolContext::attempt`]).
    pub fn run(&self) -> u32 {
        self.run
    }
}

/// The flattened attempts of a call, built run by run.
#[derive(Debug, Default)]
pub(super) struct History {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    recorded: RecordedAttempt,
    /// Index of the handler's run in the failure's attempts.
    run: usize,
    /// The attempt the run failed with (the run's last).
    ends_run: bool,
}

impl History {
    /// Adds the run at index `run` of the failure's attempts: the inner loops' attempts
    /// recorded during it (without the one the run failed with, see [`before_run_failure`]),
    /// then the run's own failure.
    pub(super) fn push_run(
        &mut self,
        run: usize,
        inner: Vec<RecordedAttempt>,
        own: RecordedAttempt,
    ) {
        self.entries.reserve(inner.len() + 1);
        self.entries.extend(inner.into_iter().map(|recorded| Entry {
            recorded,
            run,
            ends_run: false,
        }));
        self.entries.push(Entry {
            recorded: own,
            run,
            ends_run: true,
        });
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every attempt, first to last, with its run's error where it ended that run.
    pub(super) fn iter<'a>(
        &'a self,
        runs: &'a [ToolAttempt],
    ) -> impl ExactSizeIterator<Item = CallAttempt<'a>> + DoubleEndedIterator + 'a {
        self.entries.iter().map(move |entry| CallAttempt {
            recorded: &entry.recorded,
            run: u32::try_from(entry.run + 1).unwrap_or(u32::MAX),
            ended: entry.ends_run.then(|| runs.get(entry.run)).flatten(),
        })
    }
}

/// The inner loops' attempts that precede a run's own failure: all of `inner`, except that
/// when the run is judged by a runner's give-up (`runner_failure`, its last attempt's
/// verdict), that attempt is the run's failure itself and is left out (the run's own entry
/// stands for it, with the error the handler returned), so it is not listed twice.
pub(super) fn before_run_failure(
    mut inner: Vec<RecordedAttempt>,
    runner_failure: Option<AttemptFailure>,
) -> Vec<RecordedAttempt> {
    if let Some(judged) = runner_failure
        && inner.last().is_some_and(|last| last.failure == judged)
    {
        inner.pop();
    }
    inner
}

#[cfg(test)]
mod tests {
    use txretry_core::{
        AttemptFailure, Code, Phase, RecordedAttempt, SqlState, TransientKind, Verdict,
    };

    use super::{History, before_run_failure};
    use crate::invoke::ToolAttempt;
    use crate::invoke::run::AttemptEnd;

    const DEADLOCK: AttemptFailure = AttemptFailure::new(
        Verdict::Transient(TransientKind::Deadlock),
        Some(Code::SqlState(SqlState::from_static("40P01"))),
        Phase::Body,
    );
    const BUSINESS: AttemptFailure = AttemptFailure::new(Verdict::Permanent, None, Phase::Body);

    fn recorded(failure: AttemptFailure, text: &str) -> RecordedAttempt {
        RecordedAttempt::new(failure, text)
    }

    fn run(failure: AttemptFailure, error: &str) -> ToolAttempt {
        ToolAttempt {
            error: error.into(),
            failure,
            end: AttemptEnd::Returned,
            committed: false,
            runner_outcome: None,
        }
    }

    #[test]
    fn a_runner_give_up_is_the_runs_failure_listed_once() {
        let inner = vec![
            recorded(DEADLOCK, "deadlock 1"),
            recorded(DEADLOCK, "deadlock 2"),
            recorded(DEADLOCK, "deadlock 3"),
        ];
        let before = before_run_failure(inner.clone(), Some(DEADLOCK));
        assert_eq!(before, inner[..2]);
        // A run judged by no runner keeps every inner attempt before its own.
        assert_eq!(before_run_failure(inner.clone(), None), inner);
        // A give-up that is not the last recorded attempt (another loop failed after it):
        // nothing is left out.
        assert_eq!(before_run_failure(inner.clone(), Some(BUSINESS)), inner);
        assert!(before_run_failure(Vec::new(), Some(DEADLOCK)).is_empty());
    }

    #[test]
    fn runs_flatten_in_order_with_each_runs_error_on_its_last_attempt() {
        let runs = [
            run(BUSINESS, "handler-level failure"),
            run(DEADLOCK, "deadlock 3 (as the handler returned it)"),
        ];
        let mut history = History::default();
        // Run 1 failed outside any runner; run 2's runner deadlocked three times and gave up.
        history.push_run(0, Vec::new(), recorded(BUSINESS, "handler-level failure"));
        let inner = before_run_failure(
            vec![
                recorded(DEADLOCK, "deadlock 1"),
                recorded(DEADLOCK, "deadlock 2"),
                recorded(DEADLOCK, "deadlock 3"),
            ],
            Some(DEADLOCK),
        );
        history.push_run(
            1,
            inner,
            recorded(DEADLOCK, "deadlock 3 (as the handler returned it)"),
        );

        let flat: Vec<_> = history.iter(&runs).collect();
        assert_eq!(history.len(), 4);
        assert_eq!(
            flat.iter()
                .map(|a| (a.run(), a.verdict(), a.phase(), a.message()))
                .collect::<Vec<_>>(),
            [
                (1, Verdict::Permanent, Phase::Body, "handler-level failure"),
                (2, DEADLOCK.verdict, Phase::Body, "deadlock 1"),
                (2, DEADLOCK.verdict, Phase::Body, "deadlock 2"),
                (
                    2,
                    DEADLOCK.verdict,
                    Phase::Body,
                    "deadlock 3 (as the handler returned it)"
                ),
            ]
        );
        assert_eq!(flat[1].code(), DEADLOCK.code);
        assert_eq!(flat[1].kind(), Some(TransientKind::Deadlock));
        // The error values: each run's, on the attempt it ended with; the runner's earlier
        // attempts keep their text only.
        let errors: Vec<_> = flat
            .iter()
            .map(|a| a.error().map(ToString::to_string))
            .collect();
        assert_eq!(
            errors,
            [
                Some("handler-level failure".to_owned()),
                None,
                None,
                Some("deadlock 3 (as the handler returned it)".to_owned()),
            ]
        );
    }
}
