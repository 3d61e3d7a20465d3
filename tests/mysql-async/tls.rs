//! TLS to MariaDB (a server of its own whose certificate a CA of its own signed:
//! `.ci/mariadb-tls` starts it and prints `TXRETRY_MYSQL_TLS_URL` / `_CERT`). A certificate that fails its check is permanent,
//! surfacing after one attempt even under a failover budget: mysql_async's rustls reports
//! it as an I/O error, which the runner took for a broken connection and retried for the
//! budget's whole length. With the certificate trusted, a deadlock over TLS is retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use mysql_async::prelude::*;
use mysql_async::{Opts, OptsBuilder, Pool, SslOpts};
use txretry::RetryPolicy;

fn pool(url: &str, ssl: SslOpts) -> Pool {
    let opts = Opts::from_url(url).expect("a MySQL URL");
    Pool::new(
        OptsBuilder::from_opts(opts)
            .prefer_socket(false)
            .ssl_opts(ssl),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_that_fails_its_check_surfaces_at_once() {
    let Some((url, _)) = txretry_testkit::mysql_tls("mysql_async::tls_certificate") else {
        return;
    };
    // The built-in roots only: the server's self-signed certificate is not among them.
    let pool = pool(&url, SslOpts::default());
    let calls = Arc::new(AtomicU32::new(0));
    let err = txretry_testkit::wait::within(txretry::mysql_async::transaction(
        &pool,
        &RetryPolicy::high_availability(),
        async |_tx| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok::<_, mysql_async::Error>(())
        },
    ))
    .await
    .expect_err("the certificate is trusted by nothing");
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the closure never ran");
    txretry_testkit::outcome::assert_permanent_once(err.outcome());
    assert!(
        err.error().to_string().contains("certificate"),
        "{}",
        err.error()
    );
    pool.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlock_over_tls_is_retried() {
    let Some((url, cert)) = txretry_testkit::mysql_tls("mysql_async::tls_deadlock") else {
        return;
    };
    // Its CA trusted (the certificate is made out to 127.0.0.1).
    let ssl = SslOpts::default().with_root_certs(vec![std::path::PathBuf::from(cert).into()]);
    let pool = pool(&url, ssl);
    let t = txretry_testkit::unique_name("my_tls_deadlock");
    let mut admin = pool.get_conn().await.unwrap();
    let cipher: Option<(String, String)> = admin
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .await
        .unwrap();
    assert!(
        cipher.is_some_and(|(_, cipher)| !cipher.is_empty()),
        "the connection is not on TLS"
    );
    admin
        .query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB;
             INSERT INTO {t} VALUES (1, 0), (2, 0)"
        ))
        .await
        .unwrap();

    // Two transactions lock the rows in opposite orders, each waiting for the other once
    // both hold their first row: one of them is the deadlock's victim, and runs again.
    let both = Arc::new(tokio::sync::Barrier::new(2));
    let attempts = Arc::new(AtomicU32::new(0));
    let run = |first: i32, second: i32| {
        let (pool, t, both, attempts) = (pool.clone(), t.clone(), both.clone(), attempts.clone());
        async move {
            let mut waited = false;
            txretry::mysql_async::transaction(&pool, &RetryPolicy::default(), async |tx| {
                attempts.fetch_add(1, Ordering::Relaxed);
                tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = {first}"))
                    .await?;
                if !std::mem::replace(&mut waited, true) {
                    both.wait().await;
                }
                tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = {second}"))
                    .await
            })
            .await
        }
    };
    let (a, b) = txretry_testkit::wait::within(async { tokio::join!(run(1, 2), run(2, 1)) }).await;
    a.expect("committed");
    b.expect("committed");
    assert_eq!(attempts.load(Ordering::Relaxed), 3, "one of them ran again");
    let rows: Vec<(i32, i32)> = admin
        .query(format!("SELECT id, v FROM {t} ORDER BY id"))
        .await
        .unwrap();
    assert_eq!(rows, [(1, 2), (2, 2)], "each update once");
    admin.query_drop(format!("DROP TABLE {t}")).await.unwrap();
    drop(admin);
    pool.disconnect().await.unwrap();
}
