//! A sqlx pool that follows the primary of several Postgres hosts, as libpq's
//! `target_session_attrs=read-write` does for one connection: sqlx connects to one host
//! only (it has no multi-host connect).

mod hosts;
mod search;

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use search::{PROBE_TIMEOUT, PassedOver, read_only, refuse_read_only, search};

/// How often the watcher checks that the host it follows is still the primary.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// The pause between two rounds of the search when no host accepts writes.
const SEARCH_PAUSE: Duration = Duration::from_millis(50);

/// A `PgPool` whose connections always go to the host that accepts writes, out of the
/// hosts of a multi-host URL (`postgres://app@h1:5432,h2:5432,h3:5432/shop`).
///
/// A watcher task keeps one connection of its own to the current primary and checks it
/// every 250 ms (`SHOW transaction_read_only`). When that connection is lost or the host
/// turns read-only (a switchover, a failover), it asks every host at once for the one
/// that accepts writes (a host that does not answer, such as a frozen old primary, blocks
/// no other; a round that finds none writable ends when its probe times out, 2 s) and
/// points the pool at it
/// ([`Pool::set_connect_options`](sqlx::Pool::set_connect_options)). Every new connection
/// of the pool is checked too: one that lands on a read-only host is refused with a
/// [`NotPrimary`] error (`25006`), so the pool never hands out a session on a standby.
/// sqlx retries a refused connect inside `acquire` (logging each refusal), so a caller
/// meets it as `PoolTimedOut` (a connection failure) once the pool's `acquire_timeout`
/// has passed, not as `25006`. Together with the runners (which
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
    /// Parses the multi-host `url`, finds the host that accepts writes (asking every host at
    /// once, the first to answer wins; waiting up to `options`' acquire timeout for one),
    /// and opens the pool there.
    ///
    /// The pool's `after_connect` hook is PrimaryPool's own (it refuses a connection that
    /// lands on a standby): one set on `options` is replaced. Put session settings in the
    /// connect options instead (`options=-c%20search_path%3Dapp` in the URL, or
    /// [`PgConnectOptions::options`] on [`hosts`](PrimaryPool::hosts)).
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
        hosts::hosts(url)
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
        hosts::is_multi_host(url)
    }

    /// [`connect`](PrimaryPool::connect) on hosts given one by one (errors name them in this
    /// order).
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

    /// The pool (a clone of the handle). It follows the primary only while this
    /// `PrimaryPool` lives: the watcher stops when it is dropped ([`detach`] keeps it
    /// running).
    ///
    /// [`detach`]: PrimaryPool::detach
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
/// [`Failover`](txretry_core::TransientKind::Failover) where it surfaces; sqlx keeps it
/// inside `acquire`, which retries the connect and in the end says `PoolTimedOut`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotPrimary;

crate::own_error::database_error!(NotPrimary, |_this| message: NOT_PRIMARY, code: "25006");

/// [`NotPrimary`]'s message.
const NOT_PRIMARY: &str = "the server does not accept writes (not the primary)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_primary_is_a_failover() {
        let err = sqlx::Error::Database(Box::new(NotPrimary));
        assert_eq!(
            txretry_core::classify(&err).verdict,
            txretry_core::Verdict::Transient(txretry_core::TransientKind::Failover)
        );
    }
}
