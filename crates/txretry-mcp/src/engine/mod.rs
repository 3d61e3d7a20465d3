//! Runs a declared tool: its statements, in order, in one transaction on its source, under
//! the call's retry budget (or exactly once); captures, expectations and the answer.

mod database;
mod mysql;
pub mod postgres;
mod sqlite;
mod stopper;

pub use self::stopper::settled;

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Value};
use sqlx::{Pool, Transaction};
use txretry_core::TxOptions;
use txretry_tool::{BoxError, BusinessError, ToolContext};

pub use self::database::Database;
use self::database::Done;
use crate::config::{ReturnsPlan, SqlValue, ToolPlan};
use crate::sql::Ref;

/// A call's arguments, checked: every declared parameter, defaults applied.
pub type Args = IndexMap<String, SqlValue>;

/// The kind of the business error a failed expectation ends a call with.
pub const EXPECTATION_FAILED: &str = "expectation_failed";

/// The business error's kind when a statement returns more rows than the tool's
/// `max_rows`.
pub const TOO_MANY_ROWS: &str = "too_many_rows";

/// Runs one call of `tool` on `pool`: the transaction (retried under the call's budget, or
/// exactly once when the tool is `once`), and its answer.
pub async fn call<DB: Database>(
    ctx: ToolContext,
    pool: Pool<DB>,
    tool: Arc<ToolPlan>,
    args: Args,
) -> Result<Value, BoxError> {
    let mut options = TxOptions::new()
        .read_only(tool.read_only)
        .idempotent(tool.idempotent);
    if let Some(level) = tool.isolation {
        options = options.isolation(level);
    }
    let once = tool.once.is_some();
    let source = pool.clone();
    let work = async move |tx: &mut Transaction<'_, DB>| -> Result<Value, BoxError> {
        // Armed while the statements run: a call dropped meanwhile (cancelled, timed out)
        // has its statement cancelled in the server, which would otherwise run it to its
        // end holding the transaction's locks.
        let stopper = DB::stopper(tx, &source).await?;
        let answer = run_statements(tx, &tool, &args).await;
        if let Some(stopper) = stopper {
            stopper.disarm();
        }
        answer
    };
    if once {
        Ok(ctx.once_with(&pool, &options, work).await?)
    } else {
        Ok(txretry_sqlx::transaction_with(&pool, ctx.policy(), &options, work).await?)
    }
}

/// What the statements so far have captured.
type Captures = IndexMap<String, Option<Map<String, Value>>>;

async fn run_statements<DB: Database>(
    tx: &mut Transaction<'_, DB>,
    tool: &ToolPlan,
    args: &Args,
) -> Result<Value, BoxError> {
    let mut captures = Captures::new();
    let mut counts = Vec::with_capacity(tool.statements.len());
    let mut last_rows: Option<Vec<Map<String, Value>>> = None;
    for (index, statement) in tool.statements.iter().enumerate() {
        let prepared = &statement.prepared;
        let binds = prepared
            .binds
            .iter()
            .map(|reference| bind(reference, args, &captures))
            .collect::<Result<Vec<_>, _>>()?;
        let Done {
            returns_rows,
            rows,
            count,
        } = DB::run(tx, Arc::clone(&prepared.sql), binds, tool.max_rows).await?;
        if rows.len() > tool.max_rows as usize {
            let message = format!(
                "statement {} returned more than {} rows (the tool's max_rows): narrow the call, or bound the statement (LIMIT)",
                index + 1,
                tool.max_rows
            );
            return Err(BusinessError::new(TOO_MANY_ROWS, message).into());
        }
        if let Some(expect) = &statement.expect
            && !(expect.min..=expect.max).contains(&count)
        {
            let message = expect
                .error
                .render(|reference| lookup(reference, args, &captures));
            return Err(BusinessError::new(EXPECTATION_FAILED, message).into());
        }
        if let Some(name) = &statement.capture {
            captures.insert(name.clone(), rows.first().cloned());
        }
        counts.push(count);
        if returns_rows {
            last_rows = Some(rows);
        }
    }
    Ok(match &tool.returns {
        ReturnsPlan::Default => match last_rows {
            Some(rows) => Value::from(rows.into_iter().map(Value::Object).collect::<Vec<_>>()),
            None => Value::from(counts),
        },
        ReturnsPlan::Rows => Value::from(
            last_rows
                .unwrap_or_default()
                .into_iter()
                .map(Value::Object)
                .collect::<Vec<_>>(),
        ),
        ReturnsPlan::Row => last_rows
            .and_then(|rows| rows.into_iter().next())
            .map_or(Value::Null, Value::Object),
        ReturnsPlan::Affected => Value::from(counts),
        ReturnsPlan::Template(template) => {
            Value::from(template.render(|reference| lookup(reference, args, &captures)))
        }
    })
}

/// The value a placeholder binds: an argument, or a captured column (as the database gave
/// it back, bound with its JSON type).
fn bind(reference: &Ref, args: &Args, captures: &Captures) -> Result<SqlValue, BoxError> {
    match reference {
        Ref::Param(name) => args
            .get(name)
            .cloned()
            .ok_or_else(|| format!("no argument {name}").into()),
        Ref::Column(capture, column) => {
            let row = captures
                .get(capture)
                .and_then(Option::as_ref)
                .ok_or_else(|| {
                    BusinessError::new(
                        EXPECTATION_FAILED,
                        format!("the statement capturing {capture:?} returned no row"),
                    )
                })?;
            let value = row.get(column).ok_or_else(|| {
                BusinessError::new(
                    "invalid_capture",
                    format!("the row captured as {capture:?} has no column {column:?}"),
                )
            })?;
            Ok(match value {
                Value::Null => SqlValue::Null(None),
                Value::Bool(b) => SqlValue::Boolean(*b),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => SqlValue::Integer(i),
                    None => SqlValue::Number(n.as_f64().unwrap_or(f64::NAN)),
                },
                Value::String(s) => SqlValue::Text(s.clone()),
                other => SqlValue::Text(other.to_string()),
            })
        }
    }
}

/// A template field's value.
fn lookup(reference: &Ref, args: &Args, captures: &Captures) -> Option<Value> {
    match reference {
        Ref::Param(name) => args.get(name).map(SqlValue::to_json),
        Ref::Column(capture, column) => captures.get(capture)?.as_ref()?.get(column).cloned(),
    }
}
