//! Postgres: `$n` placeholders, each declared with the type of the value it binds; rows
//! read by the columns' declared types.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgPool, PgRow, PgTypeInfo, Postgres};
use sqlx::{Column, Row, Transaction, Type, TypeInfo, ValueRef};

use super::database::{Database, Done, unreadable_text};
use super::stopper::Stopper;
use crate::config::{ParamKind, SqlValue};

impl Database for Postgres {
    async fn run(
        tx: &mut Transaction<'_, Postgres>,
        sql: Arc<str>,
        binds: Vec<SqlValue>,
        limit: u32,
    ) -> Result<Done, sqlx::Error> {
        let (sql, types) = typed(&sql, binds.iter().map(SqlValue::kind));
        super::database::run_statement!(Postgres, tx, sql, &types, binds, limit, read_row)
    }

    async fn stopper(
        tx: &mut Transaction<'_, Postgres>,
        pool: &PgPool,
    ) -> Result<Option<Stopper>, sqlx::Error> {
        Stopper::postgres(tx, pool).await.map(Some)
    }
}

/// `sql` to prepare with each parameter declared as the kind of value it binds (`None`: a
/// NULL nothing types, left to Postgres), and those types.
///
/// Left to itself, Postgres gives a parameter the type of where it stands (`price = $1` on a
/// DOUBLE PRECISION column: float8), while sqlx sends each value in binary as the Rust type
/// it was bound as: an i64 read as a float8 is a wrong number, committed. Declared, the
/// parameter is what the value is (int8, float8, text, boolean), and Postgres converts it
/// where SQL converts (an int8 into an INT or NUMERIC column, compared with a float8) or
/// refuses the statement with its own hint (text into a timestamptz column: write
/// `:at::timestamptz`).
///
/// sqlx caches prepared statements by their SQL text alone, whatever types they were
/// prepared with, so the types are appended to the text as a comment: the same SQL with
/// other types (a captured value that is NULL in one call) is another statement.
pub fn typed(
    sql: &str,
    kinds: impl Iterator<Item = Option<ParamKind>>,
) -> (String, Vec<PgTypeInfo>) {
    let mut text = format!("{sql}\n/* txretry-mcp:");
    let mut types = Vec::new();
    for kind in kinds {
        let (name, info) = match kind {
            Some(ParamKind::String) => ("text", <String as Type<Postgres>>::type_info()),
            Some(ParamKind::Integer) => ("int8", <i64 as Type<Postgres>>::type_info()),
            Some(ParamKind::Number) => ("float8", <f64 as Type<Postgres>>::type_info()),
            Some(ParamKind::Boolean) => ("bool", <bool as Type<Postgres>>::type_info()),
            // Oid 0: unspecified, Postgres infers it.
            None => ("?", PgTypeInfo::with_oid(Oid(0))),
        };
        let _ = write!(text, " {name}");
        types.push(info);
    }
    text.push_str(" */");
    (text, types)
}

/// What a column of a Postgres type is in a call's answer, and binds as when a later
/// statement uses it as a captured value.
pub enum ColumnKind {
    /// A JSON value of this kind.
    Value(ParamKind),
    /// Always NULL (VOID).
    Null,
    /// Nothing: a call cannot read it into JSON (it fails).
    Unreadable,
}

/// The [`ColumnKind`] of Postgres type `type_name`: what a call reads it as (`read_row`
/// goes by it), and what `check` prepares a captured value of it as.
pub fn column_kind(type_name: &str) -> ColumnKind {
    match type_name {
        "BOOL" => ColumnKind::Value(ParamKind::Boolean),
        "INT2" | "INT4" | "INT8" => ColumnKind::Value(ParamKind::Integer),
        "FLOAT4" | "FLOAT8" => ColumnKind::Value(ParamKind::Number),
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "CHAR" | "CITEXT" => {
            ColumnKind::Value(ParamKind::String)
        }
        "VOID" => ColumnKind::Null,
        _ => ColumnKind::Unreadable,
    }
}

/// Why a call cannot read column `name` of type `type_name` into JSON, and the cast that lets it.
pub fn unreadable_column(name: &str, type_name: &str) -> String {
    unreadable_text(name, type_name, &format!("{name}::text"))
}

fn read_row(row: &PgRow) -> Result<Map<String, Value>, sqlx::Error> {
    let mut object = Map::new();
    for column in row.columns() {
        let i = column.ordinal();
        let name = column.name();
        let value = if row.try_get_raw(i)?.is_null() {
            Value::Null
        } else {
            let type_name = column.type_info().name();
            // Each width decodes as its own Rust type (sqlx checks it), into one JSON kind.
            match (column_kind(type_name), type_name) {
                (ColumnKind::Value(ParamKind::Boolean), _) => {
                    Value::from(row.try_get::<bool, _>(i)?)
                }
                (ColumnKind::Value(ParamKind::Integer), "INT2") => {
                    Value::from(row.try_get::<i16, _>(i)?)
                }
                (ColumnKind::Value(ParamKind::Integer), "INT4") => {
                    Value::from(row.try_get::<i32, _>(i)?)
                }
                (ColumnKind::Value(ParamKind::Integer), _) => {
                    Value::from(row.try_get::<i64, _>(i)?)
                }
                (ColumnKind::Value(ParamKind::Number), "FLOAT4") => {
                    Value::from(row.try_get::<f32, _>(i)?)
                }
                (ColumnKind::Value(ParamKind::Number), _) => Value::from(row.try_get::<f64, _>(i)?),
                (ColumnKind::Value(ParamKind::String), _) => {
                    Value::from(row.try_get::<String, _>(i)?)
                }
                (ColumnKind::Null, _) => Value::Null,
                (ColumnKind::Unreadable, _) => {
                    return Err(sqlx::Error::Decode(
                        unreadable_column(name, type_name).into(),
                    ));
                }
            }
        };
        object.insert(name.to_owned(), value);
    }
    Ok(object)
}
