//! `src/backend.rs`.

use sqlx::{MySql, Postgres, Sqlite};
use txretry_lab::backend::LabDb;

#[test]
fn placeholders() {
    assert_eq!(Postgres::placeholder(2), "$2");
    assert_eq!(Sqlite::placeholder(3), "$3");
    assert_eq!(MySql::placeholder(2), "?");
}
