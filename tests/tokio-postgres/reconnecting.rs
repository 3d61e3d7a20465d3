//! A `Reconnecting` client replaces a connection the server ended: the backend is
//! terminated in the middle of the first attempt (what every session of a primary meets in
//! a switchover), and under `RetryPolicy::high_availability` the runner connects again and
//! runs the whole transaction once more: one effect. Under a policy without a failover
//! budget the same fault surfaces once. (The switchovers and failovers of a real cluster
//! are in `tests/ha.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use txretry::tokio_postgres::Reconnecting;
use txretry::{Phase, RetryPolicy, StopReason, TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_backend_is_replaced_and_the_transaction_runs_again_once() {
    let Some((url, observer, t)) =
        observed_row("tokio_postgres::reconnecting", "tp_reconnect").await
    else {
        return;
    };

    let mut db = Reconnecting::new(url.parse().unwrap());
    let (policy, seen) = riding_out_a_lost_session();
    let mut attempts = 0;
    let mut pids = Vec::new();
    db.transaction(&policy, async |tx| {
        attempts += 1;
        let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        pids.push(pid);
        // Only the first attempt loses its backend: the retry commits.
        let victim = (attempts == 1).then_some(pid);
        bump_around_termination(tx, &observer, &t, victim).await
    })
    .await
    .expect("the second attempt commits on a new connection");

    assert_eq!(attempts, 2);
    assert_ne!(pids[0], pids[1], "the retry ran on a new backend");
    assert_eq!(value(&observer, &t, 1).await, 2, "one effect: +2 once");
    assert_one_lost_session_in_the_body(&seen, |kind| {
        matches!(kind, TransientKind::Failover | TransientKind::Connection)
    });
    assert!(db.is_connected());
    drop_tables(&observer, &[&t]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_failover_budget_the_same_fault_surfaces_once() {
    let Some((url, observer, t)) = observed_row(
        "tokio_postgres::reconnecting_default",
        "tp_reconnect_default",
    )
    .await
    else {
        return;
    };

    let mut db = Reconnecting::new(url.parse().unwrap());
    let mut attempts = 0;
    let err = db
        .transaction(&RetryPolicy::default(), async |tx| {
            attempts += 1;
            let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
            bump_around_termination(tx, &observer, &t, Some(pid)).await
        })
        .await
        .expect_err("the default policy does not retry a lost session");
    assert_eq!(attempts, 1);
    let outcome = err.outcome();
    assert_eq!(outcome.phase(), Phase::Body);
    assert!(
        matches!(
            outcome.verdict(),
            Verdict::Transient(TransientKind::Failover | TransientKind::Connection)
        ),
        "{outcome:?}"
    );
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    assert!(!db.is_connected(), "the lost connection was let go");
    assert_eq!(
        value(&observer, &t, 1).await,
        0,
        "rolled back by the server"
    );

    // The next call connects again by itself.
    db.transaction(&RetryPolicy::default(), async |tx| {
        tx.execute(&format!("UPDATE {t} SET v = v + 10 WHERE id = 1"), &[])
            .await
    })
    .await
    .expect("a new connection");
    assert_eq!(value(&observer, &t, 1).await, 10);
    drop_tables(&observer, &[&t]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connect_is_a_connection_failure_ridden_out_then_reported() {
    // A port nothing listens on: every connect is refused, like a primary that is down.
    let config: tokio_postgres::Config = "postgres://postgres@127.0.0.1:1/test".parse().unwrap();
    let mut db = Reconnecting::new(config);
    let policy = RetryPolicy::builder()
        .failover(std::time::Duration::from_millis(600))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let err = db
        .transaction(&policy, async |_tx| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok::<_, tokio_postgres::Error>(())
        })
        .await
        .expect_err("nothing to connect to");
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the closure never ran");
    let outcome = err.outcome();
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::Connection)
    );
    assert_eq!(outcome.stop_reason(), StopReason::OutageExceeded);
    assert!(outcome.attempts() > 3, "{outcome:?}");
    assert!(!outcome.may_have_committed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_reconnecting_client_can_be_spawned() {
    let Some(url) = url("tokio_postgres::reconnecting_spawn") else {
        return;
    };
    let mut db = Reconnecting::new(url.parse().unwrap());
    let policy = RetryPolicy::high_availability();
    let answer = tokio::spawn(async move {
        db.transaction(&policy, async move |tx| {
            let row = tx.query_one("SELECT 41 + 1", &[]).await?;
            Ok::<i32, tokio_postgres::Error>(row.get(0))
        })
        .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(answer, 42);
}

/// A call cut short by its deadline while its connection's server is frozen (the proxy
/// holds every answer on that connection from its BEGIN on: what a hung primary that still
/// accepts TCP looks like): the next call starts on a new connection, and commits. It
/// reused the frozen one, and every later call timed out behind the first one's BEGIN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_short_by_its_deadline_leaves_its_connection_behind() {
    let Some((url, observer, t)) = observed_row(
        "tokio_postgres::reconnecting_deadline",
        "tp_reconnect_deadline",
    )
    .await
    else {
        return;
    };
    let proxy = txretry_testkit::CommitFaultProxy::start(&url).unwrap();
    let mut db = Reconnecting::new(proxy.url().parse().unwrap());
    let policy = RetryPolicy::default();
    let bump = format!("UPDATE {t} SET v = v + 1 WHERE id = 1");
    db.transaction(&policy, async |tx| tx.batch_execute(&bump).await)
        .await
        .expect("a first call, on a connection that answers");

    proxy.hold_replies_from_next_begin();
    let frozen = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        db.transaction(&policy, async |tx| tx.batch_execute(&bump).await),
    )
    .await;
    assert!(
        frozen.is_err(),
        "the frozen connection answered: {frozen:?}"
    );

    // The frozen connection stays frozen; the next call must not wait behind it.
    txretry_testkit::wait::within(
        db.transaction(&policy, async |tx| tx.batch_execute(&bump).await),
    )
    .await
    .expect("the next call commits on a new connection");
    assert_eq!(
        value(&observer, &t, 1).await,
        2,
        "the first and the third call"
    );
    proxy.release_replies();
    drop(db);
    drop_tables(&observer, &[&t]).await;
}

/// `url` with a host before its own that accepts connections and never answers (a frozen
/// primary: stopped, or cut off after its kernel accepted the connection), every host
/// bounded by a 1 s `connect_timeout`. The listener must live as long as the config is
/// used: its kernel completes every handshake into the backlog.
fn behind_a_frozen_host(url: &str) -> (tokio_postgres::Config, std::net::TcpListener) {
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = frozen.local_addr().unwrap().port();
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, hosts) = match rest.rsplit_once('@') {
        Some((user, hosts)) => (format!("{user}@"), hosts),
        None => (String::new(), rest),
    };
    let sep = if hosts.contains('?') { '&' } else { '?' };
    let url = format!(
        "{scheme}://{user}127.0.0.1:{port},{hosts}{sep}connect_timeout=1&target_session_attrs=read-write"
    );
    (url.parse().unwrap(), frozen)
}

/// The frozen first host is given up after `connect_timeout` and the next host serves the
/// call, as libpq does. tokio-postgres bounds only the TCP connect, which the frozen
/// host's kernel completes: the connect waited for its startup answer for ever, and the
/// primary after it (where a failover went) was never tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_first_host_is_passed_over_after_connect_timeout() {
    let Some(url) = url("tokio_postgres::frozen_host") else {
        return;
    };
    let (config, _frozen) = behind_a_frozen_host(&url);
    let mut db = Reconnecting::new(config);
    let answer =
        txretry_testkit::wait::within(db.transaction(&RetryPolicy::default(), async |tx| {
            let row = tx.query_one("SELECT 41 + 1", &[]).await?;
            Ok::<i32, tokio_postgres::Error>(row.get(0))
        }))
        .await
        .expect("the second host serves the call");
    assert_eq!(answer, 42);
    assert!(db.is_connected());
}

/// Every host frozen: each connect gives up after `connect_timeout`, a connection failure
/// (nothing ran), ridden out under a failover budget and then reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_never_answer_are_a_connection_failure_not_a_hang() {
    let frozen = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config: tokio_postgres::Config = format!(
        "host=127.0.0.1 port={} user=postgres dbname=test connect_timeout=1",
        frozen.local_addr().unwrap().port()
    )
    .parse()
    .unwrap();
    let mut db = Reconnecting::new(config);
    let policy = RetryPolicy::builder()
        .failover(std::time::Duration::from_millis(1500))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let err = txretry_testkit::wait::within(db.transaction(&policy, async |_tx| {
        calls.fetch_add(1, Ordering::Relaxed);
        Ok::<_, tokio_postgres::Error>(())
    }))
    .await
    .expect_err("nothing answers");
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the closure never ran");
    assert!(
        err.error().to_string().contains("timeout"),
        "{}",
        err.error()
    );
    let outcome = err.outcome();
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::Connection)
    );
    assert_eq!(outcome.stop_reason(), StopReason::OutageExceeded);
    assert!(outcome.attempts() >= 2, "{outcome:?}");
    assert!(!outcome.may_have_committed());
}

/// A connect whose TLS fails for good (rustls trusts no root here, so the server's
/// certificate fails its check; a server without TLS fails `sslmode=require`) is the
/// failure it is, permanent: under a failover budget it was a connection failure, and the
/// same connect failed again and again until the budget ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_failure_at_connect_surfaces_at_once() {
    let Some(url) = url("tokio_postgres::tls_failure") else {
        return;
    };
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.ssl_mode(tokio_postgres::config::SslMode::Require);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let mut db = Reconnecting::with_tls(config, tokio_postgres_rustls::MakeRustlsConnect::new(tls));
    let calls = Arc::new(AtomicU32::new(0));
    let err = txretry_testkit::wait::within(db.transaction(
        &RetryPolicy::high_availability(),
        async |_tx| {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok::<_, tokio_postgres::Error>(())
        },
    ))
    .await
    .expect_err("the certificate is trusted by nothing");
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the closure never ran");
    txretry_testkit::outcome::assert_permanent_once(err.outcome());
    let cause = std::error::Error::source(err.error()).map(ToString::to_string);
    assert!(
        cause
            .as_deref()
            .is_some_and(|c| c.contains("certificate") || c.contains("TLS")),
        "{cause:?}"
    );
}
