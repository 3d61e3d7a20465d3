//! Integration tests of `txretry::sqlx` on MySQL / MariaDB (feature `sqlx-mysql`):
//! deadlocks and lock-wait timeouts provoked for real between two sessions, and recovered
//! by the runner; the commit boundary through a fault-injecting proxy. Needs
//! `TXRETRY_MYSQL_URL` (or Docker); see txretry-testkit.

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
mod contention;
mod dialect;
mod options;
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
