//! The cluster and plain mysql_async connections to its nodes: the counter table, a row's
//! value, each node's conflict counters (read one run at a time, [`SERIAL`]).

use mysql_async::prelude::*;

/// The contended runs read each node's conflict counters: one at a time.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The cluster's node URLs, or `None` when the test must skip (testkit printed why).
pub(crate) fn cluster(test: &str) -> Option<Vec<String>> {
    let urls = txretry_testkit::galera_cluster(test)?;
    assert!(urls.len() >= 3, "three nodes expected: {urls:?}");
    Some(urls)
}

/// mysql_async options for one node. `prefer_socket` off: by default mysql_async asks the
/// server for its `@@socket` and reconnects through that path on this machine, which on a
/// host with a MariaDB of its own reaches that server instead of the node.
pub(crate) fn node_opts(url: &str) -> mysql_async::Opts {
    let opts = mysql_async::Opts::from_url(url).expect("a mysql:// URL");
    mysql_async::OptsBuilder::from_opts(opts)
        .prefer_socket(false)
        .into()
}

/// A plain mysql_async connection to one node; reads on it wait until the node has
/// applied every write set the cluster committed before the read (`wsrep_sync_wait=1`).
pub(crate) async fn node(url: &str) -> mysql_async::Conn {
    let mut conn = mysql_async::Conn::new(node_opts(url))
        .await
        .expect("connect to a node");
    conn.query_drop("SET SESSION wsrep_sync_wait = 1")
        .await
        .expect("causal reads");
    conn
}

/// Creates `{t} (id, v)` with row 1, v = 0, on node 1, and waits until node 2 has it.
pub(crate) async fn counter_table(urls: &[String], t: &str) {
    let mut first = node(&urls[0]).await;
    first
        .query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"
        ))
        .await
        .expect("create table");
    first
        .query_drop(format!("INSERT INTO {t} VALUES (1, 0)"))
        .await
        .expect("insert row");
    for url in &urls[1..] {
        let n: Option<i64> = node(url)
            .await
            .query_first(format!("SELECT count(*) FROM {t}"))
            .await
            .expect("read on another node");
        assert_eq!(n, Some(1), "the row replicated");
    }
}

/// Row 1's value, read on `url` after everything committed before has been applied there.
pub(crate) async fn value(url: &str, t: &str) -> i64 {
    node(url)
        .await
        .query_first(format!("SELECT v FROM {t} WHERE id = 1"))
        .await
        .expect("read the counter")
        .expect("the row exists")
}

pub(crate) async fn drop_table(url: &str, t: &str) {
    node(url)
        .await
        .query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .expect("drop table");
}

/// `wsrep_local_cert_failures` and `wsrep_local_bf_aborts` of a node: how its local
/// transactions lost (certification at COMMIT, or aborted by the applier).
pub(crate) async fn conflicts(url: &str) -> (u64, u64) {
    let mut conn = node(url).await;
    let mut status = async |name: &str| -> u64 {
        let row: Option<(String, u64)> = conn
            .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .await
            .expect("wsrep status");
        row.unwrap_or_else(|| panic!("no status {name}")).1
    };
    (
        status("wsrep_local_cert_failures").await,
        status("wsrep_local_bf_aborts").await,
    )
}
