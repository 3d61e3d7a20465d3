//! Integration tests of `txretry::sea_orm` on SQLite (feature `sea-orm-sqlite`):
//! `SQLITE_BUSY` provoked for real by two writers on one database file, and recovered by
//! the runner; in-process admission; what the runner refuses. Needs nothing: each test has
//! its own file.

mod admission;
mod busy;
mod common;
mod options;
mod rolled_back_by_sqlite;

#[path = "../sea-orm-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../shared/transfers.rs"]
mod transfers;
