//! A write that reaches a standby (what a stale DNS name or a proxy that has not caught up
//! yet sends to a demoted primary): `25006` "cannot execute INSERT in a read-only
//! transaction". The runner did not ask for a read-only transaction, so it is a wrong
//! node: the connection is discarded and the transaction runs again on a new one, which
//! (here, once the test points the pool at the proxy, as the name catching up would)
//! lands on the primary: one effect. In a transaction that *was* asked to be read-only,
//! the same 25006 is the caller's own mistake: permanent, once.

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use sqlx::postgres::PgConnectOptions;
use txretry::{RetryPolicy, SqlState, StopReason, TransientKind, TxOptions, Verdict};

use crate::common::*;

/// A standby's URL: the multi-host URL's database on a port that is not the leader's.
async fn standby_url(cluster: &Cluster) -> String {
    let (_, leader_port) = cluster.leader().await;
    let standby = (5441..=5443)
        .find(|p| *p != leader_port)
        .expect("a standby port");
    cluster.proxy.replace(
        &format!(":{}", proxy_port(&cluster.proxy)),
        &format!(":{standby}"),
    )
}

/// Waits until the standby has replayed the table's creation (replication is
/// asynchronous): an INSERT into a table it does not know yet fails with 42P01, not 25006.
async fn replicated(standby: &sqlx::PgPool, t: &str) {
    for _ in 0..500 {
        let there: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(t)
            .fetch_one(standby)
            .await
            .expect("ask the standby");
        if there {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the standby never saw {t}");
}

fn proxy_port(url: &str) -> u16 {
    PgConnectOptions::from_str(url).unwrap().get_port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn a_write_on_a_standby_is_a_wrong_node_retried_on_a_new_connection() {
    let Some(cluster) = cluster("ha::wrong_node").await else {
        return;
    };
    let leader = cluster.leader_conn().await;
    let t = table("ha_wrong_node");
    exec(&leader, &format!("CREATE TABLE {t} (note text NOT NULL)")).await;
    let standby = standby_url(&cluster).await;
    // One connection: a second idle one to the standby would be met (and discarded) too.
    let pool = pool(&standby, 1).await;
    replicated(&pool, &t).await;

    // The pool's name "catches up" when the runner reports the wrong node.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let policy = {
        let (pool, seen) = (pool.clone(), Arc::clone(&seen));
        let proxy = PgConnectOptions::from_str(&cluster.proxy).unwrap();
        RetryPolicy::builder()
            .failover(std::time::Duration::from_secs(30))
            .on_retry(move |e| {
                seen.lock().unwrap().push((e.verdict, e.code));
                pool.set_connect_options(proxy.clone());
            })
            .build()
            .unwrap()
    };
    let mut ports = Vec::new();
    txretry::sqlx::transaction(&pool, &policy, async |tx| {
        let port: i32 = sqlx::query_scalar(SERVER_PORT).fetch_one(&mut **tx).await?;
        ports.push(port);
        sqlx::query(sql(format!("INSERT INTO {t} VALUES ('order 7')")))
            .execute(&mut **tx)
            .await
            .map(drop)
    })
    .await
    .expect("committed on the primary");

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            Verdict::Transient(TransientKind::Failover),
            Some(txretry::Code::SqlState(SqlState::new("25006").unwrap()))
        )],
        "one wrong-node retry"
    );
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[1], i32::from(cluster.leader().await.1));
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {t}")).await,
        1,
        "one effect"
    );
    drop_tables(&leader, &[&t]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn a_write_in_a_read_only_transaction_on_a_standby_is_permanent() {
    let Some(cluster) = cluster("ha::wrong_node::read_only").await else {
        return;
    };
    let leader = cluster.leader_conn().await;
    let t = table("ha_read_only");
    exec(&leader, &format!("CREATE TABLE {t} (note text NOT NULL)")).await;
    let pool = pool(&standby_url(&cluster).await, 2).await;
    replicated(&pool, &t).await;
    let mut calls = 0;
    let err = txretry::sqlx::transaction_with(
        &pool,
        &RetryPolicy::high_availability(),
        &TxOptions::new().read_only(true),
        async |tx| {
            calls += 1;
            sqlx::query(sql(format!("INSERT INTO {t} VALUES ('oops')")))
                .execute(&mut **tx)
                .await
                .map(drop)
        },
    )
    .await
    .expect_err("a write in a read-only transaction");
    assert_eq!(calls, 1);
    assert_eq!(err.outcome().verdict(), Verdict::Permanent);
    assert_eq!(err.outcome().stop_reason(), StopReason::NotRetryable);
    drop_tables(&leader, &[&t]).await;
}
