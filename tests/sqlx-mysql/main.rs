//! Integration tests of `txretry::sqlx` on MySQL / MariaDB (feature `sqlx-mysql`):
//! deadlocks and lock-wait timeouts provoked for real between two sessions, and recovered
//! by the runner; the commit boundary through a fault-injecting proxy. Needs
//! `TXRETRY_MYSQL_URL` (or Docker); see txretry-testkit.

mod business;
mod commit_fault;
mod common;
mod contention;
mod deadlock;
mod lock_wait_timeout;
mod options;
mod unique;
