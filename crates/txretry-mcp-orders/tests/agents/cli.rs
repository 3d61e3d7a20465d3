//! The server's command line: a database it cannot use stops it with exit code 2 and a
//! message saying why, which never shows the URL's password.

use std::process::Stdio;

use crate::common::{SERVER, within};

/// Runs the server with `args`; it must exit with code 2. Its stderr.
async fn refused(args: &[&str]) -> String {
    let output = within(
        "the server exits",
        tokio::process::Command::new(SERVER)
            .args(args)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_it_cannot_use_is_exit_2_and_the_password_is_never_shown() {
    for (args, says) in [
        (
            &["--db", "oracle://app:hunter2@db/shop"][..],
            "--db oracle://app:***@db/shop: expected sqlite:PATH, postgres://… or mysql://…",
        ),
        (
            &["--db", "orders.db"],
            "--db orders.db: expected sqlite:PATH",
        ),
        (
            &["--db", "sqlite:"],
            "--db sqlite:: sqlite:PATH needs a path",
        ),
        (
            &["--db", "postgres://app:hunter2@[oops/shop"],
            ": not a valid URL",
        ),
        // Nothing listens on port 1: refused at once.
        (
            &["--db", "postgres://app:hunter2@127.0.0.1:1/shop"],
            "--db postgres://app:***@127.0.0.1:1/shop: cannot connect: ",
        ),
        (
            &["--db", "mysql://app:hunter2@127.0.0.1:1/shop"],
            "--db mysql://app:***@127.0.0.1:1/shop: cannot connect: ",
        ),
        (
            &["--table-prefix", "Orders-1"],
            "--table-prefix: table prefix \"Orders-1\": expected lowercase letters",
        ),
        (&["--max-attempts", "0"], "--max-attempts: "),
        (&["--db"], "--db needs a value"),
    ] {
        let stderr = refused(args).await;
        assert!(
            stderr.starts_with("txretry-mcp-orders: ") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("hunter2"), "{args:?}: {stderr}");
    }
}
