//! inventory.yaml: reservations until the stock runs out, their captures and
//! expectations, a repeat answered from its record, and releases.

use serde_json::json;

use crate::common::{self, Db, INVALID_PARAMS, call, outcome, protocol_error, stdio, tool_names};

/// inventory.yaml: reserve until the stock runs out (the refusal names the SKU), with the
/// capture of what is left; release through a capture of the reservation.
pub(crate) async fn inventory_reserves_until_stock_runs_out(db: Db) {
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
