//! Integration tests of `txretry::sqlx` on PostgreSQL (feature `sqlx-postgres`): deadlocks,
//! serialization failures and lock timeouts provoked for real between two sessions, and
//! recovered by the runner; the commit boundary through a fault-injecting proxy; errors a
//! closure swallowed. Needs `TXRETRY_POSTGRES_URL` (or Docker); see txretry-testkit.

#[path = "../shared/admission/mod.rs"]
mod admission;
mod admission_db;

// Tests written once for sqlx on PostgreSQL and on MySQL; `dialect` says how they differ.
#[path = "../sqlx-shared/admission_run.rs"]
mod admission_run;
#[path = "../sqlx-shared/business.rs"]
mod business;
#[path = "../sqlx-shared/cancelled_begin.rs"]
mod cancelled_begin;
#[path = "../sqlx-shared/commit_fault.rs"]
mod commit_fault;
mod common;
mod connection;
mod contention;
mod dialect;
mod dropped;
mod options;
mod primary;
mod raise_exception;
mod serialization;
mod spawn;
mod swallowed_error;
mod tls;
mod unique;

#[path = "../sqlx-shared/bank.rs"]
mod bank;
#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/lost_commit.rs"]
mod lost_commit;
#[path = "../shared/transfers.rs"]
mod transfers;
