//! A sqlx pool that follows the primary of several Postgres hosts, as libpq's
//! `target_session_attrs=read-write` does for one connection: sqlx connects to one host
//! only (it has no multi-host connect).

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

/// How often the watcher checks that the host it follows is still the primary.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How long one check, or one connect while searching, may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause between two rounds of the search when no host accepts writes.
const SEARCH_PAUSE: Duration = Duration::from_millis(50);

/// A `PgPool` whose connections always go to the host that accepts writes, out of the
/// hosts of a multi-host URL (`postgres://app@h1:5432,h2:5432,h3:5432/shop`).
///
/// A watcher task keeps one connection of its own to the current primary and checks it
/// every 250 ms (`SHOW transaction_read_only`). When that connection is lost or the host
/// turns read-only (a switchover, a failover), it searches the hosts in order for the one
/// that accepts writes and points the pool at it
/// ([`Pool::set_connect_options`](sqlx::Pool::set_connect_options)). Every new connection
/// of the pool is checked too: one that lands on a read-only host is refused with a
/// [`NotPrimary`] error (`25006`, a [`Failover`](txretry_core::TransientKind::Failover)),
/// so the pool never hands out a session on a standby. Together with the runners (which
/// discard a connection after a lost session) and a policy with a failover budget
/// ([`RetryPolicy::high_availability`](txretry_core::RetryPolicy::high_availability)),
/// a transaction interrupted by a failover runs again on the new primary.
///
/// It dereferences to the [`PgPool`]: pass `&primary` wherever a `&PgPool` goes. The
/// watcher stops when the `PrimaryPool` is dropped (clones of the inner pool taken with
/// [`pool`](PrimaryPool::pool) then keep the host they have), or, after
/// [`detach`](PrimaryPool::detach), when the pool is closed.
///
/// ```no_run
/// use std::time::Duration;
/// use sqlx::postgres::PgPoolOptions;
/// use txretry_core::RetryPolicy;
/// use txretry_sqlx::PrimaryPool;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = PrimaryPool::connect(
///     PgPoolOptions::new().acquire_timeout(Duration::from_secs(2)),
///     "postgres://app@10.0.0.1:5432,10.0.0.2:5432,10.0.0.3:5432/shop",
/// )
/// .await?;
/// let policy = RetryPolicy::high_availability();
/// txretry_sqlx::transaction(&pool, &policy, async |tx| {
///     sqlx::query("UPDATE stock SET n = n - 1 WHERE sku = 'A-17'")
///         .execute(&mut **tx)
///         .await
/// })
/// .await?;
/// # Ok(())
/// # }
/// ```
pub struct PrimaryPool {
    pool: PgPool,
    /// `None` once detached.
    watcher: Option<tokio::task::JoinHandle<()>>,
}

impl PrimaryPool {
    /// Parses the multi-host `url`, finds the host that accepts writes (trying them in
    /// order, waiting up to `options`' acquire timeout for one), and opens the pool there.
    ///
    /// Each host's part of the URL is parsed as sqlx parses a single-host URL; the query
    /// parameters apply to every host (`target_session_attrs` is implied and removed).
    ///
    /// # Errors
    /// [`MultiHostError::Url`] when the URL is not a Postgres URL with at least one host;
    /// [`MultiHostError::NoPrimary`] when no host accepted writes within the acquire
    /// timeout.
    pub async fn connect(options: PgPoolOptions, url: &str) -> Result<PrimaryPool, MultiHostError> {
        PrimaryPool::connect_hosts(options, PrimaryPool::hosts(url)?).await
    }

    /// The hosts of a multi-host URL, one `PgConnectOptions` each, to adjust (an
    /// application name, TLS) before [`connect_hosts`](PrimaryPool::connect_hosts).
    ///
    /// # Errors
    /// [`MultiHostError::Url`] when the URL is not a Postgres URL with at least one host.
    pub fn hosts(url: &str) -> Result<Vec<PgConnectOptions>, MultiHostError> {
        hosts(url)
    }

    /// [`connect`](PrimaryPool::connect) on hosts given one by one, tried in this order.
    ///
    /// # Errors
    /// [`MultiHostError::Url`] when `hosts` is empty; [`MultiHostError::NoPrimary`] when no
    /// host accepted writes within the acquire timeout.
    pub async fn connect_hosts(
        options: PgPoolOptions,
        hosts: Vec<PgConnectOptions>,
    ) -> Result<PrimaryPool, MultiHostError> {
        if hosts.is_empty() {
            return Err(MultiHostError::Url("no host"));
        }
        let deadline = tokio::time::Instant::now() + options.get_acquire_timeout();
        let (index, _) = loop {
            if let Some(found) = search(&hosts).await {
                break found;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MultiHostError::NoPrimary { hosts: hosts.len() });
            }
            tokio::time::sleep(SEARCH_PAUSE).await;
        };
        let pool = options
            .after_connect(|conn, _| Box::pin(async move { refuse_read_only(conn).await }))
            .connect_lazy_with(hosts[index].clone());
        let watcher = tokio::spawn(watch(pool.clone(), hosts, index));
        Ok(PrimaryPool {
            pool,
            watcher: Some(watcher),
        })
    }

    /// The pool (a clone of the handle).
    pub fn pool(&self) -> PgPool {
        self.pool.clone()
    }

    /// The pool, with the watcher left running until the pool is closed
    /// ([`PgPool::close`](sqlx::Pool::close)): for code that keeps only a `PgPool`.
    pub fn detach(mut self) -> PgPool {
        self.watcher = None;
        self.pool.clone()
    }
}

impl Deref for PrimaryPool {
    type Target = PgPool;

    fn deref(&self) -> &PgPool {
        &self.pool
    }
}

impl Drop for PrimaryPool {
    fn drop(&mut self) {
        if let Some(watcher) = &self.watcher {
            watcher.abort();
        }
    }
}

impl fmt::Debug for PrimaryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrimaryPool")
            .field("primary", &self.pool.connect_options().get_host())
            .field("port", &self.pool.connect_options().get_port())
            .finish_non_exhaustive()
    }
}

/// Follows the primary: checks the one it has, and searches when it is gone.
async fn watch(pool: PgPool, hosts: Vec<PgConnectOptions>, mut index: usize) {
    let mut probe: Option<PgConnection> = None;
    loop {
        if pool.is_closed() {
            return;
        }
        let healthy = match probe.as_mut() {
            Some(conn) => matches!(
                tokio::time::timeout(PROBE_TIMEOUT, read_only(conn)).await,
                Ok(Ok(false))
            ),
            None => false,
        };
        if healthy {
            tokio::time::sleep(WATCH_EVERY).await;
            continue;
        }
        probe = None;
        match search(&hosts).await {
            Some((found, conn)) => {
                if found != index {
                    tracing::info!(
                        host = hosts[found].get_host(),
                        port = hosts[found].get_port(),
                        "txretry: the pool follows the new primary"
                    );
                    pool.set_connect_options(hosts[found].clone());
                    index = found;
                }
                probe = Some(conn);
            }
            None => tokio::time::sleep(SEARCH_PAUSE).await,
        }
    }
}

/// The first host (in order) that accepts a connection and writes, with that connection.
async fn search(hosts: &[PgConnectOptions]) -> Option<(usize, PgConnection)> {
    for (i, host) in hosts.iter().enumerate() {
        let Ok(Ok(mut conn)) = tokio::time::timeout(PROBE_TIMEOUT, host.connect()).await else {
            continue;
        };
        if let Ok(Ok(false)) = tokio::time::timeout(PROBE_TIMEOUT, read_only(&mut conn)).await {
            return Some((i, conn));
        }
    }
    None
}

/// Whether the session is read-only, as libpq's `target_session_attrs=read-write` asks.
async fn read_only(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let value: String = sqlx::query_scalar("SHOW transaction_read_only")
        .fetch_one(conn)
        .await?;
    Ok(value == "on")
}

/// The pool's `after_connect`: a new connection on a read-only host is refused.
async fn refuse_read_only(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    if read_only(conn).await? {
        return Err(sqlx::Error::Database(Box::new(NotPrimary)));
    }
    Ok(())
}

/// One `PgConnectOptions` per host of a multi-host URL.
fn hosts(url: &str) -> Result<Vec<PgConnectOptions>, MultiHostError> {
    let bad = |why: &'static str| MultiHostError::Url(why);
    let (scheme, rest) = url.split_once("://").ok_or(bad("no scheme"))?;
    if scheme != "postgres" && scheme != "postgresql" {
        return Err(bad("not a postgres:// URL"));
    }
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (user, host_list) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let path = strip_param(path, "target_session_attrs");
    let hosts = host_list
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|host| {
            PgConnectOptions::from_str(&format!("{scheme}://{user}{host}{path}"))
                .map_err(|_| bad("a host's URL does not parse"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if hosts.is_empty() {
        return Err(bad("no host"));
    }
    Ok(hosts)
}

/// `path` (`/db?a=1&b=2`) without the query parameter `name`.
fn strip_param(path: &str, name: &str) -> String {
    let Some((base, query)) = path.split_once('?') else {
        return path.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| kv.split('=').next() != Some(name) && !kv.is_empty())
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// Why [`PrimaryPool::connect`] failed.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultiHostError {
    /// The URL is not a Postgres URL with at least one host; says what is wrong (the URL
    /// itself, which may hold a password, is not repeated).
    #[error("invalid multi-host Postgres URL: {0}")]
    Url(&'static str),
    /// No host accepted writes within the pool's acquire timeout.
    #[error("none of the {hosts} hosts accepted writes within the acquire timeout")]
    NoPrimary {
        /// How many hosts were tried.
        hosts: usize,
    },
}

/// A new connection of a [`PrimaryPool`] reached a host that does not accept writes (a
/// standby, or a primary being demoted). Its code is Postgres' own for a write refused on
/// such a host, `25006`, so it classifies as
/// [`Failover`](txretry_core::TransientKind::Failover).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPrimary;

crate::own_error::database_error!(NotPrimary, |_this| message: NOT_PRIMARY, code: "25006");

/// [`NotPrimary`]'s message.
const NOT_PRIMARY: &str = "the server does not accept writes (not the primary)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_of_a_multi_host_url_gets_the_user_database_and_parameters() {
        let hosts = hosts(
            "postgres://app:secret@127.0.0.1:5441,127.0.0.1:5442,db3/shop?target_session_attrs=read-write&application_name=x",
        )
        .unwrap();
        let seen: Vec<_> = hosts
            .iter()
            .map(|h| {
                (
                    h.get_host().to_owned(),
                    h.get_port(),
                    h.get_database().map(str::to_owned),
                    h.get_username().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "127.0.0.1".to_owned(),
                    5441,
                    Some("shop".to_owned()),
                    "app".to_owned()
                ),
                (
                    "127.0.0.1".to_owned(),
                    5442,
                    Some("shop".to_owned()),
                    "app".to_owned()
                ),
                (
                    "db3".to_owned(),
                    5432,
                    Some("shop".to_owned()),
                    "app".to_owned()
                ),
            ]
        );
        assert_eq!(hosts[0].get_application_name(), Some("x"));
    }

    #[test]
    fn a_single_host_url_is_one_host() {
        assert_eq!(hosts("postgresql://h/db").unwrap().len(), 1);
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        for (url, why) in [
            ("mysql://root@h/db", "not a postgres:// URL"),
            ("h1,h2/db", "no scheme"),
            ("postgres://u:pw@/db", "no host"),
            (
                "postgres://u:pw@h1:notaport/db",
                "a host's URL does not parse",
            ),
        ] {
            let err = hosts(url).unwrap_err();
            assert_eq!(err, MultiHostError::Url(why), "{url}");
            assert!(!err.to_string().contains("pw"));
        }
    }

    #[test]
    fn only_the_named_parameter_is_stripped() {
        assert_eq!(
            strip_param(
                "/db?target_session_attrs=read-write",
                "target_session_attrs"
            ),
            "/db"
        );
        assert_eq!(
            strip_param(
                "/db?a=1&target_session_attrs=any&b=2",
                "target_session_attrs"
            ),
            "/db?a=1&b=2"
        );
        assert_eq!(strip_param("/db", "target_session_attrs"), "/db");
    }

    #[test]
    fn not_primary_is_a_failover() {
        let err = sqlx::Error::Database(Box::new(NotPrimary));
        assert_eq!(
            txretry_core::classify(&err).verdict,
            txretry_core::Verdict::Transient(txretry_core::TransientKind::Failover)
        );
    }
}
