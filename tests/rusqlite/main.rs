//! Integration tests of the rusqlite adapter, through the facade (`txretry::rusqlite`),
//! against real SQLite database files in temporary directories (WAL mode unless a test
//! says otherwise). Every transient error is provoked for real with two connections.
//!
//! One module per topic; `common` holds the database and policy helpers.

mod business_error;
mod busy;
mod busy_snapshot;
mod commit;
mod common;
mod contention;
mod options;
mod read_only;
mod threads;
mod unique_violation;

#[path = "../shared/transfers.rs"]
mod transfers;
