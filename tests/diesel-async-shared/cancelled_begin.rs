//! A runner future dropped while its BEGIN awaits the server's answer: diesel-async marks
//! the connection broken (the BEGIN may have run, its answer is still on the wire), and
//! the next call on that connection panicked inside diesel-async ("Tried to execute a
//! transaction SQL on transaction manager that was previously canceled", a debug
//! assertion; a release build sent BEGIN into the leftover transaction). The runner now
//! refuses the connection at once, as unusable, without running the closure. The proxy
//! holds the server's answers from the BEGIN on, so the drop lands inside it every time.

use std::time::Duration;

use diesel_async::RunQueryDsl;
use txretry::{RetryPolicy, StopReason, TxError};
use txretry_testkit::CommitFaultProxy;

use crate::calls::block_on;
use crate::db::*;

#[test]
fn a_runner_dropped_inside_begin_leaves_a_connection_the_next_call_refuses() {
    let Some(url) = url(&format!("{BINARY}::cancelled_begin")) else {
        return;
    };
    block_on(async {
        let mut observer = connect(&url).await;
        let t = table(&format!("{BINARY}_cancel_begin"));
        create_rows(&mut observer, &t, 1).await;
        let proxy = CommitFaultProxy::start(&url).unwrap();
        let mut conn = connect(proxy.url()).await;
        let policy = RetryPolicy::default();

        proxy.hold_replies_from_next_begin();
        let attempt = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
                .execute(conn)
                .await
        });
        let dropped = tokio::time::timeout(Duration::from_millis(300), attempt).await;
        assert!(
            dropped.is_err(),
            "BEGIN was answered while held: {dropped:?}"
        );
        proxy.release_replies();

        let mut calls = 0;
        let result: Result<(), TxError<diesel::result::Error>> =
            txretry::diesel::async_transaction(&mut conn, &policy, async |_| {
                calls += 1;
                Ok(())
            })
            .await;
        let err = result.expect_err("the connection's state is unknown");
        assert_eq!(calls, 0, "the closure ran on a broken connection");
        assert_eq!(
            err.outcome().stop_reason(),
            StopReason::ConnectionUnusable,
            "{err:?}"
        );
        assert!(!err.outcome().may_have_committed(), "{err:?}");
        drop(conn);
        assert_eq!(value(&mut observer, &t, 1).await, 0, "nothing committed");
        drop_tables(&mut observer, &[&t]).await;
    });
}
