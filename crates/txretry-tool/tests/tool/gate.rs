//! Point 6: the fail-closed gate. Offered = registered ∩ the caller's roles ∩ the persona's
//! list ∩ the agent's list; invoke runs the same gate; unknown and not offered get the same
//! refusal; invalid arguments are refused before the handler runs and never retried.

use serde_json::json;
use txretry_tool::{BoxError, BuildError, Caller, InvokeError, Tool, ToolContext, Toolbox};

use crate::common::{self, Counter, shared_tool};

fn counted(name: &str, runs: &Counter) -> Tool {
    let description = format!("The {name} tool.");
    shared_tool(name, &description, runs.clone(), |_, runs| async move {
        runs.bump();
        Ok::<_, BoxError>("ran")
    })
}

/// get_order: anyone; refund: support or admin; purge: admin; audit: nobody (empty roles).
fn toolbox(runs: &Counter) -> Toolbox {
    Toolbox::builder()
        .tool(counted("get_order", runs))
        .tool(counted("refund", runs).roles(["support", "admin"]))
        .tool(counted("purge", runs).roles(["admin"]))
        .tool(counted("audit", runs).roles(Vec::<String>::new()))
        .persona("refunds", ["get_order", "refund"])
        .persona("silent", Vec::<String>::new())
        .agent("helpdesk", ["get_order", "refund", "purge"])
        .agent("reader", ["get_order"])
        .build()
        .unwrap()
}

fn names(toolbox: &Toolbox, caller: &Caller) -> Vec<String> {
    toolbox
        .offered(caller)
        .iter()
        .map(|d| d.name().to_owned())
        .collect()
}

#[test]
fn p6_offered_is_registered_and_roles_and_persona_and_agent() {
    let toolbox = toolbox(&Counter::default());
    assert_eq!(names(&toolbox, &Caller::new(["user"])), ["get_order"]);
    assert_eq!(
        names(&toolbox, &Caller::new(["support"])),
        ["get_order", "refund"]
    );
    assert_eq!(
        names(&toolbox, &Caller::new(["admin"])),
        ["get_order", "refund", "purge"]
    );
    assert_eq!(
        names(&toolbox, &Caller::new(["admin"]).persona("refunds")),
        ["get_order", "refund"]
    );
    assert_eq!(
        names(&toolbox, &Caller::new(["admin"]).agent("reader")),
        ["get_order"]
    );
    assert_eq!(
        names(
            &toolbox,
            &Caller::new(["admin"]).persona("refunds").agent("helpdesk")
        ),
        ["get_order", "refund"]
    );
    let descriptor = toolbox.offered(&Caller::new(["user"]))[0];
    assert_eq!(descriptor.description(), "The get_order tool.");
    assert_eq!(descriptor.input_schema()["type"], "object");
}

#[test]
fn p6_empty_lists_allow_nothing_and_unknown_persona_or_agent_is_fail_closed() {
    let toolbox = toolbox(&Counter::default());
    assert!(names(&toolbox, &Caller::new(["admin"]).persona("silent")).is_empty());
    assert!(names(&toolbox, &Caller::new(["admin"]).persona("nobody-knows")).is_empty());
    assert!(names(&toolbox, &Caller::new(["admin"]).agent("nobody-knows")).is_empty());
    assert!(
        !names(&toolbox, &Caller::new(["admin"])).contains(&"audit".to_owned()),
        "empty roles: nobody"
    );
}

#[tokio::test]
async fn p6_a_tool_excluded_by_role_persona_or_agent_is_refused_like_an_unknown_one() {
    let runs = Counter::default();
    let toolbox = toolbox(&runs);
    let excluded = [
        (Caller::new(["user"]), "purge"),                     // role
        (Caller::new(["admin"]).persona("refunds"), "purge"), // persona
        (Caller::new(["admin"]).agent("reader"), "refund"),   // agent
        (Caller::new(["admin"]).persona("nobody-knows"), "get_order"),
        (Caller::new(["admin"]), "audit"), // empty role list
    ];
    let unknown = toolbox
        .invoke(&Caller::new(["admin"]), "drop_database", json!({}), "c")
        .await
        .unwrap_err();
    assert_eq!(
        unknown.to_string(),
        r#"tool "drop_database" is not available"#
    );
    for (caller, name) in excluded {
        assert!(!names(&toolbox, &caller).contains(&name.to_owned()));
        let err = toolbox
            .invoke(&caller, name, json!({}), "c")
            .await
            .unwrap_err();
        assert!(
            matches!(&err, InvokeError::Refused { tool } if tool == name),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("tool {name:?} is not available"),
            "same refusal as unknown"
        );
    }
    assert_eq!(runs.get(), 0, "no handler ran");
    // The same callers invoke what they are offered.
    let ok = toolbox
        .invoke(
            &Caller::new(["admin"]).agent("reader"),
            "get_order",
            json!({}),
            "c",
        )
        .await;
    assert_eq!(ok.unwrap(), json!("ran"));
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Order {
    order_id: i64,
    items: Vec<Item>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Item {
    qty: u32,
}

#[tokio::test]
async fn p6_invalid_arguments_are_refused_before_the_handler_and_never_retried() {
    let runs = Counter::default();
    let tool = {
        let runs = runs.clone();
        Tool::new("place", "", move |_ctx: ToolContext, order: Order| {
            let runs = runs.clone();
            async move {
                runs.bump();
                Ok::<_, BoxError>(
                    order.order_id + order.items.iter().map(|i| i64::from(i.qty)).sum::<i64>(),
                )
            }
        })
    };
    let toolbox = common::toolbox(5, tool);
    let caller = Caller::new(["user"]);
    let cases = [
        (json!({"items": []}), "missing field `order_id`"),
        (
            json!({"order_id": "seven", "items": []}),
            "order_id: invalid type: string \"seven\"",
        ),
        (
            json!({"order_id": 7, "items": [{"qty": 1}, {"qty": -2}]}),
            "items[1].qty: invalid value: integer `-2`",
        ),
        (
            json!({"order_id": 7, "items": [], "drop": true}),
            "unknown field `drop`",
        ),
        (json!("not an object"), "invalid type: string"),
        // serde's derive would read the struct from a list, by position.
        (
            json!([7, []]),
            "expected an object of named arguments, got a list",
        ),
    ];
    for (args, expected) in cases {
        let err = toolbox
            .invoke(&caller, "place", args, "c")
            .await
            .unwrap_err();
        let InvokeError::InvalidArguments { tool, message } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(tool, "place");
        assert!(
            message.contains(expected),
            "{message:?} should name {expected:?}"
        );
    }
    assert_eq!(runs.get(), 0);
    let ok = toolbox
        .invoke(
            &caller,
            "place",
            json!({"order_id": 7, "items": [{"qty": 1}]}),
            "c",
        )
        .await
        .unwrap();
    assert_eq!(ok, json!(8));
}

#[test]
fn p6_build_rejects_duplicate_and_invalid_names_and_lists_naming_unknown_tools() {
    let runs = Counter::default();
    let dup = Toolbox::builder()
        .tool(counted("a", &runs))
        .tool(counted("a", &runs))
        .build();
    assert!(matches!(dup, Err(BuildError::DuplicateTool(name)) if name == "a"));
    let invalid = Toolbox::builder()
        .tool(counted("drop tables;", &runs))
        .build();
    assert!(matches!(invalid, Err(BuildError::InvalidToolName(_))));
    let unknown = Toolbox::builder()
        .tool(counted("a", &runs))
        .persona("p", ["a", "b"])
        .build();
    assert!(
        matches!(unknown, Err(BuildError::UnknownTool { ref tool, .. }) if tool == "b"),
        "{unknown:?}"
    );
    let lists = Toolbox::builder()
        .tool(counted("a", &runs))
        .agent("x", ["a"])
        .agent("x", ["a"])
        .build();
    assert!(matches!(
        lists,
        Err(BuildError::DuplicateList { kind: "agent", .. })
    ));
}

#[test]
fn toolbox_is_cheap_to_clone_send_and_sync_and_invoke_is_send() {
    fn send_sync<T: Send + Sync + Clone + 'static>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let toolbox = toolbox(&Counter::default());
    send_sync(&toolbox);
    let caller = Caller::new(["user"]);
    send(toolbox.invoke(&caller, "get_order", json!({}), "c"));
}
