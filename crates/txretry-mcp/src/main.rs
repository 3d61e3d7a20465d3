//! `txretry-mcp`: serves the transactional tools declared in a YAML file over MCP.
//!
//! ```text
//! txretry-mcp check --config tools.yaml
//! txretry-mcp serve --config tools.yaml [--role ROLE]... [--toolset NAME]
//! txretry-mcp serve --config tools.yaml --http 127.0.0.1:8080
//! ```
//!
//! `--role` and `--toolset` are the stdio caller's; over HTTP each request's caller is its
//! bearer token, so they are refused with `--http`.
//!
//! Exit codes: 0 done; 1 the server failed; 2 the config (or a flag) was refused.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use tokio::net::TcpListener;
use txretry_mcp::auth::Tokens;
use txretry_mcp::config::{self, Config, ConfigErrors};
use txretry_mcp::{check, serve, toolbox};
use txretry_tool::mcp::RetryRelay;
use txretry_tool::{Caller, Toolbox};

#[derive(Parser)]
#[command(
    name = "txretry-mcp",
    version,
    about = "Transactional database tools for MCP hosts, declared in a YAML file"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Checks the config and prepares every statement on its source; exit 2 on a problem.
    Check {
        /// The config file.
        #[arg(long, short)]
        config: String,
    },
    /// Checks the config as `check` does, then serves its tools.
    Serve {
        /// The config file.
        #[arg(long, short)]
        config: String,
        /// Serve streamable HTTP at ADDR (`127.0.0.1:8080`, or a port alone for loopback)
        /// instead of stdio; callers are the config's bearer tokens.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// With --http: a name clients reach the server by, answered besides loopback's
        /// and the bound address (repeatable; the `Host` check against DNS rebinding).
        #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
        allowed_hosts: Vec<String>,
        /// A role of the stdio caller (repeatable; not with --http).
        #[arg(long = "role", value_name = "ROLE")]
        roles: Vec<String>,
        /// The toolset the stdio caller speaks as: offered only its tools (not with --http).
        #[arg(long)]
        toolset: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Serve {
        http: Some(_),
        roles,
        toolset,
        ..
    } = &cli.command
        && (!roles.is_empty() || toolset.is_some())
    {
        // Refused rather than ignored: the caller would not be who the flags say.
        Cli::command()
            .error(
                ErrorKind::ArgumentConflict,
                "--role and --toolset set the stdio caller; over --http each request's caller \
                 is its bearer token, whose roles and toolset auth.tokens sets in the config",
            )
            .exit();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("txretry-mcp: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(cli.command));
    // `run` has closed the pools. What may be left is the stdio transport's read of stdin,
    // on a blocking thread nothing can cancel: dropping the runtime would wait for a line
    // that a host keeping stdin open never sends, after SIGTERM or Ctrl-C.
    runtime.shutdown_background();
    code
}

async fn run(command: Command) -> ExitCode {
    let (path, serving) = match &command {
        Command::Check { config } => (config, None),
        Command::Serve {
            config,
            http,
            allowed_hosts,
            roles,
            toolset,
        } => (config, Some((http, roles, toolset, allowed_hosts))),
    };
    let refused = |errors: Vec<config::ConfigError>| {
        eprintln!(
            "{}",
            ConfigErrors {
                path: path.clone(),
                errors
            }
        );
        ExitCode::from(2)
    };
    let config: Config = match config::load(path, &|name| std::env::var(name).ok()) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(2);
        }
    };
    let addr = match serving
        .and_then(|(http, _, _, _)| http.as_deref())
        .map(parse_addr)
    {
        Some(Ok(addr)) => Some(addr),
        Some(Err(why)) => {
            eprintln!("txretry-mcp: --http: {why}");
            return ExitCode::from(2);
        }
        None => None,
    };
    if let Some((_, _, Some(set), _)) = serving
        && !config.toolsets.contains_key(set)
    {
        eprintln!("txretry-mcp: --toolset: {path} declares no toolset {set:?}");
        return ExitCode::from(2);
    }
    let pools = match check::open(&config).await {
        Ok(pools) => pools,
        Err(errors) => return refused(errors),
    };
    let prepared = match check::prepare(&config, &pools).await {
        Ok(prepared) => prepared,
        Err(errors) => return refused(errors),
    };
    let Some((_, roles, toolset, allowed_hosts)) = serving else {
        let count = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        println!(
            "{path}: OK: {}, {} prepared on {}",
            count(config.tools.len(), "tool"),
            count(prepared, "statement"),
            count(config.sources.len(), "source")
        );
        return ExitCode::SUCCESS;
    };
    let relay = RetryRelay::new();
    let toolbox = match toolbox::build(&config, &pools, &relay) {
        Ok(toolbox) => toolbox,
        Err(error) => {
            eprintln!("txretry-mcp: {error}");
            return ExitCode::from(2);
        }
    };
    for source in config.sources.values() {
        eprintln!("txretry-mcp: source {}: {}", source.name, source.shown);
    }
    let served = match addr {
        None => {
            let mut caller = Caller::new(roles.iter().cloned());
            if let Some(set) = toolset {
                caller = caller.persona(set.clone());
            }
            serve::stdio(toolbox, relay, caller).await
        }
        Some(addr) => serve_http(toolbox, relay, &config, addr, allowed_hosts).await,
    };
    // The calls dropped as serving stopped: their statements cancelled in the server before
    // the process (and its runtime, with the cancels) goes.
    txretry_mcp::engine::settled().await;
    for (name, pool) in &pools {
        if !pool.close().await {
            eprintln!(
                "txretry-mcp: source {name}: its connections did not close within {} s (the \
                 database does not answer); exiting without them",
                txretry_mcp::source::CLOSE_WAIT.as_secs()
            );
        }
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("txretry-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Serves over streamable HTTP at `addr` (`--http`), each caller a bearer token of the
/// config.
async fn serve_http(
    toolbox: Toolbox,
    relay: RetryRelay,
    config: &Config,
    addr: SocketAddr,
    allowed_hosts: &[String],
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let tokens = Tokens::new(&config.tokens);
    if tokens.is_empty() {
        eprintln!("txretry-mcp: auth.tokens is empty: every HTTP caller is offered nothing");
    }
    let listener = TcpListener::bind(addr).await.map_err(|error| {
        format!(
            "could not listen on {addr} (--http): {}",
            bind_failure(&error)
        )
    })?;
    // Port 0 takes a free one: say which.
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let hosts = serve::Hosts::answered(addr.ip(), allowed_hosts);
    serve::http(toolbox, relay, tokens, listener, hosts).await
}

/// Why a bind failed: for the usual reasons, the kind's words ("address in use"), which the
/// system's message only capitalizes and numbers ("(os error 98)"); else that message.
fn bind_failure(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::AddrInUse
        | io::ErrorKind::AddrNotAvailable
        | io::ErrorKind::PermissionDenied => error.kind().to_string(),
        _ => error.to_string(),
    }
}

/// `--http`: an address, or a port alone (loopback).
fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.trim_start_matches(':').parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not an address such as 127.0.0.1:8080, nor a port"))
}
