//! The binary serving the examples over stdio to rmcp's client (a child process), on
//! SQLite, Postgres and MariaDB: what each caller is offered, the schemas and annotations,
//! colliding transfers that deadlock for real and still commit exactly once, business
//! errors, arguments refused before the database, `once` answered from its record, and the
//! inventory's captures and expectations.
//!
//! The scenarios, each run on every database by `on_each_database!` here (so that the
//! tests are `sqlite::<name>`, `postgres::<name>`, `mariadb::<name>`): `offered.rs` (what
//! each caller is offered, schemas, annotations), `once.rs` (colliding transfers, a
//! repeated `once` call), `errors.rs` (business errors, invalid arguments) and
//! `inventory.rs` (inventory.yaml).

#[path = "../common/mod.rs"]
mod common;

mod errors;
mod inventory;
mod offered;
mod once;

use common::{Client, Db, stdio, tools};
use errors::{
    a_business_error_is_told_once_and_writes_nothing, invalid_arguments_never_reach_the_database,
};
use inventory::inventory_reserves_until_stock_runs_out;
use offered::{schemas_and_annotations, tools_offered_per_role_and_toolset};
use once::{
    a_repeated_once_call_returns_the_recorded_answer, colliding_transfers_commit_exactly_once,
};

/// orders.sql loaded, and orders.yaml served with `args`.
async fn orders(db: &Db, args: &[&str]) -> Client {
    db.load("orders.sql").await;
    orders_again(db, args).await
}

/// Another server of orders.yaml on the same database.
async fn orders_again(db: &Db, args: &[&str]) -> Client {
    stdio(
        &common::examples().join("orders.yaml"),
        args,
        &[("ORDERS_DATABASE_URL", db.url.as_str())],
    )
    .await
}

const TELLER: &[&str] = &["--role", "support", "--role", "teller"];

/// `idempotentHint` is absent unless a tool declares `idempotent: true`: never guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_hint_is_absent_unless_declared() {
    let db = Db::sqlite().await;
    let client = orders(&db, TELLER).await;
    for tool in tools(&client).await {
        let hint = tool.annotations.and_then(|a| a.idempotent_hint);
        assert_eq!(
            hint, None,
            "{}: idempotentHint absent unless declared",
            tool.name
        );
    }
    client.cancel().await.unwrap();
}

crate::on_each_database!(
    tools_offered_per_role_and_toolset,
    schemas_and_annotations,
    colliding_transfers_commit_exactly_once,
    a_business_error_is_told_once_and_writes_nothing,
    invalid_arguments_never_reach_the_database,
    a_repeated_once_call_returns_the_recorded_answer,
    inventory_reserves_until_stock_runs_out,
);
