//! Integration tests of `txretry::sqlx` on PostgreSQL (feature `sqlx-postgres`): deadlocks,
//! serialization failures and lock timeouts provoked for real between two sessions, and
//! recovered by the runner; the commit boundary through a fault-injecting proxy; errors a
//! closure swallowed. Needs `TXRETRY_POSTGRES_URL` (or Docker); see txretry-testkit.

mod business;
mod commit_fault;
mod common;
mod connection;
mod contention;
mod deadlock;
mod lock_timeout;
mod options;
mod raise_exception;
mod serialization;
mod spawn;
mod swallowed_error;
mod unique;
