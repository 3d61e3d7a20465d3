//! SQLite: `?` placeholders; rows read by each value's own storage class (SQLite's columns
//! are not typed), a column declared BOOLEAN as `true` / `false`.

use serde_json::{Map, Value};
use sqlx::sqlite::{Sqlite, SqliteRow};
use sqlx::{Column, Row, TypeInfo, ValueRef};

use super::database::unreadable;

super::database::database!(Sqlite, read_row);

fn read_row(row: &SqliteRow) -> Result<Map<String, Value>, sqlx::Error> {
    let mut object = Map::new();
    for column in row.columns() {
        let i = column.ordinal();
        let name = column.name();
        let raw = row.try_get_raw(i)?;
        let value = if raw.is_null() {
            Value::Null
        } else {
            let storage = raw.type_info().name().to_owned();
            match storage.as_str() {
                // A column declared BOOLEAN stores 0 and 1; its declaration says what they
                // are, as Postgres' and MySQL's answer `true` and `false`.
                "INTEGER" if column.type_info().name() == "BOOLEAN" => {
                    Value::from(row.try_get_unchecked::<i64, _>(i)? != 0)
                }
                "INTEGER" => Value::from(row.try_get_unchecked::<i64, _>(i)?),
                "REAL" => Value::from(row.try_get_unchecked::<f64, _>(i)?),
                "TEXT" => Value::from(row.try_get_unchecked::<String, _>(i)?),
                other => return Err(unreadable(name, other, &format!("CAST({name} AS TEXT)"))),
            }
        };
        object.insert(name.to_owned(), value);
    }
    Ok(object)
}
