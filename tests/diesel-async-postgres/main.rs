//! Integration tests of the diesel-async adapter on PostgreSQL (`AsyncPgConnection`,
//! through the facade's `txretry::diesel::async_transaction`), against a real server
//! (`TXRETRY_POSTGRES_URL`; see txretry-testkit). Every transient failure is provoked for
//! real, the sessions coordinated through channels and `pg_stat_activity`, never by
//! timing. The scenarios of `tests/diesel-shared/` run here as they do on `PgConnection`.

mod admission;
#[path = "../diesel-shared/business.rs"]
mod business;
#[path = "../diesel-async-shared/calls.rs"]
mod calls;
mod cancellation;
#[path = "../diesel-async-shared/cancelled_begin.rs"]
mod cancelled_begin;
#[path = "../diesel-shared/pg_commit_boundary.rs"]
mod commit_boundary;
#[path = "../diesel-async-shared/common.rs"]
mod common;
#[path = "../diesel-async-shared/connection_lost.rs"]
mod connection_lost;
#[path = "../diesel-async-shared/db.rs"]
mod db;
#[path = "../diesel-shared/pg_options.rs"]
mod options;
#[path = "../diesel-shared/read_only.rs"]
mod read_only;
#[path = "../diesel-shared/pg_serialization.rs"]
mod serialization;
mod server;
#[path = "../diesel-shared/pg_swallowed_error.rs"]
mod swallowed_error;

#[path = "../diesel-async-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../diesel-shared/failure.rs"]
mod failure;
#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/transfers.rs"]
mod transfers;
