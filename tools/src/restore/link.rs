//! One connection to one node: commands written through a buffer, replies read by a thread
//! of its own (so the server never waits on a full output buffer while we write) and
//! handed to the restore's single channel, tagged with the link and its generation.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::sync::mpsc::Sender;
use std::time::Duration;

use ferrokv::persist::feed::put_multibulk;

use crate::net::{self, Access, Conn};

/// A reply, as much of it as the restore looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Error(s) => s.clone(),
            Reply::Int(n) => n.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) | Reply::Array(None) => String::new(),
            Reply::Array(Some(items)) => items.iter().map(Reply::text).collect::<Vec<_>>().join(" "),
        }
    }
}

/// Replies nest at most this deep (CLUSTER SLOTS is three levels).
const MAX_DEPTH: usize = 8;
/// No reply the restore asks for is larger than this.
const MAX_BULK: usize = 512 << 20;

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("protocol error: {what}"))
}

/// A reply line without its CRLF: its type byte and the rest.
fn line(r: &mut impl BufRead) -> io::Result<(u8, String)> {
    let mut l = Vec::new();
    if r.read_until(b'\n', &mut l)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection"));
    }
    if !l.ends_with(b"\r\n") || l.len() < 3 {
        return Err(bad("a reply line without a type or CRLF"));
    }
    Ok((l[0], String::from_utf8_lossy(&l[1..l.len() - 2]).into_owned()))
}

/// Read one RESP2 reply.
pub fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    read_nested(r, 0)
}

fn read_nested(r: &mut impl BufRead, depth: usize) -> io::Result<Reply> {
    if depth > MAX_DEPTH {
        return Err(bad("replies nested too deep"));
    }
    let (kind, rest) = line(r)?;
    let number = || rest.parse::<i64>().map_err(|_| bad(&format!("'{rest}' is not a length")));
    Ok(match kind {
        b'+' => Reply::Status(rest),
        b'-' => Reply::Error(rest),
        b':' => Reply::Int(number()?),
        b'$' => {
            let n = number()?;
            if n < 0 {
                return Ok(Reply::Bulk(None));
            }
            let n = usize::try_from(n).ok().filter(|&n| n <= MAX_BULK).ok_or_else(|| bad("a bulk too long"))?;
            let mut b = vec![0; n + 2];
            r.read_exact(&mut b)?;
            if !b.ends_with(b"\r\n") {
                return Err(bad("a bulk without CRLF"));
            }
            b.truncate(n);
            Reply::Bulk(Some(b))
        }
        b'*' => {
            let n = number()?;
            if n < 0 {
                return Ok(Reply::Array(None));
            }
            let n = usize::try_from(n).ok().filter(|&n| n <= 1 << 20).ok_or_else(|| bad("an array too long"))?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(read_nested(r, depth + 1)?);
            }
            Reply::Array(Some(items))
        }
        other => return Err(bad(&format!("unexpected reply type 0x{other:02x}"))),
    })
}

/// A message from a link's reader: its index, its generation, a reply or the end.
pub type Message = (usize, u64, io::Result<Reply>);

/// What a sent command is waiting for.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub job: u64,
}

/// How long connecting and a silent server are waited for.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A connection with its replies read elsewhere.
pub struct Link {
    pub addr: String,
    w: BufWriter<Conn>,
    pub generation: u64,
    /// Commands sent whose replies have not come, oldest first.
    pub pending: VecDeque<Pending>,
    /// The database selected on this connection (standalone targets).
    pub db: Option<u64>,
}

/// A blocking request on a fresh connection (discovery, before the reader starts).
pub fn call(r: &mut BufReader<Conn>, args: &[&[u8]]) -> io::Result<Reply> {
    let mut out = Vec::new();
    put_multibulk(&mut out, args);
    r.get_mut().write_all(&out)?;
    read_reply(r)
}

/// Connect to `addr` and authenticate.
pub fn connect(addr: &str, access: &Access) -> io::Result<BufReader<Conn>> {
    let conn = net::connect(addr, access, CONNECT_TIMEOUT)?;
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut r = BufReader::with_capacity(64 << 10, conn);
    if let Some(pass) = &access.password {
        let reply = match &access.user {
            Some(u) => call(&mut r, &[b"AUTH", u.as_bytes(), pass.as_bytes()])?,
            None => call(&mut r, &[b"AUTH", pass.as_bytes()])?,
        };
        if let Reply::Error(e) = reply {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("AUTH: {e}")));
        }
    }
    Ok(r)
}

impl Link {
    /// Connect, and start the thread that sends every reply to `tx` as (`index`, `generation`, reply).
    pub fn open(addr: &str, access: &Access, index: usize, generation: u64, tx: Sender<Message>) -> io::Result<Link> {
        let r = connect(addr, access)?;
        let w = r.get_ref().try_clone()?;
        std::thread::Builder::new().name(format!("restore-{addr}")).spawn(move || {
            let mut r = r;
            loop {
                let reply = read_reply(&mut r);
                let end = reply.is_err();
                if tx.send((index, generation, reply)).is_err() || end {
                    return;
                }
            }
        })?;
        Ok(Link {
            addr: addr.to_string(),
            w: BufWriter::with_capacity(1 << 20, w),
            generation,
            pending: VecDeque::new(),
            db: None,
        })
    }

    /// The buffered writer, for a key streamed straight to the socket.
    pub fn writer(&mut self) -> &mut BufWriter<Conn> {
        &mut self.w
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Close both halves (the reader thread ends on its next read).
    pub fn close(&mut self) {
        let _ = self.w.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse() {
        let mut r: &[u8] =
            b"+OK\r\n-MOVED 3999 127.0.0.1:6381\r\n:42\r\n$3\r\nabc\r\n$-1\r\n*2\r\n*1\r\n:1\r\n$0\r\n\r\n";
        assert_eq!(read_reply(&mut r).unwrap(), Reply::Status("OK".into()));
        assert_eq!(read_reply(&mut r).unwrap(), Reply::Error("MOVED 3999 127.0.0.1:6381".into()));
        assert_eq!(read_reply(&mut r).unwrap(), Reply::Int(42));
        assert_eq!(read_reply(&mut r).unwrap(), Reply::Bulk(Some(b"abc".to_vec())));
        assert_eq!(read_reply(&mut r).unwrap(), Reply::Bulk(None));
        assert_eq!(
            read_reply(&mut r).unwrap(),
            Reply::Array(Some(vec![Reply::Array(Some(vec![Reply::Int(1)])), Reply::Bulk(Some(vec![]))]))
        );
        assert!(read_reply(&mut r).is_err(), "the end");
        for bad in [&b"?x\r\n"[..], b"$5\r\nab\r\n", b"$x\r\n", b"+OK\n", b"*3\r\n:1\r\n", b"\x92OK\r\n", b"\r\n"] {
            let mut r = bad;
            assert!(read_reply(&mut r).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
