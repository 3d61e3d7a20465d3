//! The options reach the server: the isolation level and READ ONLY are those of the
//! transaction the closure runs in, and nothing of them stays on the session. (A write in
//! a read-only transaction: `read_only`, shared with the MySQL binary.)

use diesel::prelude::*;
use diesel::sql_types::Text;
use txretry::{Isolation, RetryPolicy, TxOptions};

use crate::common::*;

#[derive(QueryableByName)]
struct Setting {
    #[diesel(sql_type = Text)]
    s: String,
}

fn setting(conn: &mut PgConnection, name: &str) -> Result<String, diesel::result::Error> {
    diesel::sql_query("SELECT current_setting($1) AS s")
        .bind::<Text, _>(name)
        .get_result::<Setting>(conn)
        .map(|row| row.s)
}

#[test]
fn isolation_and_read_only_are_the_transactions() {
    let Some(url) = url("diesel_postgres::options") else {
        return;
    };
    let mut conn = connect(&url);
    let policy = RetryPolicy::default();
    let options = TxOptions::new()
        .isolation(Isolation::RepeatableRead)
        .read_only(true);
    let (isolation, read_only) =
        txretry::diesel::transaction_with(&mut conn, &policy, &options, |conn| {
            Ok::<_, diesel::result::Error>((
                setting(conn, "transaction_isolation")?,
                setting(conn, "transaction_read_only")?,
            ))
        })
        .expect("a read");
    assert_eq!(isolation, "repeatable read");
    assert_eq!(read_only, "on");
    // Nothing of it stays on the session.
    let after = txretry::diesel::transaction(&mut conn, &policy, |conn| {
        setting(conn, "transaction_read_only")
    })
    .expect("a read");
    assert_eq!(after, "off");
}
