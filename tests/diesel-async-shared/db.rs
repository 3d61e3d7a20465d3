//! The async helpers both diesel-async binaries use: connections, tables, rows. Written
//! once; each binary's `server` module names its connection type (`Conn`), its server and
//! what only that server has, re-exported here. The shared scenarios reach these through
//! `common` (blocking).

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, RunQueryDsl, SimpleAsyncConnection};

pub use crate::server::*;
pub use txretry_testkit::outcome::assert_outcome;
pub use txretry_testkit::record::recording;

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// A new session.
pub async fn connect(url: &str) -> Conn {
    Conn::establish(url).await.expect("connect to the server")
}

/// Runs statements outside the runner.
pub async fn exec(conn: &mut Conn, sql: &str) {
    conn.batch_execute(sql).await.expect(sql);
}

/// One `bigint` column, `n`.
#[derive(QueryableByName)]
pub struct Number {
    #[diesel(sql_type = BigInt)]
    pub n: i64,
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

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL)` with rows `1..=rows`,
/// v = 0.
pub async fn create_rows(conn: &mut Conn, name: &str, rows: i32) {
    exec(
        conn,
        &format!("CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL){TABLE_OPTIONS}"),
    )
    .await;
    for id in 1..=rows {
        exec(
            conn,
            &format!("INSERT INTO {name} (id, v) VALUES ({id}, 0)"),
        )
        .await;
    }
}

/// The value of row `id`.
pub async fn value(conn: &mut Conn, name: &str, id: i32) -> i64 {
    diesel::sql_query(format!("SELECT v AS n FROM {name} WHERE id = {id}"))
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
