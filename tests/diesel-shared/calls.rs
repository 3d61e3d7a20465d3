//! How the shared scenarios call the runner and run a statement in it, for the blocking
//! adapter (`txretry::diesel::transaction_with`, Diesel's `RunQueryDsl`). The diesel-async
//! binaries have the same macros in `diesel-async-shared/calls.rs`, so one scenario runs
//! on both.

/// `txretry::diesel::transaction_with(conn, policy, options, |c| body)`.
macro_rules! transaction_with {
    ($conn:expr, $policy:expr, $options:expr, |$c:ident| $body:expr) => {
        txretry::diesel::transaction_with($conn, $policy, $options, |$c| $body)
    };
}
pub(crate) use transaction_with;

/// `query.execute(conn)`.
macro_rules! execute {
    ($query:expr, $conn:expr) => {
        diesel::RunQueryDsl::execute($query, $conn)
    };
}
pub(crate) use execute;

/// `query.get_result(conn)`.
// Used by the Postgres binaries only (`pg_options.rs`).
#[allow(unused_macros)]
macro_rules! get_result {
    ($query:expr, $conn:expr) => {
        diesel::RunQueryDsl::get_result($query, $conn)
    };
}
#[allow(unused_imports)]
pub(crate) use get_result;

/// Begins a nested transaction (a savepoint) by hand and leaves it open.
macro_rules! begin_nested {
    ($conn:expr) => {{
        use diesel::connection::{AnsiTransactionManager, TransactionManager};
        AnsiTransactionManager::begin_transaction($conn)
    }};
}
pub(crate) use begin_nested;

/// How many transactions Diesel counts open on the connection (0: none).
macro_rules! depth {
    ($conn:expr) => {{
        use diesel::connection::{AnsiTransactionManager, TransactionManager};
        AnsiTransactionManager::transaction_manager_status_mut($conn)
            .transaction_depth()
            .expect("a working transaction manager")
            .map_or(0, |depth| depth.get())
    }};
}
pub(crate) use depth;
