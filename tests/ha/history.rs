//! A history check over many calls: writers through both drivers (sqlx through the proxy
//! and through a `PrimaryPool` on the multi-host URL, tokio-postgres through the multi-host
//! URL) commit one row per call id, each under
//! `RetryPolicy::high_availability`, while the cluster takes a switchover and a kill -9
//! failover with `synchronous_mode` on. Afterwards, on the final primary: no call id is
//! there twice, every acknowledged call is there (synchronous replication loses none),
//! an ambiguous call is there once or not at all, and nothing else failed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use txretry::tokio_postgres::Reconnecting;
use txretry::{RetryPolicy, TxError, Verdict};

use crate::common::*;

/// How each call ended, as the writer saw it.
#[derive(Default)]
struct Calls {
    acknowledged: Vec<String>,
    ambiguous: Vec<String>,
    failed: Vec<String>,
}

impl Calls {
    fn note<E: std::fmt::Debug>(&mut self, id: String, result: Result<(), TxError<E>>) {
        match result {
            Ok(()) => self.acknowledged.push(id),
            Err(e) if e.outcome().verdict() == Verdict::Ambiguous => self.ambiguous.push(id),
            Err(e) => self.failed.push(format!("{id}: {e:?}")),
        }
    }
}

const WRITERS_PER_DRIVER: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn every_call_commits_at_most_once_and_no_acknowledged_commit_is_lost_under_sync() {
    let Some(cluster) = cluster("ha::history").await else {
        return;
    };
    cluster.sync(true).await;
    let leader = cluster.leader_conn().await;
    let t = table("ha_history");
    exec(
        &leader,
        &format!("CREATE TABLE {t} (call_id text NOT NULL)"),
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let proxied = cluster.pool(WRITERS_PER_DRIVER as u32).await;
    let primary = cluster.primary_pool(WRITERS_PER_DRIVER as u32).await;

    let mut writers = tokio::task::JoinSet::new();
    let sqlx_writers = (0..WRITERS_PER_DRIVER)
        .map(|w| (format!("sqlx-{w}"), proxied.clone()))
        .chain((0..WRITERS_PER_DRIVER).map(|w| (format!("primary-{w}"), primary.pool())));
    for (w, pool) in sqlx_writers {
        let (t, stop) = (t.clone(), Arc::clone(&stop));
        writers.spawn(async move {
            let policy = RetryPolicy::high_availability();
            let mut calls = Calls::default();
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let id = format!("{w}-{i}");
                let insert = format!("INSERT INTO {t} VALUES ('{id}')");
                let result = txretry::sqlx::transaction(&pool, &policy, async move |tx| {
                    sqlx::query(sql(insert.clone()))
                        .execute(&mut **tx)
                        .await
                        .map(drop)
                })
                .await;
                calls.note(id, result);
            }
            calls
        });
    }
    for w in 0..WRITERS_PER_DRIVER {
        let (url, t, stop) = (cluster.multi_host.clone(), t.clone(), Arc::clone(&stop));
        writers.spawn(async move {
            let policy = RetryPolicy::high_availability();
            let mut db = Reconnecting::new(url.parse().unwrap());
            let mut calls = Calls::default();
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let id = format!("tp-{w}-{i}");
                let insert = format!("INSERT INTO {t} VALUES ('{id}')");
                let result = db
                    .transaction(&policy, async move |tx| {
                        tx.execute(&insert, &[]).await.map(drop)
                    })
                    .await;
                calls.note(id, result);
            }
            calls
        });
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = switchover().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let f = failover().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    eprintln!("ha::history: {s:?}, then {f:?}");

    let mut all = Calls::default();
    while let Some(calls) = writers.join_next().await {
        let calls = calls.unwrap();
        all.acknowledged.extend(calls.acknowledged);
        all.ambiguous.extend(calls.ambiguous);
        all.failed.extend(calls.failed);
    }
    cluster.sync(false).await;

    let leader = cluster.leader_conn().await;
    let rows = leader
        .query(
            &format!("SELECT call_id, count(*) FROM {t} GROUP BY call_id"),
            &[],
        )
        .await
        .unwrap();
    let there: HashMap<String, i64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let doubled: Vec<_> = there.iter().filter(|(_, n)| **n > 1).collect();
    let lost: Vec<_> = all
        .acknowledged
        .iter()
        .filter(|id| !there.contains_key(*id))
        .collect();
    let known: BTreeSet<&String> = all.acknowledged.iter().chain(&all.ambiguous).collect();
    let strangers: Vec<_> = there.keys().filter(|id| !known.contains(id)).collect();
    let ambiguous_landed = all
        .ambiguous
        .iter()
        .filter(|id| there.contains_key(*id))
        .count();
    eprintln!(
        "ha::history: {} acknowledged, {} ambiguous ({} of them landed), {} failed, {} rows",
        all.acknowledged.len(),
        all.ambiguous.len(),
        ambiguous_landed,
        all.failed.len(),
        there.len()
    );
    assert!(all.acknowledged.len() > 100, "the writers wrote");
    assert!(doubled.is_empty(), "committed twice: {doubled:?}");
    assert!(
        lost.is_empty(),
        "acknowledged but lost under synchronous_mode: {lost:?}"
    );
    assert!(strangers.is_empty(), "rows no call wrote: {strangers:?}");
    assert!(all.failed.is_empty(), "failed: {:?}", all.failed);
    drop_tables(&leader, &[&t]).await;
}
