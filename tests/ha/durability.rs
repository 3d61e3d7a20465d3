//! Durability the caller can read. Under `synchronous_mode` a COMMIT waits for the
//! synchronous standby; when that wait is cancelled (here: the standby's WAL receiver is
//! frozen and the waiting COMMIT gets `pg_cancel_backend`, as an operator or a client's
//! cancel request would; `statement_timeout` is disarmed at COMMIT), Postgres answers it with
//! success and a warning that the transaction "might not have been replicated". The
//! runner's `Ok` is then not plain success: a `Reconnecting` client reports it.

use std::time::Duration;

use txretry::RetryPolicy;
use txretry::tokio_postgres::Reconnecting;

use crate::common::*;

/// Sends `signal` to the process `pid` (a PostgreSQL backend of the cluster).
async fn signal(pid: i32, signal: &str) {
    let status = tokio::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .await
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn a_commit_not_confirmed_by_the_synchronous_standby_is_reported() {
    let Some(cluster) = cluster("ha::durability").await else {
        return;
    };
    cluster.sync(true).await;
    let leader = cluster.leader_conn().await;
    let t = table("ha_durability");
    exec(&leader, &format!("CREATE TABLE {t} (note text NOT NULL)")).await;
    let standby: String = leader
        .query_one(
            "SELECT application_name FROM pg_stat_replication WHERE sync_state = 'sync'",
            &[],
        )
        .await
        .expect("a synchronous standby")
        .get(0);
    let port: u16 = 5440 + standby.trim_start_matches("pg").parse::<u16>().unwrap();
    let standby_url = cluster.proxy.replace(":5440/", &format!(":{port}/"));
    let (standby_conn, connection) = tokio_postgres::connect(&standby_url, tokio_postgres::NoTls)
        .await
        .expect("connect to the standby");
    tokio::spawn(connection);
    let receiver: i32 = standby_conn
        .query_one("SELECT pid FROM pg_stat_wal_receiver", &[])
        .await
        .expect("the standby's WAL receiver")
        .get(0);

    let mut db = Reconnecting::new(cluster.multi_host.parse().unwrap());
    let policy = RetryPolicy::high_availability();
    signal(receiver, "STOP").await;
    let canceller = tokio::spawn(async move {
        for _ in 0..3000 {
            let cancelled: Option<bool> = leader
                .query_one(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
                     WHERE wait_event = 'SyncRep' UNION ALL SELECT NULL LIMIT 1",
                    &[],
                )
                .await
                .expect("look for the waiting COMMIT")
                .get(0);
            if cancelled == Some(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no COMMIT waited for the synchronous standby");
    });
    let result = db
        .transaction(&policy, async |tx| {
            tx.execute(&format!("INSERT INTO {t} VALUES ('unconfirmed')"), &[])
                .await
        })
        .await;
    signal(receiver, "CONT").await;
    canceller.await.unwrap();
    result.expect("the COMMIT succeeded on the primary");
    let warning = db
        .unreplicated_commit()
        .expect("reported as not replicated")
        .clone();
    eprintln!("ha::durability: {warning:?}");
    assert!(
        warning.message.contains("synchronous replication"),
        "{warning:?}"
    );

    // Once the standby answers again, the next commit is confirmed.
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.transaction(&policy, async |tx| {
        tx.execute(&format!("INSERT INTO {t} VALUES ('confirmed')"), &[])
            .await
    })
    .await
    .expect("committed");
    assert_eq!(db.unreplicated_commit(), None);
    cluster.sync(false).await;
    let leader = cluster.leader_conn().await;
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {t}")).await,
        2
    );
    drop_tables(&leader, &[&t]).await;
}
