//! Concurrent `cancel_order` calls ([`cancel_concurrently`]) and the checks on what they
//! leave behind in the shop and on the retries the client was told of.

use std::collections::HashMap;

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use super::{Client, Recorder, Shop, TOTAL_CENTS, args, text, within};

/// The outcome of N concurrent `cancel_order` calls: per order, the calls that cancelled it,
/// and the texts of the ones refused as already cancelled.
#[derive(Debug, Default)]
pub struct Cancels {
    pub cancelled: HashMap<i64, u32>,
    pub already: Vec<String>,
    pub other: Vec<String>,
}

/// `calls` concurrent `cancel_order` calls spread over `orders`; every one must return a
/// result (not a protocol error).
pub async fn cancel_concurrently(client: &Client, orders: &[i64], calls: usize) -> Cancels {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..calls {
        let peer = client.peer().clone();
        let order = orders[i % orders.len()];
        set.spawn(async move {
            let params = CallToolRequestParams::new("cancel_order")
                .with_arguments(args(json!({ "order_id": order })));
            (order, peer.call_tool(params).await)
        });
    }
    let mut cancels = Cancels::default();
    while let Some(joined) = within("concurrent calls", set.join_next()).await {
        let (order, result) = joined.unwrap();
        let result = result.unwrap_or_else(|e| panic!("order {order}: not a result: {e:?}"));
        if result.is_error == Some(true) {
            let text = text(&result);
            if text == format!("cancel_order: order {order} is already cancelled") {
                cancels.already.push(text);
            } else {
                cancels.other.push(text);
            }
        } else {
            let output = result
                .structured_content
                .clone()
                .expect("structured output");
            assert_eq!(output["cancelled"], order, "{output}");
            *cancels.cancelled.entry(order).or_default() += 1;
        }
    }
    cancels
}

/// The retries the client was told of: at least one (the contention was real), each a
/// busy database, each for `tool`.
pub async fn assert_retried(recorder: &Recorder, tool: &str) {
    recorder
        .wait_until("a retry notification", |r| !r.logs().is_empty())
        .await;
    let logs = recorder.logs();
    for log in &logs {
        assert_eq!(log.data["tool"], tool, "{logs:?}");
        assert_eq!(log.data["kind"], "busy", "{logs:?}");
    }
}

/// What every `cancel_concurrently` over orders 1, 2, 4, 5 must leave behind.
pub async fn assert_each_cancelled_once(shop: &Shop, cancels: &Cancels, calls: usize) {
    let orders = [1, 2, 4, 5];
    assert!(cancels.other.is_empty(), "{cancels:?}");
    for order in orders {
        assert_eq!(
            cancels.cancelled.get(&order),
            Some(&1),
            "order {order}: {cancels:?}"
        );
    }
    assert_eq!(cancels.already.len(), calls - orders.len(), "{cancels:?}");
    let state = shop.state().await;
    for order in orders {
        assert_eq!(state.status[&order], "cancelled", "{state:?}");
        assert_eq!(
            state.refunds.get(&order),
            Some(&1),
            "refunded once: {state:?}"
        );
    }
    assert_eq!(state.ledger_rows, 2 * orders.len() as i64, "{state:?}");
    assert_eq!(state.ledger_sum, 0, "the ledger balances: {state:?}");
    assert_eq!(state.money, TOTAL_CENTS, "no money made or lost: {state:?}");
    assert_eq!(
        shop.runs("cancel_order"),
        calls as i64,
        "each call ran its handler once; the failed transactions were retried in place: {state:?}"
    );
}
