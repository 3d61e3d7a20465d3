//! Integration tests of the Diesel adapter on SQLite, through the facade
//! (`txretry::diesel`), against real database files in temporary directories. Every
//! transient error is provoked for real with two connections.
//!
//! One module per topic; `common` holds the database and policy helpers and implements
//! `tests/shared/sqlite/`'s `Sqlite` (the scenarios written once for rusqlite and Diesel).

mod business;
/// SQLITE_BUSY between two writers: `tests/shared/sqlite/busy.rs` on Diesel.
mod busy {
    crate::sqlite::busy_tests!(crate::common::Diesel);
}
mod busy_snapshot;
/// Failures at COMMIT: `tests/shared/sqlite/commit.rs` on Diesel.
mod commit {
    crate::sqlite::commit_tests!(crate::common::Diesel);
}
mod common;
mod options;
#[path = "../shared/sqlite/mod.rs"]
mod sqlite;

#[path = "../diesel-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../shared/transfers.rs"]
mod transfers;
