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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

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

mod mysql;
mod postgres;
mod read;
mod sql;
mod target;

use target::{Protocol, Target};

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
            .enable_time()
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

    /// Holds the server's answers on the connection of the next BEGIN (or `START
    /// TRANSACTION`) a client sends: the BEGIN's answer and every later one on that
    /// connection, until [`release_replies`](Self::release_replies), as a server that
    /// froze would. The BEGIN still reaches the server and runs; only its answers wait.
    /// Other connections, new ones included, go on. A test cancels a call while its BEGIN
    /// awaits its answer this way. Seen in a Postgres simple Query or Parse, and in a MySQL
    /// `COM_QUERY` or `COM_STMT_PREPARE`.
    pub fn hold_replies_from_next_begin(&self) {
        self.counters.hold_at_begin.store(true, Ordering::SeqCst);
    }

    /// Lets the answers held since [`hold_replies_from_next_begin`](Self::hold_replies_from_next_begin)
    /// go on, in order (and disarms it, if no BEGIN came).
    pub fn release_replies(&self) {
        self.counters.hold_at_begin.store(false, Ordering::SeqCst);
        let held =
            std::mem::take(&mut *self.counters.held.lock().unwrap_or_else(|e| e.into_inner()));
        for hold in held {
            hold.store(false, Ordering::SeqCst);
        }
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
    /// [`CommitFaultProxy::hold_replies_from_next_begin`]: the next BEGIN holds its
    /// connection's answers.
    hold_at_begin: AtomicBool,
    /// The connections whose answers are held, for [`CommitFaultProxy::release_replies`].
    held: std::sync::Mutex<Vec<Arc<AtomicBool>>>,
}

/// Whether a connection's answers are held (see
/// [`CommitFaultProxy::hold_replies_from_next_begin`]).
#[derive(Default)]
struct Hold(Arc<AtomicBool>);

impl Hold {
    /// Returns once this connection's answers are no longer held.
    async fn unless_held(&self) {
        while self.0.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
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

    /// Records a BEGIN a client sent on the connection `hold` belongs to: from it on, that
    /// connection's answers are held when that was asked.
    fn begin_seen(&self, hold: &Hold) {
        if self.hold_at_begin.swap(false, Ordering::SeqCst) {
            trace!("BEGIN seen: holding the server's answers on its connection");
            hold.0.store(true, Ordering::SeqCst);
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.push(Arc::clone(&hold.0));
        }
    }
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
    let hold = Hold::default();
    let ended = match target.protocol {
        Protocol::Postgres => postgres::relay(client, server, &counters, &hold).await,
        Protocol::Mysql => mysql::relay(client, server, &counters, &hold).await,
    };
    if let Err(e) = ended {
        trace!("connection ended: {e}");
    }
}
