//! Over TLS (`ssl-mode=VERIFY_IDENTITY`, on the MariaDB of `.ci/mariadb-tls`): a runner
//! dropped while its statement runs gives its pool slot back, at once. sqlx returns such a
//! connection through a ping; when the ping reads the killed statement's error, sqlx closes
//! it hard, and its rustls socket's flush waits for the idle server to speak: the slot was
//! held for good (as on Postgres, `tests/sqlx-postgres/tls.rs`). The runner then closed a
//! connection dropped inside an attempt gracefully, and that close's flush waits for the
//! busy server alike, up to sqlx's 5 s bound. It now drops the connection at once.

use std::str::FromStr;
use std::time::Duration;

use sqlx::MySqlPool;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlSslMode};
use txretry::RetryPolicy;
use txretry_testkit::wait::{poll_until, within};

/// A pool of one TLS connection whose workers wait at most `acquire` for it, a second pool
/// for looking on, and the first's connection id; `None` without the TLS server.
async fn tls_pools(test: &str, acquire: Duration) -> Option<(MySqlPool, MySqlPool, u64)> {
    let (url, ca) = txretry_testkit::mysql_tls(test)?;
    let options = MySqlConnectOptions::from_str(&url)
        .unwrap()
        .ssl_mode(MySqlSslMode::VerifyIdentity)
        .ssl_ca(ca);
    let direct = MySqlPoolOptions::new()
        .max_connections(1)
        .connect_with(options.clone())
        .await
        .unwrap();
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(acquire)
        .connect_with(options)
        .await
        .unwrap();
    let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&pool)
        .await
        .unwrap();
    let cipher: (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!cipher.1.is_empty(), "the pool's connection is not on TLS");
    Some((pool, direct, id))
}

/// Drops a runner on `pool` while its statement (session `id`) sleeps in the server.
async fn drop_mid_statement(pool: &MySqlPool, direct: &MySqlPool, id: u64) {
    let run = txretry::sqlx::transaction(pool, &RetryPolicy::default(), async |tx| {
        sqlx::query("SELECT SLEEP(60)")
            .execute(&mut **tx)
            .await
            .map(drop)
    });
    let sleeping = async {
        poll_until("the runner's statement never ran", async || {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM information_schema.processlist \
                 WHERE id = ? AND info = 'SELECT SLEEP(60)'",
            )
            .bind(id)
            .fetch_one(direct)
            .await
            .unwrap()
                == 1
        })
        .await;
    };
    tokio::select! {
        done = run => panic!("the runner ended while its statement slept: {done:?}"),
        () = sleeping => {} // `run` is dropped here, mid-statement
    }
}

#[tokio::test]
async fn a_runner_dropped_mid_statement_over_tls_gives_its_pool_slot_back() {
    let Some((pool, direct, id)) = tls_pools("sqlx-mysql tls", Duration::from_secs(10)).await
    else {
        return;
    };
    drop_mid_statement(&pool, &direct, id).await;
    // The statement ends with an error the dropped runner never reads; the session is
    // idle after it.
    sqlx::query(sqlx::AssertSqlSafe(format!("KILL QUERY {id}")))
        .execute(&direct)
        .await
        .unwrap();

    let mut conn = within(pool.acquire())
        .await
        .expect("the pool's slot never came back");
    let again: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_ne!(again, id, "the dropped attempt's connection was pooled");
    drop(conn);
    within(pool.close()).await;
    direct.close().await;
}

/// With the server still busy with the dropped statement, the slot is free within the
/// pool's 2 s acquire timeout: a new connection, while the old session still sleeps.
#[tokio::test]
async fn a_runner_dropped_mid_statement_over_tls_frees_its_slot_at_once() {
    let Some((pool, direct, id)) = tls_pools("sqlx-mysql tls slot", Duration::from_secs(2)).await
    else {
        return;
    };
    drop_mid_statement(&pool, &direct, id).await;
    let again: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&pool)
        .await
        .expect("the pool's one slot was still held by the dropped connection");
    assert_ne!(again, id, "the dropped attempt's connection was pooled");
    sqlx::query(sqlx::AssertSqlSafe(format!("KILL {id}")))
        .execute(&direct)
        .await
        .unwrap();
    within(pool.close()).await;
    direct.close().await;
}
