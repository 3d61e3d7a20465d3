//! Integration tests of the Diesel adapter on MySQL/MariaDB (`MysqlConnection`, through
//! the facade's `txretry::diesel`), against a real server (`TXRETRY_MYSQL_URL`; see
//! txretry-testkit). Diesel keeps only the SQLSTATE of a MySQL error; these tests show
//! the errno recovered for real deadlocks and lock-wait timeouts, with the sessions
//! coordinated through channels and `information_schema.processlist`, never by timing.

#[path = "../diesel-shared/business.rs"]
mod business;
#[path = "../diesel-shared/calls.rs"]
mod calls;
#[path = "../diesel-shared/mysql_commit_boundary.rs"]
mod commit_boundary;
mod common;
#[path = "../diesel-shared/read_only.rs"]
mod read_only;

#[path = "../diesel-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../diesel-shared/failure.rs"]
mod failure;
#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/transfers.rs"]
mod transfers;
