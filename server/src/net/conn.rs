//! A client's connection: a TCP socket, a TLS session over one, or the unix socket. All read
//! and write as non-blocking streams (WouldBlock when nothing more can move), so the client
//! code is the same.

use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use rustls::{ClientConnection, Connection, ServerConnection};

use super::Peer;

pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
    /// Accepted on `unixsocket`, whose path it keeps (its address in CLIENT LIST).
    Unix(UnixStream, std::sync::Arc<str>),
}

pub struct TlsStream {
    sock: TcpStream,
    /// A client's session (accepted on tls-port), or our replica link's to its master.
    tls: Connection,
}

impl Conn {
    /// A TLS session, handshake to come, over an accepted socket.
    pub fn tls(sock: TcpStream, config: Arc<rustls::ServerConfig>) -> io::Result<Conn> {
        let tls = ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(Conn::Tls(Box::new(TlsStream { sock, tls: Connection::Server(tls) })))
    }

    /// A TLS session we opened (a replica's link to its master), handshake done.
    pub fn tls_client(sock: TcpStream, tls: ClientConnection) -> Conn {
        Conn::Tls(Box::new(TlsStream { sock, tls: Connection::Client(tls) }))
    }

    pub fn fd(&self) -> RawFd {
        match self {
            Conn::Plain(s) => s.as_raw_fd(),
            Conn::Tls(t) => t.sock.as_raw_fd(),
            Conn::Unix(s, _) => s.as_raw_fd(),
        }
    }

    /// The address the connection arrived at (CLIENT LIST's laddr).
    pub fn local_addr(&self) -> Option<Peer> {
        match self {
            Conn::Plain(s) => s.local_addr().ok().map(Peer::Tcp),
            Conn::Tls(t) => t.sock.local_addr().ok().map(Peer::Tcp),
            Conn::Unix(_, path) => Some(Peer::Unix(path.clone())),
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Conn::Unix(..))
    }

    /// tcp-keepalive: probes after `secs` idle, then every third of it, three of them, as
    /// Redis's anetKeepAlive sets them (0: off).
    pub fn set_keepalive(&self, secs: u64) {
        let sock = match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => &t.sock,
            Conn::Unix(..) => return,
        };
        if secs == 0 {
            return;
        }
        let every = std::time::Duration::from_secs((secs / 3).max(1));
        let ka = socket2::TcpKeepalive::new()
            .with_time(std::time::Duration::from_secs(secs))
            .with_interval(every)
            .with_retries(3);
        let _ = socket2::SockRef::from(sock).set_tcp_keepalive(&ka);
    }

    /// TLS records made (a reply, a handshake message) that the socket has not taken yet:
    /// the connection needs writable events even with no reply bytes left.
    pub fn has_backlog(&self) -> bool {
        match self {
            Conn::Plain(_) | Conn::Unix(..) => false,
            Conn::Tls(t) => t.tls.wants_write(),
        }
    }
}

impl TlsStream {
    /// Move the TLS records made so far onto the socket, as far as it takes them.
    fn push(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Plaintext into `buf`: what was decrypted already, then what the socket has. Returns
    /// less than `buf.len()` only when both are empty (the socket said WouldBlock), which
    /// is what the event loop's edge-triggered reads rely on.
    fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        loop {
            match self.tls.reader().read(&mut buf[n..]) {
                // The peer's close_notify.
                Ok(0) => return Ok(n),
                Ok(k) => {
                    n += k;
                    if n == buf.len() {
                        return Ok(n);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
            }
            match self.tls.read_tls(&mut self.sock) {
                Ok(0) => return Ok(n),
                Ok(_) => {
                    let processed = self.tls.process_new_packets();
                    // Handshake messages, or the alert telling the peer why it failed.
                    let pushed = self.push();
                    if let Err(e) = processed {
                        return Err(io::Error::new(ErrorKind::InvalidData, e));
                    }
                    pushed?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return if n > 0 { Ok(n) } else { Err(e) };
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn write_plain(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push()?;
        if self.tls.wants_write() {
            // Records wait for the socket: take no more until it drains.
            return Err(ErrorKind::WouldBlock.into());
        }
        let n = self.tls.writer().write(buf)?;
        self.push()?;
        if n == 0 && !buf.is_empty() {
            // rustls's plaintext buffer is full (the handshake is not done yet).
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read_plain(buf),
            Conn::Unix(s, _) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => t.write_plain(buf),
            Conn::Unix(s, _) => s.write(buf),
        }
    }

    /// Push waiting TLS records; WouldBlock is not an error here (the backlog stays).
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(_) | Conn::Unix(..) => Ok(()),
            Conn::Tls(t) => t.push(),
        }
    }
}

impl mio::event::Source for Conn {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.register(registry, token, interests),
            Conn::Tls(t) => t.sock.register(registry, token, interests),
            Conn::Unix(s, _) => s.register(registry, token, interests),
        }
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.reregister(registry, token, interests),
            Conn::Tls(t) => t.sock.reregister(registry, token, interests),
            Conn::Unix(s, _) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.deregister(registry),
            Conn::Tls(t) => t.sock.deregister(registry),
            Conn::Unix(s, _) => s.deregister(registry),
        }
    }
}
