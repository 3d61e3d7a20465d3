//! Integration tests of `txretry::sqlx` on SQLite (feature `sqlx-sqlite`): real BUSY and
//! BUSY_SNAPSHOT failures from two connections on a temp-file WAL database, recovered by
//! the runner. SQLite needs no server.

// Tests written once for sqlx on every database; `dialect` says how SQLite differs.
#[path = "../sqlx-shared/business.rs"]
mod business;
mod busy;
mod busy_snapshot;
mod common;
mod contention;
mod dialect;
mod options;
mod rolled_back_by_sqlite;
mod spawn;
mod unique;

#[path = "../sqlx-shared/bank.rs"]
mod bank;
#[path = "../shared/transfers.rs"]
mod transfers;
