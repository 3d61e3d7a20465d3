//! The connection dies mid-transaction (the backend is terminated). The runner cannot open
//! another connection on the caller's `&mut AsyncPgConnection`, so it returns the error at
//! once, even under a policy that retries connection failures. diesel-async keeps
//! tokio-postgres' error only as text when it has no SQLSTATE; the adapter reads that text
//! back as a driver code.

use diesel::result::DatabaseErrorKind;
use diesel_async::RunQueryDsl;
use txretry::{Code, KindSet, Phase, StopReason, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_lost_connection_is_returned_without_retry() {
    let Some(url) = url("diesel_async_postgres::connection_lost") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("dapg_conn_lost");
        create_rows(&mut observer, &t, 1).await;

        let mut conn = connect(&url).await;
        let pid = backend_pid(&mut conn);
        let (policy, seen) = recording(5);
        let policy = policy.retry_on(KindSet::ALL).build().unwrap();
        let mut attempts = 0;
        let err = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
            attempts += 1;
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await?;
            exec(
                &mut observer,
                &format!("SELECT pg_terminate_backend({pid})"),
            )
            .await;
            wait_until_gone(&mut observer, pid);
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
        match err.error() {
            // The usual case: the connection's task read the server's FATAL and ended, and
            // the statement found the connection closed (or its socket reset: an I/O
            // error). diesel-async keeps only the text, which the adapter reads back as a
            // driver code.
            diesel::result::Error::DatabaseError(DatabaseErrorKind::UnableToSendCommand, info) => {
                let code = match info.message() {
                    "connection closed" | "channel closed" => Code::Driver("connection closed"),
                    "error communicating with the server" => Code::Driver("io"),
                    other => panic!("an unexpected text: {other}"),
                };
                assert_eq!(classification.code, Some(code));
                assert_eq!(
                    classification.verdict,
                    Verdict::Transient(TransientKind::Connection)
                );
            }
            // The statement raced the FATAL and got it: 57P01 (admin_shutdown).
            other => {
                assert_eq!(diesel_sqlstate(other).as_deref(), Some("57P01"), "{err:?}");
                assert_eq!(
                    classification.verdict,
                    Verdict::Transient(TransientKind::Failover)
                );
            }
        }
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
