//! The binary serving the examples over stdio to rmcp's client (a child process), on
//! SQLite, Postgres and MariaDB: what each caller is offered, the schemas and annotations,
//! colliding transfers that deadlock for real and still commit exactly once, business
//! errors, arguments refused before the database, `once` answered from its record, and the
//! inventory's captures and expectations.

mod common;

use std::collections::HashSet;

use serde_json::{Value, json};

use common::{
    Client, Db, INVALID_PARAMS, Kind, call, money, outcome, protocol_error, stdio, tool_names,
    tools,
};

/// orders.sql loaded, and orders.yaml served with `args`.
async fn orders(db: &Db, args: &[&str]) -> Client {
    db.load("orders.sql").await;
    orders_again(db, args).await
}

/// Another server of orders.yaml on the same database.
async fn orders_again(db: &Db, args: &[&str]) -> Client {
    stdio(
        &common::examples().join("orders.yaml"),
        args,
        &[("ORDERS_DATABASE_URL", db.url.as_str())],
    )
    .await
}

const TELLER: &[&str] = &["--role", "support", "--role", "teller"];

async fn tools_offered_per_role_and_toolset(db: Db) {
    db.load("orders.sql").await;
    let cases: &[(&[&str], &[&str])] = &[
        (&[], &["get_order"]),
        (&["--role", "support"], &["get_order", "cancel_order"]),
        (&["--role", "teller"], &["get_order", "transfer"]),
        (TELLER, &["get_order", "cancel_order", "transfer"]),
        (
            &[
                "--role",
                "support",
                "--role",
                "teller",
                "--toolset",
                "viewer",
            ],
            &["get_order"],
        ),
        (
            &[
                "--role",
                "support",
                "--role",
                "teller",
                "--toolset",
                "agent",
            ],
            &["get_order", "cancel_order", "transfer"],
        ),
        // The toolset narrows; it never grants what the roles do not.
        (&["--toolset", "agent"], &["get_order"]),
        (&["--role", "nobody"], &["get_order"]),
    ];
    for (args, expected) in cases {
        let client = orders_again(&db, args).await;
        assert_eq!(tool_names(&client).await, *expected, "{args:?}");
        // What is not offered cannot be called, and says so as an unknown tool does.
        if !expected.contains(&"transfer") {
            let refused = protocol_error(
                &client,
                "transfer",
                json!({"from": 1, "to": 2, "cents": 5, "request_id": "x"}),
            )
            .await;
            let unknown = protocol_error(&client, "transfers", json!({})).await;
            assert_eq!(refused.code, INVALID_PARAMS, "{args:?}");
            assert_eq!(unknown.code, INVALID_PARAMS, "{args:?}");
            assert_eq!(
                refused.message.replace("transfer", "X"),
                unknown.message.replace("transfers", "X"),
                "not offered and unknown look alike"
            );
        }
        client.cancel().await.unwrap();
    }
    assert_eq!(money(&db).await.1, Vec::<String>::new(), "nothing ran");
}

async fn schemas_and_annotations(db: Db) {
    db.load("orders.sql").await;
    // orders.yaml and one more tool that declares itself idempotent.
    let yaml = common::example("orders.yaml")
        + r#"
  set_status:
    source: shop
    description: Set an order's status.
    roles: [support]
    idempotent: true
    parameters:
      order_id: { type: integer, min: 1 }
      status: { type: string, enum: [open, shipped], default: open }
    statements:
      - sql: UPDATE orders SET status = :status WHERE id = :order_id
    returns: affected
"#;
    let path = db.write("orders-plus.yaml", &yaml);
    let client = stdio(&path, TELLER, &[("ORDERS_DATABASE_URL", db.url.as_str())]).await;
    let listed = tools(&client).await;
    let tool = |name: &str| listed.iter().find(|t| t.name == name).unwrap().clone();

    let transfer = tool("transfer");
    let schema = Value::Object((*transfer.input_schema).clone());
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["required"],
        json!(["from", "to", "cents", "request_id"])
    );
    let properties = schema["properties"].as_object().unwrap();
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["from", "to", "cents", "request_id"],
        "in the declared order"
    );
    assert_eq!(properties["from"]["type"], "integer");
    assert_eq!(
        properties["from"]["description"],
        "The account to take from."
    );
    assert_eq!(properties["cents"]["minimum"], 1);
    assert_eq!(properties["cents"]["maximum"], 1_000_000);
    assert_eq!(properties["request_id"]["type"], "string");
    assert_eq!(properties["request_id"]["minLength"], 1);
    assert_eq!(properties["request_id"]["maxLength"], 64);
    assert_eq!(
        transfer.description.as_deref(),
        Some("Move cents from one account to another.")
    );

    let set_status = tool("set_status");
    let schema = Value::Object((*set_status.input_schema).clone());
    assert_eq!(
        schema["required"],
        json!(["order_id"]),
        "a default makes it optional"
    );
    assert_eq!(
        schema["properties"]["status"]["enum"],
        json!(["open", "shipped"])
    );
    assert_eq!(schema["properties"]["status"]["default"], "open");

    // The output schema: the outcome, its result as the tool returns it.
    let output = Value::Object((*tool("get_order").output_schema.unwrap()).clone());
    assert_eq!(output["required"], json!(["status", "call_id", "attempts"]));
    assert_eq!(
        output["properties"]["result"]["type"],
        json!(["object", "null"])
    );
    let output = Value::Object((*set_status.output_schema.clone().unwrap()).clone());
    assert_eq!(output["properties"]["result"]["items"]["type"], "integer");

    let hints = |name: &str| {
        let annotations = tool(name).annotations.unwrap_or_default();
        (annotations.read_only_hint, annotations.idempotent_hint)
    };
    assert_eq!(hints("get_order").0, Some(true), "read_only: readOnlyHint");
    assert_ne!(hints("transfer").0, Some(true));
    assert_ne!(hints("cancel_order").0, Some(true));
    // Not claimed unless declared. (Strictly, the contract says absent; txretry-tool sends
    // `false`, which the spec reads the same: see `idempotent_hint_is_absent_unless_declared`.)
    assert_ne!(
        hints("transfer").1,
        Some(true),
        "not idempotent unless declared"
    );
    assert_ne!(
        hints("cancel_order").1,
        Some(true),
        "not idempotent unless declared"
    );
    assert_eq!(hints("set_status").1, Some(true), "declared idempotent");

    // The default applies; an enum refuses what it does not list.
    let set = outcome(&client, "set_status", json!({"order_id": 9})).await;
    assert_eq!(set["status"], "committed", "{set}");
    assert_eq!(set["result"], json!([1]));
    let wrong = protocol_error(
        &client,
        "set_status",
        json!({"order_id": 9, "status": "lost"}),
    )
    .await;
    assert_eq!(wrong.code, INVALID_PARAMS, "{wrong:?}");
    let order = outcome(&client, "get_order", json!({"order_id": 9})).await;
    assert_eq!(order["result"]["status"], "open", "{order}");
    client.cancel().await.unwrap();
}

/// 24 transfers at once between accounts 1 and 2, half each way: on the servers they
/// deadlock for real; every one commits exactly once.
async fn colliding_transfers_commit_exactly_once(db: Db) {
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

async fn a_business_error_is_told_once_and_writes_nothing(db: Db) {
    let client = orders(&db, TELLER).await;
    let before = money(&db).await;
    let short = outcome(
        &client,
        "transfer",
        json!({"from": 1, "to": 2, "cents": 999_999, "request_id": "b-1"}),
    )
    .await;
    assert_eq!(short["status"], "business_error", "{short}");
    assert_eq!(short["attempts"], 1, "not retried: {short}");
    assert!(
        short["error"]
            .as_str()
            .unwrap()
            .contains("account 1 not found or short of 999999 cents"),
        "{short}"
    );
    assert!(short.get("result").is_none(), "{short}");
    // The second statement's expectation: the first one's update is rolled back with it.
    let nowhere = outcome(
        &client,
        "transfer",
        json!({"from": 1, "to": 42, "cents": 5, "request_id": "b-2"}),
    )
    .await;
    assert_eq!(nowhere["status"], "business_error", "{nowhere}");
    assert!(
        nowhere["error"]
            .as_str()
            .unwrap()
            .contains("account 42 not found"),
        "{nowhere}"
    );
    let cancel = outcome(&client, "cancel_order", json!({"order_id": 9})).await;
    assert_eq!(cancel["status"], "business_error", "{cancel}");
    assert!(
        cancel["error"]
            .as_str()
            .unwrap()
            .contains("order 9 not found or not open"),
        "{cancel}"
    );
    let missing = outcome(&client, "get_order", json!({"order_id": 404})).await;
    assert_eq!(missing["status"], "business_error", "{missing}");
    assert!(
        missing["error"]
            .as_str()
            .unwrap()
            .contains("order 404 not found"),
        "{missing}"
    );
    assert_eq!(money(&db).await, before, "nothing written");
    assert_eq!(
        db.strings("SELECT status FROM orders ORDER BY id").await,
        ["open", "open", "shipped"]
    );
    client.cancel().await.unwrap();
}

async fn invalid_arguments_never_reach_the_database(db: Db) {
    let client = orders(&db, TELLER).await;
    let before = money(&db).await;
    let cases = [
        (
            json!({"from": 1, "to": 2, "cents": 0, "request_id": "i-1"}),
            "cents",
        ),
        (
            json!({"from": 1, "to": 2, "cents": 1_000_001, "request_id": "i-2"}),
            "cents",
        ),
        (
            json!({"from": 1, "to": 2, "cents": "ten", "request_id": "i-3"}),
            "cents",
        ),
        (
            json!({"from": 1, "to": 2, "cents": 2.5, "request_id": "i-4"}),
            "cents",
        ),
        (json!({"from": 1, "to": 2, "cents": 5}), "request_id"),
        (
            json!({"from": 1, "to": 2, "cents": 5, "request_id": ""}),
            "request_id",
        ),
        (
            json!({"from": 1, "to": 2, "cents": 5, "request_id": "x".repeat(65)}),
            "request_id",
        ),
        (
            json!({"from": 1, "to": 2, "cents": 5, "request_id": "i-8", "memo": "hi"}),
            "memo",
        ),
        (
            json!({"from": "1; DROP TABLE ledger", "to": 2, "cents": 5, "request_id": "i-9"}),
            "from",
        ),
        (
            json!({"from": null, "to": 2, "cents": 5, "request_id": "i-10"}),
            "from",
        ),
    ];
    for (arguments, field) in cases {
        let error = protocol_error(&client, "transfer", arguments.clone()).await;
        assert_eq!(error.code, INVALID_PARAMS, "{arguments}: {error:?}");
        assert!(error.message.contains(field), "{arguments}: {error:?}");
    }
    let error = protocol_error(&client, "get_order", json!({"order_id": 0})).await;
    assert_eq!(error.code, INVALID_PARAMS, "{error:?}");
    assert_eq!(money(&db).await, before, "the database is unchanged");
    // Not even a once record was claimed: the calls never reached the database.
    let records = match db.kind {
        Kind::Sqlite => "SELECT count(*) FROM sqlite_master WHERE name = 'txretry_tool_calls'",
        Kind::Postgres => {
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'txretry_tool_calls' AND table_catalog = current_database()"
        }
        Kind::MariaDb => {
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'txretry_tool_calls' AND table_schema = database()"
        }
    };
    assert_eq!(
        db.ints(records).await,
        [0],
        "no record table: no once call ran"
    );
    client.cancel().await.unwrap();
}

async fn a_repeated_once_call_returns_the_recorded_answer(db: Db) {
    let client = orders(&db, TELLER).await;
    let arguments = json!({"from": 3, "to": 1, "cents": 700, "request_id": "o-1"});
    let first = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(first["status"], "committed", "{first}");
    assert_eq!(
        first["result"],
        "moved 700 cents from account 3 to account 1"
    );
    let again = outcome(&client, "transfer", arguments.clone()).await;
    assert_eq!(again["status"], "committed", "{again}");
    assert_eq!(again["result"], first["result"]);
    // From another server process too (the record is in the database).
    let other = orders_again(&db, TELLER).await;
    let third = outcome(&other, "transfer", arguments.clone()).await;
    assert_eq!(third["result"], first["result"], "{third}");
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

/// inventory.yaml: reserve until the stock runs out (the refusal names the SKU), with the
/// capture of what is left; release through a capture of the reservation.
async fn inventory_reserves_until_stock_runs_out(db: Db) {
    db.load("inventory.sql").await;
    let client = stdio(
        &common::examples().join("inventory.yaml"),
        &[],
        &[("INVENTORY_DATABASE_URL", db.url.as_str())],
    )
    .await;
    assert_eq!(
        tool_names(&client).await,
        ["stock_level", "reserve_stock", "release_reservation"]
    );
    for (i, left) in [(1, 2), (2, 1), (3, 0)] {
        let reserved = outcome(
            &client,
            "reserve_stock",
            json!({"order_ref": format!("o-{i}"), "sku": "gear", "qty": 1}),
        )
        .await;
        assert_eq!(reserved["status"], "committed", "{reserved}");
        assert_eq!(
            reserved["result"],
            format!("reserved 1 of gear for o-{i}; {left} left")
        );
    }
    let refused = outcome(
        &client,
        "reserve_stock",
        json!({"order_ref": "o-4", "sku": "gear", "qty": 1}),
    )
    .await;
    assert_eq!(refused["status"], "business_error", "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("cannot reserve 1 of gear: no such SKU or too few available"),
        "{refused}"
    );
    let level = outcome(&client, "stock_level", json!({"sku": "gear"})).await;
    assert_eq!(level["result"], json!({"sku": "gear", "available": 0}));
    assert_eq!(
        db.strings("SELECT order_ref FROM reservations ORDER BY order_ref")
            .await,
        ["o-1", "o-2", "o-3"]
    );

    // A repeat of a reservation is answered from its record: nothing more is taken.
    let again = outcome(
        &client,
        "reserve_stock",
        json!({"order_ref": "o-2", "sku": "gear", "qty": 1}),
    )
    .await;
    assert_eq!(
        again["result"], "reserved 1 of gear for o-2; 1 left",
        "{again}"
    );

    // Release: the reservation's qty captured, then given back.
    let released = outcome(
        &client,
        "release_reservation",
        json!({"order_ref": "o-2", "sku": "gear"}),
    )
    .await;
    assert_eq!(
        released["result"], "released 1 of gear from o-2",
        "{released}"
    );
    let nothing = outcome(
        &client,
        "release_reservation",
        json!({"order_ref": "o-9", "sku": "gear"}),
    )
    .await;
    assert_eq!(nothing["status"], "business_error", "{nothing}");
    assert!(
        nothing["error"]
            .as_str()
            .unwrap()
            .contains("no reservation of gear for o-9"),
        "{nothing}"
    );
    let unknown = outcome(&client, "stock_level", json!({"sku": "widget"})).await;
    assert_eq!(unknown["status"], "business_error", "{unknown}");
    assert!(unknown["error"].as_str().unwrap().contains("no SKU widget"));
    assert_eq!(
        db.ints("SELECT available FROM stock WHERE sku = 'gear'")
            .await,
        [1]
    );
    assert_eq!(
        db.strings("SELECT order_ref FROM reservations ORDER BY order_ref")
            .await,
        ["o-1", "o-3"]
    );
    // Bigger than max: refused before the database.
    let error = protocol_error(
        &client,
        "reserve_stock",
        json!({"order_ref": "o-5", "sku": "bolt", "qty": 101}),
    )
    .await;
    assert_eq!(error.code, INVALID_PARAMS);
    assert_eq!(
        db.ints("SELECT available FROM stock WHERE sku = 'bolt'")
            .await,
        [100]
    );
    client.cancel().await.unwrap();
    let _ = call;
}

/// `idempotentHint` is absent unless a tool declares `idempotent: true`: never guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_hint_is_absent_unless_declared() {
    let db = Db::sqlite().await;
    let client = orders(&db, TELLER).await;
    for tool in tools(&client).await {
        let hint = tool.annotations.and_then(|a| a.idempotent_hint);
        assert_eq!(
            hint, None,
            "{}: idempotentHint absent unless declared",
            tool.name
        );
    }
    client.cancel().await.unwrap();
}

crate::on_each_database!(
    tools_offered_per_role_and_toolset,
    schemas_and_annotations,
    colliding_transfers_commit_exactly_once,
    a_business_error_is_told_once_and_writes_nothing,
    invalid_arguments_never_reach_the_database,
    a_repeated_once_call_returns_the_recorded_answer,
    inventory_reserves_until_stock_runs_out,
);
