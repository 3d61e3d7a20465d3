//! Shared helpers: connections, tables, polling the server.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer};

pub use txretry_testkit::outcome::assert_outcome;
pub use txretry_testkit::record::recording;

/// This binary's name, for test names and table prefixes.
pub const BINARY: &str = "diesel_mysql";

/// The SQLSTATE of a duplicate key on this server.
pub const UNIQUE_VIOLATION: &str = "23000";

/// The server URL, or `None` when the test must skip (txretry-testkit printed why; with
/// `TXRETRY_REQUIRE_DB=1` it panics instead).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// A new session.
pub fn connect(url: &str) -> MysqlConnection {
    MysqlConnection::establish(url).expect("connect to mysql")
}

/// Runs statements outside the runner.
pub fn exec(conn: &mut MysqlConnection, sql: &str) {
    conn.batch_execute(sql).expect(sql);
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

#[derive(QueryableByName)]
struct Number {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `SELECT count(*) FROM {table} WHERE {condition}`.
pub fn count(conn: &mut MysqlConnection, table: &str, condition: &str) -> i64 {
    diesel::sql_query(format!(
        "SELECT count(*) AS n FROM {table} WHERE {condition}"
    ))
    .get_result::<Number>(conn)
    .expect("count rows")
    .n
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB` with rows
/// `1..=rows`, v = 0.
pub fn create_rows(conn: &mut MysqlConnection, name: &str, rows: i32) {
    exec(
        conn,
        &format!("CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB"),
    );
    for id in 1..=rows {
        diesel::sql_query(format!("INSERT INTO {name} (id, v) VALUES (?, 0)"))
            .bind::<Integer, _>(id)
            .execute(conn)
            .expect("insert row");
    }
}

/// `CREATE TABLE {name} (note varchar(64) NOT NULL) ENGINE=InnoDB`: no key, so a second
/// run would show as a second row rather than as a duplicate-key error.
pub fn create_log(conn: &mut MysqlConnection, name: &str) {
    exec(
        conn,
        &format!("CREATE TABLE {name} (note varchar(64) NOT NULL) ENGINE=InnoDB"),
    );
}

/// The value of row `id`.
pub fn value(conn: &mut MysqlConnection, name: &str, id: i32) -> i64 {
    diesel::sql_query(format!("SELECT v AS n FROM {name} WHERE id = ?"))
        .bind::<Integer, _>(id)
        .get_result::<Number>(conn)
        .expect("read row")
        .n
}

/// Drops the tables.
pub fn drop_tables(conn: &mut MysqlConnection, names: &[&str]) {
    for name in names {
        exec(conn, &format!("DROP TABLE IF EXISTS {name}"));
    }
}

/// The SQLSTATE and message Diesel kept of a database error.
pub fn kept(err: &diesel::result::Error) -> Option<(String, String)> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => Some((
            info.sqlstate()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            info.message().to_owned(),
        )),
        _ => None,
    }
}
