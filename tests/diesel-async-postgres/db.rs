//! This binary's helpers, async: connections, tables, polling the server. The shared
//! scenarios reach them through `common` (blocking).

use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Integer};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};

pub use txretry_testkit::outcome::assert_outcome;
pub use txretry_testkit::record::recording;

/// This binary's connection type.
pub type Conn = AsyncPgConnection;

/// This binary's name, for test names and table prefixes.
pub const BINARY: &str = "diesel_async_postgres";

/// The SQLSTATE of a duplicate key on this server.
pub const UNIQUE_VIOLATION: &str = "23505";

/// The server URL, or `None` when the test must skip (txretry-testkit printed why; with
/// `TXRETRY_REQUIRE_DB=1` it panics instead).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// A new session.
pub async fn connect(url: &str) -> Conn {
    AsyncPgConnection::establish(url)
        .await
        .expect("connect to postgres")
}

/// Runs statements outside the runner.
pub async fn exec(conn: &mut Conn, sql: &str) {
    conn.batch_execute(sql).await.expect(sql);
}

#[derive(QueryableByName)]
struct Number {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `SELECT count(*) FROM {table} WHERE {condition}`.
pub async fn count(conn: &mut Conn, table: &str, condition: &str) -> i64 {
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM {table} WHERE {condition}"
    ))
    .get_result::<Number>(conn)
    .await
    .expect("count rows")
    .n
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL)` with rows `1..=rows`.
pub async fn create_rows(conn: &mut Conn, name: &str, rows: i32) {
    exec(
        conn,
        &format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {name} SELECT g, 0 FROM generate_series(1, {rows}) g;"
        ),
    )
    .await;
}

/// The value of row `id`.
pub async fn value(conn: &mut Conn, name: &str, id: i32) -> i64 {
    diesel::sql_query(format!("SELECT v AS n FROM {name} WHERE id = $1"))
        .bind::<Integer, _>(id)
        .get_result::<Number>(conn)
        .await
        .expect("read row")
        .n
}

/// Drops the tables.
pub async fn drop_tables(conn: &mut Conn, names: &[&str]) {
    for name in names {
        exec(conn, &format!("DROP TABLE IF EXISTS {name}")).await;
    }
}

/// The session's backend process id.
pub async fn backend_pid(conn: &mut Conn) -> i32 {
    diesel::select(diesel::dsl::sql::<Integer>("pg_backend_pid()"))
        .get_result(conn)
        .await
        .expect("pg_backend_pid")
}

/// Waits until session `pid` is blocked on a lock (`pg_stat_activity`). Polls; panics
/// after 30 s so a broken setup fails instead of hanging.
pub async fn wait_for_lock_wait(observer: &mut Conn, pid: i32) {
    #[derive(QueryableByName)]
    struct Waiting {
        #[diesel(sql_type = Bool)]
        waiting: bool,
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now: Waiting = diesel::sql_query(
            "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) AS waiting \
             FROM pg_stat_activity WHERE pid = $1",
        )
        .bind::<Integer, _>(pid)
        .get_result(observer)
        .await
        .expect("poll pg_stat_activity");
        if now.waiting {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "session {pid} never waited for a lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until session `pid` has left `pg_stat_activity` (it was terminated). Polls;
/// panics after 30 s.
pub async fn wait_until_gone(observer: &mut Conn, pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(observer, "pg_stat_activity", &format!("pid = {pid}")).await > 0 {
        assert!(Instant::now() < deadline, "session {pid} never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `Code::SqlState` for a literal.
pub fn sqlstate(code: &str) -> txretry::Code {
    txretry::Code::SqlState(txretry::SqlState::new(code).expect("a SQLSTATE"))
}

/// The SQLSTATE diesel-async kept on a database error.
pub fn diesel_sqlstate(err: &diesel::result::Error) -> Option<String> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => {
            info.sqlstate().map(|s| s.as_str().to_owned())
        }
        _ => None,
    }
}
