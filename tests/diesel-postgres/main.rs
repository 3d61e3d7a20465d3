//! Integration tests of the Diesel adapter on PostgreSQL (`PgConnection`, through the
//! facade's `txretry::diesel`), against a real server (`TXRETRY_POSTGRES_URL`; see
//! txretry-testkit). Every transient failure is provoked for real, the sessions
//! coordinated through channels and `pg_stat_activity`, never by timing.

#[path = "../diesel-shared/business.rs"]
mod business;
#[path = "../diesel-shared/calls.rs"]
mod calls;
#[path = "../diesel-shared/pg_commit_boundary.rs"]
mod commit_boundary;
mod common;
#[path = "../diesel-shared/pg_options.rs"]
mod options;
#[path = "../diesel-shared/read_only.rs"]
mod read_only;
#[path = "../diesel-shared/pg_serialization.rs"]
mod serialization;
#[path = "../diesel-shared/pg_swallowed_error.rs"]
mod swallowed_error;

#[path = "../diesel-shared/bank.rs"]
mod bank;
mod contention;
#[path = "../diesel-shared/failure.rs"]
mod failure;
#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/transfers.rs"]
mod transfers;
