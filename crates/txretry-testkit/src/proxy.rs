//! A TCP proxy that lets a COMMIT land on the server but tells the client the connection
//! broke while it was in flight.
//!
//! That is what a pooler in front of the database (PgBouncer, a MySQL proxy) produces when
//! its own link to the server drops just after it forwarded a COMMIT: the transaction is
//! durable, yet the client only sees a connection-class error. A retry layer that re-ran
//! the transaction on that error would run it twice; the integration tests put this proxy
//! between a driver and the real server to prove txretry does not.
//!
//! The proxy understands just enough of each wire protocol to find COMMIT statements and
//! the server's answer to them; everything else it forwards byte for byte. To keep the
//! traffic readable it turns encryption and compression off: it answers a Postgres
//! SSLRequest/GSSENCRequest with `N` itself, and clears the TLS, compression and
//! query-attribute capability bits in a MySQL server's greeting.
//!
//! Set `TXRETRY_PROXY_TRACE=1` to have it print, on stderr, each COMMIT it sees (and how the
//! client sent it) and each fault it injects.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Prints a line on stderr when `TXRETRY_PROXY_TRACE` is set (to anything but `0`).
macro_rules! trace {
    ($($arg:tt)*) => {
        if $crate::proxy::tracing_on() {
            eprintln!("[commit-fault-proxy] {}", format_args!($($arg)*));
        }
    };
}

fn tracing_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("TXRETRY_PROXY_TRACE").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// A local TCP proxy to a PostgreSQL or MySQL server that, when armed, turns the answer to
/// a COMMIT into a connection-class error after the COMMIT reached (and ran on) the server.
///
/// Unarmed, it is a transparent proxy. Armed with [`arm_commit_faults`](Self::arm_commit_faults),
/// each of the next COMMITs (on any connection) is forwarded to the server unchanged, the
/// server's answer is read and thrown away, and the client gets instead what a pooler sends
/// when its server link breaks; then both sockets are closed:
///
/// - PostgreSQL: an `ErrorResponse` with severity `FATAL`, SQLSTATE `08P01` and the message
///   `server conn crashed?` (PgBouncer's).
/// - MySQL: an `ERR` packet with error 2013, SQLSTATE `HY000`, `Lost connection to MySQL
///   server during query`.
///
/// A COMMIT is a statement whose first word is `COMMIT` (or, for PostgreSQL, `END`), sent as
/// a Postgres simple Query (alone or among other statements), a Postgres extended-protocol
/// Execute of a portal bound to such a statement (the fault triggers on the Sync that
/// follows), or a MySQL `COM_QUERY`. MySQL prepared statements (`COM_STMT_EXECUTE`) are not
/// inspected.
///
/// It serves on its own thread with its own runtime, so it works the same from
/// `#[tokio::test]` and from blocking tests; dropping it stops the thread and closes every
/// connection it holds.
pub struct CommitFaultProxy {
    url: String,
    local_addr: SocketAddr,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl CommitFaultProxy {
    /// Starts a proxy on `127.0.0.1` (a free port) to the server that `url` names.
    ///
    /// `url` is a `postgres://`/`postgresql://` or `mysql://`/`mariadb://` URL with a TCP
    /// host (a missing port means the protocol's default). The proxy starts unarmed.
    ///
    /// Fails when the URL has no usable host, or the socket or thread cannot be had. The
    /// upstream server is only dialled when a client connects.
    pub fn start(url: &str) -> io::Result<Self> {
        let target = Arc::new(Target::parse(url)?);
        let listener = StdTcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        // A runtime of its own: the caller may be a blocking test, or a current-thread
        // #[tokio::test] runtime that would starve the proxy while the test awaits it.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("commit-fault-proxy-{}", local_addr.port()))
            .spawn({
                let target = Arc::clone(&target);
                let counters = Arc::clone(&counters);
                move || runtime.block_on(accept_loop(listener, target, counters, stopped))
            })?;
        Ok(Self {
            url: target.url_via(local_addr.port()),
            local_addr,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The caller's URL with the host and port replaced by the proxy's; connect here.
    ///
    /// A MySQL URL also gets `prefer_socket=false`: otherwise mysql_async, seeing a server
    /// on 127.0.0.1, would move to the server's Unix socket and bypass the proxy.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Makes the next `n` COMMITs that pass through the proxy faulty, replacing whatever was
    /// left of an earlier arming; `0` disarms it.
    pub fn arm_commit_faults(&self, n: usize) {
        self.counters.armed.store(n, Ordering::SeqCst);
    }

    /// How many of the armed faults are still to come.
    pub fn armed_faults(&self) -> usize {
        self.counters.armed.load(Ordering::SeqCst)
    }

    /// How many faults the proxy has injected: COMMITs whose answer it replaced with an
    /// error. It counts a fault before the client can see the error, so a test that got the
    /// error may read this at once.
    pub fn faults_injected(&self) -> usize {
        self.counters.injected.load(Ordering::SeqCst)
    }

    /// How many COMMITs (faulty or not) the proxy has seen clients send.
    pub fn commits_seen(&self) -> usize {
        self.counters.commits_seen.load(Ordering::SeqCst)
    }
}

impl fmt::Debug for CommitFaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommitFaultProxy")
            .field("url", &self.url)
            .field("armed_faults", &self.armed_faults())
            .field("faults_injected", &self.faults_injected())
            .field("commits_seen", &self.commits_seen())
            .finish_non_exhaustive()
    }
}

impl Drop for CommitFaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The thread ends promptly (the accept loop watches `stop`; dropping its runtime
        // drops every connection task), so waiting is cheap and leaves no socket behind.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the proxy's handle and its connections share.
#[derive(Default)]
struct Counters {
    armed: AtomicUsize,
    injected: AtomicUsize,
    commits_seen: AtomicUsize,
}

impl Counters {
    /// Records a COMMIT sent by a client; true when it must be faulted, which uses up one
    /// armed fault.
    fn commit_must_fault(&self) -> bool {
        self.commits_seen.fetch_add(1, Ordering::SeqCst);
        self.armed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    fn fault_injected(&self) {
        self.injected.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Postgres,
    Mysql,
}

/// The upstream server, and the caller's URL cut around its host and port.
#[derive(Debug)]
struct Target {
    protocol: Protocol,
    host: String,
    port: u16,
    /// `scheme://user:password@`, up to where the host starts.
    before_host: String,
    /// `/database?options`, from where the port ends (for MySQL, with
    /// `prefer_socket=false`).
    after_port: String,
}

impl Target {
    fn parse(url: &str) -> io::Result<Self> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{why}: {url}"));
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("not a URL"))?;
        let (protocol, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" => (Protocol::Postgres, 5432),
            "mysql" | "mariadb" => (Protocol::Mysql, 3306),
            _ => return Err(bad("not a postgres:// or mysql:// URL")),
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        // The password may hold '@' only percent-encoded, but look for the last one anyway.
        let host_start = authority.rfind('@').map_or(0, |at| at + 1);
        let host_port = &authority[host_start..];
        if host_port.contains(',') {
            return Err(bad("the proxy serves a single host, not a list"));
        }
        let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| bad("unclosed '[' in the host"))?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| bad("junk after the host"))?,
                    ),
                ),
            }
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        if host.is_empty() {
            return Err(bad("the proxy needs a TCP host in the URL"));
        }
        let port = match port {
            Some(port) => port.parse().map_err(|_| bad("not a port number"))?,
            None => default_port,
        };
        Ok(Self {
            protocol,
            host: host.to_owned(),
            port,
            before_host: format!("{scheme}://{}", &authority[..host_start]),
            after_port: match protocol {
                Protocol::Postgres => rest[authority_end..].to_owned(),
                Protocol::Mysql => stay_on_tcp(&rest[authority_end..]),
            },
        })
    }

    fn url_via(&self, port: u16) -> String {
        format!("{}127.0.0.1:{port}{}", self.before_host, self.after_port)
    }
}

/// Sets `prefer_socket=false` in the query of a MySQL URL's `/database?options` tail.
///
/// mysql_async's default on Unix, for a server on 127.0.0.1, is to ask it for its Unix socket
/// (`SELECT @@socket`) and reconnect there, which would leave the proxy out of every later
/// query. sqlx ignores the option.
fn stay_on_tcp(tail: &str) -> String {
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|param| !param.is_empty() && param.split('=').next() != Some("prefer_socket"))
        .collect();
    params.push("prefer_socket=false");
    format!("{path}?{}", params.join("&"))
}

async fn accept_loop(
    listener: StdTcpListener,
    target: Arc<Target>,
    counters: Arc<Counters>,
    mut stop: oneshot::Receiver<()>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            trace!("cannot listen: {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            // A stop message, or the handle gone without sending one: either way, stop.
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    tokio::spawn(serve(client, Arc::clone(&target), Arc::clone(&counters)));
                }
                // The failed connection is gone; the listener itself still works.
                Err(e) => trace!("accept failed: {e}"),
            },
        }
    }
}

/// Relays one client connection until either side closes or a fault is injected; the
/// sockets close when this returns.
async fn serve(client: TcpStream, target: Arc<Target>, counters: Arc<Counters>) {
    let server = match TcpStream::connect((target.host.as_str(), target.port)).await {
        Ok(server) => server,
        Err(e) => {
            trace!("cannot reach {}:{}: {e}", target.host, target.port);
            return;
        }
    };
    // Messages are relayed one by one; Nagle's delay would stall every small one.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let ended = match target.protocol {
        Protocol::Postgres => postgres::relay(client, server, &counters).await,
        Protocol::Mysql => mysql::relay(client, server, &counters).await,
    };
    if let Err(e) = ended {
        trace!("connection ended: {e}");
    }
}

/// Fills `buf` from `r`; false if `r` was at its end before the first byte (a clean close).
async fn read_exact_or_eof<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]).await? {
            0 if filled == 0 => return Ok(false),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => filled += n,
        }
    }
    Ok(true)
}

/// Appends exactly `n` more bytes from `r` to `buf`. The buffer grows only as bytes arrive,
/// so a bogus length from the network cannot make it allocate a huge block up front.
async fn read_more<R: AsyncRead + Unpin>(r: &mut R, n: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    let want = u64::try_from(n).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    let got = (&mut *r).take(want).read_to_end(buf).await?;
    if got == n {
        Ok(())
    } else {
        Err(io::ErrorKind::UnexpectedEof.into())
    }
}

/// The PostgreSQL frontend/backend protocol, version 3.
mod postgres {
    use std::collections::HashMap;
    use std::io;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
    use tokio::net::TcpStream;

    use super::sql::{Dialect, has_commit};
    use super::{Counters, read_exact_or_eof, read_more};

    const SSL_REQUEST: i32 = 80_877_103;
    const GSSENC_REQUEST: i32 = 80_877_104;
    const CANCEL_REQUEST: i32 = 80_877_102;
    /// The server refuses longer startup packets too.
    const MAX_STARTUP_LEN: usize = 10_000;

    pub(super) async fn relay(
        client: TcpStream,
        server: TcpStream,
        counters: &Counters,
    ) -> io::Result<()> {
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let mut client_read = BufReader::new(client_read);
        let mut client_write = BufWriter::new(client_write);
        let mut server_read = BufReader::new(server_read);
        let mut server_write = BufWriter::new(server_write);

        // The startup phase: untyped messages (length, then a code), until the real
        // StartupMessage.
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let mut len = [0; 4];
            if !read_exact_or_eof(&mut client_read, &mut len).await? {
                return Ok(());
            }
            let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
            if !(8..=MAX_STARTUP_LEN).contains(&len) {
                return Err(invalid("startup packet length"));
            }
            buf.extend_from_slice(&(len as i32).to_be_bytes());
            read_more(&mut client_read, len - 4, &mut buf).await?;
            let code = i32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
            match code {
                // No encryption: the proxy must read the traffic. The client then sends its
                // startup packet in the clear (or gives up, if it insisted on TLS).
                SSL_REQUEST | GSSENC_REQUEST => {
                    client_write.write_all(b"N").await?;
                    client_write.flush().await?;
                }
                // A cancel request is alone on its connection; the server closes it.
                CANCEL_REQUEST => {
                    server_write.write_all(&buf).await?;
                    server_write.flush().await?;
                    let _ = tokio::io::copy(&mut server_read, &mut tokio::io::sink()).await;
                    return Ok(());
                }
                _ => {
                    server_write.write_all(&buf).await?;
                    server_write.flush().await?;
                    break;
                }
            }
        }

        // The index (1-based, counted from the connection's start) of the ReadyForQuery that
        // ends the server's answer to a faulted COMMIT; 0 while there is none. Set by the
        // client side before it forwards the COMMIT, so the server side cannot have passed
        // any of that answer on yet.
        let fault_at = AtomicU64::new(0);
        // Whichever side finishes ends the connection: the server side after injecting a
        // fault or when the server closes; the client side only on an error (after the
        // client's own close it waits for the server to close in turn).
        tokio::select! {
            ended = client_to_server(client_read, server_write, counters, &fault_at) => ended,
            ended = server_to_client(server_read, client_write, counters, &fault_at) => ended,
        }
    }

    /// Forwards the client's messages, watching for COMMITs. After forwarding a faulted one
    /// it forwards nothing more: whatever the client sends later would have been lost with
    /// the broken link.
    async fn client_to_server<R, W>(
        mut from: BufReader<R>,
        mut to: BufWriter<W>,
        counters: &Counters,
        fault_at: &AtomicU64,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        // Each simple Query, Sync and FunctionCall is answered by one ReadyForQuery, and so
        // is the startup message already forwarded.
        let mut ready_expected: u64 = 1;
        // Whether each prepared statement / portal (by name; "" is the unnamed one) is a
        // COMMIT: a Parse says what a statement is, a Bind what a portal runs.
        let mut statements: HashMap<Vec<u8>, bool> = HashMap::new();
        let mut portals: HashMap<Vec<u8>, bool> = HashMap::new();
        let mut fault_on_sync = false;
        let mut buf = Vec::new();
        loop {
            let Some(tag) = read_message(&mut from, &mut buf).await? else {
                // Let the server see the close too, and keep relaying its last words.
                to.shutdown().await?;
                return std::future::pending().await;
            };
            let body = &buf[5..];
            let mut trigger = false;
            match tag {
                b'Q' => {
                    ready_expected += 1;
                    let sql = cstr(body).map_or(&[][..], |(sql, _)| sql);
                    if has_commit(sql, Dialect::Postgres) {
                        trace!("postgres: simple Query with a COMMIT: {:?}", text(sql));
                        if counters.commit_must_fault() {
                            fault_at.store(ready_expected, Ordering::SeqCst);
                            trigger = true;
                        }
                    }
                }
                b'P' => {
                    if let Some((name, rest)) = cstr(body) {
                        let sql = cstr(rest).map_or(&[][..], |(sql, _)| sql);
                        let commit = has_commit(sql, Dialect::Postgres);
                        if commit {
                            trace!(
                                "postgres: Parse of statement {:?} as a COMMIT: {:?}",
                                text(name),
                                text(sql)
                            );
                        }
                        statements.insert(name.to_vec(), commit);
                    }
                }
                b'B' => {
                    if let Some((portal, rest)) = cstr(body) {
                        let commit = cstr(rest)
                            .and_then(|(statement, _)| statements.get(statement).copied())
                            .unwrap_or(false);
                        portals.insert(portal.to_vec(), commit);
                    }
                }
                b'E' => {
                    if let Some((portal, _)) = cstr(body)
                        && portals.get(portal).copied().unwrap_or(false)
                    {
                        trace!("postgres: Execute of portal {:?}, a COMMIT", text(portal));
                        if counters.commit_must_fault() {
                            // Answered by the ReadyForQuery of the next Sync.
                            fault_at.store(ready_expected + 1, Ordering::SeqCst);
                            fault_on_sync = true;
                        }
                    }
                }
                b'C' => {
                    if let Some((&kind, rest)) = body.split_first()
                        && let Some((name, _)) = cstr(rest)
                    {
                        match kind {
                            b'S' => statements.remove(name),
                            b'P' => portals.remove(name),
                            _ => None,
                        };
                    }
                }
                b'S' => {
                    ready_expected += 1;
                    trigger = fault_on_sync;
                }
                b'F' => ready_expected += 1,
                _ => {}
            }
            to.write_all(&buf).await?;
            if trigger {
                to.flush().await?;
                trace!("postgres: faulted COMMIT forwarded; waiting for the server's answer");
                return std::future::pending().await;
            }
            // Send when the client has nothing more queued: one write per batch it sent.
            if from.buffer().is_empty() {
                to.flush().await?;
            }
        }
    }

    /// Forwards the server's messages, except the answer to a faulted COMMIT, which it reads
    /// to its ReadyForQuery (so the COMMIT has run) and replaces with PgBouncer's error.
    async fn server_to_client<R, W>(
        mut from: BufReader<R>,
        mut to: BufWriter<W>,
        counters: &Counters,
        fault_at: &AtomicU64,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut ready_seen: u64 = 0;
        let mut buf = Vec::new();
        loop {
            let Some(tag) = read_message(&mut from, &mut buf).await? else {
                to.flush().await?;
                return Ok(());
            };
            let fault = fault_at.load(Ordering::SeqCst);
            // Past the ReadyForQuery before the faulted one: this is the COMMIT's answer.
            let in_faulted_answer = fault != 0 && ready_seen + 1 >= fault;
            if tag == b'Z' {
                ready_seen += 1;
            }
            if in_faulted_answer {
                if tag == b'Z' {
                    counters.fault_injected();
                    to.write_all(&fatal_error()).await?;
                    to.flush().await?;
                    trace!("postgres: answered the COMMIT with FATAL 08P01 and closed");
                    return Ok(());
                }
                continue;
            }
            to.write_all(&buf).await?;
            if from.buffer().is_empty() {
                to.flush().await?;
            }
        }
    }

    /// Reads one typed message (tag, length, body) into `buf`, whole; its tag, or `None` at
    /// a clean end of stream.
    async fn read_message<R: AsyncRead + Unpin>(
        r: &mut R,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<u8>> {
        buf.clear();
        let mut head = [0; 5];
        if !read_exact_or_eof(r, &mut head).await? {
            return Ok(None);
        }
        let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        let body_len = usize::try_from(len)
            .ok()
            .and_then(|len| len.checked_sub(4))
            .ok_or_else(|| invalid("message length"))?;
        buf.extend_from_slice(&head);
        read_more(r, body_len, buf).await?;
        Ok(Some(head[0]))
    }

    /// What PgBouncer sends when its server connection dies under a query.
    fn fatal_error() -> Vec<u8> {
        let mut fields = Vec::new();
        for (code, value) in [
            (b'S', "FATAL"),
            (b'V', "FATAL"),
            (b'C', "08P01"),
            (b'M', "server conn crashed?"),
        ] {
            fields.push(code);
            fields.extend_from_slice(value.as_bytes());
            fields.push(0);
        }
        fields.push(0);
        let mut message = vec![b'E'];
        // A few dozen bytes: the length fits.
        message.extend_from_slice(&((fields.len() + 4) as i32).to_be_bytes());
        message.extend_from_slice(&fields);
        message
    }

    /// Splits a NUL-terminated string off the front of `bytes`.
    fn cstr(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
        let nul = bytes.iter().position(|&b| b == 0)?;
        Some((&bytes[..nul], &bytes[nul + 1..]))
    }

    fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(bytes)
    }

    fn invalid(what: &str) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, format!("bad postgres {what}"))
    }
}

/// The MySQL client/server protocol (which MariaDB speaks too), uncompressed.
mod mysql {
    use std::io;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
    use tokio::net::TcpStream;

    use super::sql::{Dialect, has_commit};
    use super::{Counters, read_exact_or_eof, read_more};

    const CLIENT_COMPRESS: u32 = 0x0000_0020;
    const CLIENT_SSL: u32 = 0x0000_0800;
    const CLIENT_DEPRECATE_EOF: u32 = 0x0100_0000;
    const CLIENT_QUERY_ATTRIBUTES: u32 = 0x0800_0000;
    const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
    const COM_QUERY: u8 = 0x03;
    /// A payload this long continues in the next packet.
    const MAX_PAYLOAD: usize = 0xFF_FFFF;

    /// What the two directions of one connection share.
    #[derive(Default)]
    struct Link {
        /// The capability flags the server offers (as the client saw them) and the client
        /// asks for; both are needed to know how result sets end.
        server_caps: AtomicU32,
        client_caps: AtomicU32,
        /// Set by the client side before it forwards a faulted COMMIT: the next thing the
        /// server sends is its answer (MySQL answers one command at a time, in order).
        fault: AtomicBool,
    }

    impl Link {
        fn deprecate_eof(&self) -> bool {
            let both =
                self.server_caps.load(Ordering::SeqCst) & self.client_caps.load(Ordering::SeqCst);
            both & CLIENT_DEPRECATE_EOF != 0
        }
    }

    pub(super) async fn relay(
        client: TcpStream,
        server: TcpStream,
        counters: &Counters,
    ) -> io::Result<()> {
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        let link = Link::default();
        // As for Postgres: the server side ends the connection after a fault, or when the
        // server closes; the client side only on an error.
        tokio::select! {
            ended = client_to_server(
                BufReader::new(client_read), BufWriter::new(server_write), counters, &link,
            ) => ended,
            ended = server_to_client(
                BufReader::new(server_read), BufWriter::new(client_write), counters, &link,
            ) => ended,
        }
    }

    async fn client_to_server<R, W>(
        mut from: BufReader<R>,
        mut to: BufWriter<W>,
        counters: &Counters,
        link: &Link,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut first = true;
        let mut buf = Vec::new();
        loop {
            let Some(sequence) = read_packet(&mut from, &mut buf).await? else {
                to.shutdown().await?;
                return std::future::pending().await;
            };
            let payload = &buf[4..];
            if first {
                // The handshake response opens with the client's capability flags.
                first = false;
                if let Some(caps) = payload.get(..4) {
                    let caps = u32::from_le_bytes([caps[0], caps[1], caps[2], caps[3]]);
                    link.client_caps.store(caps, Ordering::SeqCst);
                }
            }
            let mut trigger = false;
            // A packet that opens a new exchange (sequence 0) is a command; the handshake
            // and large-payload continuations never have sequence 0.
            if sequence == 0
                && let Some((&COM_QUERY, sql)) = payload.split_first()
                && has_commit(sql, Dialect::Mysql)
            {
                trace!(
                    "mysql: COM_QUERY with a COMMIT: {:?}",
                    String::from_utf8_lossy(sql)
                );
                if counters.commit_must_fault() {
                    link.fault.store(true, Ordering::SeqCst);
                    trigger = true;
                }
            }
            to.write_all(&buf).await?;
            if trigger {
                to.flush().await?;
                trace!("mysql: faulted COMMIT forwarded; waiting for the server's answer");
                return std::future::pending().await;
            }
            if from.buffer().is_empty() {
                to.flush().await?;
            }
        }
    }

    async fn server_to_client<R, W>(
        mut from: BufReader<R>,
        mut to: BufWriter<W>,
        counters: &Counters,
        link: &Link,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut greeting = true;
        let mut buf = Vec::new();
        loop {
            if read_packet(&mut from, &mut buf).await?.is_none() {
                to.flush().await?;
                return Ok(());
            }
            if greeting {
                greeting = false;
                let caps = strip_capabilities(&mut buf[4..]);
                link.server_caps.store(caps, Ordering::SeqCst);
            }
            if link.fault.load(Ordering::SeqCst) {
                let packets = skip_answer(&mut from, &mut buf, link.deprecate_eof()).await?;
                counters.fault_injected();
                to.write_all(&lost_connection_error()).await?;
                to.flush().await?;
                trace!(
                    "mysql: dropped the server's answer ({packets} packets), \
                     answered the COMMIT with error 2013 and closed"
                );
                return Ok(());
            }
            to.write_all(&buf).await?;
            if from.buffer().is_empty() {
                to.flush().await?;
            }
        }
    }

    /// Clears TLS, compression and query attributes in the server's greeting (protocol 10),
    /// so the client talks plain packets with bare SQL in `COM_QUERY`; returns the
    /// capabilities left. Anything else (an error instead of a greeting) is left alone.
    fn strip_capabilities(payload: &mut [u8]) -> u32 {
        if payload.first() != Some(&10) {
            return 0;
        }
        // version, NUL; connection id (4); auth data part 1 (8); filler (1); then the low
        // capability bytes; charset (1), status (2); the high capability bytes.
        let Some(nul) = payload.iter().skip(1).position(|&b| b == 0) else {
            return 0;
        };
        let low = 1 + nul + 1 + 4 + 8 + 1;
        let Some(low_bytes) = payload.get_mut(low..low + 2) else {
            return 0;
        };
        let mut caps = u32::from(u16::from_le_bytes([low_bytes[0], low_bytes[1]]));
        caps &= !(CLIENT_SSL | CLIENT_COMPRESS);
        low_bytes.copy_from_slice(&(caps as u16).to_le_bytes());
        let high = low + 2 + 1 + 2;
        if let Some(high_bytes) = payload.get_mut(high..high + 2) {
            let all = caps | (u32::from(u16::from_le_bytes([high_bytes[0], high_bytes[1]])) << 16);
            caps = all & !CLIENT_QUERY_ATTRIBUTES;
            high_bytes.copy_from_slice(&((caps >> 16) as u16).to_le_bytes());
        }
        caps
    }

    /// Reads the rest of the server's answer to a command whose first packet is in `buf`:
    /// an OK or ERR, or result sets, possibly several (multi-statement queries). Returns how
    /// many packets the answer had.
    async fn skip_answer<R: AsyncRead + Unpin>(
        from: &mut R,
        buf: &mut Vec<u8>,
        deprecate_eof: bool,
    ) -> io::Result<usize> {
        enum At {
            /// The first packet of a result: OK, ERR, or a result set's column count.
            Start,
            /// Column definitions still to come.
            Columns(u64),
            /// The EOF after the column definitions (when EOF packets are not deprecated).
            ColumnsEof,
            /// Rows, until an EOF/OK (or ERR).
            Rows,
        }
        let mut at = At::Start;
        let mut packets = 1;
        let mut payload = logical_payload(from, buf).await?;
        loop {
            let Some(&head) = payload.first() else {
                return Ok(packets);
            };
            let more_results =
                |status: Option<u16>| status.is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0);
            at = match at {
                At::Start => match head {
                    0x00 if more_results(ok_status(&payload)) => At::Start,
                    // OK, ERR, or a LOCAL INFILE request (only the client could go on).
                    0x00 | 0xFF | 0xFB => return Ok(packets),
                    _ => match lenenc(&payload).map(|(n, _)| n) {
                        Some(0) | None => return Ok(packets),
                        Some(columns) => At::Columns(columns),
                    },
                },
                At::Columns(left) if left > 1 => At::Columns(left - 1),
                At::Columns(_) if deprecate_eof => At::Rows,
                At::Columns(_) => At::ColumnsEof,
                At::ColumnsEof => At::Rows,
                At::Rows => match head {
                    0xFF => return Ok(packets),
                    // EOF, or OK in EOF's place; a row starting 0xFE is ≥ 16 MiB.
                    0xFE if payload.len() < MAX_PAYLOAD => {
                        let status = if deprecate_eof {
                            ok_status(&payload)
                        } else {
                            payload.get(3..5).map(|s| u16::from_le_bytes([s[0], s[1]]))
                        };
                        if more_results(status) {
                            At::Start
                        } else {
                            return Ok(packets);
                        }
                    }
                    _ => At::Rows,
                },
            };
            if read_packet(from, buf).await?.is_none() {
                return Ok(packets);
            }
            packets += 1;
            payload = logical_payload(from, buf).await?;
        }
    }

    /// The payload of the packet in `buf`, with the payloads of any continuation packets.
    async fn logical_payload<R: AsyncRead + Unpin>(
        from: &mut R,
        buf: &mut Vec<u8>,
    ) -> io::Result<Vec<u8>> {
        let mut payload = buf[4..].to_vec();
        let mut last_len = payload.len();
        while last_len == MAX_PAYLOAD {
            if read_packet(from, buf).await?.is_none() {
                break;
            }
            last_len = buf.len() - 4;
            payload.extend_from_slice(&buf[4..]);
        }
        Ok(payload)
    }

    /// The status flags of an OK packet (header, affected rows, last insert id, status).
    fn ok_status(payload: &[u8]) -> Option<u16> {
        let mut at = 1;
        for _ in 0..2 {
            let (_, used) = lenenc(payload.get(at..)?)?;
            at += used;
        }
        let status = payload.get(at..at + 2)?;
        Some(u16::from_le_bytes([status[0], status[1]]))
    }

    /// A length-encoded integer at the start of `bytes`, and how many bytes it took.
    fn lenenc(bytes: &[u8]) -> Option<(u64, usize)> {
        let width = match *bytes.first()? {
            n @ 0..=0xFA => return Some((u64::from(n), 1)),
            0xFC => 2,
            0xFD => 3,
            0xFE => 8,
            _ => return None,
        };
        let mut value = [0; 8];
        value[..width].copy_from_slice(bytes.get(1..1 + width)?);
        Some((u64::from_le_bytes(value), 1 + width))
    }

    /// Reads one packet (3-byte length, sequence id, payload) into `buf`, whole; its
    /// sequence id, or `None` at a clean end of stream.
    async fn read_packet<R: AsyncRead + Unpin>(
        r: &mut R,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<u8>> {
        buf.clear();
        let mut head = [0; 4];
        if !read_exact_or_eof(r, &mut head).await? {
            return Ok(None);
        }
        let len = usize::from(head[0]) | (usize::from(head[1]) << 8) | (usize::from(head[2]) << 16);
        buf.extend_from_slice(&head);
        read_more(r, len, buf).await?;
        Ok(Some(head[3]))
    }

    /// What a MySQL client library reports when the server link drops mid-query, as the
    /// answer (sequence id 1) to the command.
    fn lost_connection_error() -> Vec<u8> {
        let mut payload = vec![0xFF];
        payload.extend_from_slice(&2013u16.to_le_bytes());
        payload.extend_from_slice(b"#HY000");
        payload.extend_from_slice(b"Lost connection to MySQL server during query");
        // A few dozen bytes: the length fits in three.
        let len = payload.len().to_le_bytes();
        let mut packet = vec![len[0], len[1], len[2], 1];
        packet.extend_from_slice(&payload);
        packet
    }
}

/// Just enough SQL lexing to find COMMIT statements.
mod sql {
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub(super) enum Dialect {
        Postgres,
        Mysql,
    }

    /// Whether a statement of `sql` (one or several, `;`-separated) starts with the word
    /// `COMMIT` (any case; PostgreSQL's `END` too). Quoted strings, quoted identifiers,
    /// dollar-quoted bodies and comments are skipped, so a `COMMIT` inside them (a
    /// procedure body, a string literal) does not count.
    pub(super) fn has_commit(sql: &[u8], dialect: Dialect) -> bool {
        let mut at_start = true;
        let mut i = 0;
        while let Some(&c) = sql.get(i) {
            let next = sql.get(i + 1).copied();
            match c {
                b';' => {
                    at_start = true;
                    i += 1;
                }
                c if c.is_ascii_whitespace() => i += 1,
                b'-' if next == Some(b'-') => i = line_end(sql, i),
                b'#' if dialect == Dialect::Mysql => i = line_end(sql, i),
                b'/' if next == Some(b'*') => i = comment_end(sql, i, dialect),
                b'\'' | b'"' | b'`' => {
                    // MySQL escapes with backslashes in strings; Postgres only in E'...'.
                    let backslash = dialect == Dialect::Mysql
                        || (c == b'\'' && i > 0 && matches!(sql[i - 1], b'e' | b'E'));
                    i = quote_end(sql, i, backslash);
                    at_start = false;
                }
                b'$' if dialect == Dialect::Postgres => {
                    i = dollar_quote_end(sql, i).unwrap_or(i + 1);
                    at_start = false;
                }
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    let end = sql[i..]
                        .iter()
                        .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'$'))
                        .map_or(sql.len(), |n| i + n);
                    let word = &sql[i..end];
                    if at_start
                        && (word.eq_ignore_ascii_case(b"commit")
                            || (dialect == Dialect::Postgres && word.eq_ignore_ascii_case(b"end")))
                    {
                        return true;
                    }
                    at_start = false;
                    i = end;
                }
                _ => {
                    at_start = false;
                    i += 1;
                }
            }
        }
        false
    }

    /// Past the end of the `--` (or `#`) comment at `start`.
    fn line_end(sql: &[u8], start: usize) -> usize {
        sql[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(sql.len(), |n| start + n + 1)
    }

    /// Past the end of the `/* */` comment at `start` (Postgres nests them).
    fn comment_end(sql: &[u8], start: usize, dialect: Dialect) -> usize {
        let mut depth = 0usize;
        let mut i = start;
        while i < sql.len() {
            if sql[i..].starts_with(b"/*") && (depth == 0 || dialect == Dialect::Postgres) {
                depth += 1;
                i += 2;
            } else if sql[i..].starts_with(b"*/") {
                depth = depth.saturating_sub(1);
                i += 2;
                if depth == 0 {
                    return i;
                }
            } else {
                i += 1;
            }
        }
        sql.len()
    }

    /// Past the closing quote of the quoted text at `start` (a doubled quote is an escaped
    /// one, as is a backslashed one when `backslash`).
    fn quote_end(sql: &[u8], start: usize, backslash: bool) -> usize {
        let quote = sql[start];
        let mut i = start + 1;
        while let Some(&c) = sql.get(i) {
            if backslash && c == b'\\' {
                i += 2;
            } else if c == quote {
                if sql.get(i + 1) == Some(&quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            } else {
                i += 1;
            }
        }
        sql.len()
    }

    /// Past the end of the `$tag$ ... $tag$` body at `start`, if a dollar quote opens there
    /// (not a `$1` parameter).
    fn dollar_quote_end(sql: &[u8], start: usize) -> Option<usize> {
        let tag_len = sql[start + 1..]
            .iter()
            .position(|&b| b == b'$')
            .filter(|&n| {
                let tag = &sql[start + 1..start + 1 + n];
                tag.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
                    && !tag.first().is_some_and(u8::is_ascii_digit)
            })?;
        let delimiter = &sql[start..start + tag_len + 2];
        let body = start + delimiter.len();
        Some(
            sql[body..]
                .windows(delimiter.len())
                .position(|w| w == delimiter)
                .map_or(sql.len(), |n| body + n + delimiter.len()),
        )
    }

    #[cfg(test)]
    mod tests {
        use super::{Dialect, has_commit};

        #[test]
        fn finds_commit_statements() {
            for sql in [
                "COMMIT",
                "commit;",
                "  Commit work",
                "SELECT 1; COMMIT",
                "BEGIN; INSERT INTO t VALUES (';'); COMMIT;",
                "/* why */ COMMIT",
                "-- note\nCOMMIT",
            ] {
                assert!(has_commit(sql.as_bytes(), Dialect::Postgres), "{sql}");
                assert!(has_commit(sql.as_bytes(), Dialect::Mysql), "{sql}");
            }
            assert!(has_commit(b"END", Dialect::Postgres));
            assert!(has_commit(b"# c\nCOMMIT", Dialect::Mysql));
        }

        #[test]
        fn ignores_commit_elsewhere() {
            for sql in [
                "ROLLBACK",
                "SELECT 'COMMIT'",
                "SELECT 1 AS commit",
                "INSERT INTO t VALUES ('a;COMMIT')",
                "SELECT \"x;commit\"",
                "/* ; COMMIT */ SELECT 1",
                "committed",
                "",
            ] {
                assert!(!has_commit(sql.as_bytes(), Dialect::Postgres), "{sql}");
                assert!(!has_commit(sql.as_bytes(), Dialect::Mysql), "{sql}");
            }
            assert!(!has_commit(
                b"CREATE PROCEDURE p() AS $body$ BEGIN NULL; COMMIT; END $body$ LANGUAGE plpgsql",
                Dialect::Postgres
            ));
            assert!(!has_commit(b"SELECT E'\\'; COMMIT'", Dialect::Postgres));
            assert!(!has_commit(b"SELECT 'it\\'s; COMMIT'", Dialect::Mysql));
            assert!(!has_commit(b"END", Dialect::Mysql));
            assert!(!has_commit(b"SELECT $1; ", Dialect::Postgres));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Protocol, Target};

    #[test]
    fn swaps_the_host_and_port_and_keeps_the_rest() {
        let t =
            Target::parse("postgres://postgres:pw@db.example:6543/test?sslmode=prefer").unwrap();
        assert_eq!(t.protocol, Protocol::Postgres);
        assert_eq!((t.host.as_str(), t.port), ("db.example", 6543));
        assert_eq!(
            t.url_via(1),
            "postgres://postgres:pw@127.0.0.1:1/test?sslmode=prefer"
        );

        let t = Target::parse("mysql://root@127.0.0.1/test").unwrap();
        assert_eq!(t.protocol, Protocol::Mysql);
        assert_eq!(t.port, 3306);
        assert_eq!(
            t.url_via(2),
            "mysql://root@127.0.0.1:2/test?prefer_socket=false"
        );

        let t = Target::parse("mysql://root@localhost:3307/test?prefer_socket=true&a=b").unwrap();
        assert_eq!(
            t.url_via(2),
            "mysql://root@127.0.0.1:2/test?a=b&prefer_socket=false"
        );

        let t = Target::parse("postgresql://[::1]:5433").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 5433));
        assert_eq!(t.url_via(3), "postgresql://127.0.0.1:3");
    }

    #[test]
    fn refuses_what_it_cannot_proxy() {
        for url in [
            "sqlite://x.db",
            "postgres:///test?host=/run/postgresql",
            "postgres://a:1,b:2/test",
            "mysql://root@host:notaport/test",
            "no url",
        ] {
            assert!(Target::parse(url).is_err(), "{url}");
        }
    }
}
