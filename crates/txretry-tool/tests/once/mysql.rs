//! The scenarios on MySQL / MariaDB (TXRETRY_MYSQL_URL), and the commit-fault proxy
//! answering a COMMIT that landed with error 2013.

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};

pub struct Fx {
    pub pool: MySqlPool,
    pub url: String,
}

pub async fn fixture(test: &str) -> Option<Fx> {
    let url = txretry_testkit::mysql_url(test)?;
    let pool = MySqlPoolOptions::new()
        .max_connections(20)
        .connect(&url)
        .await
        .unwrap();
    Some(Fx { pool, url })
}

/// Other sessions in the middle of a statement that names the records' table. While the
/// first claim holds the key, such a statement can only be a duplicate's claim blocked on
/// it. The process list is used rather than `information_schema.innodb_trx`: on a loaded
/// MariaDB 10.11, a claim blocked on the row for seconds was seen missing from
/// `innodb_trx` while the process list showed it executing.
pub async fn waiting(fx: &Fx, records: &str) -> Option<i64> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.processlist \
         WHERE id <> CONNECTION_ID() AND command IN ('Query', 'Execute') AND info LIKE ?",
    )
    .bind(format!("%{records}%"))
    .fetch_one(&fx.pool)
    .await
    .unwrap();
    Some(n)
}

pub fn age_record(records: &str, key: &str) -> String {
    format!(
        "UPDATE {records} SET created_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR \
         WHERE call_key = '{key}'"
    )
}

/// ER_DUP_ENTRY.
pub const UNIQUE_KIND: &str = "MySQL error 1062";

/// InnoDB ends the claims queued behind a rolled-back claim, all but one, as deadlocks.
pub const HANDOFF_DEADLOCKS: bool = true;

once_suite!(sqlx::MySql);
proxy_suite!(sqlx::MySql, MySqlPoolOptions);
