//! Integration tests of `txretry::mysql_async` against a real MySQL-protocol server
//! (MariaDB here; `TXRETRY_MYSQL_URL`, see txretry-testkit). Every transient failure is
//! provoked for real, with the sessions coordinated through channels and
//! `information_schema.processlist`, never by timing; a lost COMMIT answer comes from
//! `txretry_testkit::CommitFaultProxy`.

mod common;

#[path = "../shared/admission/mod.rs"]
mod admission;
mod admission_db;
mod business_error;
mod commit_boundary;
mod connection_lost;
mod contention;
mod discarded_connections;
mod options;
mod send_spawn;
mod swallowed_deadlock;
mod tls;
mod unique_violation;

#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/transfers.rs"]
mod transfers;
