//! TLS to the database, as the source URL asks: on Postgres `sslmode=` (`prefer` by
//! default: TLS when the server offers it), on MySQL/MariaDB `ssl-mode=`. A tool reads how
//! its own connection reached the server; a certificate the URL asks to verify and cannot
//! be, or TLS required of a server without it, is refused before serving, with the
//! driver's reason.

mod common;

use common::{Db, check, outcome, stdio, with_query};
use serde_json::{Value, json};

/// A server of one tool that runs `sql` and answers its row.
fn config(sql: &str) -> String {
    format!(
        r#"
sources:
  db: {{ url: "${{TLS_DB_URL}}" }}
tools:
  connection:
    source: db
    description: How this call's connection reached the server.
    statements:
      - sql: {sql}
    returns: row
"#
    )
}

/// Postgres: whether the connection is on TLS.
const POSTGRES: &str = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

/// MySQL/MariaDB: the connection's cipher, empty in the clear.
const MYSQL: &str = "SELECT variable_value AS cipher FROM information_schema.session_status \
     WHERE variable_name = 'Ssl_cipher'";

/// What the `connection` tool, running `sql`, answers on a server at `url`.
async fn connection(db: &Db, sql: &str, url: &str) -> Value {
    let path = db.write("tls.yaml", &config(sql));
    let client = stdio(&path, &[], &[("TLS_DB_URL", url)]).await;
    let answer = outcome(&client, "connection", json!({})).await;
    client.cancel().await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_connects_with_tls_as_the_url_asks() {
    let Some(db) = Db::postgres("tls::postgres").await else {
        return;
    };
    let ssl = db.strings("SHOW ssl").await;
    assert_eq!(
        ssl,
        ["on"],
        "the Postgres server of TXRETRY_POSTGRES_URL must offer TLS (ssl = on) for this test"
    );

    for (query, tls) in [
        ("sslmode=require", true),
        // The default, `prefer`: TLS, since the server offers it.
        ("application_name=txretry-mcp-tls", true),
        ("sslmode=disable", false),
    ] {
        let answer = connection(&db, POSTGRES, &with_query(&db.url, query)).await;
        assert_eq!(answer["result"]["ssl"], json!(tls), "{query}: {answer}");
    }

    // The server's certificate is its own (self-signed): not one the system's roots vouch
    // for, nor one made out to 127.0.0.1.
    let path = db.write("tls.yaml", &config(POSTGRES));
    let url = with_query(&db.url, "sslmode=verify-full");
    let ran = check(&path, &[("TLS_DB_URL", url.as_str())]).await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("sources.db.url: cannot connect")
            && ran.stderr.to_lowercase().contains("certificate"),
        "{ran:?}"
    );

    // Given as the root to trust, the same certificate passes the check of its chain.
    let cert = db.strings("SHOW ssl_cert_file").await.remove(0);
    if std::path::Path::new(&cert).exists() {
        let url = with_query(&db.url, &format!("sslmode=verify-ca&sslrootcert={cert}"));
        let answer = connection(&db, POSTGRES, &url).await;
        assert_eq!(answer["result"]["ssl"], json!(true), "{answer}");
    } else {
        assert!(
            !txretry_testkit::require_db(),
            "the server's certificate {cert} is not on this machine"
        );
        eprintln!("not checked: verify-ca (the server's certificate {cert} is elsewhere)");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_requires_tls_as_the_url_asks() {
    let Some(db) = Db::mariadb("tls::mysql").await else {
        return;
    };
    let have_ssl = db.strings("SELECT @@have_ssl").await;
    let plain = connection(&db, MYSQL, &with_query(&db.url, "ssl-mode=DISABLED")).await;
    assert_eq!(plain["result"]["cipher"], json!(""), "{plain}");

    let path = db.write("tls.yaml", &config(MYSQL));
    let url = with_query(&db.url, "ssl-mode=REQUIRED");
    if have_ssl == ["YES"] {
        let answer = connection(&db, MYSQL, &url).await;
        assert_ne!(answer["result"]["cipher"], json!(""), "{answer}");
    } else {
        // A server without TLS (as the CI's MariaDB): refused, not connected in the clear.
        let ran = check(&path, &[("TLS_DB_URL", url.as_str())]).await;
        assert_eq!(ran.code, Some(2), "have_ssl = {have_ssl:?}: {ran:?}");
        assert!(
            ran.stderr.contains("sources.db.url: cannot connect")
                && ran.stderr.to_lowercase().contains("tls"),
            "{ran:?}"
        );
    }
}
