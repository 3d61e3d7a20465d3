//! What the lab asks a server before it starts: how many connections it takes (more
//! workers than that would wait for the pool's acquire timeout and fail, saying only
//! "timed out"), its default isolation level (so a report never just says
//! "server-default"), and Postgres' `deadlock_timeout` (how long a deadlocked transfer
//! waits before Postgres notices: a p50 near it explains a collapse).

use std::time::Duration;

use sqlx::mysql::MySql;
use sqlx::postgres::Postgres;
use sqlx::{Pool, Row};

use crate::duration::parse_duration;

/// What the server said; `None` for what it would not say (a missing privilege, an
/// engine without the setting): the checks that need it are then skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The most connections the server accepts.
    pub max_connections: Option<u64>,
    /// Client connections open when the lab asked, its own included.
    pub connections_in_use: Option<u64>,
    /// The isolation level of a transaction that does not set one, as `--isolation`
    /// spells it (`read-committed`, `repeatable-read`, ...).
    pub default_isolation: Option<String>,
    /// Postgres' `deadlock_timeout`.
    pub deadlock_timeout: Option<Duration>,
}

/// `read committed` / `REPEATABLE-READ` → `read-committed` / `repeatable-read`.
pub fn isolation_name(raw: &str) -> String {
    raw.trim().to_ascii_lowercase().replace([' ', '_'], "-")
}

/// Asks a Postgres server.
pub async fn postgres(pool: &Pool<Postgres>) -> Facts {
    let text = async |sql: &'static str| -> Option<String> {
        sqlx::query(sql)
            .fetch_one(pool)
            .await
            .ok()?
            .try_get::<String, _>(0)
            .ok()
    };
    let in_use =
        sqlx::query("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
            .fetch_one(pool)
            .await
            .ok()
            .and_then(|row| row.try_get::<i64, _>(0).ok())
            .and_then(|n| u64::try_from(n).ok());
    Facts {
        max_connections: text("SHOW max_connections")
            .await
            .and_then(|n| n.parse().ok()),
        connections_in_use: in_use,
        default_isolation: text("SHOW default_transaction_isolation")
            .await
            .map(|raw| isolation_name(&raw)),
        deadlock_timeout: text("SHOW deadlock_timeout")
            .await
            .and_then(|raw| parse_duration(&raw).ok()),
    }
}

/// Asks a MySQL or MariaDB server.
pub async fn mysql(pool: &Pool<MySql>) -> Facts {
    let text = async |sql: &'static str| -> Option<String> {
        let row = sqlx::query(sql).fetch_one(pool).await.ok()?;
        // Variables come back as numbers or text depending on the server and version.
        row.try_get::<String, _>(0)
            .ok()
            .or_else(|| row.try_get::<u64, _>(0).ok().map(|n| n.to_string()))
            .or_else(|| row.try_get::<i64, _>(0).ok().map(|n| n.to_string()))
    };
    // MySQL 8 and MariaDB 11.1+ name it transaction_isolation; older ones tx_isolation.
    let isolation = match text("SELECT @@transaction_isolation").await {
        Some(level) => Some(level),
        None => text("SELECT @@tx_isolation").await,
    };
    Facts {
        max_connections: text("SELECT @@max_connections")
            .await
            .and_then(|n| n.parse().ok()),
        connections_in_use: text(
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'THREADS_CONNECTED'",
        )
        .await
        .and_then(|n| n.parse().ok()),
        default_isolation: isolation.map(|raw| isolation_name(&raw)),
        deadlock_timeout: None,
    }
}

/// Why `needed` connections (every worker's, plus the lab's own) cannot all be had, as a
/// usage error: more than the server ever accepts. `None` when they fit (or the server did
/// not say).
pub fn too_many(facts: &Facts, needed: u64, flags: &str) -> Option<String> {
    let max = facts.max_connections?;
    (needed > max).then(|| {
        format!(
            "{flags} needs {needed} connections, but the server accepts at most {max} (max_connections); \
             use fewer workers, or raise max_connections on the server"
        )
    })
}

/// A warning when `needed` connections fit the server's limit but not next to the
/// connections other clients hold now: some workers may then wait for a connection and
/// fail with a timeout. `ours` is how many of those in use are the lab's.
pub fn crowded(facts: &Facts, needed: u64, ours: u64) -> Option<String> {
    let max = facts.max_connections?;
    let others = facts.connections_in_use?.saturating_sub(ours);
    (needed + others > max).then(|| {
        format!(
            "warning: {needed} connections needed, but the server accepts {max} (max_connections) \
             and other clients hold {others}: some workers may wait for a connection and fail \
             with a pool timeout"
        )
    })
}
