//! The same over streamable HTTP: the server binary on 127.0.0.1 (a port it picks), rmcp's
//! HTTP client, and the caller of every request named by its `x-txretry-*` headers.

use serde_json::json;

use crate::common::{
    Db, HttpServer, INVALID_PARAMS, Recorder, assert_each_cancelled_once, assert_retried, call,
    cancel_concurrently, protocol_error, text, tool_names,
};

crate::on_each_database!(
    callers_from_headers_are_offered_different_tools_and_refused_alike,
    concurrent_cancels_over_http_cancel_each_order_once_with_progress,
);

async fn callers_from_headers_are_offered_different_tools_and_refused_alike(db: Db) {
    let server = HttpServer::start(&db, &[]).await;
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
    assert_eq!(
        (
            unknown.code,
            unknown.message.replace("cancel_orders", "cancel_order"),
            unknown.data
        ),
        (
            not_offered.code,
            not_offered.message.to_string(),
            not_offered.data.clone()
        )
    );
    assert_eq!(
        (
            unresolved.code,
            unresolved.message.replace("get_order", "cancel_order")
        ),
        (not_offered.code, not_offered.message.to_string())
    );

    let invalid = protocol_error(&support, "cancel_order", json!({"order_id": "one"})).await;
    assert_eq!(invalid.code, INVALID_PARAMS);
    assert!(
        invalid.message.contains("order_id: invalid type"),
        "{invalid:?}"
    );
    assert_eq!(db.state().await.cancel_runs, 0, "the handler never ran");

    let business = call(&support, "cancel_order", json!({"order_id": 3}))
        .await
        .unwrap();
    assert_eq!(business.is_error, Some(true));
    assert_eq!(text(&business), "cancel_order: order 3 is already shipped");
    let order = call(&viewer, "get_order", json!({"order_id": 3}))
        .await
        .unwrap();
    assert_eq!(order.structured_content.unwrap()["status"], "shipped");
    assert_eq!(db.state().await.cancel_runs, 1);

    for client in [support, viewer, unknown_agent, anonymous] {
        client.cancel().await.unwrap();
    }
}

async fn concurrent_cancels_over_http_cancel_each_order_once_with_progress(db: Db) {
    let server = HttpServer::start(&db, &["--max-attempts", "50"]).await;
    let recorder = Recorder::default();
    let client = server
        .client(&[("x-txretry-roles", "support")], recorder.clone())
        .await;
    let holder = db.hold().await;

    let calls = {
        let client = &client;
        async move { cancel_concurrently(client, &[1, 2, 4, 5], 16).await }
    };
    let (cancels, ()) = tokio::join!(calls, holder.release_when_contended(&recorder));

    assert_each_cancelled_once(&db, &cancels, 16).await;
    assert_retried(&db, &recorder, "cancel_order").await;
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
}
