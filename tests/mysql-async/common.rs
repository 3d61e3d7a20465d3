//! Shared helpers: pools, tables, a recording policy, lock-wait polling.

use mysql_async::prelude::*;
use mysql_async::{Conn, Pool, TxOpts};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use txretry_testkit::wait::poll_until;

/// The server URL, or `None` when the test must skip (txretry-testkit printed why).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// A pool for `url` with the extra `params` (`a=1&b=2`) and `prefer_socket=false`.
///
/// By default mysql_async asks the server for its unix socket (`@@socket`) and reconnects
/// through it when the URL names 127.0.0.1: against a container (or a proxy) on a machine
/// that also runs a server of its own, that would quietly test the host's server instead.
pub fn pool_with(url: &str, params: &str) -> Pool {
    Pool::new(with_params(url, params).as_str())
}

/// A pool as [`pool_with`] makes it, whose new sessions first run `init`.
pub fn pool_with_init(url: &str, params: &str, init: Vec<String>) -> Pool {
    let opts = mysql_async::Opts::from_url(&with_params(url, params)).expect("a MySQL URL");
    Pool::new(mysql_async::OptsBuilder::from_opts(opts).init(init))
}

/// A connection of its own (outside any pool) to `url`, with `prefer_socket=false` (see
/// [`pool_with`]): observers and lock holders must reach the same server as the pools.
pub async fn direct_conn(url: &str) -> Conn {
    Conn::from_url(with_params(url, "").as_str())
        .await
        .expect("a direct connection")
}

/// `url` with `prefer_socket=false` and the extra `params` in its query.
fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    let extra = if params.is_empty() {
        String::new()
    } else {
        format!("&{params}")
    };
    format!("{url}{sep}prefer_socket=false{extra}")
}

/// A pool of its own for one test.
pub fn pool(url: &str) -> Pool {
    pool_with(url, "")
}

/// A pool of its own holding exactly one connection, which it keeps when idle
/// (`pool_min=1`: with a minimum of 0 mysql_async closes every returned connection) and
/// does not reset between uses (`reset_connection=false`): the session a test leaves
/// behind is the one the next caller gets, so a test can tell whether the runner pooled a
/// connection or closed it.
pub fn single_connection_pool(url: &str) -> Pool {
    pool_with(url, "pool_min=1&pool_max=1&reset_connection=false")
}

/// The session's connection id (what `KILL` and `innodb_trx` name).
pub async fn connection_id<Q: Queryable>(conn: &mut Q) -> u64 {
    conn.query_first("SELECT CONNECTION_ID()")
        .await
        .expect("CONNECTION_ID()")
        .expect("a row")
}

/// Waits until session `id` is executing `statement` (`information_schema.processlist`).
/// Polls; panics after 30 s so a broken setup fails instead of hanging.
///
/// `information_schema.innodb_trx` would say "LOCK WAIT" directly, but InnoDB refreshes
/// that table only when nobody has read it for 100 ms, so polling it never sees a change.
pub async fn wait_for_statement(observer: &mut Conn, id: u64, statement: &str) {
    poll_until(format!("session {id} never ran {statement}"), async || {
        let running: Option<i64> = observer
            .exec_first(
                "SELECT count(*) FROM information_schema.processlist WHERE id = ? AND info = ?",
                (id, statement),
            )
            .await
            .expect("poll processlist");
        running == Some(1)
    })
    .await;
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB` with rows
/// `1..=rows`, v = 0.
pub async fn create_rows(conn: &mut Conn, name: &str, rows: i32) {
    conn.query_drop(format!(
        "CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB"
    ))
    .await
    .expect("create table");
    conn.exec_batch(
        format!("INSERT INTO {name} (id, v) VALUES (?, 0)"),
        (1..=rows).map(|id| (id,)),
    )
    .await
    .expect("insert rows");
}

/// The value of row `id`.
pub async fn value(conn: &mut Conn, name: &str, id: i32) -> i64 {
    conn.exec_first(format!("SELECT v FROM {name} WHERE id = ?"), (id,))
        .await
        .expect("read row")
        .expect("the row exists")
}

/// `SELECT count(*)` of a table.
pub async fn count(conn: &mut Conn, name: &str) -> i64 {
    conn.query_first(format!("SELECT count(*) FROM {name}"))
        .await
        .expect("count")
        .expect("a row")
}

/// Drops the tables.
pub async fn drop_tables(conn: &mut Conn, names: &[&str]) {
    for name in names {
        conn.query_drop(format!("DROP TABLE IF EXISTS {name}"))
            .await
            .expect("drop table");
    }
}

pub use txretry_testkit::outcome::assert_outcome;
pub use txretry_testkit::record::recording;

/// A test's pool of its own, an observer session from it, and a new table `t` with rows
/// `1..=rows` ([`create_rows`]).
pub struct Rows {
    pub pool: Pool,
    pub observer: Conn,
    pub t: String,
}

impl Rows {
    /// `None` when the test must skip.
    pub async fn start(test: &str, prefix: &str, rows: i32) -> Option<Rows> {
        let url = url(test)?;
        let pool = pool(&url);
        let mut observer = pool.get_conn().await.unwrap();
        let t = table(prefix);
        create_rows(&mut observer, &t, rows).await;
        Some(Rows { pool, observer, t })
    }

    /// The value of row `id`, read by the observer.
    pub async fn value(&mut self, id: i32) -> i64 {
        value(&mut self.observer, &self.t, id).await
    }

    /// Drops the table and closes the pool.
    pub async fn finish(mut self) {
        drop_tables(&mut self.observer, &[&self.t]).await;
        drop(self.observer);
        self.pool.disconnect().await.unwrap();
    }
}

/// An error the runner returned at once: permanent, from the body, after one attempt, with
/// `code` (`None`: the closure's own error).
#[track_caller]
pub fn assert_permanent_once<E: std::fmt::Debug>(
    err: &txretry::TxError<E>,
    code: Option<txretry::Code>,
) {
    assert_outcome(
        err,
        txretry::Verdict::Permanent,
        txretry::Phase::Body,
        1,
        txretry::StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), code, "{err:?}");
}

/// The server error number, if `err` is a server error.
pub fn errno(err: &mysql_async::Error) -> Option<u16> {
    match err {
        mysql_async::Error::Server(server) => Some(server.code),
        _ => None,
    }
}

/// Whether session `id` still exists on the server (`information_schema.processlist`).
pub async fn session_exists(observer: &mut Conn, id: u64) -> bool {
    let n: Option<i64> = observer
        .exec_first(
            "SELECT count(*) FROM information_schema.processlist WHERE id = ?",
            (id,),
        )
        .await
        .expect("read processlist");
    n == Some(1)
}

/// Waits until session `id` is gone from the server. Polls; panics after 30 s, so a
/// connection that was pooled instead of closed fails the test instead of hanging it.
pub async fn wait_until_session_gone(observer: &mut Conn, id: u64) {
    poll_until(format!("session {id} is still connected"), async || {
        !session_exists(observer, id).await
    })
    .await;
}

/// `CREATE TABLE {name} (note varchar(20) NOT NULL) ENGINE=InnoDB`: no unique key, so a
/// second copy of a row is stored, not rejected.
pub async fn create_log(conn: &mut Conn, name: &str) {
    conn.query_drop(format!(
        "CREATE TABLE {name} (note varchar(20) NOT NULL) ENGINE=InnoDB"
    ))
    .await
    .expect("create log table");
}

/// A deadlock on rows 1 and 2 of a table made by `create_rows(…, 20)`, staged between the
/// runner's transaction A and a second session B. InnoDB rolls back the lighter
/// transaction (fewer rows changed and locked), whichever request closed the cycle; B
/// changes rows 3..=20 first, so A is the victim. B, spawned, waits until A holds row 1,
/// then changes rows 3..=20 and row 2, waits for row 1, adds 10 to each and commits.
pub struct Deadlock {
    b_id: u64,
    b_waits: String,
    a_locked: Option<oneshot::Sender<()>>,
    session_b: JoinHandle<Result<(), mysql_async::Error>>,
}

impl Deadlock {
    /// Takes B from `pool` and spawns its transaction on `table`.
    pub async fn stage(pool: &Pool, table: &str) -> Deadlock {
        let mut b = pool.get_conn().await.unwrap();
        let b_id = connection_id(&mut b).await;
        let (a_locked_tx, a_locked) = oneshot::channel::<()>();
        let b_waits = format!("UPDATE {table} SET v = v + 10 WHERE id = 1");
        let statements = [
            format!("UPDATE {table} SET v = v + 10 WHERE id >= 3"),
            format!("UPDATE {table} SET v = v + 10 WHERE id = 2"),
            b_waits.clone(),
        ];
        let session_b = tokio::spawn(async move {
            a_locked.await.unwrap();
            let mut tx = b.start_transaction(TxOpts::default()).await?;
            for statement in statements {
                tx.query_drop(statement).await?;
            }
            tx.commit().await
        });
        Deadlock {
            b_id,
            b_waits,
            a_locked: Some(a_locked_tx),
            session_b,
        }
    }

    /// For A's transaction, right after it updated row 1: the first time, lets B go and
    /// returns once B holds row 2 and runs its update of row 1 (waiting for A), so that
    /// A's update of row 2 closes the cycle. Does nothing on later attempts.
    pub async fn a_holds_row_1(&mut self, observer: &mut Conn) {
        if let Some(signal) = self.a_locked.take() {
            signal.send(()).unwrap();
            wait_for_statement(observer, self.b_id, &self.b_waits).await;
        }
    }

    /// Waits for B's transaction, which commits once A's was rolled back.
    pub async fn b_commits(self) {
        self.session_b
            .await
            .unwrap()
            .expect("session B commits once A was rolled back");
    }
}
