//! `once` calls through a switchover and a kill -9 failover. The first call's COMMIT is in
//! flight (held on the server by a deferred trigger) when the primary goes away, and three
//! duplicates of the call (same call id) are queued behind its claim. The COMMIT is
//! ambiguous; `once` runs the call again under the same key on the new primary, where the
//! claim finds no record (the commit did not land), so the work runs once more: one
//! effect, one record, and the same answer to the call and to every duplicate, then and
//! when the call is sent again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::PgPool;
use txretry::RetryPolicy;
use txretry_tool::{BoxError, Caller, Once, Tool, ToolContext, Toolbox};

use crate::common::*;

#[derive(Deserialize, schemars::JsonSchema)]
struct Args {
    item: i64,
}

#[derive(Serialize, Deserialize)]
struct Placed {
    item: i64,
    effects: i64,
}

fn place(pool: &PgPool, t: &str, runs: &Arc<AtomicU32>) -> Tool {
    let (pool, t, runs) = (pool.clone(), t.to_owned(), Arc::clone(runs));
    Tool::new(
        "place",
        "Place an order for an item.",
        move |ctx: ToolContext, args: Args| {
            let (pool, t, runs) = (pool.clone(), t.clone(), Arc::clone(&runs));
            async move {
                let placed = ctx
                    .once(&pool, async move |tx| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        sqlx::query(sql(format!(
                            "INSERT INTO {t} VALUES ('item {}')",
                            args.item
                        )))
                        .execute(&mut **tx)
                        .await?;
                        let effects: i64 =
                            sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}")))
                                .fetch_one(&mut **tx)
                                .await?;
                        Ok::<_, BoxError>(Placed {
                            item: args.item,
                            effects,
                        })
                    })
                    .await?;
                Ok::<_, BoxError>(placed)
            }
        },
    )
}

async fn once_through(fault: Kind) {
    let Some(cluster) = cluster("ha::once").await else {
        return;
    };
    let observer = cluster.leader_conn().await;
    let t = table("ha_once");
    let records = table("ha_once_calls");
    let lock = blocking_commit_table(&observer, &t).await;
    let pool = cluster.pool(8).await;
    let once = Once::new().table(&records).unwrap();
    once.migrate(&pool).await.unwrap();
    exec(&observer, &lock).await;

    let runs = Arc::new(AtomicU32::new(0));
    let toolbox = Toolbox::builder()
        .policy(
            RetryPolicy::builder()
                .max_attempts(3)
                .failover(std::time::Duration::from_secs(90))
                .build()
                .unwrap(),
        )
        .tool(place(&pool, &t, &runs).once(once))
        .build()
        .unwrap();
    let caller = Caller::new(["user"]);
    let call = {
        let (toolbox, caller) = (toolbox.clone(), caller.clone());
        move || {
            let (toolbox, caller) = (toolbox.clone(), caller.clone());
            tokio::spawn(async move {
                toolbox
                    .invoke(&caller, "place", json!({"item": 11}), "call-ha")
                    .await
                    .map_err(|e| e.to_string())
            })
        }
    };
    let first = call();
    wait_for_blocked_commit(&observer).await;
    let duplicates: Vec<_> = (0..3).map(|_| call()).collect();
    // Let the duplicates reach the claim and queue behind the first call's.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let f = fault.inject().await;
    eprintln!("ha::once: {fault:?} {f:?}");

    let first = first.await.unwrap().expect("the call is answered");
    for d in duplicates {
        assert_eq!(
            d.await.unwrap().expect("answered"),
            first,
            "the same answer"
        );
    }
    assert_eq!(first, json!({"item": 11, "effects": 1}));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the lost COMMIT's work, then once more on the new primary"
    );
    let again = toolbox
        .invoke(&caller, "place", json!({"item": 11}), "call-ha")
        .await
        .unwrap();
    assert_eq!(again, first, "answered from the record");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let leader = cluster.leader_conn().await;
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {t}")).await,
        1
    );
    assert_eq!(
        count(&leader, &format!("SELECT count(*) FROM {records}")).await,
        1
    );
    drop_tables(&leader, &[&t, &records]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn once_calls_through_a_switchover_give_one_effect_and_one_answer() {
    once_through(Kind::Switchover).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn once_calls_through_a_kill_9_failover_give_one_effect_and_one_answer() {
    once_through(Kind::Failover).await;
}
