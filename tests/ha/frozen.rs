//! A primary that hangs instead of dying: every process of the leader stopped (SIGSTOP),
//! its kernel still accepting connections that nothing answers, until Patroni promotes a
//! replica. A tokio-postgres `Reconnecting` client on the multi-host URL with
//! `connect_timeout=1`: the call on the frozen connection is cut short by its deadline, and
//! the next one gives the frozen host up after its `connect_timeout` on every connect, is
//! refused by the replicas until one is promoted, and commits there once. tokio-postgres's
//! own connect waited in the frozen host's startup for ever.

use std::time::Duration;

use txretry::RetryPolicy;
use txretry::tokio_postgres::Reconnecting;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn tokio_postgres_rides_out_a_frozen_primary() {
    let Some(cluster) = cluster("ha::frozen").await else {
        return;
    };
    let t = table("ha_frozen_tp");
    exec(
        &cluster.leader_conn().await,
        &format!("CREATE TABLE {t} (id int PRIMARY KEY, port int NOT NULL)"),
    )
    .await;
    // The leader, to be frozen, first: tokio-postgres tries the hosts in order.
    let (leader, port) = cluster.leader().await;
    let mut db = Reconnecting::new(leader_first(&cluster.multi_host, port).parse().unwrap());
    let policy = RetryPolicy::builder()
        .failover(Duration::from_secs(90))
        .build()
        .unwrap();
    let insert = |id: i32| format!("INSERT INTO {t} SELECT {id}, inet_server_port()");
    db.transaction(&policy, async |tx| tx.execute(&insert(1), &[]).await)
        .await
        .expect("a first call, on the leader");

    let frozen = run_script(&["freeze"]).await;
    eprintln!("ha::frozen: {}", frozen.trim());
    let from = frozen
        .split_whitespace()
        .find_map(|w| w.strip_prefix("from="))
        .expect("the frozen node")
        .to_owned();
    assert_eq!(from, leader);
    let cut = tokio::time::timeout(
        Duration::from_secs(2),
        db.transaction(&policy, async |tx| tx.execute(&insert(2), &[]).await),
    )
    .await;
    assert!(cut.is_err(), "the frozen primary answered: {cut:?}");
    let committed = tokio::time::timeout(
        Duration::from_secs(120),
        db.transaction(&policy, async |tx| tx.execute(&insert(3), &[]).await),
    )
    .await;
    run_script(&["unfreeze", &from]).await;
    committed
        .expect("the call waited for ever")
        .expect("committed on the new primary");

    let leader = cluster.leader_conn().await;
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {t} WHERE id = 3")).await,
        1,
        "once"
    );
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {t} WHERE id = 2")).await,
        0,
        "the call cut short never committed"
    );
    let (new, port) = cluster.leader().await;
    assert_ne!(new, from, "a replica was promoted");
    assert_eq!(
        count(&leader, &format!("SELECT port::int8 FROM {t} WHERE id = 3")).await,
        i64::from(port),
        "committed on the new primary"
    );
    exec(&leader, &format!("DROP TABLE {t}")).await;
}

/// The multi-host URL with the host on `port` first, and `connect_timeout=1`.
fn leader_first(multi_host: &str, port: u16) -> String {
    let (head, rest) = multi_host.split_once('@').unwrap();
    let (hosts, tail) = rest.split_once('/').unwrap();
    let first = format!("127.0.0.1:{port}");
    let mut order = vec![first.as_str()];
    order.extend(hosts.split(',').filter(|host| *host != first));
    format!("{head}@{}/{tail}&connect_timeout=1", order.join(","))
}
