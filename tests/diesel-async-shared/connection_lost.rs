//! The runner's connection is ended by the server mid-transaction (Postgres: the backend
//! terminated; MySQL: `KILL CONNECTION`). The runner cannot open another connection on
//! the caller's `&mut` connection, so it returns the error at once, even under a policy
//! that retries connection failures, and the server rolled the transaction back. What the
//! error looks like differs by driver (each binary's `server` module checks it:
//! diesel-async keeps tokio-postgres' and mysql_async's I/O errors only as text, which
//! the adapter reads back as a driver code); the runner judges it as `classify` does.

use diesel_async::RunQueryDsl;
use txretry::{KindSet, Phase, StopReason};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_lost_connection_is_returned_without_retry() {
    let Some(url) = url(&format!("{BINARY}::connection_lost")) else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table(&format!("{BINARY}_conn_lost"));
        create_rows(&mut observer, &t, 1).await;

        let mut conn = connect(&url).await;
        let victim = victim(&mut conn);
        let (policy, seen) = recording(5);
        let policy = policy.retry_on(KindSet::ALL).build().unwrap();
        let mut attempts = 0;
        let err = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
            attempts += 1;
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await?;
            end_session(&mut observer, &victim).await;
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await
        })
        .await
        .expect_err("the connection is gone");

        assert_eq!(
            attempts, 1,
            "no retry on a connection that cannot be replaced"
        );
        assert!(seen.retried().is_empty());
        let classification = txretry::classify(err.error());
        assert_connection_lost(err.error(), &classification);
        // The runner judged it the same way, in the body, and stopped because its one
        // connection is gone — not because the policy refused.
        let outcome = err.outcome();
        assert_eq!(outcome.verdict(), classification.verdict, "{outcome:?}");
        assert_eq!(outcome.code(), classification.code, "{outcome:?}");
        assert_eq!(outcome.phase(), Phase::Body);
        assert_eq!(outcome.attempts(), 1);
        assert_eq!(outcome.stop_reason(), StopReason::ConnectionUnusable);
        assert!(!outcome.may_have_committed(), "COMMIT was never sent");
        assert_eq!(
            value(&mut observer, &t, 1).await,
            0,
            "the server rolled the transaction back"
        );
        drop_tables(&mut observer, &[&t]).await;
    });
}
