//! Over TLS (`ssl-mode=VERIFY_IDENTITY`, on the MariaDB of `.ci/mariadb-tls`): a runner
//! dropped while its statement runs gives its pool slot back. sqlx returns such a
//! connection through a ping; when the ping reads the killed statement's error, sqlx closes
//! it hard, and its rustls socket's flush waits for the idle server to speak: the slot was
//! held for good (as on Postgres, `tests/sqlx-postgres/tls.rs`). The runner closes a
//! connection dropped inside an attempt instead.

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlSslMode};
use txretry::RetryPolicy;
use txretry_testkit::wait::{poll_until, within};

#[tokio::test]
async fn a_runner_dropped_mid_statement_over_tls_gives_its_pool_slot_back() {
    let Some((url, ca)) = txretry_testkit::mysql_tls("sqlx-mysql tls") else {
        return;
    };
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
        .acquire_timeout(Duration::from_secs(10))
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

    let run = txretry::sqlx::transaction(&pool, &RetryPolicy::default(), async |tx| {
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
            .fetch_one(&direct)
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
