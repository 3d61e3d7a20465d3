//! The cluster under test and the faults it takes: `docker/ha/cluster` (Patroni + etcd +
//! three PostgreSQL nodes + HAProxy, as processes on this machine).

use std::process::Stdio;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tokio::sync::{Mutex, MutexGuard};

/// The cluster's two endpoints, from `TXRETRY_HA_PROXY_URL` / `TXRETRY_HA_MULTI_HOST_URL`,
/// or else from `docker/ha/cluster url`.
pub struct Cluster {
    /// HAProxy, routing to the leader: the one endpoint most users configure (sqlx).
    pub proxy: String,
    /// Every node, `target_session_attrs=read-write` (tokio-postgres).
    pub multi_host: String,
    /// Held while the test runs: faults of one test must not land in another's.
    _turn: MutexGuard<'static, ()>,
}

/// One fault at a time across the binary's tests.
static TURN: Mutex<()> = Mutex::const_new(());

/// The script that drives the cluster.
pub fn script() -> String {
    format!("{}/docker/ha/cluster", env!("CARGO_MANIFEST_DIR"))
}

/// The cluster, or `None` when there is none (the test then says it skipped). With
/// `TXRETRY_REQUIRE_HA=1` (CI), a missing cluster fails the test.
pub async fn cluster(test: &str) -> Option<Cluster> {
    let turn = TURN.lock().await;
    let from_env = (
        std::env::var("TXRETRY_HA_PROXY_URL").ok(),
        std::env::var("TXRETRY_HA_MULTI_HOST_URL").ok(),
    );
    let urls = match from_env {
        (Some(proxy), Some(multi_host)) => Some((proxy, multi_host)),
        _ => urls_from_script().await,
    };
    match urls {
        Some((proxy, multi_host)) => Some(Cluster {
            proxy,
            multi_host,
            _turn: turn,
        }),
        None if std::env::var("TXRETRY_REQUIRE_HA").as_deref() == Ok("1") => {
            panic!("{test}: no HA cluster (TXRETRY_REQUIRE_HA=1): run `docker/ha/cluster up`")
        }
        None => {
            eprintln!("SKIPPED {test}: no HA cluster (docker/ha/cluster up starts one)");
            None
        }
    }
}

async fn urls_from_script() -> Option<(String, String)> {
    let out = tokio::process::Command::new(script())
        .arg("url")
        .stderr(Stdio::null())
        .output()
        .await
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_owned())
    };
    Some((line("proxy:")?, line("multi-host:")?))
}

/// What the script said about one fault.
#[derive(Debug, Clone)]
pub struct Fault {
    /// The leader before.
    pub from: String,
    /// The leader after.
    pub to: String,
}

/// Runs `docker/ha/cluster <args>` and returns its output; panics when it fails.
pub async fn run_script(args: &[&str]) -> String {
    let out = tokio::process::Command::new(script())
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("run docker/ha/cluster");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "docker/ha/cluster {args:?} failed: {text}"
    );
    text
}

fn fault(text: &str) -> Fault {
    let field = |name: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {name} in {text:?}"))
    };
    Fault {
        from: field("from="),
        to: field("to="),
    }
}

/// A planned switchover; returns once the new leader accepts writes and the old one has
/// rejoined as a replica.
pub async fn switchover() -> Fault {
    let f = fault(&run_script(&["switchover"]).await);
    assert_ne!(f.from, f.to);
    f
}

/// A crash of the leader's machine (its Patroni and postmaster killed with SIGKILL);
/// returns once a replica was promoted and the old node rejoined.
pub async fn failover() -> Fault {
    let f = fault(&run_script(&["failover"]).await);
    assert_ne!(f.from, f.to);
    f
}

/// Which fault a test injects.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `docker/ha/cluster switchover`.
    Switchover,
    /// `docker/ha/cluster failover` (kill -9).
    Failover,
}

impl Kind {
    /// Injects the fault.
    pub async fn inject(self) -> Fault {
        match self {
            Kind::Switchover => switchover().await,
            Kind::Failover => failover().await,
        }
    }
}

impl Cluster {
    /// Patroni's `synchronous_mode`.
    pub async fn sync(&self, on: bool) {
        run_script(&["sync", if on { "on" } else { "off" }]).await;
    }

    /// The leader's node name and port.
    pub async fn leader(&self) -> (String, u16) {
        let text = run_script(&["leader"]).await;
        let mut words = text.split_whitespace();
        let name = words.next().expect("leader name").to_owned();
        let port = words.next().and_then(|p| p.parse().ok()).expect("port");
        (name, port)
    }

    /// A pool through the proxy, sized for HA: a short acquire timeout, so a connect
    /// that fails during the outage comes back to the runner (whose failover budget does
    /// the waiting) instead of sqlx's own backoff.
    pub async fn pool(&self, max: u32) -> PgPool {
        pool(&self.proxy, max).await
    }

    /// A `PrimaryPool` on the multi-host URL, with the same HA settings as [`Cluster::pool`].
    pub async fn primary_pool(&self, max: u32) -> txretry::sqlx::PrimaryPool {
        txretry::sqlx::PrimaryPool::connect(pool_options(max), &self.multi_host)
            .await
            .expect("a primary pool")
    }

    /// A fresh session on the current leader, for checking what is committed there.
    pub async fn leader_conn(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.multi_host, tokio_postgres::NoTls)
            .await
            .expect("connect to the leader");
        tokio::spawn(connection);
        client
    }
}

/// A pool on `url` with HA settings.
pub async fn pool(url: &str, max: u32) -> PgPool {
    pool_options(max)
        .connect_with(PgConnectOptions::from_str(url).expect("a Postgres URL"))
        .await
        .expect("a pool")
}

/// Pool options for HA: a short acquire timeout.
fn pool_options(max: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(2))
}

/// A unique table name.
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// Runs SQL made of fixed text and table names on the leader.
pub async fn exec(client: &tokio_postgres::Client, sql: &str) {
    client.batch_execute(sql).await.expect(sql);
}

/// `SELECT count(*) …` on the leader.
pub async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect(sql).get(0)
}

/// The port of the server a session runs on (the node, even through the proxy).
pub const SERVER_PORT: &str = "SELECT inet_server_port()";

/// SQL from a table name spliced into fixed text, for sqlx.
pub fn sql(text: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(text)
}

/// Creates `t` and a deferred constraint trigger that, at COMMIT, waits for an advisory
/// lock; returns the SQL that takes the lock (run it on an observer session of the same
/// leader so the COMMIT blocks there, on the server, until the fault).
pub async fn blocking_commit_table(leader: &tokio_postgres::Client, t: &str) -> String {
    exec(
        leader,
        &format!(
            "CREATE TABLE {t} (note text NOT NULL);
             CREATE FUNCTION {t}_block() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 PERFORM pg_advisory_xact_lock(hashtext('{t}'));
                 RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER {t}_at_commit AFTER INSERT ON {t}
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {t}_block();"
        ),
    )
    .await;
    format!("SELECT pg_advisory_lock(hashtext('{t}'))")
}

/// Waits until a session of the leader runs a COMMIT blocked on a lock. Panics after 30 s.
pub async fn wait_for_blocked_commit(observer: &tokio_postgres::Client) {
    for _ in 0..3000 {
        let blocked: bool = observer
            .query_one(
                "SELECT coalesce(bool_or(state = 'active' AND query ILIKE '%COMMIT%' \
                                         AND wait_event_type = 'Lock'), false) \
                 FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
                &[],
            )
            .await
            .expect("poll pg_stat_activity")
            .get(0);
        if blocked {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no COMMIT ever blocked");
}

/// Drops the tables (and the blocking functions) on the leader.
pub async fn drop_tables(leader: &tokio_postgres::Client, tables: &[&str]) {
    for t in tables {
        exec(
            leader,
            &format!("DROP TABLE IF EXISTS {t}; DROP FUNCTION IF EXISTS {t}_block();"),
        )
        .await;
    }
}
