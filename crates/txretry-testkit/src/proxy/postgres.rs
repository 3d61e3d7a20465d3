//! The PostgreSQL frontend/backend protocol, version 3.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;

use super::read::{read_exact_or_eof, read_more};
use super::sql::{Dialect, has_begin, has_commit};
use super::{Counters, Hold};

const SSL_REQUEST: i32 = 80_877_103;
const GSSENC_REQUEST: i32 = 80_877_104;
const CANCEL_REQUEST: i32 = 80_877_102;
/// The server refuses longer startup packets too.
const MAX_STARTUP_LEN: usize = 10_000;

pub(super) async fn relay(
    client: TcpStream,
    server: TcpStream,
    counters: &Counters,
    hold: &Hold,
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
        ended = client_to_server(client_read, server_write, counters, &fault_at, hold) => ended,
        ended = server_to_client(server_read, client_write, counters, &fault_at, hold) => ended,
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
    hold: &Hold,
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
                if has_begin(sql, Dialect::Postgres) {
                    counters.begin_seen(hold);
                }
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
                    if has_begin(sql, Dialect::Postgres) {
                        counters.begin_seen(hold);
                    }
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
    hold: &Hold,
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
        hold.unless_held().await;
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
