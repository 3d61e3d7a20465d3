//! A read on a hot standby that replay needs to cancel: the primary takes an ACCESS
//! EXCLUSIVE lock on a table a standby session holds a lock on, and after
//! `max_standby_streaming_delay` the standby ends that session ("terminating connection
//! due to conflict with recovery", `40001`, FATAL since it sat idle in its transaction).
//! The client may never read that FATAL: tokio-postgres's connection task consumes it and
//! the next statement fails with "connection closed" (a `Connection` failure, what is seen
//! here), while a session busy in a statement gets the `40001` ERROR (a serialization
//! failure). Under `RetryPolicy::high_availability` either runs again on a new connection,
//! and the read-only transaction then succeeds.

use txretry::tokio_postgres::Reconnecting;
use txretry::{RetryPolicy, TransientKind, TxOptions, Verdict};
use txretry_testkit::record::recording;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn a_read_cancelled_by_recovery_on_a_standby_runs_again() {
    let Some(cluster) = cluster("ha::standby").await else {
        return;
    };
    let leader = cluster.leader_conn().await;
    let t = table("ha_standby");
    exec(
        &leader,
        &format!("CREATE TABLE {t} (id int); INSERT INTO {t} VALUES (1)"),
    )
    .await;
    let (_, leader_port) = cluster.leader().await;
    let port = (5441..=5443).find(|p| *p != leader_port).unwrap();
    let standby_url = cluster.proxy.replace(":5440/", &format!(":{port}/"));
    let (standby, connection) = tokio_postgres::connect(&standby_url, tokio_postgres::NoTls)
        .await
        .expect("connect to the standby");
    tokio::spawn(connection);
    exec(
        &standby,
        "ALTER SYSTEM SET max_standby_streaming_delay = '200ms'",
    )
    .await;
    exec(&standby, "SELECT pg_reload_conf()").await;
    for _ in 0..500 {
        let delay: String = standby
            .query_one("SHOW max_standby_streaming_delay", &[])
            .await
            .unwrap()
            .get(0);
        let there: bool = standby
            .query_one("SELECT to_regclass($1) IS NOT NULL", &[&t])
            .await
            .unwrap()
            .get(0);
        if delay == "200ms" && there {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let mut db = Reconnecting::new(standby_url.parse().unwrap());
    let (policy, seen) = recording(3);
    let policy: RetryPolicy = policy
        .failover(std::time::Duration::from_secs(30))
        .build()
        .unwrap();
    let mut attempts = 0;
    let n = db
        .transaction_with(&policy, &TxOptions::new().read_only(true), async |tx| {
            attempts += 1;
            let n: i64 = tx
                .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                .await?
                .get(0);
            if attempts == 1 {
                // The primary's lock reaches the standby; this session holds the table.
                leader
                    .batch_execute(&format!(
                        "BEGIN; LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE; COMMIT"
                    ))
                    .await?;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
            tx.query_one("SELECT 1", &[]).await?;
            Ok::<_, tokio_postgres::Error>(n)
        })
        .await;
    // Put the standby's setting back before anything can fail.
    exec(&standby, "ALTER SYSTEM RESET max_standby_streaming_delay").await;
    exec(&standby, "SELECT pg_reload_conf()").await;
    let n = n.expect("the second attempt reads");

    assert_eq!(n, 1);
    assert_eq!(attempts, 2);
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert!(
        matches!(
            judged[0].verdict,
            Verdict::Transient(TransientKind::SerializationFailure | TransientKind::Connection)
        ),
        "{judged:?}"
    );
    drop_tables(&leader, &[&t]).await;
}
