//! txretry-tool's integration tests, one binary (a module per topic; `pN_` tests cover the
//! issue's numbered points). SQLite always; PostgreSQL through txretry-testkit.

mod common;

mod budget;
mod committed;
mod config;
mod events;
mod gate;
mod outage;
mod outcomes;
mod postgres;
mod precedence;
mod restart;
mod sqlite;
