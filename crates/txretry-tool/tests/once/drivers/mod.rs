//! One [`OnceDriver`](crate::driver::OnceDriver) per driver, and the matrix expanded for
//! each (driver, database) pair: sqlx × {Postgres, MariaDB, SQLite}, tokio-postgres ×
//! Postgres, mysql_async × MariaDB, rusqlite × SQLite.

#[cfg(feature = "mysql_async")]
mod mysql_async;
#[cfg(feature = "rusqlite")]
mod rusqlite;
mod sqlx;
#[cfg(feature = "tokio-postgres")]
mod tokio_postgres;
