//! A blocking `once` tool whose timed-out attempt commits after its timeout: the thread
//! cannot be stopped, the invocation waits for it, and the retry is answered from the
//! record that attempt left (on SQLite, with rusqlite).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use txretry_core::RetryPolicy;
use txretry_tool::{BoxError, Once, Tool, ToolContext, Toolbox};

use crate::common::anyone;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_once_attempt_that_commits_after_its_timeout_is_answered_from_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("late.db"));
    let open = {
        let path = Arc::clone(&path);
        move || {
            let conn = rusqlite::Connection::open(&*path).unwrap();
            conn.busy_timeout(Duration::from_secs(20)).unwrap();
            conn
        }
    };
    open()
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (run INTEGER NOT NULL)")
        .unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let tool = {
        let (open, runs) = (open.clone(), Arc::clone(&runs));
        Tool::blocking("add", "", move |ctx: ToolContext, _: NoArgs| {
            let mut conn = open();
            Ok::<_, BoxError>(ctx.once_rusqlite(&mut conn, |tx| {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                tx.execute("INSERT INTO t (run) VALUES (?1)", [run])?;
                if run == 1 {
                    // Past the timeout: the thread runs on, and commits.
                    std::thread::sleep(Duration::from_millis(600));
                }
                Ok::<_, BoxError>(format!("inserted by run {run}"))
            })?)
        })
        .once(Once::new())
        .timeout(Duration::from_millis(150))
    };
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let toolbox = Toolbox::builder()
        .policy(policy)
        .tool(tool)
        .build()
        .unwrap();
    let out = toolbox
        .invoke(&anyone(), "add", json!({}), "call-late")
        .await
        .expect("the retry replays the record of the attempt that committed late");
    assert_eq!(out, json!("inserted by run 1"));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the work ran once, then was replayed"
    );
    let rows: i64 = open()
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 1);
}
