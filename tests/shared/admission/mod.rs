//! Admission across processes, on the database (`Admission::in_database`), written once for
//! every driver: two processes (see `txretry_testkit::intervals`) that must take turns on a
//! key ([`processes`]), and a key's holder killed, its waiter cancelled, a lock not granted
//! in time ([`sessions`]). Each binary's `admission_db` module implements [`Driver`] (how it
//! connects, makes a process, runs the runner and a statement, and what the server says
//! about a key's lock) and keeps the scenarios only its driver has. What the two servers
//! say about sessions and locks is SQL, in [`Server`] (`server.rs`); the [`Driver`] trait
//! and what it passes to the scenarios are in `driver.rs`; here, a test's key and URL.

mod driver;
mod processes;
mod server;
mod sessions;

// What the binaries' modules import; each imports its part (`lock_name` and
// `lock_wait_timed_out`: the MySQL binaries).
#[allow(unused_imports)]
pub use driver::{
    Binary, Driver, Failed, Interval, OnRow, Said, SessionState, Started, Then, lock_wait_timed_out,
};
#[allow(unused_imports)]
pub use server::{Server, lock_name};

use crate::admission_db::Db;

/// The server's URL for `test`, or `None` to skip it.
fn url(test: &str) -> Option<String> {
    Db::BINARY
        .server
        .url(&format!("{} admission {test}", Db::BINARY.name))
}

/// The key a test's transactions contend on: `(name, n)`.
pub fn key(name: &str, n: i64) -> (String, i64) {
    (name.to_string(), n)
}
