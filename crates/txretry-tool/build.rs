//! Names for the feature sets the `once` code is compiled under, so each `cfg` says what it
//! means instead of repeating a list of features.

fn main() {
    cfg_aliases::cfg_aliases! {
        // `ToolContext::once` on sqlx (any of its databases).
        sqlx_once: { any(feature = "sqlx-postgres", feature = "sqlx-mysql", feature = "sqlx-sqlite") },
        // The async drivers' once records (their runners' closures share the handler's
        // closure through a `Slot`).
        async_once: { any(sqlx_once, feature = "tokio-postgres", feature = "mysql_async") },
        // Any driver's once records.
        once_records: { any(async_once, feature = "rusqlite") },
    }
}
