//! Finds the database servers txretry's integration tests run against.
//!
//! In order: the URL in `TXRETRY_POSTGRES_URL` / `TXRETRY_MYSQL_URL`; else a container
//! started with testcontainers when a Docker daemon answers (one per test binary, shared by
//! its tests, removed when the binary exits; images from `TXRETRY_POSTGRES_IMAGE` /
//! `TXRETRY_MARIADB_IMAGE`); else the test is skipped with a message saying why — unless
//! `TXRETRY_REQUIRE_DB=1`, which turns a missing server into a failure (CI sets it).
//!
//! Also the driver-free helpers every test binary shares: [`record`] (what a policy's
//! hooks saw), [`intervals`] (admission across processes, by recorded intervals), [`outcome`] (assertions on a runner's [`Outcome`](txretry_core::Outcome)),
//! [`wait`] (bounded waiting), [`lab`] (what the lab's and the bench's tests read in their
//! reports) and the [`CommitFaultProxy`]; with the `postgres` feature, `held_commit` (a
//! Postgres COMMIT held on the server and its backend terminated, on tokio-postgres
//! whatever driver the test uses).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

pub mod contended;
#[cfg(feature = "mysql")]
mod galera;
#[cfg(feature = "postgres")]
pub mod held_commit;
pub mod intervals;
pub mod lab;
pub mod outcome;
mod proxy;
pub mod record;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod restart;
pub mod wait;

#[cfg(feature = "mysql")]
pub use galera::galera_cluster;
pub use proxy::CommitFaultProxy;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use restart::RestartableServer;

/// Whether a missing server must fail the test instead of skipping it.
pub fn require_db() -> bool {
    flag("TXRETRY_REQUIRE_DB")
}

/// Whether `var` is `1` or `true`.
fn flag(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// A URL for a PostgreSQL server, or `None` (after printing why) when the test should skip.
///
/// Panics when no server can be had and `TXRETRY_REQUIRE_DB=1`.
#[cfg(feature = "postgres")]
pub fn postgres_url(test: &str) -> Option<String> {
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    server_url(
        test,
        "TXRETRY_POSTGRES_URL",
        "TXRETRY_REQUIRE_DB",
        &STARTED,
        containers::postgres,
    )
}

/// A URL for a MySQL-protocol server (MariaDB in the container), or `None` (after printing
/// why) when the test should skip.
///
/// Panics when no server can be had and `TXRETRY_REQUIRE_DB=1`.
#[cfg(feature = "mysql")]
pub fn mysql_url(test: &str) -> Option<String> {
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    server_url(
        test,
        "TXRETRY_MYSQL_URL",
        "TXRETRY_REQUIRE_DB",
        &STARTED,
        containers::mariadb,
    )
}

/// A MariaDB with TLS on: its URL (`TXRETRY_MYSQL_TLS_URL`) and the path of the certificate
/// of the CA that signed its own (`TXRETRY_MYSQL_TLS_CERT`), as `.ci/mariadb-tls` prints
/// them; or `None` (after printing why) when the test should skip.
///
/// Panics when they are not set and `TXRETRY_REQUIRE_DB=1`.
#[cfg(feature = "mysql")]
pub fn mysql_tls(test: &str) -> Option<(String, String)> {
    let url = std::env::var("TXRETRY_MYSQL_TLS_URL").ok();
    let ca = std::env::var("TXRETRY_MYSQL_TLS_CERT").ok();
    if let (Some(url), Some(ca)) = (url, ca) {
        return Some((url, ca));
    }
    let why = "TXRETRY_MYSQL_TLS_URL and TXRETRY_MYSQL_TLS_CERT are not set (.ci/mariadb-tls starts such a server)";
    if require_db() {
        panic!("{test}: no MariaDB with TLS: {why} (TXRETRY_REQUIRE_DB=1 makes this a failure)");
    }
    eprintln!("SKIPPED {test}: {why}");
    None
}

/// A URL for PgBouncer in transaction-pooling mode in front of a PostgreSQL server, or
/// `None` (after printing why) when the test should skip.
///
/// `TXRETRY_PGBOUNCER_URL`; else, when a Docker daemon answers, a container of
/// `TXRETRY_PGBOUNCER_IMAGE` (default `txretry/pgbouncer:1-local`, made by
/// docker/build-local-images.sh; Docker Hub has no official PgBouncer image) on the host
/// network, listening on 127.0.0.1 and pooling for [`postgres_url`]'s server. A pooler is
/// optional: a missing one skips, and fails only with `TXRETRY_REQUIRE_POOLER=1`.
#[cfg(feature = "postgres")]
pub fn pgbouncer_url(test: &str) -> Option<String> {
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    if let Ok(url) = std::env::var("TXRETRY_PGBOUNCER_URL")
        && !url.is_empty()
    {
        return Some(url);
    }
    let required = std::env::var("TXRETRY_REQUIRE_POOLER").is_ok_and(|v| v == "1");
    let why = match STARTED.get_or_init(|| {
        if !docker_answers() {
            return Err("TXRETRY_PGBOUNCER_URL is not set and no Docker daemon answers".into());
        }
        let upstream = postgres_url(test).ok_or("no PostgreSQL server to pool for")?;
        std::thread::spawn(move || containers::pgbouncer(&upstream))
            .join()
            .unwrap_or_else(|_| Err("starting the container panicked".to_owned()))
    }) {
        Ok(url) => return Some(url.clone()),
        Err(why) => why,
    };
    if required {
        panic!("{test}: no PgBouncer: {why} (TXRETRY_REQUIRE_POOLER=1 makes this a failure)");
    }
    eprintln!("SKIPPED {test}: {why}; set TXRETRY_PGBOUNCER_URL or start Docker to run it");
    None
}

#[allow(dead_code)] // used by whichever server features are on
fn server_url(
    test: &str,
    var: &str,
    require_var: &str,
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
            // On a thread of its own: testcontainers' sync runner blocks on a runtime of
            // its own, which panics on a thread that already drives one (an async test).
            std::thread::spawn(start)
                .join()
                .unwrap_or_else(|_| Err("starting the container panicked".to_owned()))
        } else {
            Err(format!("{var} is not set and no Docker daemon answers"))
        }
    }) {
        Ok(url) => return Some(url.clone()),
        Err(why) => why,
    };
    if flag(require_var) {
        panic!("{test}: no database server: {why} ({require_var}=1 makes this a failure)");
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
    //! One container per server per test binary, shared by its tests, and removed when the
    //! binary exits.
    //!
    //! The handle is never dropped (a `static` never is), so removal does not rely on
    //! `Drop`: each container gets a reaper, `sh -c 'cat >/dev/null; docker rm -f -v ID'`
    //! in a process group of its own, whose standard input is a pipe this process holds
    //! open until it exits. However the test binary ends (normally, on a failed test's
    //! exit code, a panic that aborts, a signal, `SIGKILL`), the kernel closes the pipe,
    //! `cat` sees end of file and the container is removed. It needs the `docker` CLI on
    //! `PATH`; without it the container is left, and a message says so. Containers carry
    //! the label `org.txretry.testkit` (value: the test process's id), so
    //! `docker ps -aq --filter label=org.txretry.testkit` finds any that were left.
    //!
    //! Images: `TXRETRY_POSTGRES_IMAGE` / `TXRETRY_MARIADB_IMAGE` as `name:tag` (e.g. the
    //! local ones `docker/build-local-images.sh` makes), else the official `postgres:16`
    //! and `mariadb:10.11` (docker/compose.yaml's defaults). An image must print the
    //! readiness lines the testcontainers module waits for (the local ones do).

    use std::io::ErrorKind;
    use std::os::unix::process::CommandExt;
    use std::process::{ChildStdin, Command, Stdio};
    use std::sync::Mutex;

    use testcontainers_modules::testcontainers::core::ContainerPort;
    use testcontainers_modules::testcontainers::runners::SyncRunner;
    use testcontainers_modules::testcontainers::{Container, ContainerRequest, Image, ImageExt};

    /// The label on every container the testkit starts.
    pub(crate) const LABEL: &str = "org.txretry.testkit";

    /// Write ends of the reapers' pipes: held, never written, closed by the process's exit.
    static REAPERS: Mutex<Vec<ChildStdin>> = Mutex::new(Vec::new());

    /// `name:tag` from `var`, else `default`.
    pub(crate) fn image(var: &str, default: (&str, &str)) -> (String, String) {
        split(&std::env::var(var).unwrap_or_default(), default)
    }

    /// `name:tag` split at the tag; empty means `default`. A colon inside a registry host
    /// (`host:5000/x`) is not a tag separator; no tag means `latest`.
    fn split(spec: &str, default: (&str, &str)) -> (String, String) {
        let spec = spec.trim();
        if spec.is_empty() {
            return (default.0.to_owned(), default.1.to_owned());
        }
        let after_slash = spec.rfind('/').map_or(0, |i| i + 1);
        match spec[after_slash..].rfind(':') {
            Some(i) => (
                spec[..after_slash + i].to_owned(),
                spec[after_slash + i + 1..].to_owned(),
            ),
            None => (spec.to_owned(), "latest".to_owned()),
        }
    }

    /// Starts `request`, arranges its removal at exit, and returns the host port mapped to
    /// `port` (`None`: on the host network, nothing is mapped).
    fn start<I: Image>(
        request: ContainerRequest<I>,
        port: Option<u16>,
        what: &str,
    ) -> Result<u16, String> {
        let node = run(request, what)?;
        let host_port = match port {
            Some(port) => node
                .get_host_port_ipv4(ContainerPort::Tcp(port))
                .map_err(|e| e.to_string())?,
            None => 0,
        };
        // Never dropped: the reaper removes it when the process exits.
        std::mem::forget(node);
        Ok(host_port)
    }

    /// Starts `request` with the testkit's label and arranges its removal at exit. The
    /// caller forgets the handle once it is done with it.
    pub(crate) fn run<I: Image>(
        request: ContainerRequest<I>,
        what: &str,
    ) -> Result<Container<I>, String> {
        let node = request
            .with_label(LABEL, std::process::id().to_string())
            .start()
            .map_err(|e| format!("could not start a {what} container: {e}"))?;
        let id = node.id();
        at_exit(
            "exec docker rm -f -v \"$1\"",
            &[id],
            &format!("{what} container {id}"),
            &format!("docker rm -f {id}"),
        );
        Ok(node)
    }

    /// Runs the shell `script` (with `args` as `$1`…) once this process has exited: the
    /// reaper described above. `what` names what it removes, `by_hand` how to remove it
    /// when no reaper can be started.
    pub(crate) fn at_exit(script: &str, args: &[&str], what: &str, by_hand: &str) {
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(format!("cat >/dev/null; {{ {script}; }} >/dev/null 2>&1"))
            .arg("txretry-testkit-reaper")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Not in the test's process group: a Ctrl-C to the test must not kill it.
            .process_group(0)
            .spawn();
        match spawned {
            Ok(mut child) => {
                if let Some(stdin) = child.stdin.take() {
                    REAPERS
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(stdin);
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => eprintln!(
                "txretry-testkit: no `sh` to remove the {what} at exit; remove it with `{by_hand}`"
            ),
            Err(e) => eprintln!(
                "txretry-testkit: the {what} will be left ({e}); remove it with `{by_hand}`"
            ),
        }
    }

    /// A Postgres server (trust authentication, database `test`) of the configured image.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres_request() -> ContainerRequest<testcontainers_modules::postgres::Postgres>
    {
        let (name, tag) = image("TXRETRY_POSTGRES_IMAGE", ("postgres", "16"));
        testcontainers_modules::postgres::Postgres::default()
            .with_host_auth()
            .with_db_name("test")
            .with_name(name)
            .with_tag(tag)
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres() -> Result<String, String> {
        let port = start(postgres_request(), Some(5432), "postgres")?;
        Ok(format!("postgres://postgres@127.0.0.1:{port}/test"))
    }

    /// A MariaDB server (root without a password, database `test`) of the configured image.
    #[cfg(feature = "mysql")]
    pub(crate) fn mariadb_request() -> ContainerRequest<testcontainers_modules::mariadb::Mariadb> {
        let (name, tag) = image("TXRETRY_MARIADB_IMAGE", ("mariadb", "10.11"));
        testcontainers_modules::mariadb::Mariadb::default()
            .with_name(name)
            .with_tag(tag)
    }

    #[cfg(feature = "mysql")]
    pub(crate) fn mariadb() -> Result<String, String> {
        let port = start(mariadb_request(), Some(3306), "mariadb")?;
        Ok(format!("mysql://root@127.0.0.1:{port}/test"))
    }

    /// PgBouncer (transaction pooling) on the host network in front of `upstream` (a
    /// `postgres://user@host:port/db` URL on this machine); returns its URL.
    #[cfg(feature = "postgres")]
    pub(crate) fn pgbouncer(upstream: &str) -> Result<String, String> {
        use testcontainers_modules::testcontainers::GenericImage;
        use testcontainers_modules::testcontainers::core::WaitFor;

        let authority = upstream
            .split_once("://")
            .map_or(upstream, |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
        let db = upstream
            .rsplit('/')
            .next()
            .and_then(|d| d.split('?').next())
            .unwrap_or("test");
        // A free port on 127.0.0.1 for it to listen on (host network: nothing is mapped).
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let (name, tag) = image("TXRETRY_PGBOUNCER_IMAGE", ("txretry/pgbouncer", "1-local"));
        let request = GenericImage::new(name, tag)
            .with_wait_for(WaitFor::message_on_stderr("process up"))
            .with_network("host")
            .with_env_var("PGBOUNCER_UPSTREAM_HOST", host)
            .with_env_var("PGBOUNCER_UPSTREAM_PORT", port)
            .with_env_var("PGBOUNCER_LISTEN_ADDR", "127.0.0.1")
            .with_env_var("PGBOUNCER_LISTEN_PORT", listen.to_string())
            .with_env_var("PGBOUNCER_POOL_MODE", "transaction");
        start(request, None, "pgbouncer")?;
        Ok(format!("postgres://postgres@127.0.0.1:{listen}/{db}"))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn image_names_split_at_the_tag() {
            let default = ("postgres", "16");
            let cases = [
                ("", ("postgres", "16")),
                (
                    "txretry/postgres:15-local",
                    ("txretry/postgres", "15-local"),
                ),
                ("postgres", ("postgres", "latest")),
                ("host:5000/pg/postgres:15", ("host:5000/pg/postgres", "15")),
                ("host:5000/pg/postgres", ("host:5000/pg/postgres", "latest")),
            ];
            for (spec, want) in cases {
                let got = super::split(spec, default);
                assert_eq!((got.0.as_str(), got.1.as_str()), want, "{spec}");
            }
        }
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
