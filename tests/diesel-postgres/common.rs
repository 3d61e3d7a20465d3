//! Shared helpers: connections, tables, polling the server.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer};

use txretry::Code;
pub use txretry_testkit::outcome::assert_outcome;
pub use txretry_testkit::record::recording;

/// This binary's connection type.
pub type Conn = PgConnection;

/// This binary's name, for test names and table prefixes.
pub const BINARY: &str = "diesel_postgres";

/// The SQLSTATE of a duplicate key on this server.
pub const UNIQUE_VIOLATION: &str = "23505";

/// The server URL, or `None` when the test must skip (txretry-testkit printed why; with
/// `TXRETRY_REQUIRE_DB=1` it panics instead).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A new session.
pub fn connect(url: &str) -> PgConnection {
    PgConnection::establish(url).expect("connect to postgres")
}

/// Runs statements outside the runner.
pub fn exec(conn: &mut PgConnection, sql: &str) {
    conn.batch_execute(sql).expect(sql);
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `SELECT count(*) FROM {table} WHERE {condition}`.
pub fn count(conn: &mut PgConnection, table: &str, condition: &str) -> i64 {
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM {table} WHERE {condition}"
    ))
    .get_result::<Count>(conn)
    .expect("count rows")
    .n
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL)` with rows `1..=rows`.
pub fn create_rows(conn: &mut PgConnection, name: &str, rows: i32) {
    exec(
        conn,
        &format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {name} SELECT g, 0 FROM generate_series(1, {rows}) g;"
        ),
    );
}

/// The value of row `id`.
pub fn value(conn: &mut PgConnection, name: &str, id: i32) -> i64 {
    #[derive(QueryableByName)]
    struct V {
        #[diesel(sql_type = BigInt)]
        v: i64,
    }
    diesel::sql_query(format!("SELECT v FROM {name} WHERE id = $1"))
        .bind::<Integer, _>(id)
        .get_result::<V>(conn)
        .expect("read row")
        .v
}

/// Drops the tables.
pub fn drop_tables(conn: &mut PgConnection, names: &[&str]) {
    for name in names {
        exec(conn, &format!("DROP TABLE IF EXISTS {name}"));
    }
}

/// `Code::SqlState` for a literal.
pub fn sqlstate(code: &str) -> txretry::Code {
    txretry::Code::SqlState(txretry::SqlState::new(code).expect("a SQLSTATE"))
}

/// The SQLSTATE Diesel kept on a database error.
pub fn diesel_sqlstate(err: &diesel::result::Error) -> Option<String> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => {
            info.sqlstate().map(|s| s.as_str().to_owned())
        }
        _ => None,
    }
}

/// What the commit-fault proxy's answer looks like through libpq: the pooler's FATAL
/// arrives together with the closed socket, and libpq reports the closed connection
/// ("server closed the connection unexpectedly", no SQLSTATE), which Diesel marks
/// `ClosedConnection` and the adapter reads as this code.
pub fn lost_commit_code(err: &diesel::result::Error) -> Code {
    assert!(
        matches!(
            err,
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::ClosedConnection,
                _
            )
        ),
        "{err:?}"
    );
    Code::Driver("connection closed")
}
