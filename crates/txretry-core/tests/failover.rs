//! The failover budget in the retry loop, under paused tokio time: an outage is ridden out
//! in wall time, its attempts count against no `max_attempts`, and what is not an outage
//! keeps the ordinary rules. (The real switchovers and failovers are in `tests/ha/`.)

use std::error::Error;
use std::io;
use std::time::Duration;

use tokio::time::Instant;
use txretry_core::{
    Code, RetryPolicy, RetryState, SqlState, StopReason, TransientKind, TxFailure, TxOptions,
    Verdict,
};

/// A refused connection: what a client meets while the old primary is down.
fn refused() -> io::Error {
    io::Error::from(io::ErrorKind::ConnectionRefused)
}

/// A server error with a SQLSTATE, read by the driver extractor the runners pass.
#[derive(Debug, thiserror::Error)]
#[error("server said {0}")]
struct Server(&'static str);

fn sqlstate(error: &(dyn Error + 'static)) -> Option<Code> {
    let e = error.downcast_ref::<Server>()?;
    SqlState::new(e.0).map(Code::SqlState)
}

#[tokio::test(start_paused = true)]
async fn an_outage_of_twenty_seconds_is_ridden_out_under_high_availability() {
    let policy = RetryPolicy::high_availability();
    let up_at = Instant::now() + Duration::from_secs(20);
    let mut calls = 0_u32;
    let result: Result<&str, io::Error> = policy
        .run(async || {
            calls += 1;
            if Instant::now() < up_at {
                Err(refused())
            } else {
                Ok("written")
            }
        })
        .await;
    assert_eq!(result.unwrap(), "written");
    // 50 ms doubling to 500 ms: about 45 attempts in 20 s, far past max_attempts (2).
    assert!(calls > 30, "{calls} attempts");
    // The first attempt after the server came back came within the longest wait.
    assert!(Instant::now() <= up_at + Duration::from_millis(500));
}

#[tokio::test(start_paused = true)]
async fn the_default_policy_does_not_ride_out_an_outage() {
    let mut calls = 0_u32;
    let result: Result<(), io::Error> = RetryPolicy::default()
        .run(async || {
            calls += 1;
            Err(refused())
        })
        .await;
    assert!(result.is_err());
    assert_eq!(calls, 1);
}

#[tokio::test(start_paused = true)]
async fn an_outage_longer_than_the_budget_stops_with_outage_exceeded() {
    let policy = RetryPolicy::builder()
        .failover(Duration::from_secs(5))
        .build()
        .unwrap();
    let started = Instant::now();
    let mut state = RetryState::new(&policy, &TxOptions::default());
    let reason = loop {
        let failure = TxFailure::in_body(&policy, sqlstate, Server("57P03"));
        assert_eq!(
            failure.classification().verdict,
            Verdict::Transient(TransientKind::Failover)
        );
        match state.after_failure(&failure) {
            txretry_core::Decision::RetryAfter(delay) => tokio::time::sleep(delay).await,
            txretry_core::Decision::Stop(reason) => break reason,
        }
    };
    assert_eq!(reason, StopReason::OutageExceeded);
    let spent = started.elapsed();
    assert!(
        spent <= Duration::from_secs(5) && spent >= Duration::from_millis(4_400),
        "{spent:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadlock_after_an_outage_still_gets_its_attempts() {
    let policy = RetryPolicy::high_availability();
    let mut state = RetryState::new(&policy, &TxOptions::default());
    for _ in 0..10 {
        let failure = TxFailure::in_body(&policy, sqlstate, Server("57P01"));
        assert!(matches!(
            state.after_failure(&failure),
            txretry_core::Decision::RetryAfter(_)
        ));
    }
    // Ten attempts were spent in the outage; a deadlock now is the first failure that
    // counts against max_attempts (2): it is retried once.
    let deadlock = TxFailure::in_body(&policy, sqlstate, Server("40P01"));
    assert!(matches!(
        state.after_failure(&deadlock),
        txretry_core::Decision::RetryAfter(_)
    ));
    let again = TxFailure::in_body(&policy, sqlstate, Server("40P01"));
    assert_eq!(
        state.after_failure(&again),
        txretry_core::Decision::Stop(StopReason::AttemptsExhausted)
    );
}

#[tokio::test(start_paused = true)]
async fn read_only_sql_transaction_is_a_wrong_node_unless_the_caller_asked_for_read_only() {
    let policy = RetryPolicy::high_availability();
    let mut read_write = RetryState::new(&policy, &TxOptions::default());
    let failure = TxFailure::in_body(&policy, sqlstate, Server("25006"));
    assert!(
        failure.discards_connection(),
        "a session on a standby is no use"
    );
    assert!(matches!(
        read_write.after_failure(&failure),
        txretry_core::Decision::RetryAfter(_)
    ));

    let mut read_only = RetryState::new(&policy, &TxOptions::new().read_only(true));
    let failure = TxFailure::in_body(&policy, sqlstate, Server("25006"));
    assert_eq!(
        read_only.after_failure(&failure),
        txretry_core::Decision::Stop(StopReason::NotRetryable)
    );
    let error = read_only.give_up(failure, StopReason::NotRetryable);
    assert_eq!(error.outcome().verdict(), Verdict::Permanent);
}

#[test]
fn failover_codes_at_commit_are_ambiguous() {
    let policy = RetryPolicy::high_availability();
    for code in ["57P01", "57P02", "57P03", "25006"] {
        let failure = TxFailure::at_commit(&policy, sqlstate, Server(code));
        assert_eq!(
            failure.classification().verdict,
            Verdict::Ambiguous,
            "{code}"
        );
        assert!(failure.discards_connection(), "{code}");
    }
}

#[test]
fn database_dropped_and_query_canceled_stay_permanent() {
    let policy = RetryPolicy::high_availability();
    for code in ["57P04", "57014"] {
        let failure = TxFailure::in_body(&policy, sqlstate, Server(code));
        assert_eq!(
            failure.classification().verdict,
            Verdict::Permanent,
            "{code}"
        );
    }
}

/// The I/O errors of a server that cannot be reached at all (its machine gone: no route to
/// it, its network unreachable or down) are connection failures, as a refused connection
/// is: the failover budget rides them out. They were permanent, ending the call at once.
/// (A code table: a real "No route to host" needs an address off this machine.)
#[test]
fn an_unreachable_host_is_a_connection_failure() {
    for kind in [
        io::ErrorKind::HostUnreachable,
        io::ErrorKind::NetworkUnreachable,
        io::ErrorKind::NetworkDown,
        io::ErrorKind::ConnectionRefused,
    ] {
        let judged = txretry_core::classify(&io::Error::from(kind));
        assert_eq!(
            judged.verdict,
            Verdict::Transient(TransientKind::Connection),
            "{kind:?}"
        );
    }
}
