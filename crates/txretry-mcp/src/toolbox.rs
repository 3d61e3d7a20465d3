//! A checked config and its open pools, as a txretry-tool [`Toolbox`]: one dynamic tool per
//! declared tool, its arguments checked against its parameters before anything runs.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use txretry_tool::mcp::RetryRelay;
use txretry_tool::{BuildError, Once, Tool, ToolContext, Toolbox};

use crate::config::{Config, ParamDecl, ReturnsPlan, SqlValue, ToolPlan};
use crate::engine::{self, Args};
use crate::source::Pool;

/// The toolbox of `config`, its tools running on `pools` (by source name), its retries
/// reported through `relay`.
///
/// # Errors
/// What txretry-tool refuses (a config that passed the checks is not refused).
pub fn build(
    config: &Config,
    pools: &HashMap<String, Arc<Pool>>,
    relay: &RetryRelay,
) -> Result<Toolbox, BuildError> {
    let mut builder = Toolbox::builder().on_retry(relay.hook());
    if let Some(policy) = &config.default_retry {
        builder = builder.policy(policy.clone());
    }
    for (set, tools) in &config.toolsets {
        builder = builder.persona(set.clone(), tools.clone());
    }
    for plan in &config.tools {
        let pool = Arc::clone(&pools[&plan.source]);
        builder = builder.tool(tool(Arc::new(plan.clone()), pool));
    }
    builder.build()
}

fn tool(plan: Arc<ToolPlan>, pool: Arc<Pool>) -> Tool {
    let params = Arc::clone(&plan);
    let parse = move |args: &Value| parse_args(&params, args);
    let handler = {
        let plan = Arc::clone(&plan);
        move |ctx: ToolContext, args: Args| {
            let plan = Arc::clone(&plan);
            let pool = Arc::clone(&pool);
            async move {
                match &*pool {
                    Pool::Postgres(pool) => engine::call(ctx, pool.clone(), plan, args).await,
                    Pool::Primary(pool) => engine::call(ctx, pool.pool(), plan, args).await,
                    Pool::MySql(pool) => engine::call(ctx, pool.clone(), plan, args).await,
                    Pool::Sqlite(pool) => engine::call(ctx, pool.clone(), plan, args).await,
                }
            }
        }
    };
    let mut tool = Tool::dynamic(
        plan.name.clone(),
        plan.description.clone(),
        input_schema(&plan),
        parse,
        handler,
    )
    .read_only(plan.read_only)
    .idempotent(plan.idempotent)
    .output_schema(output_schema(&plan.returns));
    if let Some(timeout) = plan.timeout {
        tool = tool.timeout(timeout);
    }
    if let Some(policy) = &plan.retry {
        tool = tool.retry(policy.clone());
    }
    if let Some(roles) = &plan.roles {
        tool = tool.roles(roles.clone());
    }
    if let Some(once) = &plan.once {
        // Each key parameter with its declaration: the key holds the values as parsed, so
        // a call that leaves one out and a call that sends its default are the same call,
        // and so are `5` and `5.0` for a number.
        let key: Vec<(String, ParamDecl)> = (once.key.iter())
            .map(|name| (name.clone(), plan.params[name].clone()))
            .collect();
        let mut record = Once::key_from_args(move |args: &Value| once_key(&key, args));
        if let Some(table) = &once.table {
            // Checked when the config was loaded.
            record = record.table(table).unwrap_or_else(|_| Once::new());
        }
        tool = tool.once(record);
    }
    tool
}

/// The key of a `once` call: the key parameters' values as [`parse_arg`] reads them (a
/// missing one: its default; a number: as a number whatever its JSON spelling), as a JSON
/// array (`[7,"r-19"]`). The arguments were checked before: one that does not parse (it
/// cannot happen) goes into the key as given.
fn once_key(key: &[(String, ParamDecl)], args: &Value) -> String {
    let values: Vec<Value> = key
        .iter()
        .map(|(name, decl)| {
            let given = args.get(name);
            parse_arg(decl, given).map_or_else(
                |_| given.cloned().unwrap_or(Value::Null),
                |value| value.to_json(),
            )
        })
        .collect();
    storable(Value::from(values).to_string())
}

/// `key`, or, when it is longer than the records hold ([`Once::MAX_KEY_LEN`] bytes), its
/// SHA-256 as `sha256:` and 64 hex digits: calls with the same values still share it, and
/// no key of values looks like it (those are JSON arrays, with any NUL escaped). Refused
/// instead, such a call could never run, whatever the host retried.
fn storable(key: String) -> String {
    use sha2::{Digest, Sha256};
    if key.len() <= Once::MAX_KEY_LEN {
        return key;
    }
    format!("sha256:{:x}", Sha256::digest(key.as_bytes()))
}

/// The JSON Schema of a tool's arguments.
pub fn input_schema(plan: &ToolPlan) -> Value {
    let properties: Map<String, Value> = plan
        .params
        .iter()
        .map(|(name, decl)| (name.clone(), decl.schema()))
        .collect();
    let required: Vec<&str> = plan
        .params
        .iter()
        .filter(|(_, decl)| decl.is_required())
        .map(|(name, _)| name.as_str())
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The JSON Schema of what a call answers.
fn output_schema(returns: &ReturnsPlan) -> Value {
    match returns {
        ReturnsPlan::Default => json!({"type": "array"}),
        ReturnsPlan::Rows => json!({"type": "array", "items": {"type": "object"}}),
        ReturnsPlan::Row => json!({"type": ["object", "null"]}),
        ReturnsPlan::Affected => json!({"type": "array", "items": {"type": "integer"}}),
        ReturnsPlan::Template(_) => json!({"type": "string"}),
    }
}

/// A call's arguments checked against the tool's parameters, with the schema's rules: an
/// object, nothing undeclared, every required one given, each of its type and within its
/// limits. Missing optional ones take their default, or NULL.
pub fn parse_args(plan: &ToolPlan, args: &Value) -> Result<Args, String> {
    let empty = Map::new();
    let given = match args {
        Value::Object(given) => given,
        Value::Null => &empty,
        _ => return Err("the arguments must be an object".to_owned()),
    };
    if let Some(unknown) = given.keys().find(|key| !plan.params.contains_key(*key)) {
        return Err(format!("{unknown}: no such parameter"));
    }
    let mut parsed = Args::with_capacity(plan.params.len());
    for (name, decl) in &plan.params {
        let value = parse_arg(decl, given.get(name)).map_err(|why| format!("{name}: {why}"))?;
        parsed.insert(name.clone(), value);
    }
    Ok(parsed)
}

/// One argument: `given`, or its default, or NULL. An explicit `null` is an argument left
/// out (clients send it for one they do not give): it takes the default, as the `once` key
/// does ([`once_key`]); it was bound as NULL while the key took the default, so a call
/// with `null` and one leaving the argument out shared a key and only the first ran.
fn parse_arg(decl: &ParamDecl, given: Option<&Value>) -> Result<SqlValue, String> {
    match (given.filter(|value| !value.is_null()), &decl.default) {
        (Some(value), _) | (None, Some(value)) => decl.parse(value),
        (None, None) if !decl.is_required() => Ok(SqlValue::Null(Some(decl.kind))),
        (None, None) if given.is_some() => Err(format!(
            "null is not allowed (expected {})",
            decl.kind.as_str()
        )),
        (None, None) => Err("required".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::config::{ParamDecl, SqlValue};

    fn decl(json: Value) -> ParamDecl {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_null_argument_is_one_left_out_in_the_sql_and_the_key_alike() {
        let with_default = decl(json!({"type": "string", "default": "d"}));
        let null = super::parse_arg(&with_default, Some(&Value::Null)).unwrap();
        let left_out = super::parse_arg(&with_default, None).unwrap();
        assert_eq!(null, left_out);
        assert_eq!(left_out, SqlValue::Text("d".into()));
        let key = [("k".to_owned(), with_default.clone())];
        assert_eq!(
            super::once_key(&key, &json!({"k": null})),
            super::once_key(&key, &json!({}))
        );
        // Optional without a default: NULL either way; required: refused either way.
        let optional = decl(json!({"type": "integer", "required": false}));
        assert!(matches!(
            super::parse_arg(&optional, Some(&Value::Null)),
            Ok(SqlValue::Null(_))
        ));
        let required = decl(json!({"type": "integer"}));
        assert_eq!(
            super::parse_arg(&required, Some(&Value::Null)),
            Err("null is not allowed (expected integer)".to_owned())
        );
        assert_eq!(
            super::parse_arg(&required, None),
            Err("required".to_owned())
        );
    }

    #[test]
    fn a_key_parameter_left_out_is_its_default() {
        let key = [
            ("order".to_owned(), decl(json!({"type": "string"}))),
            (
                "line".to_owned(),
                decl(json!({"type": "integer", "default": 1})),
            ),
        ];
        let sent = super::once_key(&key, &json!({"order": "o-7", "line": 1}));
        let defaulted = super::once_key(&key, &json!({"order": "o-7"}));
        assert_eq!(sent, r#"["o-7",1]"#);
        assert_eq!(sent, defaulted);
        assert_ne!(
            sent,
            super::once_key(&key, &json!({"order": "o-7", "line": 2}))
        );
    }

    /// A key too long for the records is its digest: the same values, the same key; other
    /// values, another.
    #[test]
    fn a_key_the_records_cannot_hold_is_its_digest() {
        let key = [("rid".to_owned(), decl(json!({"type": "string"})))];
        let short = super::once_key(&key, &json!({"rid": "r-1"}));
        assert_eq!(short, r#"["r-1"]"#);
        let long = "é".repeat(200);
        let digest = super::once_key(&key, &json!({ "rid": long }));
        assert!(digest.starts_with("sha256:"), "{digest}");
        assert_eq!(digest.len(), "sha256:".len() + 64);
        assert_eq!(digest, super::once_key(&key, &json!({ "rid": long })));
        let other = super::once_key(&key, &json!({ "rid": format!("{long}x") }));
        assert_ne!(digest, other);
    }

    /// A JavaScript host sends `5`, a Python host resending the same call `5.0`: for a
    /// number, one value, so one key (they were two calls, and the work ran twice).
    #[test]
    fn a_number_key_is_the_same_however_it_is_spelled() {
        let key = [("amount".to_owned(), decl(json!({"type": "number"})))];
        let whole = super::once_key(&key, &json!({"amount": 5}));
        assert_eq!(whole, super::once_key(&key, &json!({"amount": 5.0})));
        assert_eq!(whole, super::once_key(&key, &json!({"amount": 5.000})));
        assert_ne!(whole, super::once_key(&key, &json!({"amount": 5.5})));
    }
}
