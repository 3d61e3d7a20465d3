//! A runner in the middle of its body when the primary goes away: the server rolled the
//! attempt back, the connection is discarded, and the whole transaction runs again on the
//! new primary: exactly one effect.

use txretry::tokio_postgres::Reconnecting;
use txretry::{Phase, RetryPolicy, Verdict};
use txretry_testkit::record::recording;

use crate::common::*;

fn ha_policy() -> (RetryPolicy, txretry_testkit::record::Seen) {
    let (policy, seen) = recording(2);
    let policy = policy
        .failover(std::time::Duration::from_secs(90))
        .build()
        .unwrap();
    (policy, seen)
}

/// Every retry was of a lost session, in the body.
fn only_lost_sessions(seen: &txretry_testkit::record::Seen) {
    let judged = seen.judged();
    assert!(!judged.is_empty());
    for j in &judged {
        assert!(
            matches!(j.verdict, Verdict::Transient(kind) if kind.loses_session()),
            "{judged:?}"
        );
        assert_eq!(j.phase, Phase::Body, "{judged:?}");
    }
}

/// How the sqlx pool reaches the primary.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// Through HAProxy.
    Proxy,
    /// A `PrimaryPool` on the multi-host URL.
    MultiHost,
}

/// The transaction ran again on another node, the one that leads now, and only lost
/// sessions were retried; both its rows are there once. Drops the table.
async fn ran_again_once_on_the_leader(
    cluster: &Cluster,
    t: &str,
    ports: &[i32],
    seen: &txretry_testkit::record::Seen,
) {
    let last = *ports.last().expect("an attempt");
    assert!(ports.len() >= 2, "{ports:?}");
    assert_ne!(ports[0], last, "ran again on another node");
    only_lost_sessions(seen);
    let leader = cluster.leader_conn().await;
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {t}")).await,
        2,
        "both rows, once"
    );
    assert_eq!(
        i32::from(cluster.leader().await.1),
        last,
        "committed on the leader"
    );
    drop_tables(&leader, &[t]).await;
}

async fn sqlx_body(fault: Kind, route: Route) {
    let Some(cluster) = cluster("ha::body::sqlx").await else {
        return;
    };
    let leader = cluster.leader_conn().await;
    let t = table("ha_body_sqlx");
    exec(&leader, &format!("CREATE TABLE {t} (note text NOT NULL)")).await;
    let primary;
    let pool = match route {
        Route::Proxy => cluster.pool(4).await,
        Route::MultiHost => {
            primary = cluster.primary_pool(4).await;
            primary.pool()
        }
    };
    let (policy, seen) = ha_policy();
    let mut ports = Vec::new();
    txretry::sqlx::transaction(&pool, &policy, async |tx| {
        let port: i32 = sqlx::query_scalar(SERVER_PORT).fetch_one(&mut **tx).await?;
        ports.push(port);
        sqlx::query(sql(format!("INSERT INTO {t} VALUES ('first')")))
            .execute(&mut **tx)
            .await?;
        if ports.len() == 1 {
            let f = fault.inject().await;
            eprintln!("ha::body::sqlx: {fault:?} {f:?} during the first attempt ({route:?})");
        }
        sqlx::query(sql(format!("INSERT INTO {t} VALUES ('second')")))
            .execute(&mut **tx)
            .await?;
        Ok::<_, sqlx::Error>(())
    })
    .await
    .expect("the transaction commits on the new primary");

    ran_again_once_on_the_leader(&cluster, &t, &ports, &seen).await;
}

async fn tokio_postgres_body(fault: Kind) {
    let Some(cluster) = cluster("ha::body::tokio_postgres").await else {
        return;
    };
    let leader = cluster.leader_conn().await;
    let t = table("ha_body_tp");
    exec(&leader, &format!("CREATE TABLE {t} (note text NOT NULL)")).await;
    let mut db = Reconnecting::new(cluster.multi_host.parse().unwrap());
    let (policy, seen) = ha_policy();
    let mut ports = Vec::new();
    db.transaction(&policy, async |tx| {
        let port: i32 = tx.query_one(SERVER_PORT, &[]).await?.get(0);
        ports.push(port);
        tx.execute(&format!("INSERT INTO {t} VALUES ('first')"), &[])
            .await?;
        if ports.len() == 1 {
            let f = fault.inject().await;
            eprintln!("ha::body::tokio_postgres: {fault:?} {f:?} during the first attempt");
        }
        tx.execute(&format!("INSERT INTO {t} VALUES ('second')"), &[])
            .await
    })
    .await
    .expect("the transaction commits on the new primary");

    ran_again_once_on_the_leader(&cluster, &t, &ports, &seen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_body_during_a_switchover_runs_again_on_the_new_primary() {
    sqlx_body(Kind::Switchover, Route::Proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_primary_pool_body_during_a_switchover_runs_again_on_the_new_primary() {
    sqlx_body(Kind::Switchover, Route::MultiHost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_primary_pool_body_during_a_kill_9_failover_runs_again_on_the_new_primary() {
    sqlx_body(Kind::Failover, Route::MultiHost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_body_during_a_kill_9_failover_runs_again_on_the_new_primary() {
    sqlx_body(Kind::Failover, Route::Proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn tokio_postgres_body_during_a_switchover_runs_again_on_the_new_primary() {
    tokio_postgres_body(Kind::Switchover).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn tokio_postgres_body_during_a_kill_9_failover_runs_again_on_the_new_primary() {
    tokio_postgres_body(Kind::Failover).await;
}
