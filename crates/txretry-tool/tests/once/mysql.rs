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

/// InnoDB transactions waiting for a lock in a statement on the records' table.
pub async fn waiting(fx: &Fx, records: &str) -> Option<i64> {
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM information_schema.innodb_trx \
         WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE '%{records}%'"
    )))
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

once_suite!(sqlx::MySql);
proxy_suite!(sqlx::MySql, MySqlPoolOptions);
