//! Integration tests of `txretry::tokio_postgres` against a real PostgreSQL server
//! (`TXRETRY_POSTGRES_URL`; see txretry-testkit). Every transient failure is provoked for
//! real, with the two sessions coordinated through channels and `pg_stat_activity`, never
//! by timing.

mod common;

#[path = "../shared/admission/mod.rs"]
mod admission;
mod admission_db;
mod business_error;
mod commit_fault;
mod commit_terminated;
mod connection_lost;
mod contention;
mod deferred_constraint;
mod options;
mod raise_exception;
mod reconnecting;
mod send_spawn;
mod serialization;
mod service_spawn;
mod swallowed_error;
mod terminated_before_commit;
mod unique_violation;

#[path = "../shared/locks.rs"]
mod locks;
#[path = "../shared/transfers.rs"]
mod transfers;
