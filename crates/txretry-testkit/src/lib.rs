//! Finds the database servers txretry's integration tests run against.
//!
//! In order: the URL in `TXRETRY_POSTGRES_URL` / `TXRETRY_MYSQL_URL`; else a container
//! started with testcontainers when a Docker daemon answers (one per test binary, shared by
//! its tests); else the test is skipped with a message saying why — unless
//! `TXRETRY_REQUIRE_DB=1`, which turns a missing server into a failure (CI sets it).
//!
//! Also the driver-free helpers every test binary shares: [`record`] (what a policy's
//! hooks saw), [`outcome`] (assertions on a runner's [`Outcome`](txretry_core::Outcome)),
//! [`wait`] (bounded waiting) and the [`CommitFaultProxy`].

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub mod outcome;
mod proxy;
pub mod record;
pub mod wait;

pub use proxy::CommitFaultProxy;

/// Whether a missing server must fail the test instead of skipping it.
pub fn require_db() -> bool {
    std::env::var("TXRETRY_REQUIRE_DB").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// A URL for a PostgreSQL server, or `None` (after printing why) when the test should skip.
///
/// Panics when no server can be had and `TXRETRY_REQUIRE_DB=1`.
#[cfg(feature = "postgres")]
pub fn postgres_url(test: &str) -> Option<String> {
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    server_url(test, "TXRETRY_POSTGRES_URL", &STARTED, containers::postgres)
}

/// A URL for a MySQL-protocol server (MariaDB in the container), or `None` (after printing
/// why) when the test should skip.
///
/// Panics when no server can be had and `TXRETRY_REQUIRE_DB=1`.
#[cfg(feature = "mysql")]
pub fn mysql_url(test: &str) -> Option<String> {
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    server_url(test, "TXRETRY_MYSQL_URL", &STARTED, containers::mariadb)
}

#[allow(dead_code)] // used by whichever server features are on
fn server_url(
    test: &str,
    var: &str,
    started: &OnceLock<Result<String, String>>,
    start: fn() -> Result<String, String>,
) -> Option<String> {
    if let Ok(url) = std::env::var(var)
        && !url.is_empty()
    {
        return Some(url);
    }
    let why = match started.get_or_init(|| {
        if docker_answers() {
            start()
        } else {
            Err(format!("{var} is not set and no Docker daemon answers"))
        }
    }) {
        Ok(url) => return Some(url.clone()),
        Err(why) => why,
    };
    if require_db() {
        panic!("{test}: no database server: {why} (TXRETRY_REQUIRE_DB=1 makes this a failure)");
    }
    eprintln!("SKIPPED {test}: {why}; set {var} or start Docker to run it");
    None
}

fn docker_answers() -> bool {
    if std::env::var_os("DOCKER_HOST").is_some() {
        return true;
    }
    std::os::unix::net::UnixStream::connect("/var/run/docker.sock").is_ok()
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod containers {
    use testcontainers_modules::testcontainers::runners::SyncRunner;

    /// The container is leaked on purpose so every test of the binary shares it; it is not
    /// removed when the process exits (`docker ps` shows it; `docker rm -f` it).
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres() -> Result<String, String> {
        let node = testcontainers_modules::postgres::Postgres::default()
            .start()
            .map_err(|e| format!("could not start a postgres container: {e}"))?;
        let port = node.get_host_port_ipv4(5432).map_err(|e| e.to_string())?;
        Box::leak(Box::new(node));
        Ok(format!(
            "postgres://postgres:postgres@127.0.0.1:{port}/postgres"
        ))
    }

    #[cfg(feature = "mysql")]
    pub(crate) fn mariadb() -> Result<String, String> {
        let node = testcontainers_modules::mariadb::Mariadb::default()
            .start()
            .map_err(|e| format!("could not start a mariadb container: {e}"))?;
        let port = node.get_host_port_ipv4(3306).map_err(|e| e.to_string())?;
        Box::leak(Box::new(node));
        Ok(format!("mysql://root@127.0.0.1:{port}/test"))
    }
}

/// A name no other test in any process uses at the same time, for tables a test creates
/// (tests share one database and run in parallel). Only ASCII letters, digits and `_`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let clean: String = prefix
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    format!("{clean}_{}_{n}_{nanos}", std::process::id())
}
