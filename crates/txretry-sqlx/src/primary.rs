//! A sqlx pool that follows the primary of several Postgres hosts, as libpq's
//! `target_session_attrs=read-write` does for one connection: sqlx connects to one host
//! only (it has no multi-host connect).

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use txretry_core::Verdict;

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
    /// The hosts are listed in the URL's authority (`postgres://app@h1:5432,h2:5433/shop`)
    /// or, as libpq also takes them, in its `host` parameter, with one `port` for all or
    /// one for each (`postgres:///shop?host=h1,h2&port=5432,5433`). Each host's URL is then
    /// parsed as sqlx parses a single-host one; the other query parameters apply to every
    /// host (`target_session_attrs` is implied and removed).
    ///
    /// # Errors
    /// [`MultiHostError::Url`] when the URL is not a Postgres URL with at least one host;
    /// [`MultiHostError::Refused`] at once when every host refused with an error waiting
    /// cannot fix (a wrong password, a missing database); [`MultiHostError::NoPrimary`]
    /// when no host accepted writes within the acquire timeout. Both say why each host
    /// was passed over.
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

    /// Whether `url` lists several hosts, in its authority or its `host` parameter (see
    /// [`connect`](PrimaryPool::connect)): a URL that sqlx's own connect cannot open.
    ///
    /// ```
    /// use txretry_sqlx::PrimaryPool;
    ///
    /// assert!(PrimaryPool::is_multi_host("postgres://app:pw@h1:5432,h2:5432/shop"));
    /// assert!(PrimaryPool::is_multi_host("postgres:///shop?host=h1,h2"));
    /// assert!(!PrimaryPool::is_multi_host("postgres://app:p,w@h1/shop?options=a,b"));
    /// ```
    pub fn is_multi_host(url: &str) -> bool {
        let parts = UrlParts::of(url);
        parts.hosts.contains(',') || parts.param("host").is_some_and(|h| h.contains(','))
    }

    /// [`connect`](PrimaryPool::connect) on hosts given one by one, tried in this order.
    ///
    /// # Errors
    /// [`MultiHostError::Url`] when `hosts` is empty; otherwise as
    /// [`connect`](PrimaryPool::connect).
    pub async fn connect_hosts(
        options: PgPoolOptions,
        hosts: Vec<PgConnectOptions>,
    ) -> Result<PrimaryPool, MultiHostError> {
        if hosts.is_empty() {
            return Err(MultiHostError::Url("no host"));
        }
        let deadline = tokio::time::Instant::now() + options.get_acquire_timeout();
        let (index, _) = loop {
            let passed = match search(&hosts).await {
                Ok(found) => break found,
                Err(passed) => passed,
            };
            let reasons = || {
                hosts
                    .iter()
                    .zip(&passed)
                    .map(|(host, why)| format!("{}:{} {why}", host.get_host(), host.get_port()))
                    .collect()
            };
            // A wrong password or a missing database does not go away by waiting.
            if passed.iter().all(PassedOver::is_permanent) {
                return Err(MultiHostError::Refused { hosts: reasons() });
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MultiHostError::NoPrimary { hosts: reasons() });
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
            Ok((found, conn)) => {
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
            Err(_) => tokio::time::sleep(SEARCH_PAUSE).await,
        }
    }
}

/// The first host (in order) that accepts a connection and writes, with that connection;
/// else why each host was passed over, in the order of `hosts`.
async fn search(hosts: &[PgConnectOptions]) -> Result<(usize, PgConnection), Vec<PassedOver>> {
    let mut passed = Vec::with_capacity(hosts.len());
    for (i, host) in hosts.iter().enumerate() {
        let mut conn = match tokio::time::timeout(PROBE_TIMEOUT, host.connect()).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                passed.push(PassedOver::Failed(e));
                continue;
            }
            Err(_) => {
                passed.push(PassedOver::NoAnswer);
                continue;
            }
        };
        match tokio::time::timeout(PROBE_TIMEOUT, read_only(&mut conn)).await {
            Ok(Ok(false)) => return Ok((i, conn)),
            Ok(Ok(true)) => passed.push(PassedOver::ReadOnly),
            Ok(Err(e)) => passed.push(PassedOver::Failed(e)),
            Err(_) => passed.push(PassedOver::NoAnswer),
        }
    }
    Err(passed)
}

/// Why a search passed a host over.
#[derive(Debug)]
enum PassedOver {
    /// Connecting, or asking whether it accepts writes, failed.
    Failed(sqlx::Error),
    /// No answer within [`PROBE_TIMEOUT`].
    NoAnswer,
    /// It answered that it does not accept writes (a standby).
    ReadOnly,
}

impl PassedOver {
    /// Whether waiting cannot help: the host refused with an error txretry's default table
    /// calls permanent (a wrong password, a missing database), not an outage.
    fn is_permanent(&self) -> bool {
        match self {
            PassedOver::Failed(e) => txretry_core::classify(e).verdict == Verdict::Permanent,
            PassedOver::NoAnswer | PassedOver::ReadOnly => false,
        }
    }
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassedOver::Failed(sqlx::Error::Database(db)) => match db.code() {
                Some(code) => write!(f, "refused: {} (code {code})", db.message()),
                None => write!(f, "refused: {}", db.message()),
            },
            PassedOver::Failed(e) => write!(f, "failed: {e}"),
            PassedOver::NoAnswer => write!(f, "did not answer within {}s", PROBE_TIMEOUT.as_secs()),
            PassedOver::ReadOnly => f.write_str("does not accept writes (a standby)"),
        }
    }
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

/// A Postgres URL cut where a multi-host URL differs from a single-host one.
struct UrlParts<'a> {
    scheme: &'a str,
    /// `user[:password]@`, or empty.
    user: &'a str,
    /// The authority's host list: `h1:5432,h2:5433`, or empty.
    hosts: &'a str,
    /// `/database`, or empty.
    base: &'a str,
    /// The query parameters, as written (`key=value`).
    params: Vec<&'a str>,
}

impl<'a> UrlParts<'a> {
    /// `url` cut in parts; an URL without a scheme has an empty one.
    fn of(url: &'a str) -> UrlParts<'a> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let (user, hosts) = match authority.rfind('@') {
            Some(at) => authority.split_at(at + 1),
            None => ("", authority),
        };
        let (base, query) = path.split_once('?').unwrap_or((path, ""));
        let params = query.split('&').filter(|kv| !kv.is_empty()).collect();
        UrlParts {
            scheme,
            user,
            hosts,
            base,
            params,
        }
    }

    /// The value of parameter `name`, if it is given.
    fn param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    }

    /// The query (`?a=1&b=2`, or empty) without the parameters named in `without`, plus
    /// `extra` parameters.
    fn query(&self, without: &[&str], extra: &[String]) -> String {
        let kept = self
            .params
            .iter()
            .copied()
            .filter(|kv| !without.contains(&kv.split('=').next().unwrap_or(kv)))
            .chain(extra.iter().map(String::as_str))
            .collect::<Vec<_>>();
        if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        }
    }
}

/// One `PgConnectOptions` per host of a multi-host URL.
fn hosts(url: &str) -> Result<Vec<PgConnectOptions>, MultiHostError> {
    let bad = |why: &'static str| MultiHostError::Url(why);
    let parts = UrlParts::of(url);
    if parts.scheme.is_empty() {
        return Err(bad("no scheme"));
    }
    if parts.scheme != "postgres" && parts.scheme != "postgresql" {
        return Err(bad("not a postgres:// URL"));
    }
    let (scheme, user, base) = (parts.scheme, parts.user, parts.base);
    let urls: Vec<String> = match parts.param("host") {
        // libpq's form: the hosts in `host`, their ports in `port` (one for all, or one each).
        Some(list) if parts.hosts.is_empty() => {
            let names: Vec<&str> = list.split(',').filter(|h| !h.is_empty()).collect();
            let ports: Vec<&str> = parts
                .param("port")
                .map_or(Vec::new(), |p| p.split(',').collect());
            if ports.len() > 1 && ports.len() != names.len() {
                return Err(bad("give one port for every host, or one for all"));
            }
            names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let mut extra = vec![format!("host={name}")];
                    if let Some(port) = ports.get(i).or(ports.first()) {
                        extra.push(format!("port={port}"));
                    }
                    let query = parts.query(&["target_session_attrs", "host", "port"], &extra);
                    // A URL with a user needs a host to parse; the parameters override it.
                    format!("{scheme}://{user}localhost{base}{query}")
                })
                .collect()
        }
        _ => {
            let query = parts.query(&["target_session_attrs"], &[]);
            parts
                .hosts
                .split(',')
                .filter(|h| !h.is_empty())
                .map(|host| format!("{scheme}://{user}{host}{base}{query}"))
                .collect()
        }
    };
    if urls.is_empty() {
        return Err(bad("no host"));
    }
    urls.iter()
        .map(|url| PgConnectOptions::from_str(url).map_err(|_| bad("a host's URL does not parse")))
        .collect()
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
    #[error(
        "no host accepted writes within the acquire timeout: {}",
        hosts.join("; ")
    )]
    NoPrimary {
        /// Each host, in order, as `host:port` and why it was passed over the last time it
        /// was tried (refused, with the server's message and code; no answer; read-only).
        hosts: Vec<String>,
    },
    /// Every host refused with an error that waiting cannot fix (a wrong password, a
    /// missing database): returned at once, without waiting out the acquire timeout.
    #[error("every host refused the connection: {}", hosts.join("; "))]
    Refused {
        /// Each host, in order, as `host:port` and the server's refusal, with its code.
        hosts: Vec<String>,
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
    fn only_the_named_parameters_are_dropped() {
        let query = |url: &str, without: &[&str]| UrlParts::of(url).query(without, &[]);
        let tsa = ["target_session_attrs"];
        assert_eq!(
            query("postgres://h/db?target_session_attrs=read-write", &tsa),
            ""
        );
        assert_eq!(
            query("postgres://h/db?a=1&target_session_attrs=any&b=2", &tsa),
            "?a=1&b=2"
        );
        assert_eq!(query("postgres://h/db", &tsa), "");
        // A parameter whose name only starts with a dropped one stays.
        assert_eq!(
            query("postgres://h/db?hostaddr=1&host=2", &["host"]),
            "?hostaddr=1"
        );
    }

    #[test]
    fn hosts_in_the_host_parameter_take_one_port_each_or_one_for_all() {
        let seen = |url: &str| {
            hosts(url)
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h.get_host().to_owned(),
                        h.get_port(),
                        h.get_database().map(str::to_owned),
                    )
                })
                .collect::<Vec<_>>()
        };
        let one = |host: &str, port| (host.to_owned(), port, Some("shop".to_owned()));
        assert_eq!(
            seen("postgres://app@/shop?host=h1,h2&port=5441,5442&target_session_attrs=read-write"),
            [one("h1", 5441), one("h2", 5442)]
        );
        assert_eq!(
            seen("postgresql:///shop?port=5441&host=h1,h2,h3"),
            [one("h1", 5441), one("h2", 5441), one("h3", 5441)]
        );
        assert_eq!(
            seen("postgres:///shop?host=h1,h2"),
            [one("h1", 5432), one("h2", 5432)]
        );
        assert_eq!(
            hosts("postgres:///shop?host=h1,h2,h3&port=1,2").unwrap_err(),
            MultiHostError::Url("give one port for every host, or one for all")
        );
        for url in [
            "postgres://u:p@h1,h2/db",
            "postgres:///db?host=h1,h2&port=1",
        ] {
            assert!(PrimaryPool::is_multi_host(url), "{url}");
        }
        for url in [
            "postgres://u:p,w@h:5440/test",
            "postgres://u@h:5440/test?options=a,b",
            "postgres:///test?host=/run/postgresql",
        ] {
            assert!(!PrimaryPool::is_multi_host(url), "{url}");
        }
    }

    #[test]
    fn why_a_host_was_passed_over_says_whether_waiting_can_help() {
        let refused = PassedOver::Failed(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(!refused.is_permanent());
        assert!(refused.to_string().starts_with("failed: "), "{refused}");
        assert!(!PassedOver::ReadOnly.is_permanent());
        assert!(!PassedOver::NoAnswer.is_permanent());
        let config = PassedOver::Failed(sqlx::Error::Configuration("bad sslmode".into()));
        assert!(config.is_permanent());
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
