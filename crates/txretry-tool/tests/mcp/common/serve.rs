//! The server served to a recorded client: over an in-memory pipe ([`connect`], as over
//! stdio) or over streamable HTTP on 127.0.0.1 ([`HttpServer`]).

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use txretry_tool::mcp::ToolboxServer;

use super::{Client, Recorder, within};

/// Serves `server` on one end of an in-memory pipe (as it would serve stdio) and connects a
/// recorded client to the other.
pub async fn connect(server: ToolboxServer, recorder: Recorder) -> Client {
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    within("initialize", recorder.serve(client_end))
        .await
        .unwrap()
}

/// `server` over streamable HTTP at `http://127.0.0.1:PORT/mcp` (rmcp's service on axum,
/// every session a clone of the server, as rmcp's service needs). Stopped on drop.
pub struct HttpServer {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    pub async fn start(server: ToolboxServer) -> HttpServer {
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let router = axum::Router::new().nest_service("/mcp", service);
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        HttpServer { url, task }
    }

    /// A client whose requests carry these headers.
    pub async fn client(&self, headers: &[(&str, &str)], recorder: Recorder) -> Client {
        let headers = headers
            .iter()
            .map(|(name, value)| {
                (
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    http::HeaderValue::from_str(value).unwrap(),
                )
            })
            .collect();
        let config =
            StreamableHttpClientTransportConfig::with_uri(self.url.clone()).custom_headers(headers);
        let transport = StreamableHttpClientTransport::from_config(config);
        within("http initialize", recorder.serve(transport))
            .await
            .unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
