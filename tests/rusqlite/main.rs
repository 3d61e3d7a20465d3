//! Integration tests of the rusqlite adapter, through the facade (`txretry::rusqlite`),
//! against real SQLite database files in temporary directories (WAL mode unless a test
//! says otherwise). Every transient error is provoked for real with two connections.
//!
//! One module per topic; `common` holds the database and policy helpers and implements
//! `tests/shared/sqlite/`'s `Sqlite` (the scenarios written once for rusqlite and Diesel).

mod business_error;
/// SQLITE_BUSY between two writers: `tests/shared/sqlite/busy.rs` on rusqlite.
mod busy {
    crate::sqlite::busy_tests!(crate::common::Rusqlite);
}
mod busy_snapshot;
mod commit;
mod common;
mod contention;
mod options;
mod read_only;
mod threads;
mod unique_violation;

#[path = "../shared/sqlite/mod.rs"]
mod sqlite;
#[path = "../shared/transfers.rs"]
mod transfers;
