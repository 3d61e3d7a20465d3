//! `ToolContext::once_tokio_postgres` on PostgreSQL (TXRETRY_POSTGRES_URL): the suite's
//! scenarios that a client (not a pool) runs — duplicates, business errors, the table's
//! creation, `migrate` and `prune` — and a lost COMMIT answer (the commit-fault proxy),
//! which the runner cannot retry on its one client: the call run again resolves it.
//!
//! Each call connects its own client, as a handler without a pool would.

use std::str::FromStr;
use std::time::Duration;

use serde_json::json;
use tokio_postgres::{Client, Config, NoTls};
use txretry_core::Verdict;
use txretry_tool::{
    BoxError, BusinessError, FailureKind, InvokeError, Once, Tool, ToolContext, Toolbox,
};

use crate::common::*;

struct Fx {
    /// The test's own client: setup and checks.
    admin: Client,
    url: String,
    /// The calls' sessions' `application_name`.
    app: String,
}

async fn connect(url: &str, app: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = Config::from_str(url)?
        .application_name(app)
        .connect(NoTls)
        .await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn fixture(test: &str) -> Option<Fx> {
    let url = txretry_testkit::postgres_url(test)?;
    let app = unique_name("once_tpg");
    let admin = connect(&url, "once_tpg_admin").await.unwrap();
    Some(Fx { admin, url, app })
}

async fn count(fx: &Fx, table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table}");
    fx.admin.query_one(&sql, &[]).await.unwrap().get(0)
}

async fn record(fx: &Fx, records: &str, key: &str) -> (String, Option<String>, Option<String>) {
    let sql = format!("SELECT status, output, error_kind FROM {records} WHERE call_key = $1");
    let row = fx.admin.query_one(&sql, &[&key]).await.unwrap();
    (row.get(0), row.get(1), row.get(2))
}

async fn effects_table(fx: &Fx) -> String {
    let t = unique_name("once_effects");
    fx.admin
        .batch_execute(&format!(
            "CREATE TABLE {t} (item BIGINT NOT NULL, note VARCHAR(100) NOT NULL)"
        ))
        .await
        .unwrap();
    t
}

async fn drop_tables(fx: &Fx, tables: &[&str]) {
    for t in tables {
        fx.admin
            .batch_execute(&format!("DROP TABLE IF EXISTS {t}"))
            .await
            .unwrap();
    }
}

/// `place`, as in the suite: inserts an effect row, waits at `gate`, refuses a negative
/// item (a business error, after its insert), else answers with the item and the number
/// of effect rows it sees. Each call connects to `url`.
fn place(url: &str, app: &str, t: &str, runs: &Counter, gate: &Gate) -> Tool {
    let (url, app, t) = (url.to_owned(), app.to_owned(), t.to_owned());
    let (runs, gate) = (runs.clone(), gate.clone());
    Tool::new(
        "place",
        "Place an order for an item.",
        move |ctx: ToolContext, args: Args| {
            let (url, app, t) = (url.clone(), app.clone(), t.clone());
            let (runs, gate) = (runs.clone(), gate.clone());
            async move {
                let mut client = connect(&url, &app).await?;
                let placed = ctx
                    .once_tokio_postgres(&mut client, async move |tx| {
                        runs.bump();
                        tx.execute(
                            &format!("INSERT INTO {t} (item, note) VALUES ($1, 'placed')"),
                            &[&args.item],
                        )
                        .await?;
                        gate.pass().await;
                        if args.item < 0 {
                            return Err(BoxError::from(BusinessError::new(
                                "unknown_item",
                                format!("there is no item {}", args.item),
                            )));
                        }
                        let effects: i64 = tx
                            .query_one(&format!("SELECT count(*) FROM {t}"), &[])
                            .await?
                            .get(0);
                        Ok(Placed {
                            item: args.item,
                            effects,
                            note: "placed".to_owned(),
                        })
                    })
                    .await?;
                Ok::<_, BoxError>(placed)
            }
        },
    )
}

fn records_for(records: &str) -> Once {
    Once::new().table(records).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokio_postgres_sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers()
 {
    let Some(mut fx) = fixture("once tokio-postgres duplicates").await else {
        return;
    };
    let t = effects_table(&fx).await;
    let records = unique_name("once_calls");
    let once = records_for(&records);
    once.migrate_tokio_postgres(&mut fx.admin).await.unwrap();
    let runs = Counter::default();
    let gate = Gate::closed();
    let toolbox = Toolbox::builder()
        .policy(fast(5))
        .tool(place(&fx.url, &fx.app, &t, &runs, &gate).once(once))
        .build()
        .unwrap();

    let calls: Vec<_> = (0..16)
        .map(|_| {
            let toolbox = toolbox.clone();
            tokio::spawn(async move {
                toolbox
                    .invoke(&anyone(), "place", json!({"item": 3}), "call-dup")
                    .await
            })
        })
        .collect();
    poll_until("the first call's work never started", async || {
        runs.get() >= 1
    })
    .await;
    poll_until("the duplicates never queued on the key", async || {
        let waiting: i64 = fx
            .admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE $2",
                &[&fx.app, &format!("%{records}%")],
            )
            .await
            .unwrap()
            .get(0);
        waiting >= 15
    })
    .await;
    assert_eq!(
        runs.get(),
        1,
        "the duplicates wait; they do not run the work"
    );
    gate.release();
    let mut answers = Vec::new();
    for call in calls {
        answers.push(within(call).await.unwrap());
    }
    let first = answers[0].as_ref().unwrap().clone();
    assert_eq!(first, json!({"item": 3, "effects": 1, "note": "placed"}));
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.as_ref().unwrap(), &first, "answer {i}");
    }
    assert_eq!(runs.get(), 1, "the work ran once");
    assert_eq!(count(&fx, &t).await, 1, "one effect");
    assert_eq!(count(&fx, &records).await, 1);
    drop_tables(&fx, &[&t, &records]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_business_error_is_recorded_its_writes_rolled_back_and_replayed() {
    let Some(fx) = fixture("once tokio-postgres business error").await else {
        return;
    };
    let t = effects_table(&fx).await;
    let records = unique_name("once_calls");
    let runs = Counter::default();
    let toolbox = Toolbox::builder()
        .policy(fast(3))
        .tool(place(&fx.url, &fx.app, &t, &runs, &Gate::open()).once(records_for(&records)))
        .build()
        .unwrap();

    let first = toolbox
        .invoke(&anyone(), "place", json!({"item": -5}), "call-b")
        .await;
    let Err(InvokeError::Failed(failure)) = &first else {
        panic!("{first:?}");
    };
    assert_eq!(failure.kind(), FailureKind::Business);
    assert_eq!(failure.to_string(), "place: there is no item -5");
    assert_eq!(failure.attempts().len(), 1);
    assert_eq!(failure.attempts()[0].verdict(), Verdict::Permanent);

    let again = toolbox
        .invoke(&anyone(), "place", json!({"item": -5}), "call-b")
        .await;
    assert_eq!(answer(&again), answer(&first), "the same business error");
    assert_eq!(runs.get(), 1, "the work did not run again");
    assert_eq!(count(&fx, &t).await, 0, "the work's insert was rolled back");
    let (status, output, kind) = record(&fx, &records, "call-b").await;
    assert_eq!((status.as_str(), output), ("error", None));
    assert_eq!(kind.as_deref(), Some("unknown_item"));
    drop_tables(&fx, &[&t, &records]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_the_table_is_created_on_first_use_replayed_migrated_and_pruned() {
    let Some(mut fx) = fixture("once tokio-postgres migrate prune").await else {
        return;
    };
    let t = effects_table(&fx).await;
    let records = unique_name("once_calls");
    let once = records_for(&records);
    let runs = Counter::default();
    let toolbox = Toolbox::builder()
        .policy(fast(3))
        .tool(place(&fx.url, &fx.app, &t, &runs, &Gate::open()).once(once.clone()))
        .build()
        .unwrap();
    // No table yet: the first call creates it; its failed claim is not one of its attempts.
    let first = toolbox
        .invoke(&anyone(), "place", json!({"item": 1}), "call-1")
        .await
        .unwrap();
    assert_eq!(first, json!({"item": 1, "effects": 1, "note": "placed"}));
    let again = toolbox
        .invoke(&anyone(), "place", json!({"item": 1}), "call-1")
        .await
        .unwrap();
    assert_eq!(again, first, "replayed");
    toolbox
        .invoke(&anyone(), "place", json!({"item": 2}), "call-2")
        .await
        .unwrap();
    assert_eq!(runs.get(), 2);
    let (status, output, _) = record(&fx, &records, "call-1").await;
    assert_eq!(status, "ok");
    let output: serde_json::Value = serde_json::from_str(&output.unwrap()).unwrap();
    assert_eq!(output, first);

    once.migrate_tokio_postgres(&mut fx.admin).await.unwrap();
    once.migrate_tokio_postgres(&mut fx.admin).await.unwrap();
    assert_eq!(count(&fx, &records).await, 2, "migrate keeps the records");

    let hour = Duration::from_secs(3600);
    assert_eq!(once.prune_tokio_postgres(&fx.admin, hour).await.unwrap(), 0);
    fx.admin
        .batch_execute(&format!(
            "UPDATE {records} SET created_at = now() - interval '2 hours' WHERE call_key = 'call-1'"
        ))
        .await
        .unwrap();
    assert_eq!(once.prune_tokio_postgres(&fx.admin, hour).await.unwrap(), 1);
    assert_eq!(count(&fx, &records).await, 1);
    // A pruned key is forgotten: the call runs again; the kept one does not.
    toolbox
        .invoke(&anyone(), "place", json!({"item": 1}), "call-1")
        .await
        .unwrap();
    assert_eq!(runs.get(), 3);
    toolbox
        .invoke(&anyone(), "place", json!({"item": 2}), "call-2")
        .await
        .unwrap();
    assert_eq!(runs.get(), 3, "call-2 was kept");
    drop_tables(&fx, &[&t, &records]).await;
}

/// The proxy answers a COMMIT that landed with FATAL 08P01. The runner's one client is
/// gone, so the runner stops (ambiguous); the invocation runs the handler again under the
/// same key (a new client), and the claim finds the record: one effect, one answer. A call
/// re-sent later gets the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_postgres_a_lost_commit_answer_is_resolved_by_the_call_run_again() {
    let Some(mut fx) = fixture("once tokio-postgres commit fault proxy").await else {
        return;
    };
    let t = effects_table(&fx).await;
    let records = unique_name("once_calls");
    let once = records_for(&records);
    once.migrate_tokio_postgres(&mut fx.admin).await.unwrap();
    let proxy = txretry_testkit::CommitFaultProxy::start(&fx.url).unwrap();
    let runs = Counter::default();
    let retried = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let toolbox = {
        let retried = std::sync::Arc::clone(&retried);
        Toolbox::builder()
            .policy(fast(3))
            .on_retry(move |e| {
                retried
                    .lock()
                    .unwrap()
                    .push((e.verdict, e.phase, e.attempt))
            })
            .tool(place(proxy.url(), &fx.app, &t, &runs, &Gate::open()).once(once))
            .build()
            .unwrap()
    };

    proxy.arm_commit_faults(1);
    let first = within(toolbox.invoke(&anyone(), "place", json!({"item": 5}), "call-p"))
        .await
        .unwrap();
    assert_eq!(
        proxy.faults_injected(),
        1,
        "the COMMIT landed, its answer was lost"
    );
    assert_eq!(first, json!({"item": 5, "effects": 1, "note": "placed"}));
    assert_eq!(
        runs.get(),
        1,
        "the second run found the record: the work did not run again"
    );
    assert_eq!(
        *retried.lock().unwrap(),
        [(Verdict::Ambiguous, txretry_core::Phase::Commit, 1)],
        "one retry, of the ambiguous COMMIT"
    );
    assert_eq!(count(&fx, &t).await, 1, "one effect");

    let resent = within(toolbox.invoke(&anyone(), "place", json!({"item": 5}), "call-p"))
        .await
        .unwrap();
    assert_eq!(resent, first);
    assert_eq!(runs.get(), 1);
    assert_eq!(count(&fx, &t).await, 1, "one effect");
    assert_eq!(count(&fx, &records).await, 1);
    drop_tables(&fx, &[&t, &records]).await;
}
