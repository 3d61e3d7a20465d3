//! A runner future dropped mid-attempt (a timeout) leaves diesel-async counting the
//! transaction open: the next call on that connection fails at once with
//! `AlreadyInTransaction`, permanent, without running the closure — and without a panic.

use std::time::Duration;

use diesel_async::RunQueryDsl;
use txretry::{Phase, RetryPolicy, StopReason, TxError, Verdict};

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_dropped_attempt_leaves_the_connection_in_its_transaction() {
    let Some(url) = url("diesel_async_postgres::cancellation") else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table("dapg_cancel");
        create_rows(&mut observer, &t, 1).await;
        let mut conn = connect(&url).await;
        let policy = RetryPolicy::default();

        let attempt = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await?;
            // Never returns: only the timeout ends this attempt.
            std::future::pending::<Result<(), diesel::result::Error>>().await
        });
        assert!(
            tokio::time::timeout(Duration::from_millis(50), attempt)
                .await
                .is_err(),
            "the attempt cannot finish"
        );

        let mut calls = 0;
        let result: Result<(), TxError<diesel::result::Error>> =
            txretry::diesel::async_transaction(&mut conn, &policy, async |_| {
                calls += 1;
                Ok(())
            })
            .await;
        let err = result.expect_err("the dropped transaction is still open");
        assert!(
            matches!(err.error(), diesel::result::Error::AlreadyInTransaction),
            "{err:?}"
        );
        assert_outcome(
            &err,
            Verdict::Permanent,
            Phase::Body,
            1,
            StopReason::NotRetryable,
        );
        assert_eq!(calls, 0);
        drop(conn);
        assert_eq!(value(&mut observer, &t, 1).await, 0, "nothing committed");
        drop_tables(&mut observer, &[&t]).await;
    });
}
