//! Point 3: committed work is never re-run. Only the failing transaction is retried (in
//! place, by its runner); the handler runs again only when nothing in its attempt committed.

use std::path::PathBuf;

use serde_json::json;
use txretry_core::{SqliteBegin, TxOptions};
use txretry_tool::{BoxError, FailureKind, Tool, ToolContext, Toolbox};

use crate::common::{Counter, Db, Holder, NoArgs, anyone, failure, fast};

const SCHEMA: &str = "CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT NOT NULL);
                      CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                      INSERT INTO t VALUES (1, 0);";

/// Tx1 (through the runner, commits a log row); then the other writer takes the lock and
/// tx2 runs: outside any runner when `tx2_in_runner` is false, else through the runner
/// (which releases the other writer after its first failure).
fn two_transactions(
    pool: &sqlx::SqlitePool,
    path: PathBuf,
    runs: &Counter,
    tx2_attempts: &Counter,
    tx2_in_runner: bool,
) -> Tool {
    let (pool, runs, tx2_attempts) = (pool.clone(), runs.clone(), tx2_attempts.clone());
    Tool::new("ship", "", move |ctx: ToolContext, _: NoArgs| {
        let (pool, path, runs, tx2_attempts) = (
            pool.clone(),
            path.clone(),
            runs.clone(),
            tx2_attempts.clone(),
        );
        async move {
            runs.bump();
            txretry_sqlx::transaction(&pool, ctx.policy(), async |tx| {
                sqlx::query("INSERT INTO log (note) VALUES ('tx1')")
                    .execute(&mut **tx)
                    .await
                    .map(drop)
            })
            .await?;

            let holder = std::sync::Arc::new(Holder::empty());
            holder.arm_at(&path);
            if tx2_in_runner {
                let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
                txretry_sqlx::transaction_with(&pool, ctx.policy(), &deferred, async move |tx| {
                    let attempt = tx2_attempts.bump();
                    let r = sqlx::query("UPDATE t SET v = v + 1")
                        .execute(&mut **tx)
                        .await;
                    if attempt == 1 {
                        holder.release();
                    }
                    r.map(drop)
                })
                .await?;
            } else {
                tx2_attempts.bump();
                let r = sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await;
                holder.release();
                r?;
            }
            Ok::<_, BoxError>("shipped")
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_committed_tx1_then_transient_tx2_outside_the_runner_is_not_rerun() {
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let (runs, tx2_attempts) = (Counter::default(), Counter::default());
    let toolbox = Toolbox::builder()
        .policy(fast(5))
        .tool(two_transactions(
            &pool,
            db.path().to_owned(),
            &runs,
            &tx2_attempts,
            false,
        ))
        .build()
        .unwrap();

    let f = failure(toolbox.invoke(&anyone(), "ship", json!({}), "c").await);

    assert_eq!(
        runs.get(),
        1,
        "tx1 committed in that attempt: the handler is not run again"
    );
    assert_eq!(tx2_attempts.get(), 1);
    assert_eq!(
        db.scalar("SELECT count(*) FROM log"),
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
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let (runs, tx2_attempts) = (Counter::default(), Counter::default());
    let toolbox = Toolbox::builder()
        .policy(fast(5))
        .tool(two_transactions(
            &pool,
            db.path().to_owned(),
            &runs,
            &tx2_attempts,
            true,
        ))
        .build()
        .unwrap();

    let out = toolbox
        .invoke(&anyone(), "ship", json!({}), "c")
        .await
        .unwrap();

    assert_eq!(out, json!("shipped"));
    assert_eq!(runs.get(), 1, "the handler ran once");
    assert_eq!(tx2_attempts.get(), 2, "only tx2 ran again");
    assert_eq!(db.scalar("SELECT count(*) FROM log"), 1, "tx1 once");
    assert_eq!(db.scalar("SELECT v FROM t"), 1, "tx2 once");
}
