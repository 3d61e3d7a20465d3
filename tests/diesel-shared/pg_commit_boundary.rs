//! The commit boundary through txretry-testkit's `CommitFaultProxy`: the runner's COMMIT
//! reaches the server and lands, but the proxy answers it as PgBouncer does when its
//! server link breaks (FATAL 08P01) and closes the connection. Nobody can tell from that
//! answer whether the transaction committed: the verdict is ambiguous and the closure is
//! not run again — a retry would insert the row twice. Written once for Postgres through
//! Diesel and diesel-async (a `#[path]` module, like `business.rs`); what the fault looks
//! like through each driver is each binary's `lost_commit_code`.

use txretry::{
    KindSet, Phase, RetryPolicy, StopReason, TransientKind, TxError, TxOptions, Verdict,
};
use txretry_testkit::CommitFaultProxy;
use txretry_testkit::record::Seen;

use crate::calls::*;
use crate::common::*;

/// A policy of five attempts that retries every kind (connection failures included),
/// recording retries and give-ups.
fn retry_everything() -> (RetryPolicy, Seen) {
    let (builder, seen) = recording(5);
    let policy = seen
        .give_ups(builder.retry_on(KindSet::ALL))
        .build()
        .unwrap();
    (policy, seen)
}

/// `CREATE TABLE {name} (note text NOT NULL)`: no key, so a second run would show as a
/// second row rather than as a unique violation.
fn create_notes(conn: &mut Conn, name: &str) {
    exec(conn, &format!("CREATE TABLE {name} (note text NOT NULL)"));
}

/// The proxy's answer, as the binary's driver reports it (`lost_commit_code`): judged
/// ambiguous at COMMIT on the first attempt; the runner's one connection is gone, so the
/// loop ended.
fn assert_ambiguous_commit(err: &TxError<diesel::result::Error>) {
    let code = lost_commit_code(err.error());
    // On its own, the answer is a connection failure…
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // …but at COMMIT it means "may have committed".
    assert_outcome(
        err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::ConnectionUnusable,
    );
    assert_eq!(err.outcome().code(), Some(code));
    assert_eq!(err.outcome().history().len(), 1);
}

#[test]
fn commit_answered_with_08p01_is_ambiguous_and_not_rerun() {
    let Some(url) = url(&format!("{BINARY}::commit_boundary")) else {
        return;
    };
    let mut direct = connect(&url);
    let t = table(&format!("{BINARY}_commit_fault"));
    create_notes(&mut direct, &t);
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let mut conn = connect(proxy.url());

    let (policy, seen) = retry_everything();
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = transaction_with!(&mut conn, &policy, &TxOptions::default(), |conn| {
        attempts += 1;
        execute!(
            diesel::sql_query(format!("INSERT INTO {t} VALUES ('order 17')")),
            conn
        )
    })
    .expect_err("the proxy answers the COMMIT with 08P01");

    assert_ambiguous_commit(&err);
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.retried().is_empty());
    assert_eq!(seen.gave_up(), vec![err.outcome().clone()]);
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1, "one COMMIT went through the proxy");
    assert_eq!(
        count(&mut direct, &t, "note = 'order 17'"),
        1,
        "the COMMIT landed, exactly once"
    );
    drop_tables(&mut direct, &[&t]);
}

/// An idempotent call may retry an ambiguous COMMIT, but not on this connection: the
/// fault closed it and the runner cannot open another, so the loop ends after one
/// attempt. The caller's next call, on a new connection, finds the row already there.
#[test]
fn an_idempotent_call_still_ends_on_the_lost_connection() {
    let Some(url) = url(&format!("{BINARY}::commit_boundary_idempotent")) else {
        return;
    };
    let mut direct = connect(&url);
    let t = table(&format!("{BINARY}_commit_fault_idem"));
    create_notes(&mut direct, &t);
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let mut conn = connect(proxy.url());

    let (policy, seen) = retry_everything();
    let options = TxOptions::new().idempotent(true);
    let insert_once = format!(
        "INSERT INTO {t} SELECT 'order 18' WHERE NOT EXISTS \
         (SELECT 1 FROM {t} WHERE note = 'order 18')"
    );
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = transaction_with!(&mut conn, &policy, &options, |conn| {
        attempts += 1;
        execute!(diesel::sql_query(&insert_once), conn)
    })
    .expect_err("the connection is gone");

    assert_ambiguous_commit(&err);
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty(), "no retry was even scheduled");
    assert_eq!(count(&mut direct, &t, "note = 'order 18'"), 1);

    let mut fresh = connect(proxy.url());
    let inserted = transaction_with!(&mut fresh, &policy, &options, |conn| {
        execute!(diesel::sql_query(&insert_once), conn)
    })
    .expect("the proxy is disarmed");
    assert_eq!(inserted, 0, "the first COMMIT had landed");
    assert_eq!(count(&mut direct, &t, "note = 'order 18'"), 1);
    drop_tables(&mut direct, &[&t]);
}
