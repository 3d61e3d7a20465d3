//! Integration tests of the diesel-async adapter on MySQL/MariaDB (`AsyncMysqlConnection`,
//! through the facade's `txretry::diesel::async_transaction`), against a real server
//! (`TXRETRY_MYSQL_URL`; see txretry-testkit). diesel-async keeps only the SQLSTATE and
//! the text of a MySQL error; these tests show the errno recovered for real deadlocks and
//! lock-wait timeouts, with the sessions coordinated through channels and
//! `information_schema.processlist`, never by timing. The scenarios of
//! `tests/diesel-shared/` run here as they do on `MysqlConnection`.

#[path = "../diesel-shared/business.rs"]
mod business;
#[path = "../diesel-async-shared/calls.rs"]
mod calls;
#[path = "../diesel-async-shared/cancelled_begin.rs"]
mod cancelled_begin;
#[path = "../diesel-shared/mysql_commit_boundary.rs"]
mod commit_boundary;
#[path = "../diesel-async-shared/common.rs"]
mod common;
#[path = "../diesel-async-shared/connection_lost.rs"]
mod connection_lost;
#[path = "../diesel-async-shared/db.rs"]
mod db;
#[path = "../diesel-shared/read_only.rs"]
mod read_only;
mod server;

#[path = "../diesel-async-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../diesel-shared/failure.rs"]
mod failure;
#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/transfers.rs"]
mod transfers;
