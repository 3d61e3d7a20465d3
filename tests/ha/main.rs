//! Postgres high availability for real: a Patroni cluster (`docker/ha/cluster`: etcd,
//! three PostgreSQL 15 nodes, HAProxy) takes switchovers, kill -9 failovers and a frozen
//! (SIGSTOPped) leader while runners are in the middle of their transactions. sqlx reaches the leader through the
//! proxy; tokio-postgres through a multi-host URL with `target_session_attrs=read-write`
//! and a `Reconnecting` client.
//!
//! Ignored by the plain test run (it needs the cluster, and a skipped test must not count
//! as passed); `.ci/run` starts the cluster and runs these with `--include-ignored` and
//! `TXRETRY_REQUIRE_HA=1`. One fault at a time: the tests take turns.

mod common;

mod body;
mod commit;
mod durability;
mod frozen;
mod history;
mod once;
mod standby;
mod wrong_node;
