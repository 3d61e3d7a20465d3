//! Calls that write nothing: a business error, told once, rolled back; arguments refused
//! before they reach the database.

use serde_json::json;

use super::{TELLER, orders};
use crate::common::{Db, INVALID_PARAMS, Kind, money, outcome, protocol_error};

pub(crate) async fn a_business_error_is_told_once_and_writes_nothing(db: Db) {
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

pub(crate) async fn invalid_arguments_never_reach_the_database(db: Db) {
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
    // A whole number past 64 bits is out of range, not "not an integer".
    let error = protocol_error(&client, "get_order", json!({"order_id": u64::MAX})).await;
    assert_eq!(error.code, INVALID_PARAMS, "{error:?}");
    assert!(
        error
            .message
            .contains("order_id: must be from -9223372036854775808 to 9223372036854775807"),
        "{error:?}"
    );
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
