//! A lost COMMIT reply: the testkit's commit-fault proxy between the server under test and
//! the database lets a COMMIT land, then breaks the connection instead of passing its answer
//! on. A `once` tool resolves the doubt from its record (committed, its effect applied once,
//! and the same call sent again answered from the record); a tool without `once` says
//! `ambiguous` and is not run again.

mod common;

use serde_json::json;
use txretry_testkit::CommitFaultProxy;

use common::{Db, Kind, money, outcome, stdio};

/// orders.yaml plus a transfer without `once`, served through a commit-fault proxy.
async fn through_proxy(db: &Db) -> (CommitFaultProxy, common::Client) {
    db.load("orders.sql").await;
    let proxy = CommitFaultProxy::start(&db.url).unwrap();
    let yaml = common::example("orders.yaml")
        + r#"
  transfer_plain:
    source: shop
    description: Move cents, without a once record.
    roles: [teller]
    parameters:
      from: { type: integer }
      to: { type: integer }
      cents: { type: integer, min: 1 }
      request_id: { type: string, min: 1, max: 64 }
    statements:
      - sql: UPDATE accounts SET cents = cents - :cents WHERE id = :from AND cents >= :cents
        expect: { rows: 1, error: "account {from} short" }
      - sql: UPDATE accounts SET cents = cents + :cents WHERE id = :to
      - sql: INSERT INTO ledger (request_id, from_account, to_account, cents) VALUES (:request_id, :from, :to, :cents)
    returns: affected
"#;
    let path = db.write("orders-proxy.yaml", &yaml);
    let client = stdio(
        &path,
        &["--role", "teller", "--role", "support"],
        &[("ORDERS_DATABASE_URL", proxy.url())],
    )
    .await;
    (proxy, client)
}

/// [`through_proxy`], and a first `once` call (3 to 3: no money moves; ledger row `w-0`)
/// that creates the records' table: on Postgres that is a transaction of its own, whose
/// COMMIT would otherwise be the one faulted.
async fn warmed_up(db: &Db) -> (CommitFaultProxy, common::Client) {
    let (proxy, client) = through_proxy(db).await;
    let warm = outcome(
        &client,
        "transfer",
        json!({"from": 3, "to": 3, "cents": 1, "request_id": "w-0"}),
    )
    .await;
    assert_eq!(warm["status"], "committed", "{warm}");
    (proxy, client)
}

/// The very first `once` call's lost COMMIT reply on Postgres is that of the records'
/// table creation (its own transaction): the call fails before its work ran, nothing is
/// written, and sending it again commits it once. (MariaDB creates the table with one
/// statement, no COMMIT: the fault hits the call's own COMMIT, resolved by the record.)
async fn a_lost_reply_while_creating_the_records_table(db: Db) {
    let (proxy, client) = through_proxy(&db).await;
    let arguments = json!({"from": 1, "to": 2, "cents": 5, "request_id": "m-1"});
    proxy.arm_commit_faults(1);
    let first = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(proxy.faults_injected(), 1);
    let written = money(&db).await;
    match first["status"].as_str().unwrap() {
        "failed" => {
            assert_eq!(db.kind, Kind::Postgres, "{first}");
            assert_eq!(written, (vec![10_000, 10_000, 10_000], vec![]), "{first}");
        }
        "committed" => {
            assert_eq!(db.kind, Kind::MariaDb, "{first}");
            assert_eq!(written.1, ["m-1"], "{first}");
        }
        _ => panic!("{first}"),
    }
    let again = outcome(&client, "transfer", arguments).await;
    assert_eq!(again["status"], "committed", "{again}");
    assert_eq!(
        money(&db).await,
        (vec![9_995, 10_005, 10_000], vec!["m-1".to_owned()]),
        "applied once"
    );
    client.cancel().await.unwrap();
}

async fn a_lost_commit_reply_of_a_once_tool_is_resolved_by_its_record(db: Db) {
    let (proxy, client) = warmed_up(&db).await;
    let arguments = json!({"from": 1, "to": 2, "cents": 250, "request_id": "f-1"});
    proxy.arm_commit_faults(1);
    let first = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(proxy.faults_injected(), 1, "the COMMIT's reply was lost");
    assert_eq!(
        first["status"], "committed",
        "resolved by the record: {first}"
    );
    assert_eq!(
        first["result"],
        "moved 250 cents from account 1 to account 2"
    );
    assert_eq!(
        money(&db).await,
        (
            vec![9_750, 10_250, 10_000],
            vec!["f-1".to_owned(), "w-0".to_owned()]
        ),
        "applied once"
    );
    // The same call again: the recorded answer, nothing more written.
    let again = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(again["status"], "committed", "{again}");
    assert_eq!(again["result"], first["result"]);
    assert_eq!(
        money(&db).await,
        (
            vec![9_750, 10_250, 10_000],
            vec!["f-1".to_owned(), "w-0".to_owned()]
        )
    );

    // A lost reply on cancel_order too (its captures and template replayed from the record).
    proxy.arm_commit_faults(1);
    let cancel = outcome(&client, "cancel_order", json!({"order_id": 7})).await;
    assert_eq!(proxy.faults_injected(), 2);
    assert_eq!(cancel["status"], "committed", "{cancel}");
    assert_eq!(
        cancel["result"],
        "order 7 cancelled: 2500 cents back to account 1"
    );
    let again = outcome(&client, "cancel_order", json!({"order_id": 7})).await;
    assert_eq!(again["result"], cancel["result"], "{again}");
    assert_eq!(
        db.ints("SELECT cents FROM accounts WHERE id = 1").await,
        [12_250]
    );
    assert_eq!(proxy.armed_faults(), 0);
    client.cancel().await.unwrap();
}

/// Several lost replies in a row, on calls at once: each call resolved, each effect once.
async fn lost_commit_replies_of_concurrent_once_calls(db: Db) {
    let (proxy, client) = warmed_up(&db).await;
    proxy.arm_commit_faults(4);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..8_i64 {
        let peer = client.peer().clone();
        set.spawn(async move {
            let arguments =
                json!({"from": 3, "to": 1 + i % 2, "cents": 1 + i, "request_id": format!("c-{i}")});
            let params = rmcp::model::CallToolRequestParams::new("transfer")
                .with_arguments(common::object(arguments.clone()));
            (arguments, peer.call_tool(params).await)
        });
    }
    while let Some(joined) = common::within("8 transfers", set.join_next()).await {
        let (arguments, result) = joined.unwrap();
        let result = result.unwrap_or_else(|e| panic!("{arguments}: {e:?}"));
        let outcome = common::outcome_of(&result);
        assert_eq!(outcome["status"], "committed", "{arguments}: {outcome}");
    }
    assert_eq!(proxy.faults_injected(), 4);
    let (balances, ledger) = money(&db).await;
    assert_eq!(ledger.len(), 9, "{ledger:?}");
    assert_eq!(balances[2], 10_000 - (1..=8).sum::<i64>(), "{balances:?}");
    assert_eq!(balances.iter().sum::<i64>(), 30_000);
    client.cancel().await.unwrap();
}

/// Without `once`, a lost COMMIT reply is `ambiguous`: the call is not run again, and the
/// transaction did commit.
async fn a_lost_commit_reply_without_once_is_ambiguous(db: Db) {
    let (proxy, client) = warmed_up(&db).await;
    proxy.arm_commit_faults(1);
    let lost = outcome(
        &client,
        "transfer_plain",
        json!({"from": 1, "to": 2, "cents": 40, "request_id": "p-1"}),
    )
    .await;
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(lost["status"], "ambiguous", "{lost}");
    assert_eq!(lost["attempts"], 1, "not run again: {lost}");
    assert!(lost["error"].is_string(), "{lost}");
    assert!(lost.get("result").is_none(), "{lost}");
    assert_eq!(
        money(&db).await,
        (
            vec![9_960, 10_040, 10_000],
            vec!["p-1".to_owned(), "w-0".to_owned()]
        ),
        "it did commit, once"
    );
    client.cancel().await.unwrap();
}

macro_rules! on_servers {
    ($($scenario:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let test = concat!(module_path!(), "::", stringify!($scenario));
                    let Some(db) = crate::common::Db::postgres(test).await else { return };
                    assert_eq!(db.kind, crate::common::Kind::Postgres);
                    super::$scenario(db).await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let test = concat!(module_path!(), "::", stringify!($scenario));
                    let Some(db) = crate::common::Db::mariadb(test).await else { return };
                    super::$scenario(db).await;
                }
            )*
        }
    };
}

on_servers!(
    a_lost_reply_while_creating_the_records_table,
    a_lost_commit_reply_of_a_once_tool_is_resolved_by_its_record,
    lost_commit_replies_of_concurrent_once_calls,
    a_lost_commit_reply_without_once_is_ambiguous,
);
