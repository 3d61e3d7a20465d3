//! A server container of one test's own that the test can restart: for tests of what a
//! runner, a pool or the lab does when the server goes away mid-transaction and comes back.
//!
//! Not the container the other tests of the binary share ([`crate::postgres_url`]): a
//! restart would break their sessions. Its host port is chosen here and mapped explicitly,
//! because Docker gives a dynamically published port a new number on every start (seen on
//! Docker 20.10), and the URL must stay valid across restarts.
//!
//! A restart is a clean shutdown, never a kill: the images run with throwaway durability
//! (`synchronous_commit = off`, `innodb_flush_log_at_trx_commit = 0`), so a killed server
//! could lose transactions it had acknowledged and a test would blame the library. Postgres
//! gets `SIGINT`, a fast shutdown (what `pg_ctl restart -m fast` and the official image's
//! stop signal do: open transactions roll back, sessions end with `57P01`); Docker's
//! default `SIGTERM` would be a smart shutdown, which waits for every pooled session to
//! leave. MariaDB gets `SIGTERM`, its normal shutdown.
//!
//! Ignored tests use it (`.ci/containers` runs them); without a Docker daemon they skip,
//! and fail instead with `TXRETRY_REQUIRE_RESTARTS=1`.

use std::time::Duration;

use testcontainers_modules::testcontainers::core::{CmdWaitFor, ContainerPort, ExecCommand};
use testcontainers_modules::testcontainers::runners::AsyncRunner;
use testcontainers_modules::testcontainers::{ContainerAsync, ContainerRequest, Image, ImageExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::containers;

/// How long a stopping server may take to shut down cleanly before Docker kills it.
const STOP_GRACE_SECONDS: i32 = 60;
/// How long a restarted server may take to accept connections again.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// Pause between two readiness probes.
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// A database server in a container of its own, on a fixed host port, that
/// [`restart`](RestartableServer::restart) stops cleanly and starts again. Removed when
/// dropped (inside the test's runtime), and by the testkit's reaper when the process exits.
pub struct RestartableServer {
    node: Node,
    url: String,
    port: u16,
}

/// The container, by engine (the image type differs).
enum Node {
    #[cfg(feature = "postgres")]
    Postgres(ContainerAsync<testcontainers_modules::postgres::Postgres>),
    #[cfg(feature = "mysql")]
    Mariadb(ContainerAsync<testcontainers_modules::mariadb::Mariadb>),
}

impl RestartableServer {
    /// A Postgres server of its own (`TXRETRY_POSTGRES_IMAGE`, trust authentication,
    /// database `test`), or `None` (after printing why) when the test should skip.
    ///
    /// Panics when none can be had and `TXRETRY_REQUIRE_RESTARTS=1`.
    #[cfg(feature = "postgres")]
    pub async fn postgres(test: &str) -> Option<RestartableServer> {
        let started = start(containers::postgres_request(), 5432, "postgres").await;
        let started =
            started.map(|(node, port)| (Node::Postgres(node), port, "postgres://postgres"));
        found(test, started)
    }

    /// A MariaDB server of its own (`TXRETRY_MARIADB_IMAGE`, root without a password,
    /// database `test`), or `None` (after printing why) when the test should skip.
    ///
    /// Panics when none can be had and `TXRETRY_REQUIRE_RESTARTS=1`.
    #[cfg(feature = "mysql")]
    pub async fn mariadb(test: &str) -> Option<RestartableServer> {
        let started = start(containers::mariadb_request(), 3306, "mariadb").await;
        let started = started.map(|(node, port)| (Node::Mariadb(node), port, "mysql://root"));
        found(test, started)
    }

    /// The server's URL; the same before and after a restart.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Shuts the server down cleanly, starts it again, and returns once it accepts a
    /// login on its host port. Sessions open during the restart are gone afterwards.
    ///
    /// Panics when Docker refuses, or the server is not back within two minutes.
    pub async fn restart(&self) {
        let stopped = match &self.node {
            #[cfg(feature = "postgres")]
            Node::Postgres(node) => {
                // Fast shutdown first (see the module doc); `docker stop` then only waits.
                // `kill` is a shell builtin: the images have no kill binary.
                let signal = ExecCommand::new(["sh", "-c", "kill -INT 1"])
                    .with_cmd_ready_condition(CmdWaitFor::exit_code(0));
                match node.exec(signal).await {
                    Ok(_) => node.stop_with_timeout(Some(STOP_GRACE_SECONDS)).await,
                    Err(e) => Err(e),
                }
            }
            #[cfg(feature = "mysql")]
            Node::Mariadb(node) => node.stop_with_timeout(Some(STOP_GRACE_SECONDS)).await,
        };
        stopped.unwrap_or_else(|e| panic!("stopping the server at {} failed: {e}", self.url));
        let started = match &self.node {
            #[cfg(feature = "postgres")]
            Node::Postgres(node) => node.start().await,
            #[cfg(feature = "mysql")]
            Node::Mariadb(node) => node.start().await,
        };
        started.unwrap_or_else(|e| panic!("starting the server at {} failed: {e}", self.url));
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            let answer = match &self.node {
                #[cfg(feature = "postgres")]
                Node::Postgres(_) => postgres_login(self.port).await,
                #[cfg(feature = "mysql")]
                Node::Mariadb(_) => mariadb_greeting(self.port).await,
            };
            match answer {
                Ok(()) => return,
                Err(why) if tokio::time::Instant::now() >= deadline => {
                    panic!("the server at {} did not come back: {why}", self.url)
                }
                Err(_) => tokio::time::sleep(PROBE_EVERY).await,
            }
        }
    }
}

/// Starts `request` with `port` published on a free host port of this machine; the
/// container and that host port.
async fn start<I: Image>(
    request: ContainerRequest<I>,
    port: u16,
    what: &str,
) -> Result<(ContainerAsync<I>, u16), String> {
    if !crate::docker_answers() {
        return Err("no Docker daemon answers".into());
    }
    // Free now; Docker binds it a moment later (the window in which another process could
    // take it is the same as for any "port 0, then tell the server" scheme).
    let host_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let node = request
        .with_mapped_port(host_port, ContainerPort::Tcp(port))
        .with_label(containers::LABEL, std::process::id().to_string())
        .start()
        .await
        .map_err(|e| format!("could not start a {what} container: {e}"))?;
    let id = node.id().to_owned();
    containers::at_exit(
        "exec docker rm -f -v \"$1\"",
        &[&id],
        &format!("{what} container {id}"),
        &format!("docker rm -f {id}"),
    );
    Ok((node, host_port))
}

/// The server, or the skip (or failure) when it could not be started.
fn found(test: &str, started: Result<(Node, u16, &str), String>) -> Option<RestartableServer> {
    match started {
        Ok((node, port, scheme_and_user)) => Some(RestartableServer {
            node,
            url: format!("{scheme_and_user}@127.0.0.1:{port}/test"),
            port,
        }),
        Err(why) if crate::flag("TXRETRY_REQUIRE_RESTARTS") => {
            panic!(
                "{test}: no restartable server: {why} (TXRETRY_REQUIRE_RESTARTS=1 makes this a failure)"
            )
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}; start Docker to run it");
            None
        }
    }
}

/// Logs in as `postgres` to database `test` on `127.0.0.1:port` (trust authentication)
/// and waits for ReadyForQuery: a server still starting up or recovering answers with an
/// error instead, and Docker's port proxy accepts and then closes while nothing listens.
async fn postgres_login(port: u16) -> Result<(), String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let mut startup = Vec::new();
    startup.extend_from_slice(&0x0003_0000_i32.to_be_bytes()); // protocol 3.0
    for part in ["user", "postgres", "database", "test"] {
        startup.extend_from_slice(part.as_bytes());
        startup.push(0);
    }
    startup.push(0);
    let length = i32::try_from(startup.len() + 4).map_err(|e| e.to_string())?;
    stream
        .write_all(&[&length.to_be_bytes()[..], &startup].concat())
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let mut header = [0u8; 5];
        stream
            .read_exact(&mut header)
            .await
            .map_err(|e| e.to_string())?;
        let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let mut body = vec![0u8; usize::try_from(length - 4).map_err(|e| e.to_string())?];
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| e.to_string())?;
        match header[0] {
            b'Z' => {
                // Terminate, so the server does not log an unexpected EOF.
                let _ = stream.write_all(&[b'X', 0, 0, 0, 4]).await;
                return Ok(());
            }
            b'E' => return Err(String::from_utf8_lossy(&body).into_owned()),
            // Authentication answers other than "ok" would need a password: not ours.
            b'R' if body.get(..4) != Some(&[0, 0, 0, 0]) => {
                return Err("the server asks for a password".into());
            }
            _ => {}
        }
    }
}

/// Reads MariaDB's initial handshake packet on `127.0.0.1:port`: the server sends it once
/// it listens, which it does only after its storage engines are up; an error packet
/// (`0xff`) or a closed connection means not yet.
async fn mariadb_greeting(port: u16) -> Result<(), String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let mut header = [0u8; 5];
    stream
        .read_exact(&mut header)
        .await
        .map_err(|e| e.to_string())?;
    match header[4] {
        10 => Ok(()),
        first => Err(format!("no handshake (first payload byte {first:#x})")),
    }
}
