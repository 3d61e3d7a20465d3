//! Integration tests of `txretry::mysql_async` against a real MySQL-protocol server
//! (MariaDB here; `TXRETRY_MYSQL_URL`, see txretry-testkit). Every transient failure is
//! provoked for real, with the sessions coordinated through channels and
//! `information_schema.innodb_trx`, never by timing.

mod common;

mod business_error;
mod connection_lost;
mod contention;
mod deadlock;
mod lock_wait_timeout;
mod options;
mod send_spawn;
mod unique_violation;
