//! Streamable HTTP: [`ToolboxServer::from_headers`] behind rmcp's HTTP service on 127.0.0.1,
//! rmcp's HTTP client, and the caller of every request named by its `x-txretry-*` headers.

use serde_json::json;
use txretry_tool::Toolbox;
use txretry_tool::mcp::{AGENT_HEADER, PERSONA_HEADER, ROLES_HEADER, RetryRelay, ToolboxServer};

use crate::common::{
    HttpServer, INVALID_PARAMS, Recorder, Shop, assert_each_cancelled_once, assert_refused_alike,
    assert_retried, call, cancel_concurrently, policy, protocol_error, text, tool_names,
};

/// The shop's toolbox (up to `max_attempts` per call, retries relayed) served from the
/// headers.
async fn serve(shop: &Shop, max_attempts: u32) -> HttpServer {
    let relay = RetryRelay::new();
    let toolbox = shop.toolbox(
        Toolbox::builder()
            .policy(policy(max_attempts))
            .on_retry(relay.hook()),
    );
    HttpServer::start(ToolboxServer::from_headers(toolbox).with_relay(relay)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_from_headers_are_offered_different_tools_and_refused_alike() {
    assert_eq!(
        (ROLES_HEADER, PERSONA_HEADER, AGENT_HEADER),
        ("x-txretry-roles", "x-txretry-persona", "x-txretry-agent")
    );
    let shop = Shop::new().await;
    let server = serve(&shop, 10).await;
    let support = server
        .client(&[("x-txretry-roles", "support")], Recorder::default())
        .await;
    let viewer = server
        .client(
            &[
                ("x-txretry-roles", "teller"),
                ("x-txretry-persona", "viewer"),
            ],
            Recorder::default(),
        )
        .await;
    let unknown_agent = server
        .client(
            &[
                ("x-txretry-roles", "support"),
                ("x-txretry-agent", "nobody"),
            ],
            Recorder::default(),
        )
        .await;
    let anonymous = server.client(&[], Recorder::default()).await;

    assert_eq!(tool_names(&support).await, ["get_order", "cancel_order"]);
    assert_eq!(tool_names(&viewer).await, ["get_order"]);
    assert!(
        tool_names(&unknown_agent).await.is_empty(),
        "an unknown agent: fail-closed"
    );
    assert!(
        tool_names(&anonymous).await.is_empty(),
        "no roles header: not resolved"
    );

    let not_offered = protocol_error(&viewer, "cancel_order", json!({"order_id": 1})).await;
    let unknown = protocol_error(&viewer, "cancel_orders", json!({"order_id": 1})).await;
    let unresolved = protocol_error(&anonymous, "get_order", json!({"order_id": 1})).await;
    assert_eq!(not_offered.code, INVALID_PARAMS);
    assert_eq!(
        not_offered.message,
        "tool \"cancel_order\" is not available"
    );
    assert_refused_alike(&unknown, "cancel_orders", &not_offered, "cancel_order");
    assert_refused_alike(&unresolved, "get_order", &not_offered, "cancel_order");

    let invalid = protocol_error(&support, "cancel_order", json!({"order_id": "one"})).await;
    assert_eq!(invalid.code, INVALID_PARAMS);
    assert!(
        invalid.message.contains("order_id: invalid type"),
        "{invalid:?}"
    );
    assert_eq!(shop.runs("cancel_order"), 0, "the handler never ran");

    let business = call(&support, "cancel_order", json!({"order_id": 3}))
        .await
        .unwrap();
    assert_eq!(business.is_error, Some(true));
    assert_eq!(text(&business), "cancel_order: order 3 is already shipped");
    let order = call(&viewer, "get_order", json!({"order_id": 3}))
        .await
        .unwrap();
    assert_eq!(order.structured_content.unwrap()["status"], "shipped");
    assert_eq!(shop.runs("cancel_order"), 1);

    for client in [support, viewer, unknown_agent, anonymous] {
        client.cancel().await.unwrap();
    }
    shop.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_cancels_over_http_cancel_each_order_once_with_progress() {
    let shop = Shop::new().await;
    let server = serve(&shop, 50).await;
    let recorder = Recorder::default();
    let client = server
        .client(&[("x-txretry-roles", "support")], recorder.clone())
        .await;
    let holder = shop.hold().await;

    let calls = {
        let client = &client;
        async move { cancel_concurrently(client, &[1, 2, 4, 5], 16).await }
    };
    let (cancels, ()) = tokio::join!(calls, holder.release_when_contended(&recorder));

    assert_each_cancelled_once(&shop, &cancels, 16).await;
    assert_retried(&recorder, "cancel_order").await;
    // Progress rides each call's own response stream, log messages the session's.
    recorder
        .wait_until("progress", |r| !r.progress().is_empty())
        .await;
    let progress = recorder.progress();
    assert!(
        progress.iter().all(|step| step
            .message
            .as_deref()
            .unwrap()
            .starts_with("cancel_order: attempt ")),
        "{progress:?}"
    );
    client.cancel().await.unwrap();
    shop.close().await;
}
