//! How the shared scenarios (`tests/diesel-shared/`) call the runner and run a statement
//! in it, for diesel-async: the same macros as `diesel-shared/calls.rs`, expanding to
//! `txretry::diesel::async_transaction_with` and diesel-async's `RunQueryDsl`, with the
//! call driven to completion on this binary's runtime. The scenarios stay plain `#[test]`s.

use std::future::Future;
use std::sync::LazyLock;

/// One runtime for the binary: diesel-async's Postgres connection runs a task on the
/// runtime it was established on, so every connection of a test lives on this one.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
});

/// Runs `future` to completion on the binary's runtime: from a plain `#[test]` or a
/// thread of its own, or from inside the runner's closure (where a shared scenario calls
/// a blocking helper), leaving the runtime's context for the duration, as any blocking
/// call made there would.
pub fn block_on<F: Future>(future: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => tokio::task::block_in_place(|| handle.block_on(future)),
        Err(_) => RUNTIME.block_on(future),
    }
}

/// `txretry::diesel::async_transaction_with(conn, policy, options, async |c| body)`, waited
/// for.
macro_rules! transaction_with {
    ($conn:expr, $policy:expr, $options:expr, |$c:ident| $body:expr) => {
        $crate::calls::block_on(txretry::diesel::async_transaction_with(
            $conn,
            $policy,
            $options,
            async |$c| $body,
        ))
    };
}
pub(crate) use transaction_with;

/// `query.execute(conn).await`.
macro_rules! execute {
    ($query:expr, $conn:expr) => {
        diesel_async::RunQueryDsl::execute($query, $conn).await
    };
}
pub(crate) use execute;

/// `query.get_result(conn).await`.
// Used by the Postgres binaries only (`pg_options.rs`).
#[allow(unused_macros)]
macro_rules! get_result {
    ($query:expr, $conn:expr) => {
        diesel_async::RunQueryDsl::get_result($query, $conn).await
    };
}
#[allow(unused_imports)]
pub(crate) use get_result;

/// Begins a nested transaction (a savepoint) by hand and leaves it open.
macro_rules! begin_nested {
    ($conn:expr) => {{
        use diesel_async::{AnsiTransactionManager, TransactionManager};
        AnsiTransactionManager::begin_transaction($conn).await
    }};
}
pub(crate) use begin_nested;

/// How many transactions diesel-async counts open on the connection (0: none).
macro_rules! depth {
    ($conn:expr) => {{
        use diesel_async::{AnsiTransactionManager, TransactionManager};
        AnsiTransactionManager::transaction_manager_status_mut($conn)
            .transaction_depth()
            .expect("a working transaction manager")
            .map_or(0, |depth| depth.get())
    }};
}
pub(crate) use depth;
