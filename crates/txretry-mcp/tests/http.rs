//! The binary serving orders.yaml over streamable HTTP to rmcp's reqwest client: each
//! caller is its bearer token (roles and toolset from the config's `auth.tokens`); no
//! token, or a wrong one, is offered nothing and refused every call; the server binds only
//! where it is told.

mod common;

use serde_json::json;

use common::{Db, HttpServer, INVALID_PARAMS, money, outcome, protocol_error, tool_names};

const TELLER_TOKEN: &str = "teller-token-0123456789abcdef";
const VIEWER_TOKEN: &str = "viewer-token-0123456789abcdef";
const SUPPORT_TOKEN: &str = "support-token-0123456789abcd";

/// orders.yaml with three tokens.
async fn server(db: &Db) -> HttpServer {
    db.load("orders.sql").await;
    let yaml = common::example("orders.yaml")
        + r#"
auth:
  tokens:
    - env: HTTP_TELLER_TOKEN
      roles: [teller, support]
    - env: HTTP_VIEWER_TOKEN
      roles: [teller, support]
      toolset: viewer
    - env: HTTP_SUPPORT_TOKEN
      roles: [support]
      toolset: agent
"#;
    let path = db.write("orders-http.yaml", &yaml);
    HttpServer::start(
        &path,
        "127.0.0.1:0",
        &[
            ("ORDERS_DATABASE_URL", db.url.as_str()),
            ("HTTP_TELLER_TOKEN", TELLER_TOKEN),
            ("HTTP_VIEWER_TOKEN", VIEWER_TOKEN),
            ("HTTP_SUPPORT_TOKEN", SUPPORT_TOKEN),
        ],
    )
    .await
}

async fn tokens_make_callers_and_strangers_get_nothing(db: Db) {
    let server = server(&db).await;
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    assert!(server.url.ends_with("/mcp"), "{}", server.url);
    let teller = server.client(Some(TELLER_TOKEN)).await;
    let viewer = server.client(Some(VIEWER_TOKEN)).await;
    let support = server.client(Some(SUPPORT_TOKEN)).await;
    let anonymous = server.client(None).await;
    let wrong = server.client(Some("teller-token-0123456789abcdeX")).await;
    let prefix = server.client(Some(&TELLER_TOKEN[..20])).await;

    assert_eq!(
        tool_names(&teller).await,
        ["get_order", "cancel_order", "transfer"]
    );
    assert_eq!(tool_names(&viewer).await, ["get_order"]);
    assert_eq!(tool_names(&support).await, ["get_order", "cancel_order"]);
    for stranger in [&anonymous, &wrong, &prefix] {
        assert!(tool_names(stranger).await.is_empty(), "offered nothing");
    }

    let transfer = json!({"from": 1, "to": 2, "cents": 100, "request_id": "h-1"});
    // Refused alike: a stranger, a caller not offered the tool, an unknown tool.
    let mut refusals = Vec::new();
    for (client, tool) in [
        (&anonymous, "transfer"),
        (&wrong, "transfer"),
        (&prefix, "get_order"),
        (&viewer, "transfer"),
        (&support, "transfer"),
        (&teller, "transfers"),
    ] {
        let error = protocol_error(client, tool, transfer.clone()).await;
        assert_eq!(error.code, INVALID_PARAMS, "{tool}: {error:?}");
        refusals.push(
            error
                .message
                .replace("transfers", "transfer")
                .replace("get_order", "transfer"),
        );
    }
    refusals.dedup();
    assert_eq!(refusals.len(), 1, "one refusal for all: {refusals:?}");
    assert_eq!(money(&db).await.1, Vec::<String>::new(), "nothing ran");

    let moved = outcome(&teller, "transfer", transfer.clone()).await;
    assert_eq!(moved["status"], "committed", "{moved}");
    let again = outcome(&teller, "transfer", transfer.clone()).await;
    assert_eq!(again["result"], moved["result"], "{again}");
    let order = outcome(&viewer, "get_order", json!({"order_id": 7})).await;
    assert_eq!(order["result"]["cents"], 2500, "{order}");
    let cancelled = outcome(&support, "cancel_order", json!({"order_id": 8})).await;
    assert_eq!(cancelled["status"], "committed", "{cancelled}");
    let invalid = protocol_error(&teller, "transfer", json!({"from": 1})).await;
    assert_eq!(invalid.code, INVALID_PARAMS);
    assert_eq!(
        money(&db).await,
        (vec![9_900, 10_500, 10_000], vec!["h-1".to_owned()])
    );
    for client in [teller, viewer, support, anonymous, wrong, prefix] {
        client.cancel().await.unwrap();
    }
}

/// Requests by hand: a claimed role header is no token; `Basic` is not `Bearer`.
async fn only_a_bearer_token_counts(db: Db) {
    let server = server(&db).await;
    let url = server.url.clone();
    let list = |headers: Vec<(&'static str, String)>| {
        let url = url.clone();
        async move {
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
            config = config.custom_headers(
                headers
                    .into_iter()
                    .map(|(name, value)| {
                        (
                            http::HeaderName::from_static(name),
                            http::HeaderValue::from_str(&value).unwrap(),
                        )
                    })
                    .collect(),
            );
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            let client: common::Client = rmcp::ServiceExt::serve((), transport).await.unwrap();
            let names = tool_names(&client).await;
            client.cancel().await.unwrap();
            names
        }
    };
    assert!(
        list(vec![("x-txretry-roles", "teller".into())])
            .await
            .is_empty()
    );
    assert!(
        list(vec![("authorization", format!("Basic {TELLER_TOKEN}"))])
            .await
            .is_empty()
    );
    assert!(
        list(vec![("authorization", format!("Bearer {TELLER_TOKEN}x"))])
            .await
            .is_empty()
    );
    assert_eq!(
        list(vec![("authorization", format!("Bearer {VIEWER_TOKEN}"))]).await,
        ["get_order"]
    );
}

/// A port alone binds the loopback address, and nothing else.
async fn a_port_alone_binds_loopback_only(db: Db) {
    db.load("orders.sql").await;
    let path = common::examples().join("orders.yaml");
    let env = [("ORDERS_DATABASE_URL", db.url.as_str())];
    let server = HttpServer::start(&path, "0", &env).await;
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let port: u16 = server
        .url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    assert_ne!(port, 0);
    // No tokens in orders.yaml: every caller is offered nothing.
    let client = server.client(Some(TELLER_TOKEN)).await;
    assert!(tool_names(&client).await.is_empty());
    client.cancel().await.unwrap();
    // Not on the machine's other addresses.
    if let Some(other) = non_loopback_address() {
        let reached = tokio::net::TcpStream::connect((other, port)).await;
        assert!(reached.is_err(), "reachable on {other}:{port}");
    } else {
        eprintln!("no non-loopback address to try");
    }
    // A --http that is no address is refused before serving.
    let ran = common::run(
        &[
            "serve",
            "--config",
            path.to_str().unwrap(),
            "--http",
            "nonsense",
        ],
        &env,
    )
    .await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(ran.stderr.contains("--http"), "{ran:?}");
}

/// Bound to an address of its own (127.0.0.2 here: tests reach nothing but loopback), the
/// server answers requests made to that address, and to each `--allowed-host` name;
/// another `Host` is refused (403). It answered loopback's names only, so a server bound to
/// a machine's address refused every request made to that address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answers_its_own_address_and_the_hosts_named() {
    let db = Db::sqlite().await;
    db.load("orders.sql").await;
    let path = common::examples().join("orders.yaml");
    let env = [("ORDERS_DATABASE_URL", db.url.as_str())];
    let flags = ["--allowed-host", "mcp.test"];
    let server = HttpServer::start_with(&path, "127.0.0.2:0", &flags, &env).await;
    assert!(
        server.url.starts_with("http://127.0.0.2:"),
        "{}",
        server.url
    );
    let client = server.client(Some(TELLER_TOKEN)).await;
    assert!(
        tool_names(&client).await.is_empty(),
        "no tokens in orders.yaml"
    );
    client.cancel().await.unwrap();
    let authority = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    assert_eq!(initialize_status(&authority, "mcp.test").await, 200);
    assert_eq!(initialize_status(&authority, "elsewhere.test").await, 403);
    // The flag is the HTTP server's.
    let ran = common::run(
        &[
            "serve",
            "--config",
            path.to_str().unwrap(),
            "--allowed-host",
            "x",
        ],
        &env,
    )
    .await;
    assert_eq!(ran.code, Some(2), "{ran:?}");
    assert!(
        ran.stderr.contains("required arguments were not provided"),
        "{ran:?}"
    );
    assert!(ran.stderr.contains("--http <ADDR>"), "{ran:?}");
}

/// The status of an `initialize` POSTed to `authority` with `Host: host`.
async fn initialize_status(authority: &str, host: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let port = authority.rsplit(':').next().unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    common::within("the status line", stream.read_exact(&mut head))
        .await
        .unwrap();
    let line = String::from_utf8_lossy(&head);
    line["HTTP/1.1 ".len()..].trim().parse().unwrap()
}

/// An address of this machine other than loopback (the one a UDP socket would use).
fn non_loopback_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.255:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

crate::on_each_database!(
    tokens_make_callers_and_strangers_get_nothing,
    only_a_bearer_token_counts,
    a_port_alone_binds_loopback_only,
);
