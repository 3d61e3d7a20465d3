//! The MySQL client/server protocol (which MariaDB speaks too), uncompressed.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;

use super::read::{read_exact_or_eof, read_more};
use super::sql::{Dialect, has_begin, has_commit};
use super::{Counters, Hold};

const CLIENT_COMPRESS: u32 = 0x0000_0020;
const CLIENT_SSL: u32 = 0x0000_0800;
const CLIENT_DEPRECATE_EOF: u32 = 0x0100_0000;
const CLIENT_QUERY_ATTRIBUTES: u32 = 0x0800_0000;
const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
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
    hold: &Hold,
) -> io::Result<()> {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let link = Link::default();
    // As for Postgres: the server side ends the connection after a fault, or when the
    // server closes; the client side only on an error.
    tokio::select! {
        ended = client_to_server(
            BufReader::new(client_read), BufWriter::new(server_write), counters, &link, hold,
        ) => ended,
        ended = server_to_client(
            BufReader::new(server_read), BufWriter::new(client_write), counters, &link, hold,
        ) => ended,
    }
}

async fn client_to_server<R, W>(
    mut from: BufReader<R>,
    mut to: BufWriter<W>,
    counters: &Counters,
    link: &Link,
    hold: &Hold,
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
        if sequence == 0
            && let Some((&(COM_QUERY | COM_STMT_PREPARE), sql)) = payload.split_first()
            && has_begin(sql, Dialect::Mysql)
        {
            counters.begin_seen(hold);
        }
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
    hold: &Hold,
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
        hold.unless_held().await;
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
async fn read_packet<R: AsyncRead + Unpin>(r: &mut R, buf: &mut Vec<u8>) -> io::Result<Option<u8>> {
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
