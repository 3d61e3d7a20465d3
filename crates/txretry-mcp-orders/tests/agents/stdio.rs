//! rmcp's client starts the server binary as a child process (stdio), as an MCP host does.

use serde_json::json;

use crate::common::{
    Db, INVALID_PARAMS, Recorder, assert_each_cancelled_once, assert_retried, call,
    cancel_concurrently, protocol_error, stdio, text, tool_names, within,
};

crate::on_each_database!(
    two_callers_are_offered_different_tools_with_their_annotations,
    concurrent_cancels_cancel_each_order_once_and_keep_the_ledger_balanced,
    a_tool_not_offered_gets_the_same_protocol_error_as_a_tool_that_does_not_exist,
    invalid_arguments_are_a_protocol_error_and_the_handler_never_runs,
    retries_reach_the_client_as_log_messages_and_progress,
);

async fn two_callers_are_offered_different_tools_with_their_annotations(db: Db) {
    let support = stdio(&db, &["--role", "support"], Recorder::default()).await;
    let viewer = stdio(
        &db,
        &["--role", "teller", "--persona", "viewer"],
        Recorder::default(),
    )
    .await;
    let teller = stdio(
        &db,
        &["--role", "teller,support", "--persona", "agent"],
        Recorder::default(),
    )
    .await;
    let nobody = stdio(&db, &[], Recorder::default()).await;

    assert_eq!(tool_names(&support).await, ["get_order", "cancel_order"]);
    assert_eq!(tool_names(&viewer).await, ["get_order"]);
    assert_eq!(
        tool_names(&teller).await,
        ["get_order", "cancel_order", "transfer"]
    );
    assert!(
        tool_names(&nobody).await.is_empty(),
        "a caller that cannot be resolved is offered nothing"
    );

    let tools = within("tools/list", support.list_all_tools())
        .await
        .unwrap();
    let get_order = &tools[0];
    let hints = get_order.annotations.as_ref().unwrap();
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(hints.idempotent_hint, Some(true));
    assert_eq!(get_order.input_schema["required"], json!(["order_id"]));
    assert_eq!(
        get_order.input_schema["properties"]["order_id"]["description"],
        "The order's id."
    );
    let cancel = tools[1].annotations.as_ref().unwrap();
    assert_eq!(
        (
            cancel.read_only_hint,
            cancel.idempotent_hint,
            cancel.destructive_hint
        ),
        (Some(false), Some(false), None)
    );

    for client in [support, viewer, teller, nobody] {
        client.cancel().await.unwrap();
    }
}

/// 16 calls on 4 open orders at once, while another writer holds locks until the server's
/// transactions collide with it (SQLITE_BUSY, Postgres' serialization failures, MariaDB's
/// deadlocks, see `Db::hold`): every call returns, each order is cancelled exactly once,
/// the ledger balances, retries were reported, and each handler ran once (the failed
/// transactions were retried in place by txretry).
async fn concurrent_cancels_cancel_each_order_once_and_keep_the_ledger_balanced(db: Db) {
    let recorder = Recorder::default();
    let client = stdio(
        &db,
        &["--role", "support", "--max-attempts", "50"],
        recorder.clone(),
    )
    .await;
    let holder = db.hold().await;

    let calls = {
        let client = &client;
        async move { cancel_concurrently(client, &[1, 2, 4, 5], 16).await }
    };
    let (cancels, ()) = tokio::join!(calls, holder.release_when_contended(&recorder));

    assert_retried(&db, &recorder, "cancel_order").await;
    // The server exits when the client closes stdin; the database is read after it did.
    client.cancel().await.unwrap();
    assert_each_cancelled_once(&db, &cancels, 16).await;
}

async fn a_tool_not_offered_gets_the_same_protocol_error_as_a_tool_that_does_not_exist(db: Db) {
    let support = stdio(&db, &["--role", "support"], Recorder::default()).await;
    let nobody = stdio(&db, &[], Recorder::default()).await;

    let not_offered = protocol_error(
        &support,
        "transfer",
        json!({"from": 1, "to": 2, "cents": 5}),
    )
    .await;
    let unknown = protocol_error(
        &support,
        "tarnsfer",
        json!({"from": 1, "to": 2, "cents": 5}),
    )
    .await;
    let unresolved =
        protocol_error(&nobody, "transfer", json!({"from": 1, "to": 2, "cents": 5})).await;

    assert_eq!(not_offered.code, INVALID_PARAMS);
    assert_eq!(not_offered.message, "tool \"transfer\" is not available");
    assert_eq!(
        (
            unknown.code,
            unknown.message.replace("tarnsfer", "transfer"),
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
            unresolved.message.to_string(),
            unresolved.data
        ),
        (
            not_offered.code,
            not_offered.message.to_string(),
            not_offered.data
        )
    );

    support.cancel().await.unwrap();
    nobody.cancel().await.unwrap();
    let state = db.state().await;
    assert_eq!(state.transfer_runs, 0, "the handler never ran: {state:?}");
    assert_eq!(state.ledger_rows, 0);
}

async fn invalid_arguments_are_a_protocol_error_and_the_handler_never_runs(db: Db) {
    let client = stdio(&db, &["--role", "support"], Recorder::default()).await;

    for (arguments, says) in [
        (
            json!({"order_id": "seven"}),
            "order_id: invalid type: string \"seven\"",
        ),
        (json!({}), "missing field `order_id`"),
        (
            json!({"order_id": 1.5}),
            "order_id: invalid type: floating point",
        ),
    ] {
        let error = protocol_error(&client, "cancel_order", arguments.clone()).await;
        assert_eq!(error.code, INVALID_PARAMS, "{arguments}: {error:?}");
        assert!(
            error
                .message
                .starts_with("cancel_order: invalid arguments: ")
                && error.message.contains(says),
            "{arguments}: {}",
            error.message
        );
    }
    assert_eq!(db.state().await.cancel_runs, 0, "the handler never ran");

    // The counter does count: a valid call runs the handler, and its business error is a
    // result the model reads (isError), not a protocol error.
    let result = call(&client, "cancel_order", json!({"order_id": 999}))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(text(&result), "cancel_order: order 999 not found");
    assert_eq!(db.state().await.cancel_runs, 1);

    let order = call(&client, "get_order", json!({"order_id": 3}))
        .await
        .unwrap();
    assert_eq!(order.is_error, Some(false));
    assert_eq!(
        order.structured_content,
        Some(json!({"id": 3, "account": 3, "status": "shipped", "cents": 1200}))
    );
    client.cancel().await.unwrap();
}

/// A retry reaches the client while the call runs: a `notifications/message` at level
/// warning from the `txretry` logger, and a progress notification on the request's token.
async fn retries_reach_the_client_as_log_messages_and_progress(db: Db) {
    let recorder = Recorder::default();
    let client = stdio(
        &db,
        &["--role", "support", "--max-attempts", "50"],
        recorder.clone(),
    )
    .await;
    let holder = db.hold().await;

    let cancel = call(&client, "cancel_order", json!({"order_id": 2}));
    let (result, ()) = tokio::join!(cancel, holder.release_when_contended(&recorder));
    let result = result.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");

    // The client handles each notification in a task of its own: wait for all of them,
    // and expect no particular order.
    recorder
        .wait_until("a progress notification per log message", |r| {
            !r.logs().is_empty() && r.logs().len() == r.progress().len()
        })
        .await;
    let expected = db.expected_retries();
    let logs = recorder.logs();
    let call_id = logs[0].data["call_id"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("mcp-"), "{call_id}");
    for log in &logs {
        assert_eq!(
            serde_json::to_value(log.level).unwrap(),
            "warning",
            "{log:?}"
        );
        assert_eq!(log.logger.as_deref(), Some("txretry"));
        assert_eq!(log.data["event"], "retry");
        assert_eq!(log.data["tool"], "cancel_order");
        assert_eq!(log.data["call_id"], call_id.as_str(), "one call, one id");
        assert!(
            expected.kinds.contains(&log.data["kind"].as_str().unwrap()),
            "{log:?}"
        );
        assert_eq!(log.data["max_attempts"], 50);
        assert!(log.data["attempt"].as_u64().unwrap() >= 1, "{log:?}");
        assert!(
            log.data["code"]
                .as_str()
                .unwrap()
                .starts_with(expected.code),
            "{log:?}"
        );
        assert!(
            !log.data.to_string().contains(expected.driver_text),
            "the driver's error text stays in the server: {log:?}"
        );
    }

    let progress = recorder.progress();
    let token = &progress[0].progress_token;
    let mut steps: Vec<f64> = progress
        .iter()
        .map(|step| {
            assert_eq!(&step.progress_token, token, "one call, one token");
            assert!(
                step.message
                    .as_deref()
                    .unwrap()
                    .starts_with("cancel_order: attempt "),
                "{step:?}"
            );
            step.progress
        })
        .collect();
    steps.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (1..=progress.len()).map(|n| n as f64).collect();
    assert_eq!(steps, expected, "the progress increases with every retry");

    // The ledger has the refund once, with the call id the retries were reported under.
    let ids = db
        .connect()
        .await
        .strings(format!(
            "SELECT DISTINCT call_id FROM {}",
            db.table("ledger")
        ))
        .await;
    assert_eq!(ids, [call_id]);
    client.cancel().await.unwrap();
}
