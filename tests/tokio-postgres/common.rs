//! Shared helpers: connections, tables, a recording policy, lock-wait polling.

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls, Transaction};
use txretry_testkit::wait::poll_until;

/// The server URL, or `None` when the test must skip (txretry-testkit printed why).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A new session; its connection future runs on the runtime until the client is dropped.
pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to postgres");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Waits until the client's connection task has ended (it may still be winding down when
/// an error arrives). Polls; panics after 30 s.
pub async fn wait_until_closed(client: &Client) {
    poll_until("the client's connection never closed", async || {
        client.is_closed()
    })
    .await;
}

/// The session's backend process id.
pub async fn backend_pid(client: &Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid")
        .get(0)
}

/// Waits until session `pid` is blocked on a lock (`pg_stat_activity.wait_event_type =
/// 'Lock'`). Polls; panics after 30 s so a broken setup fails instead of hanging.
pub async fn wait_for_lock_wait(observer: &Client, pid: i32) {
    poll_until(format!("session {pid} never waited for a lock"), async || {
        observer
            .query_one(
                "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .expect("poll pg_stat_activity")
            .get(0)
    })
    .await;
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL)` with rows `1..=rows`, v = 0.
pub async fn create_rows(client: &Client, name: &str, rows: i32) {
    client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {name} SELECT g, 0 FROM generate_series(1, {rows}) g;"
        ))
        .await
        .expect("create table");
}

/// The server URL, an observer session and a new table of one row ([`create_rows`]), or
/// `None` when the test must skip.
pub async fn observed_row(test: &str, prefix: &str) -> Option<(String, Client, String)> {
    let url = url(test)?;
    let observer = connect(&url).await;
    let t = table(prefix);
    create_rows(&observer, &t, 1).await;
    Some((url, observer, t))
}

/// A body that loses its session halfway: adds 1 to row 1 of `t`, has `observer` terminate
/// backend `pid` (when given), and adds 1 again, which fails once the backend is gone.
pub async fn bump_around_termination(
    tx: &Transaction<'_>,
    observer: &Client,
    t: &str,
    pid: Option<i32>,
) -> Result<u64, tokio_postgres::Error> {
    let bump = format!("UPDATE {t} SET v = v + 1 WHERE id = 1");
    tx.execute(&bump, &[]).await?;
    if let Some(pid) = pid {
        let killed: bool = observer
            .query_one("SELECT pg_terminate_backend($1)", &[&pid])
            .await?
            .get(0);
        assert!(killed, "backend {pid} was not terminated");
    }
    tx.execute(&bump, &[]).await
}

/// The value of row `id`.
pub async fn value(client: &Client, name: &str, id: i32) -> i64 {
    client
        .query_one(&format!("SELECT v FROM {name} WHERE id = $1"), &[&id])
        .await
        .expect("read row")
        .get(0)
}

/// Drops the tables.
pub async fn drop_tables(client: &Client, names: &[&str]) {
    for name in names {
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
            .await
            .expect("drop table");
    }
}

pub use txretry_testkit::record::{Seen, recording};

/// A recording policy of 2 attempts that rides out a lost session for up to 10 s (a
/// `Reconnecting` client's runs that lose their backend).
pub fn riding_out_a_lost_session() -> (txretry::RetryPolicy, Seen) {
    let (policy, seen) = recording(2);
    let policy = policy
        .failover(std::time::Duration::from_secs(10))
        .build()
        .unwrap();
    (policy, seen)
}

/// Asserts that `seen` judged one failure, in the body (before COMMIT was sent), of a kind
/// `kind` accepts.
pub fn assert_one_lost_session_in_the_body(
    seen: &Seen,
    kind: impl Fn(txretry::TransientKind) -> bool,
) {
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert!(
        matches!(judged[0].verdict, txretry::Verdict::Transient(k) if kind(k)),
        "{judged:?}"
    );
    assert_eq!(judged[0].phase, txretry::Phase::Body, "{judged:?}");
}

/// `Code::SqlState` for a literal.
pub fn sqlstate(code: &str) -> txretry::Code {
    txretry::Code::SqlState(txretry::SqlState::new(code).expect("a SQLSTATE"))
}

/// A deadlock on rows 1 and 2 of a table, staged between the runner's session A and a
/// second session B. A checks for deadlocks after 100 ms, B only after 10 s: A is the
/// victim. B, spawned, waits until A holds row 1, then locks row 2, waits for row 1, adds
/// 10 to both rows and commits.
pub struct Deadlock {
    b_pid: i32,
    a_locked: Option<oneshot::Sender<()>>,
    session_b: JoinHandle<Result<(), tokio_postgres::Error>>,
}

impl Deadlock {
    /// Connects A (returned, for the runner) and B, and spawns B's transaction on `table`.
    pub async fn stage(url: &str, table: &str) -> (Client, Deadlock) {
        let a = connect(url).await;
        a.batch_execute("SET deadlock_timeout = '100ms'")
            .await
            .unwrap();
        let b = connect(url).await;
        b.batch_execute("SET deadlock_timeout = '10s'")
            .await
            .unwrap();
        let b_pid = backend_pid(&b).await;
        let (a_locked_tx, a_locked) = oneshot::channel::<()>();
        let b_sql = format!(
            "BEGIN;
             UPDATE {table} SET v = v + 10 WHERE id = 2;
             UPDATE {table} SET v = v + 10 WHERE id = 1;
             COMMIT;"
        );
        let session_b = tokio::spawn(async move {
            a_locked.await.unwrap();
            b.batch_execute(&b_sql).await
        });
        let deadlock = Deadlock {
            b_pid,
            a_locked: Some(a_locked_tx),
            session_b,
        };
        (a, deadlock)
    }

    /// For A's transaction, right after it updated row 1: the first time, lets B go and
    /// returns once B holds row 2 and waits for row 1, so that A's update of row 2 closes
    /// the cycle. Does nothing on later attempts.
    pub async fn a_holds_row_1(&mut self, observer: &Client) {
        if let Some(signal) = self.a_locked.take() {
            signal.send(()).unwrap();
            wait_for_lock_wait(observer, self.b_pid).await;
        }
    }

    /// Waits for B's transaction, which commits once A's was rolled back or aborted.
    pub async fn b_commits(self) {
        self.session_b
            .await
            .unwrap()
            .expect("session B commits once A's transaction is out of its way");
    }
}

/// The runner's COMMIT on `client` held on the server and its backend terminated
/// (txretry-testkit's `HeldCommit`, on a table `t` created here through the server at
/// `direct`): the runner returns the server's 57P01 or the driver's closed connection,
/// judged ambiguous at COMMIT, the connection unusable, the closure not run again; and the
/// row did not land (the trigger never got its lock). Returns the session terminated, for
/// the caller to check it was `client`'s.
pub async fn commit_terminated(
    direct: &str,
    t: &str,
    client: &mut Client,
) -> txretry_testkit::held_commit::Terminated {
    use txretry::{Code, KindSet, Phase, StopReason, Verdict};

    let observer = connect(direct).await;
    observer
        .batch_execute(&format!("CREATE TABLE {t} (note text NOT NULL)"))
        .await
        .expect("create table");
    let mut held = txretry_testkit::held_commit::HeldCommit::install(direct, t).await;
    let killer = held.terminate_in_commit();

    let (policy, seen) = recording(5);
    let policy = policy.retry_on(KindSet::ALL).build().unwrap();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("INSERT INTO {t} VALUES ('order 19')"), &[])
            .await
    })
    .await
    .expect_err("the backend was terminated during COMMIT");
    let terminated = killer.await.unwrap();
    eprintln!("commit terminated: the runner returned {err:?}");

    // The server's 57P01 (admin_shutdown), or the driver's "connection closed" / I/O error.
    let code = err.error().code().cloned();
    assert!(
        code.as_ref() == Some(&tokio_postgres::error::SqlState::ADMIN_SHUTDOWN)
            || err.error().is_closed()
            || code.is_none(),
        "{err:?}"
    );
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Ambiguous, "{outcome:?}");
    assert!(outcome.may_have_committed());
    assert!(
        outcome.code() == Some(sqlstate("57P01"))
            || matches!(outcome.code(), Some(Code::Driver(_))),
        "{outcome:?}"
    );
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::ConnectionUnusable);
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.retried().is_empty());

    // The trigger never got its lock, so the COMMIT never completed: the server rolled the
    // transaction back when the backend exited. (The client could not know that.)
    let rows: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "the row did not land, and certainly not twice");

    drop_tables(&observer, &[t]).await;
    held.remove().await;
    terminated
}
