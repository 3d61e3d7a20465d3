//! A driver error as txretry's binaries print it (txretry-lab's reports, `PrimaryPool`'s
//! reason for passing a host over), written once; hidden, not part of txretry-sqlx's API.

/// A database's own message and code (MySQL's error number, else the SQLSTATE), without
/// what sqlx's Postgres `Display` appends
/// (`at line 948`: a line of the server's C source, noise to whoever reads it); any other
/// error as sqlx says it.
pub fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => {
            // MySQL's own error number (1213, 1205), which its docs and ours cite; sqlx's
            // `code` is the SQLSTATE, which several errors share (40001, HY000).
            #[cfg(feature = "mysql")]
            if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                return format!("{} (code {})", db.message(), mysql.number());
            }
            match db.code() {
                Some(code) => format!("{} (code {code})", db.message()),
                None => db.message().to_owned(),
            }
        }
        other => other.to_string(),
    }
}
