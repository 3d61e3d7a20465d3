//! rig: the toolbox's offered tools in a `ToolSet`, called by name with JSON arguments as an
//! agent's tool loop calls them (no model involved).

use rig_agent::tool::{ToolContext, ToolErrorKind, ToolSet};
use txretry_tool::{BoxError, Caller, InvokeError, Tool, Toolbox};

use crate::common::{Shop, policy};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// The tools the shop's toolbox offers a `support` caller.
fn tool_set(shop: &Shop, max_attempts: u32) -> ToolSet {
    let toolbox = shop.toolbox(Toolbox::builder().policy(policy(max_attempts)));
    ToolSet::from_dynamic_tools(txretry_tool::rig::tools(
        &toolbox,
        &Caller::new(["support"]),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_set_calls_offered_tools_and_maps_their_errors_as_not_retryable() {
    let shop = Shop::new().await;
    let tools = tool_set(&shop, 10);
    let names: Vec<String> = tools
        .tool_definitions()
        .into_iter()
        .map(|definition| definition.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["get_order", "cancel_order"],
        "only what the caller is offered"
    );

    let mut context = ToolContext::new();
    let cancelled = tools
        .execute("cancel_order", r#"{"order_id": 1}"#, &mut context)
        .await;
    assert!(cancelled.is_success(), "{:?}", cancelled.error());
    assert_eq!(
        cancelled.output().as_json().unwrap(),
        &serde_json::json!({"cancelled": 1, "refunded_cents": 2500})
    );
    let order = tools
        .execute("get_order", r#"{"order_id": 1}"#, &mut context)
        .await;
    assert_eq!(order.output().as_json().unwrap()["status"], "cancelled");

    // A business error: the model reads it once, and is told not to retry.
    let again = tools
        .execute("cancel_order", r#"{"order_id": 1}"#, &mut context)
        .await;
    let error = again.error().expect("an error");
    assert_eq!(error.retryable(), Some(false));
    assert_eq!(error.code(), Some("business"));
    assert_eq!(
        error.model_feedback(),
        Some("cancel_order: order 1 is already cancelled")
    );
    assert!(
        error.downcast_ref::<InvokeError>().is_some(),
        "the source is kept"
    );

    // Invalid arguments: rig's kind for them, the handler never ran.
    let invalid = tools
        .execute("cancel_order", r#"{"order_id": "x"}"#, &mut context)
        .await;
    let invalid = invalid.error().expect("an error");
    assert_eq!(invalid.kind(), ToolErrorKind::InvalidArgs);
    assert_eq!(invalid.retryable(), Some(false));
    assert_eq!(shop.runs("cancel_order"), 2);

    // A tool not offered is absent: the same answer as a name that does not exist.
    let mut refused = Vec::new();
    for name in ["transfer", "tarnsfer"] {
        let result = tools
            .execute(name, r#"{"from": 1, "to": 2, "cents": 5}"#, &mut context)
            .await;
        let error = result.error().unwrap();
        let feedback = error.model_feedback().unwrap().replace(name, "X");
        refused.push((error.kind(), error.retryable(), feedback));
    }
    assert_eq!(refused[0].0, ToolErrorKind::NotFound);
    assert_eq!(refused[0], refused[1]);
    assert_eq!(shop.runs("transfer"), 0);
    shop.close().await;
}

/// A transaction that stays busy until the budget runs out (another writer holds the lock):
/// rig gets a not-retryable error saying so (txretry already retried), nothing committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_that_ran_out_are_not_retryable_for_the_model() {
    let shop = Shop::new().await;
    let pool = shop.pool().clone();
    let close = Tool::new(
        "close_shop",
        "Closes every open order.",
        move |ctx: txretry_tool::ToolContext, _: NoArgs| {
            let pool = pool.clone();
            async move {
                txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                    sqlx::query("UPDATE orders SET status = 'closed' WHERE status = 'open'")
                        .execute(&mut **tx)
                        .await
                })
                .await?;
                Ok::<_, BoxError>("closed")
            }
        },
    );
    let toolbox = Toolbox::builder()
        .policy(policy(3))
        .tool(close)
        .build()
        .unwrap();
    let tools =
        ToolSet::from_dynamic_tools(txretry_tool::rig::tools(&toolbox, &Caller::new(["owner"])));
    let holder = shop.hold().await;

    let result = tools
        .execute("close_shop", "{}", &mut ToolContext::new())
        .await;
    holder.release().await;

    let error = result.error().expect("an error");
    assert_eq!(error.retryable(), Some(false));
    assert_eq!(error.code(), Some("retries_exhausted"));
    assert_eq!(
        error.model_feedback(),
        Some(
            "close_shop: still failing after 3 attempts (busy); nothing was committed, try again later"
        )
    );
    assert_eq!(shop.state().await.status[&2], "open");
    shop.close().await;
}
