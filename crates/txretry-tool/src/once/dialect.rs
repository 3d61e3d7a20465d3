//! The databases the records' table can live in, and how each quotes a name.

/// The databases the records' table can live in.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres = 0,
    /// MySQL 8 / MariaDB 10.5 and later.
    MySql = 1,
    /// SQLite 3.
    Sqlite = 2,
}

/// `name` quoted for `dialect` (it is a checked plain identifier).
pub(super) fn quote(dialect: Dialect, name: &str) -> String {
    match dialect {
        Dialect::MySql => format!("`{name}`"),
        Dialect::Postgres | Dialect::Sqlite => format!("\"{name}\""),
    }
}
