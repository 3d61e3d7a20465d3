//! `PrimaryPool` on one real server, with hosts that cannot be it beside it: a host that
//! refuses connections is passed over, and when no host will do, the error says why each
//! was passed over, at once when waiting cannot help. (Switchovers and failovers: the HA
//! cluster's tests, `tests/ha`.)

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use txretry::RetryPolicy;
use txretry::sqlx::{MultiHostError, PrimaryPool};

use crate::common::within;

/// Loopback ports nothing listens on: connecting is refused at once.
const REFUSED: [&str; 2] = ["127.0.0.1:1", "127.0.0.1:2"];

/// `url` with its host list replaced by `hosts` (comma-separated) and, when given, its
/// database by `database`.
fn with_hosts(url: &str, hosts: &str, database: Option<&str>) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let user = authority.rfind('@').map_or("", |at| &authority[..=at]);
    let path = match database {
        Some(db) => {
            let query = path.find('?').map_or("", |q| &path[q..]);
            format!("/{db}{query}")
        }
        None => path.to_owned(),
    };
    format!("{scheme}://{user}{hosts}{path}")
}

/// The `host:port` of the test server.
fn server(url: &str) -> String {
    let options: sqlx::postgres::PgConnectOptions = url.parse().expect("the test URL parses");
    format!("{}:{}", options.get_host(), options.get_port())
}

#[tokio::test]
async fn a_host_that_refuses_is_passed_over_for_the_one_that_accepts_writes() {
    let Some(url) = txretry_testkit::postgres_url("sqlx-postgres primary pool") else {
        return;
    };
    let real = server(&url);
    let multi = with_hosts(&url, &format!("{},{real}", REFUSED[0]), None);
    assert!(PrimaryPool::is_multi_host(&multi));
    let pool = within(PrimaryPool::connect(
        PgPoolOptions::new().max_connections(2),
        &multi,
    ))
    .await
    .expect("the second host accepts writes");
    assert_eq!(
        format!(
            "{}:{}",
            pool.connect_options().get_host(),
            pool.connect_options().get_port()
        ),
        real
    );
    let policy = RetryPolicy::default();
    let one: i32 = within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        sqlx::query_scalar("SELECT 1").fetch_one(&mut **tx).await
    }))
    .await
    .expect("a transaction on the primary");
    assert_eq!(one, 1);
}

#[tokio::test]
async fn hosts_that_all_refuse_for_good_fail_at_once_saying_why() {
    let Some(url) = txretry_testkit::postgres_url("sqlx-postgres primary pool") else {
        return;
    };
    let real = server(&url);
    // The same server twice, asked for a database it does not have: 3D000 on each, which
    // no wait mends. The acquire timeout is an hour: only the refusals can end this.
    let multi = with_hosts(
        &url,
        &format!("{real},{real}"),
        Some("txretry_no_such_database"),
    );
    let options = PgPoolOptions::new().acquire_timeout(Duration::from_secs(3600));
    let err = within(PrimaryPool::connect(options, &multi))
        .await
        .expect_err("no host has the database");
    let MultiHostError::Refused { hosts } = &err else {
        panic!("expected Refused, got {err:?}");
    };
    assert_eq!(hosts.len(), 2, "{err}");
    for host in hosts {
        assert!(host.starts_with(&real), "{host}");
        assert!(host.contains("(code 3D000)"), "{host}");
    }
    assert!(
        err.to_string().contains("txretry_no_such_database"),
        "{err}"
    );
}

#[tokio::test]
async fn no_host_within_the_acquire_timeout_says_why_each_was_passed_over() {
    let Some(url) = txretry_testkit::postgres_url("sqlx-postgres primary pool") else {
        return;
    };
    // A refused connection may be a host restarting: waited for, up to the timeout.
    let multi = with_hosts(&url, &REFUSED.join(","), None);
    let options = PgPoolOptions::new().acquire_timeout(Duration::from_millis(300));
    let err = within(PrimaryPool::connect(options, &multi))
        .await
        .expect_err("nothing listens on either host");
    let MultiHostError::NoPrimary { hosts } = &err else {
        panic!("expected NoPrimary, got {err:?}");
    };
    assert_eq!(hosts.len(), 2, "{err}");
    for (host, address) in hosts.iter().zip(REFUSED) {
        assert!(host.starts_with(&format!("{address} failed: ")), "{host}");
    }
}

/// Session settings reach every connection through the URL's `options` (the guide's
/// advice, since `PrimaryPool` owns the pool's `after_connect` hook).
#[tokio::test]
async fn session_settings_in_the_url_reach_every_connection() {
    let Some(url) = txretry_testkit::postgres_url("sqlx-postgres primary pool options") else {
        return;
    };
    let real = server(&url);
    let multi = with_hosts(&url, &format!("{},{real}", REFUSED[0]), None);
    let separator = if multi.contains('?') { '&' } else { '?' };
    let multi = format!("{multi}{separator}options=-c%20search_path%3Dtxretry_app,public");
    let pool = within(PrimaryPool::connect(
        PgPoolOptions::new().max_connections(2),
        &multi,
    ))
    .await
    .expect("the second host accepts writes");
    let search_path: String = sqlx::query_scalar("SHOW search_path")
        .fetch_one(&*pool)
        .await
        .expect("SHOW answers");
    assert_eq!(search_path, "txretry_app,public");
}

/// A host that accepts connections and never answers (a frozen machine), listed first,
/// does not hold up the search: the hosts are asked at once. The real server is reached
/// through a relay that notes whether the frozen host's probe was still waiting when the
/// real one was asked; asked in turn, it had always timed out (2 s) first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_never_answers_does_not_hold_up_the_search() {
    use std::io::Read;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let Some(url) = txretry_testkit::postgres_url("sqlx-postgres primary pool frozen host") else {
        return;
    };
    // The frozen host: accepts, reads until the client lets go, never writes.
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let frozen_at = frozen.local_addr().unwrap();
    let waiting = Arc::new(AtomicUsize::new(0));
    {
        let waiting = waiting.clone();
        std::thread::spawn(move || {
            for stream in frozen.incoming() {
                let Ok(mut stream) = stream else { return };
                waiting.fetch_add(1, Ordering::SeqCst);
                let waiting = waiting.clone();
                std::thread::spawn(move || {
                    let mut buf = [0_u8; 1024];
                    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
                    waiting.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }
    // The relay to the real server: the first connection (the search's probe) notes
    // whether the frozen host's probe was waiting meanwhile (given a moment to be seen).
    let relay = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_at = relay.local_addr().unwrap();
    let real = server(&url);
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<bool>();
    tokio::spawn(async move {
        let mut seen_tx = Some(seen_tx);
        while let Ok((mut inbound, _)) = relay.accept().await {
            if let Some(tx) = seen_tx.take() {
                let mut frozen_waiting = false;
                for _ in 0..100 {
                    if waiting.load(Ordering::SeqCst) > 0 {
                        frozen_waiting = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _ = tx.send(frozen_waiting);
            }
            let real = real.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&real).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let multi = with_hosts(&url, &format!("{frozen_at},{relay_at}"), None);
    let pool = within(PrimaryPool::connect(
        PgPoolOptions::new().max_connections(1),
        &multi,
    ))
    .await
    .expect("the relayed server accepts writes");
    assert!(
        seen_rx.await.unwrap(),
        "the real host was asked only after the frozen one's probe gave up"
    );
    assert_eq!(
        pool.connect_options().get_port(),
        relay_at.port(),
        "the pool is on the host that answered"
    );
}
