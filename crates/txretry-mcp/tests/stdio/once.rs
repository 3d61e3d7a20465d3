//! Exactly once: colliding transfers that deadlock for real and still commit once each, and
//! a repeated `once` call answered from its record (by the same server or another).

use std::collections::HashSet;

use serde_json::json;

use super::{TELLER, orders, orders_again};
use crate::common::{self, Db, Kind, money, outcome, stdio};

/// 24 transfers at once between accounts 1 and 2, half each way: on the servers they
/// deadlock for real; every one commits exactly once.
pub(crate) async fn colliding_transfers_commit_exactly_once(db: Db) {
    db.load("orders.sql").await;
    // orders.yaml with room for more retries: on Postgres one call saw 11 attempts (each
    // deadlock costs deadlock_timeout, 1 s, and 8 connections collide).
    let example = common::example("orders.yaml");
    assert!(example.contains("max_attempts: 20"));
    let yaml = example.replace("max_attempts: 20", "max_attempts: 30");
    let path = db.write("orders-30.yaml", &yaml);
    let client = stdio(&path, TELLER, &[("ORDERS_DATABASE_URL", db.url.as_str())]).await;
    const CALLS: i64 = 24;
    // On the servers, the two accounts are held until the server's transactions queue for
    // them: when they are let go, one transaction of each direction gets its first row and
    // waits for the other's: a deadlock, for sure.
    let mut holder = match db.kind {
        Kind::Sqlite => None,
        Kind::Postgres | Kind::MariaDb => {
            let mut conn = db.connect().await;
            conn.run("BEGIN; SELECT id FROM accounts WHERE id IN (1, 2) FOR UPDATE")
                .await;
            Some(conn)
        }
    };
    let mut set = tokio::task::JoinSet::new();
    for i in 0..CALLS {
        let peer = client.peer().clone();
        let (from, to) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
        let arguments =
            json!({"from": from, "to": to, "cents": 10 + i, "request_id": format!("t-{i:02}")});
        set.spawn(async move {
            let params = rmcp::model::CallToolRequestParams::new("transfer")
                .with_arguments(common::object(arguments.clone()));
            (i, arguments, peer.call_tool(params).await)
        });
    }
    if let Some(mut conn) = holder.take() {
        let waiting = match db.kind {
            Kind::Postgres => {
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            }
            _ => {
                "SELECT count(*) FROM information_schema.processlist WHERE db = database() AND info LIKE 'UPDATE accounts%'"
            }
        };
        let mut watch = db.connect().await;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        // The pool's 8 connections, each waiting at its first UPDATE.
        while watch.ints(waiting).await[0] < 8 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server's transactions never queued for the held accounts"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        conn.run("COMMIT").await;
        conn.close().await;
        watch.close().await;
    }
    let mut attempts = Vec::new();
    while let Some(joined) = common::within("24 transfers", set.join_next()).await {
        let (i, arguments, result) = joined.unwrap();
        let result = result.unwrap_or_else(|e| panic!("{arguments}: not a result: {e:?}"));
        let outcome = common::outcome_of(&result);
        assert_eq!(outcome["status"], "committed", "{arguments}: {outcome}");
        let (from, to) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
        assert_eq!(
            outcome["result"],
            format!("moved {} cents from account {from} to account {to}", 10 + i)
        );
        attempts.push(outcome["attempts"].as_u64().unwrap());
    }
    let (balances, ledger) = money(&db).await;
    let expected: Vec<String> = (0..CALLS).map(|i| format!("t-{i:02}")).collect();
    assert_eq!(ledger, expected, "one ledger row per transfer");
    let net: i64 = (0..CALLS)
        .map(|i| if i % 2 == 0 { -(10 + i) } else { 10 + i })
        .sum();
    assert_eq!(
        balances,
        [10_000 + net, 10_000 - net, 10_000],
        "each applied once"
    );
    assert_eq!(
        balances.iter().sum::<i64>(),
        30_000,
        "no money made or lost"
    );
    let ledger_cents = db.ints("SELECT cents FROM ledger").await;
    assert_eq!(
        ledger_cents.iter().sum::<i64>(),
        (0..CALLS).map(|i| 10 + i).sum::<i64>()
    );
    eprintln!("{:?}: attempts {attempts:?}", db.kind);
    if db.kind != Kind::Sqlite {
        assert!(
            attempts.iter().any(|&n| n > 1),
            "the transfers collided for real and were retried: {attempts:?}"
        );
    }
    client.cancel().await.unwrap();
}

pub(crate) async fn a_repeated_once_call_returns_the_recorded_answer(db: Db) {
    let client = orders(&db, TELLER).await;
    let arguments = json!({"from": 3, "to": 1, "cents": 700, "request_id": "o-1"});
    let first = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(first["status"], "committed", "{first}");
    assert_eq!(
        first["result"],
        "moved 700 cents from account 3 to account 1"
    );
    assert_eq!(first.get("replayed"), None, "{first}");
    let again = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(again["status"], "committed", "{again}");
    assert_eq!(again["result"], first["result"]);
    assert_eq!(again["replayed"], true, "{again}");
    // From another server process too (the record is in the database).
    let other = orders_again(&db, TELLER).await;
    let third = outcome(&other, "transfer", arguments.clone()).await;
    assert_eq!(third["result"], first["result"], "{third}");
    assert_eq!(third["replayed"], true, "{third}");
    assert_eq!(
        money(&db).await,
        (vec![10_700, 10_000, 9_300], vec!["o-1".to_owned()])
    );

    // cancel_order: a second cancel of the same order is answered from the record.
    let cancel = outcome(&client, "cancel_order", json!({"order_id": 7})).await;
    assert_eq!(
        cancel["result"], "order 7 cancelled: 2500 cents back to account 1",
        "{cancel}"
    );
    let again = outcome(&other, "cancel_order", json!({"order_id": 7})).await;
    assert_eq!(again["status"], "committed", "{again}");
    assert_eq!(again["result"], cancel["result"]);
    assert_eq!(again["replayed"], true, "{again}");
    // A business error recorded by the first call is that call's: replayed, and said so,
    // although the account has the money now.
    let short = json!({"from": 2, "to": 1, "cents": 999_999, "request_id": "o-2"});
    let refused = outcome(&client, "transfer", short.clone()).await;
    assert_eq!(refused["status"], "business_error", "{refused}");
    assert_eq!(refused.get("replayed"), None, "{refused}");
    db.exec("UPDATE accounts SET cents = 2000000 WHERE id = 2")
        .await;
    let repeated = outcome(&other, "transfer", short).await;
    assert_eq!(repeated["status"], "business_error", "{repeated}");
    assert_eq!(repeated["replayed"], true, "{repeated}");
    let error = repeated["error"].as_str().unwrap();
    assert!(
        error.contains("short of 999999 cents") && error.contains("use another key"),
        "{repeated}"
    );
    db.exec("UPDATE accounts SET cents = 10000 WHERE id = 2")
        .await;
    assert_eq!(
        db.ints("SELECT cents FROM accounts WHERE id = 1").await,
        [13_200]
    );
    let calls: HashSet<String> = [&first, &again, &cancel]
        .iter()
        .map(|o| o["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls.len(), 3, "each call has its own id");
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
}
