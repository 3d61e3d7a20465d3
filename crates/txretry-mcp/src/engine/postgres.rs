//! Postgres: `$n` placeholders; rows read by the columns' declared types.

use serde_json::{Map, Value};
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{Column, Row, TypeInfo, ValueRef};

use super::database::unreadable;

super::database::database!(Postgres, read_row);

fn read_row(row: &PgRow) -> Result<Map<String, Value>, sqlx::Error> {
    let mut object = Map::new();
    for column in row.columns() {
        let i = column.ordinal();
        let name = column.name();
        let value = if row.try_get_raw(i)?.is_null() {
            Value::Null
        } else {
            match column.type_info().name() {
                "BOOL" => Value::from(row.try_get::<bool, _>(i)?),
                "INT2" => Value::from(row.try_get::<i16, _>(i)?),
                "INT4" => Value::from(row.try_get::<i32, _>(i)?),
                "INT8" => Value::from(row.try_get::<i64, _>(i)?),
                "FLOAT4" => Value::from(row.try_get::<f32, _>(i)?),
                "FLOAT8" => Value::from(row.try_get::<f64, _>(i)?),
                "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "CHAR" | "CITEXT" => {
                    Value::from(row.try_get::<String, _>(i)?)
                }
                "VOID" => Value::Null,
                other => return Err(unreadable(name, other, &format!("{name}::text"))),
            }
        };
        object.insert(name.to_owned(), value);
    }
    Ok(object)
}
