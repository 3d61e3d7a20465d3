//! The runner's connection is killed mid-transaction (`KILL CONNECTION`). The runner
//! cannot open another connection on the caller's `&mut AsyncMysqlConnection`, so it
//! returns the error at once, even under a policy that retries connection failures.
//! mysql_async reports an I/O error, which diesel-async keeps only as text; the adapter
//! reads that text back as a driver code.

use diesel::result::DatabaseErrorKind;
use diesel_async::RunQueryDsl;
use txretry::{Code, KindSet, Phase, StopReason, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_killed_connection_is_returned_without_retry() {
    let Some(url) = url("diesel_async_mysql::connection_lost") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("damy_conn_lost");
        create_rows(&mut observer, &t, 1).await;

        let mut conn = connect(&url).await;
        let id = connection_id(&mut conn);
        let (policy, seen) = recording(5);
        let policy = policy.retry_on(KindSet::ALL).build().unwrap();
        let mut attempts = 0;
        let err = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
            attempts += 1;
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await?;
            exec(&mut observer, &format!("KILL CONNECTION {id}")).await;
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
        assert!(
            matches!(
                err.error(),
                diesel::result::Error::DatabaseError(DatabaseErrorKind::Unknown, info)
                    if info.sqlstate().is_none()
            ),
            "no server code: {err:?}"
        );
        let classification = txretry::classify(err.error());
        assert_eq!(
            classification.verdict,
            Verdict::Transient(TransientKind::Connection)
        );
        assert!(
            matches!(classification.code, Some(Code::Driver(_))),
            "{err:?}"
        );
        let outcome = err.outcome();
        assert_eq!(outcome.code(), classification.code, "{outcome:?}");
        assert_eq!(outcome.phase(), Phase::Body);
        assert_eq!(outcome.attempts(), 1);
        assert_eq!(outcome.stop_reason(), StopReason::ConnectionUnusable);
        assert_eq!(value(&mut observer, &t, 1).await, 0, "rolled back");
        drop_tables(&mut observer, &[&t]).await;
    });
}
