//! A driver error as txretry's binaries and the tool layer show it (txretry-lab's reports,
//! `PrimaryPool`'s reason for passing a host over, a tool's error for the model), written
//! once; hidden, not part of txretry-sqlx's API.

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

/// `text` (the `Display` of `error`, or of an error that shows `error`'s text) without the
/// ` at line N` sqlx's Postgres `Display` appends, when `error` or an error down its
/// `source()` chain is a Postgres server's: the line of the server's C source, which reads
/// as a line of the caller's SQL. Any other text as it is.
#[cfg(feature = "postgres")]
pub fn without_source_line(error: &(dyn std::error::Error + 'static), text: String) -> String {
    use sqlx::error::DatabaseError;
    use sqlx::postgres::PgDatabaseError;
    let mut link = Some(error);
    // A chain as long as this is a cycle, or past any wrapper worth reading.
    for _ in 0..16 {
        let Some(current) = link else { break };
        // `sqlx::Error::Database`'s source is its `Box<dyn DatabaseError>` itself.
        let database = (current.downcast_ref::<sqlx::Error>())
            .and_then(sqlx::Error::as_database_error)
            .or_else(|| {
                current
                    .downcast_ref::<Box<dyn DatabaseError>>()
                    .map(|db| &**db)
            });
        let postgres = database.and_then(|db| db.try_downcast_ref::<PgDatabaseError>());
        if let Some(line) = postgres.and_then(PgDatabaseError::line) {
            return match text.strip_suffix(&format!(" at line {line}")) {
                Some(own) => own.to_owned(),
                None => text,
            };
        }
        link = current.source();
    }
    text
}
