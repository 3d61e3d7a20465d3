//! Integration tests of the Diesel adapter on SQLite, through the facade
//! (`txretry::diesel`), against real database files in temporary directories. Every
//! transient error is provoked for real with two connections.
//!
//! One module per topic; `common` holds the database and policy helpers.

mod business;
mod busy;
mod busy_snapshot;
mod commit;
mod common;
mod options;

#[path = "../diesel-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../shared/transfers.rs"]
mod transfers;
