//! Point 3: committed work is never re-run. Only the failing transaction is retried (in
//! place, by its runner); the handler runs again only when nothing in its attempt committed.

use serde_json::{Value, json};
use txretry_tool::{BoxError, FailureKind, InvokeError};

use crate::common::{Counter, Db, Holder, call, failure, runner_bump, shared_tool, toolbox};

const SCHEMA: &str = "CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
                      CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                      INSERT INTO t VALUES (1, 0);";

/// What a call of `ship` left: the database, the handler's runs, tx2's attempts, and the
/// answer.
struct Shipped {
    db: Db,
    runs: u32,
    tx2_attempts: u32,
    answer: Result<Value, InvokeError>,
}

/// Calls a tool `ship` under a budget of 5 on a database of its own. Its handler runs tx1
/// (through the runner, commits a log row; under `ctx.policy()`, or with `variant` under a
/// variant of it built with `to_builder`); then the other writer takes the lock and tx2
/// runs: outside any runner when `tx2_in_runner` is false, else through the runner (which
/// releases the other writer after its first failure).
async fn ship(tx2_in_runner: bool, variant: bool) -> Shipped {
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let (runs, tx2_attempts) = (Counter::default(), Counter::default());
    let shared = (
        pool.clone(),
        db.path().to_owned(),
        runs.clone(),
        tx2_attempts.clone(),
    );
    let tool = shared_tool(
        "ship",
        "",
        shared,
        move |ctx, (pool, path, runs, tx2_attempts)| async move {
            runs.bump();
            let tx1_policy = if variant {
                let attempts = ctx.policy().max_attempts() + 1;
                ctx.policy().to_builder().max_attempts(attempts).build()?
            } else {
                ctx.policy().clone()
            };
            txretry_sqlx::transaction(&pool, &tx1_policy, async |tx| {
                sqlx::query("INSERT INTO log (note) VALUES ('tx1')")
                    .execute(&mut **tx)
                    .await
                    .map(drop)
            })
            .await?;

            let holder = std::sync::Arc::new(Holder::empty());
            holder.arm_at(&path);
            if tx2_in_runner {
                runner_bump(&pool, ctx.policy(), tx2_attempts, Some(holder)).await?;
            } else {
                tx2_attempts.bump();
                let r = sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await;
                holder.release();
                r?;
            }
            Ok::<_, BoxError>("shipped")
        },
    );
    let answer = call(&toolbox(5, tool), "ship", "c").await;
    Shipped {
        db,
        runs: runs.get(),
        tx2_attempts: tx2_attempts.get(),
        answer,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_committed_tx1_then_transient_tx2_outside_the_runner_is_not_rerun() {
    committed_tx1_is_not_rerun(false).await;
}

/// A variant of the call's policy (`ctx.policy().to_builder()…build()`) keeps the call's
/// budget, through which the call learns that tx1 committed: it is not run again either.
/// (`to_builder` dropped the budget: the handler ran again and tx1 committed twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_committed_tx1_under_a_variant_of_the_policy_is_not_rerun() {
    committed_tx1_is_not_rerun(true).await;
}

async fn committed_tx1_is_not_rerun(variant: bool) {
    let shipped = ship(false, variant).await;
    let f = failure(shipped.answer);

    assert_eq!(
        shipped.runs, 1,
        "tx1 committed in that attempt: the handler is not run again"
    );
    assert_eq!(shipped.tx2_attempts, 1);
    assert_eq!(
        shipped.db.scalar("SELECT count(*) FROM log"),
        1,
        "tx1 is in the database once"
    );
    assert_eq!(f.kind(), FailureKind::NotRestartable);
    assert!(f.committed());
    assert!(f.kind().may_have_taken_effect());
    assert_eq!(
        f.to_string(),
        "ship: failed (busy) after part of its work was committed; it was not run again, check its effects before trying again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_transient_tx2_inside_the_runner_is_retried_in_place() {
    let shipped = ship(true, false).await;

    assert_eq!(shipped.answer.unwrap(), json!("shipped"));
    assert_eq!(shipped.runs, 1, "the handler ran once");
    assert_eq!(shipped.tx2_attempts, 2, "only tx2 ran again");
    assert_eq!(shipped.db.scalar("SELECT count(*) FROM log"), 1, "tx1 once");
    assert_eq!(shipped.db.scalar("SELECT v FROM t"), 1, "tx2 once");
}
