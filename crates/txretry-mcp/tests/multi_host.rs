//! A source on a multi-host Postgres URL, on the one real server: the host that accepts
//! writes is found past one that refuses, and when none does, `check` says why for each
//! host, at once for what waiting cannot fix. (Following the primary through a switchover
//! is `ha.rs`, on the HA cluster.)

mod common;

use common::{Db, call, check, examples, outcome_of, stdio};
use serde_json::json;

/// The host (and port) part of `url`, and `url` with `hosts` there instead.
fn hosts(url: &str, hosts: &str) -> (String, String) {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user, rest) = match rest.split_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), rest),
    };
    let (own, path) = rest.split_once('/').expect("a database");
    (own.to_owned(), format!("{scheme}://{user}{hosts}/{path}"))
}

/// `url` on database `name` instead of its own.
fn on_database(url: &str, name: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a database");
    format!("{base}/{name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_source_finds_the_host_that_accepts_writes() {
    let Some(db) = Db::postgres("multi_host::finds").await else {
        return;
    };
    db.load("orders.sql").await;
    // Nothing listens on port 1: the search passes it over for the real server.
    let (server, _) = hosts(&db.url, "");
    let (_, url) = hosts(&db.url, &format!("127.0.0.1:1,{server}"));
    let env = [("ORDERS_DATABASE_URL", url.as_str())];
    let config = examples().join("orders.yaml");
    let ran = check(&config, &env).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let client = stdio(&config, &["--role", "support"], &env).await;
    let result = call(&client, "cancel_order", json!({ "order_id": 7 }))
        .await
        .expect("the call is answered");
    assert_eq!(outcome_of(&result)["status"], "committed", "{result:?}");
    client.cancel().await.unwrap();
    let status = db.strings("SELECT status FROM orders WHERE id = 7").await;
    assert_eq!(status, ["cancelled"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_host_source_with_no_primary_says_why_for_each_host() {
    let Some(db) = Db::postgres("multi_host::no_primary").await else {
        return;
    };
    let config = examples().join("orders.yaml");
    // Two ports nothing listens on: an outage, waited out for the pool's short acquire
    // timeout, then each host's reason (not "no answer within 10s", which named none).
    let (server, down) = hosts(&db.url, "127.0.0.1:1,127.0.0.1:2");
    let ran = check(&config, &[("ORDERS_DATABASE_URL", down.as_str())]).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("sources.shop.url: cannot connect")
            && ran.stderr.contains("127.0.0.1:1 ")
            && ran.stderr.contains("127.0.0.1:2 ")
            && ran.stderr.contains("refused")
            && !ran.stderr.contains("no answer within"),
        "{ran:?}"
    );
    // Both hosts answer that the database does not exist (3D000): refused, with the
    // server's reason for each host.
    let (_, both) = hosts(&db.url, &format!("{server},{server}"));
    let missing = on_database(&both, "txretry_no_such_database");
    let ran = check(&config, &[("ORDERS_DATABASE_URL", missing.as_str())]).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("sources.shop.url: cannot connect")
            && ran.stderr.contains("3D000")
            && ran.stderr.contains("does not exist"),
        "{ran:?}"
    );
}
