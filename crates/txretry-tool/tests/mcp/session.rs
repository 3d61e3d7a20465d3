//! What needs to look inside the server: cancellation, list changes, logging levels.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rmcp::model::LoggingLevel;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, SetLevelRequestParams};
use rmcp::service::PeerRequestOptions;
use serde_json::json;
use tokio::sync::Notify;
use txretry_tool::mcp::{RetryRelay, ToolboxServer};
use txretry_tool::{BoxError, Caller, Tool, ToolContext, Toolbox};

use crate::common::{Recorder, Shop, args, call, connect, policy, text, tool_names, within};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// Marks its counter when dropped: the handler's future was dropped.
struct Dropped(Arc<AtomicU32>, Arc<Notify>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_one();
    }
}

/// `notifications/cancelled` for a call in flight drops the invocation (and with it the
/// handler's future, which would roll back its open transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_in_flight_drops_the_invocation() {
    let (started, dropped, dropped_signal) = (
        Arc::new(Notify::new()),
        Arc::new(AtomicU32::new(0)),
        Arc::new(Notify::new()),
    );
    let tool = {
        let (started, dropped, dropped_signal) =
            (started.clone(), dropped.clone(), dropped_signal.clone());
        Tool::new(
            "wait",
            "Waits forever.",
            move |_ctx: ToolContext, _: NoArgs| {
                let (started, guard) = (
                    started.clone(),
                    Dropped(dropped.clone(), dropped_signal.clone()),
                );
                async move {
                    let _guard = guard;
                    started.notify_one();
                    std::future::pending::<()>().await;
                    Ok::<_, BoxError>("never")
                }
            },
        )
    };
    let toolbox = Toolbox::builder().tool(tool).build().unwrap();
    let client = connect(
        ToolboxServer::for_caller(toolbox, Some(Caller::new(["anyone"]))),
        Recorder::default(),
    )
    .await;

    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("wait").with_arguments(args(json!({}))),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    within("the handler starts", started.notified()).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 0);

    handle
        .cancel(Some("the user stopped it".to_owned()))
        .await
        .unwrap();
    within("the invocation is dropped", dropped_signal.notified()).await;
    assert_eq!(dropped.load(Ordering::SeqCst), 1);

    // The session goes on.
    assert_eq!(tool_names(&client).await, ["wait"]);
    client.cancel().await.unwrap();
}

/// Replacing the toolbox sends `notifications/tools/list_changed`, and the next
/// `tools/list` shows the new tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_the_toolbox_notifies_list_changed() {
    let shop = Shop::new().await;
    let first = Toolbox::builder()
        .tool(Tool::new(
            "ping",
            "Answers pong.",
            |_ctx: ToolContext, _: NoArgs| async { Ok::<_, BoxError>("pong") },
        ))
        .build()
        .unwrap();
    let server = ToolboxServer::for_caller(first, Some(Caller::new(["support"])));
    let recorder = Recorder::default();
    let client = connect(server.clone(), recorder.clone()).await;
    assert_eq!(tool_names(&client).await, ["ping"]);
    let pong = call(&client, "ping", json!({})).await.unwrap();
    assert_eq!(text(&pong), "pong");

    let notified = server
        .replace_toolbox(shop.toolbox(Toolbox::builder()))
        .await;
    assert_eq!(notified, 1, "one session");
    recorder
        .wait_until("tools/list_changed", |r| r.list_changes() == 1)
        .await;
    assert_eq!(tool_names(&client).await, ["get_order", "cancel_order"]);
    client.cancel().await.unwrap();
    shop.close().await;
}

/// `logging/setLevel error` silences the warnings; the progress notifications still come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_asks_for_errors_only_gets_no_retry_warnings() {
    let shop = Shop::new().await;
    let relay = RetryRelay::new();
    let toolbox = shop.toolbox(Toolbox::builder().policy(policy(50)).on_retry(relay.hook()));
    let recorder = Recorder::default();
    let client = connect(
        ToolboxServer::for_caller(toolbox, Some(Caller::new(["support"]))).with_relay(relay),
        recorder.clone(),
    )
    .await;
    client
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    let holder = shop.hold().await;

    let cancel = call(&client, "cancel_order", json!({"order_id": 1}));
    let (result, ()) = tokio::join!(cancel, holder.release_when_contended(&recorder));
    assert_eq!(result.unwrap().is_error, Some(false));
    // The call was retried (the holder let go once the client heard of it): progress came,
    // and no warning.
    assert!(!recorder.progress().is_empty());
    assert!(recorder.logs().is_empty(), "{:?}", recorder.logs());
    client.cancel().await.unwrap();
    shop.close().await;
}
