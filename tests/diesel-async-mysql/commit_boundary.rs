//! The commit boundary through txretry-testkit's `CommitFaultProxy`: the runner's COMMIT
//! reaches the server and lands, but the proxy answers it with error 2013 ("Lost
//! connection to MySQL server during query", SQLSTATE HY000) and closes the connection,
//! as a MySQL proxy does when its server link breaks. Nobody can tell from that answer
//! whether the transaction committed: the verdict is ambiguous and the closure is not run
//! again — a retry would insert the row twice.

use diesel_async::RunQueryDsl;
use txretry::{Code, KindSet, Phase, RetryPolicy, StopReason, TransientKind, Verdict};
use txretry_testkit::CommitFaultProxy;

use crate::calls::block_on;
use crate::db::*;

#[test]
fn commit_answered_with_2013_is_ambiguous_and_not_rerun() {
    let Some(url) = url("diesel_async_mysql::commit_boundary") else {
        return;
    };
    block_on(async {
        let mut direct = connect(&url).await;
        let t = table("damy_commit_fault");
        create_log(&mut direct, &t).await;
        let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
        let mut conn = connect(proxy.url()).await;

        let (builder, seen) = recording(5);
        let policy: RetryPolicy = seen
            .give_ups(builder.retry_on(KindSet::ALL))
            .build()
            .unwrap();
        proxy.arm_commit_faults(1);
        let mut attempts = 0;
        let err = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
            attempts += 1;
            diesel::sql_query(format!("INSERT INTO {t} (note) VALUES ('order 17')"))
                .execute(conn)
                .await
        })
        .await
        .expect_err("the proxy answers the COMMIT with 2013");

        // mysql_async reads the proxy's ERR packet as the server's: diesel-async keeps its
        // SQLSTATE and text (not the errno), from which the adapter recovers 2013.
        let (state, message) = kept(err.error()).expect("a database error");
        assert_eq!(state, "HY000", "{err:?}");
        assert_eq!(message, "Lost connection to MySQL server during query");
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
            count(&mut direct, &t, "note = 'order 17'").await,
            1,
            "the COMMIT landed, exactly once"
        );
        drop_tables(&mut direct, &[&t]).await;
    });
}
