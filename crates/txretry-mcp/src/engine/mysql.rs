//! MySQL and MariaDB: `?` placeholders; rows read by the columns' types; a dropped call's
//! statement stopped with `KILL QUERY`.

use serde_json::{Map, Value};
use sqlx::mysql::{MySql, MySqlRow};
use sqlx::{Column, Row, TypeInfo, ValueRef};

use super::database::unreadable;

super::database::database!(MySql, read_row, stopper = super::stopper::Stopper::mysql);

fn read_row(row: &MySqlRow) -> Result<Map<String, Value>, sqlx::Error> {
    let mut object = Map::new();
    for column in row.columns() {
        let i = column.ordinal();
        let name = column.name();
        let value = if row.try_get_raw(i)?.is_null() {
            Value::Null
        } else {
            let type_name = column.type_info().name();
            match type_name {
                "BOOLEAN" => Value::from(row.try_get::<bool, _>(i)?),
                "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "BIGINT" | "YEAR" => {
                    Value::from(row.try_get::<i64, _>(i)?)
                }
                "TINYINT UNSIGNED" | "SMALLINT UNSIGNED" | "MEDIUMINT UNSIGNED"
                | "INT UNSIGNED" | "BIGINT UNSIGNED" => Value::from(row.try_get::<u64, _>(i)?),
                "FLOAT" => Value::from(row.try_get::<f32, _>(i)?),
                "DOUBLE" => Value::from(row.try_get::<f64, _>(i)?),
                "VARCHAR" | "CHAR" | "TEXT" | "TINYTEXT" | "MEDIUMTEXT" | "LONGTEXT" | "ENUM"
                | "SET" => Value::from(row.try_get::<String, _>(i)?),
                // The protocol sends a DECIMAL as its digits: kept exact, as a string.
                "DECIMAL" => Value::from(row.try_get_unchecked::<String, _>(i)?),
                other => {
                    return Err(unreadable(name, other, &format!("CAST({name} AS CHAR)")));
                }
            }
        };
        object.insert(name.to_owned(), value);
    }
    Ok(object)
}
