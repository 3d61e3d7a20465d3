//! Reading whole messages off a socket: both wire protocols frame theirs by length.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Fills `buf` from `r`; false if `r` was at its end before the first byte (a clean close).
pub(super) async fn read_exact_or_eof<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
) -> io::Result<bool> {
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
pub(super) async fn read_more<R: AsyncRead + Unpin>(
    r: &mut R,
    n: usize,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let want = u64::try_from(n).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    let got = (&mut *r).take(want).read_to_end(buf).await?;
    if got == n {
        Ok(())
    } else {
        Err(io::ErrorKind::UnexpectedEof.into())
    }
}
