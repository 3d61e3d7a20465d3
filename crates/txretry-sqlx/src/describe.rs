//! A driver error as txretry's binaries print it (txretry-lab's reports, `PrimaryPool`'s
//! reason for passing a host over), written once; hidden, not part of txretry-sqlx's API.

/// A database's own message and code, without what sqlx's Postgres `Display` appends
/// (`at line 948`: a line of the server's C source, noise to whoever reads it); any other
/// error as sqlx says it.
pub fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("{} (code {code})", db.message()),
            None => db.message().to_owned(),
        },
        other => other.to_string(),
    }
}
