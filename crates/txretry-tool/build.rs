//! Names for the feature sets the `once` code is compiled under, so each `cfg` says what it
//! means instead of repeating a list of features.

fn main() {
    cfg_aliases::cfg_aliases! {
        // `ToolContext::once` on sqlx (any of its databases).
        sqlx_once: { any(feature = "sqlx-postgres", feature = "sqlx-mysql", feature = "sqlx-sqlite") },
        // Any driver's once records.
        once_records: { any(sqlx_once, feature = "tokio-postgres") },
    }
}
