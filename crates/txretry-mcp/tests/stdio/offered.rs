//! What each caller is offered (per role and toolset, and a tool not offered refused as an
//! unknown one), and the tools' schemas and annotations.

use serde_json::{Value, json};

use super::{TELLER, orders_again};
use crate::common::{
    self, Db, INVALID_PARAMS, money, outcome, protocol_error, stdio, tool_names, tools,
};

pub(crate) async fn tools_offered_per_role_and_toolset(db: Db) {
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

pub(crate) async fn schemas_and_annotations(db: Db) {
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
