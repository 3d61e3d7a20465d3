//! A failure at COMMIT without a server code may have committed: it is ambiguous, and only
//! an operation declared idempotent is run again. The adapters' tests provoke the
//! server-coded cases for real; here the runner-side rule is checked on its own.

use std::io;

use txretry_core::{Code, RetryPolicy, TransientKind, TxFailure, Verdict};

fn connection_reset() -> io::Error {
    io::Error::from(io::ErrorKind::ConnectionReset)
}

#[test]
fn a_connection_lost_at_commit_is_ambiguous() {
    let failure = TxFailure::at_commit(&RetryPolicy::default(), connection_reset());
    assert_eq!(failure.classification().verdict, Verdict::Ambiguous);
    assert_eq!(failure.classification().code, Some(Code::Driver("io")));
    assert!(failure.discards_connection());
}

#[test]
fn the_same_failure_before_commit_is_a_connection_failure() {
    let failure = TxFailure::in_body(&RetryPolicy::default(), connection_reset());
    assert_eq!(
        failure.classification().verdict,
        Verdict::Transient(TransientKind::Connection)
    );
}

#[test]
fn a_server_answer_at_commit_keeps_its_verdict() {
    // SQLite's BUSY (and Postgres' 40001 at COMMIT) are answers: nothing was committed.
    let busy = io::Error::other("database is locked");
    let policy = RetryPolicy::builder()
        .classifier(txretry_core::Classifier::default().with_fn(|_| {
            Some(txretry_core::Classification::new(
                Verdict::Transient(TransientKind::Busy),
                Some(Code::Sqlite(5)),
            ))
        }))
        .build()
        .unwrap();
    let failure = TxFailure::at_commit(&policy, busy);
    assert_eq!(
        failure.classification().verdict,
        Verdict::Transient(TransientKind::Busy)
    );
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_commit_runs_once_unless_idempotent() {
    let everything = RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(txretry_core::KindSet::ALL)
        .build()
        .unwrap();
    let mut commits = 0;
    let result: Result<(), io::Error> = txretry_core::retry_async!(&everything, async {
        commits += 1;
        Err(TxFailure::at_commit(&everything, connection_reset()))
    });
    assert!(result.is_err());
    assert_eq!(
        commits, 1,
        "an ambiguous commit must not be retried blindly"
    );

    let idempotent = everything.to_builder().idempotent(true).build().unwrap();
    let mut commits = 0;
    let result: Result<(), io::Error> = txretry_core::retry_async!(&idempotent, async {
        commits += 1;
        if commits < 3 {
            Err(TxFailure::at_commit(&idempotent, connection_reset()))
        } else {
            Ok(())
        }
    });
    assert!(result.is_ok());
    assert_eq!(commits, 3);
}
