//! Assertions on the [`Outcome`] a runner reports with a failure.

use txretry_core::{Code, Outcome, Phase, StopReason, TxError, Verdict};

/// Asserts how a runner call that failed went: the last verdict, where it failed, how many
/// attempts ran, and why the loop stopped (and that "may have committed" agrees with the
/// verdict).
#[track_caller]
pub fn assert_outcome<E: std::fmt::Debug>(
    err: &TxError<E>,
    verdict: Verdict,
    phase: Phase,
    attempts: u32,
    stop: StopReason,
) {
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), verdict, "{err:?}");
    assert_eq!(outcome.phase(), phase, "{err:?}");
    assert_eq!(outcome.attempts(), attempts, "{err:?}");
    assert_eq!(outcome.stop_reason(), stop, "{err:?}");
    let ambiguous = outcome
        .history()
        .iter()
        .any(|a| a.verdict == Verdict::Ambiguous);
    assert_eq!(outcome.may_have_committed(), ambiguous, "{err:?}");
}

/// The outcome of a failure that is the caller's to handle: permanent, before COMMIT, on
/// the first attempt, never a message match, certainly not committed.
#[track_caller]
pub fn assert_permanent_once(outcome: &Outcome) {
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Body, "{outcome:?}");
    assert_eq!(outcome.attempts(), 1, "{outcome:?}");
    assert_eq!(outcome.history().len(), 1, "{outcome:?}");
    assert_eq!(
        outcome.stop_reason(),
        StopReason::NotRetryable,
        "{outcome:?}"
    );
    assert!(!outcome.may_have_committed(), "{outcome:?}");
    assert!(
        !matches!(outcome.code(), Some(Code::Message(_))),
        "not a message match: {outcome:?}"
    );
}
