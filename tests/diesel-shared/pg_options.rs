//! The options reach the server: the isolation level and READ ONLY are those of the
//! transaction the closure runs in, and nothing of them stays on the session. (A write in
//! a read-only transaction: `read_only`, shared with the MySQL binaries.) Written once for
//! Postgres through Diesel and diesel-async (a `#[path]` module, like `business.rs`).

use diesel::QueryableByName;
use diesel::query_builder::SqlQuery;
use diesel::sql_types::Text;
use txretry::{Isolation, RetryPolicy, TxOptions};

use crate::calls::*;
use crate::common::*;

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    s: String,
}

/// `SELECT current_setting('{name}')`, for a fixed name.
fn setting(name: &'static str) -> SqlQuery {
    diesel::sql_query(format!("SELECT current_setting('{name}') AS s"))
}

#[test]
fn isolation_and_read_only_are_the_transactions() {
    let Some(url) = url(&format!("{BINARY}::options")) else {
        return;
    };
    let mut conn = connect(&url);
    let policy = RetryPolicy::default();
    let options = TxOptions::new()
        .isolation(Isolation::RepeatableRead)
        .read_only(true);
    let (isolation, read_only) = transaction_with!(&mut conn, &policy, &options, |conn| {
        let isolation: Setting = get_result!(setting("transaction_isolation"), conn)?;
        let read_only: Setting = get_result!(setting("transaction_read_only"), conn)?;
        Ok::<_, diesel::result::Error>((isolation.s, read_only.s))
    })
    .expect("a read");
    assert_eq!(isolation, "repeatable read");
    assert_eq!(read_only, "on");
    // Nothing of it stays on the session.
    let after = transaction_with!(&mut conn, &policy, &TxOptions::default(), |conn| {
        let read_only: Setting = get_result!(setting("transaction_read_only"), conn)?;
        Ok::<_, diesel::result::Error>(read_only.s)
    })
    .expect("a read");
    assert_eq!(after, "off");
}
