//! The commit boundary, judged on its own: what a failure at COMMIT means, and that an
//! ambiguous commit runs once unless the operation is idempotent. The adapters' tests
//! provoke each case for real (a pooler's 08P01 after a landed COMMIT, a backend killed
//! during COMMIT, a serialization failure at COMMIT); here stand-in driver errors pin the
//! rule itself.

use std::error::Error;
use std::fmt;
use std::io;

use txretry_core::{
    Code, Phase, RetryPolicy, RetryState, SqlState, StopReason, TransientKind, TxFailure,
    TxOptions, Verdict,
};

/// A stand-in for a driver's typed database error, with the code the server sent.
#[derive(Debug)]
struct ServerError(&'static str);
impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server said {}", self.0)
    }
}
impl Error for ServerError {}

fn driver(error: &(dyn Error + 'static)) -> Option<Code> {
    SqlState::new(error.downcast_ref::<ServerError>()?.0).map(Code::SqlState)
}

fn everything() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(txretry_core::KindSet::ALL)
        .build()
        .unwrap()
}

fn at_commit(error: ServerError) -> TxFailure<ServerError> {
    TxFailure::at_commit(&everything(), driver, error)
}

#[test]
fn a_connection_lost_at_commit_is_ambiguous_and_discards_the_connection() {
    let failure = TxFailure::at_commit(
        &everything(),
        driver,
        io::Error::from(io::ErrorKind::ConnectionReset),
    );
    assert_eq!(failure.classification().verdict, Verdict::Ambiguous);
    assert_eq!(failure.classification().code, Some(Code::Driver("io")));
    assert_eq!(failure.phase(), Phase::Commit);
    assert!(failure.discards_connection());
}

#[test]
fn a_connection_class_code_at_commit_is_ambiguous() {
    // A pooler answers a COMMIT that landed with FATAL 08P01 when its server link breaks;
    // a terminated backend answers 57P01. Neither says "not committed".
    for code in ["08P01", "08006", "57P01", "57P02"] {
        let failure = at_commit(ServerError(code));
        assert_eq!(
            failure.classification().verdict,
            Verdict::Ambiguous,
            "{code}"
        );
        assert!(failure.discards_connection(), "{code}");
    }
}

#[test]
fn the_same_code_before_commit_is_a_connection_failure() {
    let failure = TxFailure::in_body(&everything(), driver, ServerError("08P01"));
    assert_eq!(
        failure.classification().verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    assert_eq!(failure.phase(), Phase::Body);
}

#[test]
fn a_server_verdict_of_not_committed_at_commit_keeps_its_verdict() {
    for (code, kind) in [
        ("40001", TransientKind::SerializationFailure),
        ("40P01", TransientKind::Deadlock),
    ] {
        let failure = at_commit(ServerError(code));
        assert_eq!(failure.classification().verdict, Verdict::Transient(kind));
        assert!(!failure.discards_connection());
    }
    // A deferred constraint checked at COMMIT: the server refused, nothing committed.
    let failure = at_commit(ServerError("23505"));
    assert_eq!(failure.classification().verdict, Verdict::Permanent);
}

#[test]
fn a_users_classifier_cannot_keep_a_broken_connection_in_the_pool() {
    // The user narrows: connection failures are "permanent" to them. The connection is
    // still broken, and is still discarded.
    let policy = RetryPolicy::builder()
        .classifier(txretry_core::Classifier::default().with_code(
            Code::SqlState(SqlState::from_static("08P01")),
            Verdict::Permanent,
        ))
        .build()
        .unwrap();
    let failure = TxFailure::in_body(&policy, driver, ServerError("08P01"));
    assert_eq!(failure.classification().verdict, Verdict::Permanent);
    assert!(failure.discards_connection());
}

/// Drives the loop the way a runner does, with a COMMIT that always fails with `code`.
async fn commits_until_given_up(
    options: &TxOptions,
    code: &'static str,
    succeed_at: u32,
) -> (u32, Result<(), txretry_core::TxError<ServerError>>) {
    let policy = everything();
    let mut state = RetryState::new(&policy, options);
    let mut commits = 0;
    let result = txretry_core::retry_async!(state, async {
        commits += 1;
        if commits >= succeed_at {
            Ok(())
        } else {
            Err(TxFailure::at_commit(&policy, driver, ServerError(code)))
        }
    });
    (commits, result)
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_commit_runs_once_and_says_it_may_have_committed() {
    let (commits, result) = commits_until_given_up(&TxOptions::new(), "08P01", u32::MAX).await;
    assert_eq!(
        commits, 1,
        "an ambiguous commit must not be retried blindly"
    );
    let err = result.unwrap_err();
    let outcome = err.outcome();
    assert!(outcome.may_have_committed());
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    assert_eq!(err.error().0, "08P01");
}

#[tokio::test(start_paused = true)]
async fn an_idempotent_operation_retries_an_ambiguous_commit() {
    let idempotent = TxOptions::new().idempotent(true);
    let (commits, result) = commits_until_given_up(&idempotent, "08P01", 3).await;
    assert!(result.is_ok());
    assert_eq!(commits, 3);
}
