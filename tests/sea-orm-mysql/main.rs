//! Integration tests of `txretry::sea_orm` on MySQL / MariaDB (feature `sea-orm-mysql`):
//! deadlocks and lock-wait timeouts provoked for real between two sessions and recovered
//! by the runner; options really applied; business errors; the commit boundary through a
//! fault-injecting proxy. Needs `TXRETRY_MYSQL_URL` (or Docker); see txretry-testkit.

// Tests written once for SeaORM on PostgreSQL and on MySQL; `dialect` says how they differ.
#[path = "../sea-orm-shared/business.rs"]
mod business;
#[path = "../sea-orm-shared/commit_fault.rs"]
mod commit_fault;
#[path = "../sea-orm-shared/common.rs"]
mod common;
mod dialect;
mod lock_wait_timeout;
mod nested;
mod options;

#[path = "../sea-orm-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/lost_commit.rs"]
mod lost_commit;
#[path = "../sea-orm-shared/sessions.rs"]
mod sessions;
#[path = "../shared/transfers.rs"]
mod transfers;
