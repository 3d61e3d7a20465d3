//! The helpers the shared scenarios (`tests/diesel-shared/`) call from a plain `#[test]`:
//! this binary's `db` module, whose async helpers are wrapped here to run to completion
//! on its runtime (these shadow the glob). Written once for both diesel-async binaries;
//! each `db` module names its connection type `Conn`.

pub use crate::db::*;

use crate::calls::block_on;
use crate::db;

/// A new session.
pub fn connect(url: &str) -> Conn {
    block_on(db::connect(url))
}

/// `SELECT count(*) FROM {table} WHERE {condition}`.
pub fn count(conn: &mut Conn, table: &str, condition: &str) -> i64 {
    block_on(db::count(conn, table, condition))
}

/// A table `(id int PRIMARY KEY, v bigint NOT NULL)` with rows `1..=rows`, v = 0.
pub fn create_rows(conn: &mut Conn, name: &str, rows: i32) {
    block_on(db::create_rows(conn, name, rows));
}

/// The value of row `id`.
pub fn value(conn: &mut Conn, name: &str, id: i32) -> i64 {
    block_on(db::value(conn, name, id))
}

/// Runs statements outside the runner.
#[allow(dead_code)] // the Postgres binary's scenarios use it
pub fn exec(conn: &mut Conn, sql: &str) {
    block_on(db::exec(conn, sql));
}

/// Drops the tables.
pub fn drop_tables(conn: &mut Conn, names: &[&str]) {
    block_on(db::drop_tables(conn, names));
}
