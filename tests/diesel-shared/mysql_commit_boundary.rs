//! The commit boundary through txretry-testkit's `CommitFaultProxy`: the runner's COMMIT
//! reaches the server and lands, but the proxy answers it with error 2013 ("Lost
//! connection to MySQL server during query", SQLSTATE HY000) and closes the connection,
//! as a MySQL proxy does when its server link breaks. Nobody can tell from that answer
//! whether the transaction committed: the verdict is ambiguous and the closure is not run
//! again — a retry would insert the row twice. Written once for MySQL/MariaDB through
//! Diesel and diesel-async (a `#[path]` module, like `business.rs`).

use txretry::{Code, KindSet, Phase, RetryPolicy, StopReason, TransientKind, TxOptions, Verdict};
use txretry_testkit::CommitFaultProxy;

use crate::calls::*;
use crate::common::*;

#[test]
fn commit_answered_with_2013_is_ambiguous_and_not_rerun() {
    let Some(url) = url(&format!("{BINARY}::commit_boundary")) else {
        return;
    };
    let mut direct = connect(&url);
    let t = table(&format!("{BINARY}_commit_fault"));
    create_log(&mut direct, &t);
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let mut conn = connect(proxy.url());

    let (builder, seen) = recording(5);
    let policy: RetryPolicy = seen
        .give_ups(builder.retry_on(KindSet::ALL))
        .build()
        .unwrap();
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = transaction_with!(&mut conn, &policy, &TxOptions::default(), |conn| {
        attempts += 1;
        execute!(
            diesel::sql_query(format!("INSERT INTO {t} (note) VALUES ('order 17')")),
            conn
        )
    })
    .expect_err("the proxy answers the COMMIT with 2013");

    // Diesel's COMMIT failed and so did its ROLLBACK on the closed connection: it reports
    // both; the COMMIT's answer is the one judged. (diesel-async reports the COMMIT's
    // alone.)
    let commit_error = match err.error() {
        diesel::result::Error::RollbackErrorOnCommit { commit_error, .. } => &**commit_error,
        other => other,
    };
    let (state, message) = kept(commit_error).expect("a database error");
    assert_eq!(state, "HY000");
    // The client library reports 2013 with its own text: libmysqlclient's "Lost
    // connection to MySQL server during query", MariaDB Connector/C's "Lost connection to
    // server during query"; the adapter knows both. (diesel-async: mysql_async reads the
    // proxy's own ERR packet, the first text.)
    assert!(
        [
            "Lost connection to MySQL server during query",
            "Lost connection to server during query"
        ]
        .contains(&message.as_str()),
        "{message}"
    );
    // On its own, 2013 is a connection failure…
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // …but at COMMIT it means "may have committed".
    assert_outcome(
        &err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::ConnectionUnusable,
    );
    assert_eq!(err.outcome().code(), Some(Code::MySql(2013)));
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
