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
mod commit_boundary;
#[path = "../diesel-async-shared/common.rs"]
mod common;
mod connection_lost;
mod db;
mod deadlock;
mod lock_wait_timeout;
#[path = "../diesel-shared/read_only.rs"]
mod read_only;
