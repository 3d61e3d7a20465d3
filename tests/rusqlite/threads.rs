//! The runner is blocking; from async code it runs in `spawn_blocking`, with a `move`
//! closure that owns the connection (a `rusqlite::Connection` is `Send`).

use txretry::RetryPolicy;

use crate::common::Db;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runner_runs_inside_spawn_blocking() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)")
        .unwrap();
    let policy = RetryPolicy::default();

    let task = tokio::task::spawn_blocking(move || {
        let result: Result<i64, txretry::TxError<rusqlite::Error>> =
            txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
                tx.execute("INSERT INTO t VALUES (1)", [])?;
                tx.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            });
        (conn, result)
    });
    let (conn, result) = task.await.expect("blocking task");
    assert_eq!(result.unwrap(), 1);
    assert!(conn.is_autocommit());
}
