//! A TLS session turned back into a plain socket, for code written over blocking sockets
//! that reads on one thread and writes on another (a rustls connection cannot be split).
//!
//! The handshake is made on the caller's thread, so a refused certificate is an error of
//! the connect. Then two threads carry the bytes: one reads the TCP socket, decrypts and
//! writes the plaintext to the caller's end of a socket pair; the other reads the caller's
//! writes, encrypts and sends them. The session is shared under a lock held only to
//! encrypt or decrypt, never across a blocking read; encrypted records are written in the
//! order they were made (a second lock is taken before the first is let go).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

const CHUNK: usize = 64 << 10;

/// The TLS session over `tcp`, handshake done, as the caller's end of a socket pair: what is
/// written to it is sent encrypted, what the server sends is read from it in plain. Shutting
/// down its writing side sends close_notify and ends the TCP socket's sending side; what the
/// server still sends is read until it closes (closing the caller's end ends both).
pub fn tunnel(mut tcp: TcpStream, name: ServerName<'static>, config: Arc<ClientConfig>) -> io::Result<Tunnel> {
    let mut session = ClientConnection::new(config, name).map_err(other)?;
    while session.is_handshaking() {
        session.complete_io(&mut tcp).map_err(|e| match e.kind() {
            // The caller's timeout: a server that waits for more (a plain port does).
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                io::Error::new(io::ErrorKind::TimedOut, "no answer from the server (is this its TLS port?)")
            }
            _ => e,
        })?;
    }
    // A timeout the caller set for the handshake; from here the caller's end has its own.
    tcp.set_read_timeout(None)?;
    // Sent records are taken out at once: no limit on what waits in the session.
    session.set_buffer_limit(None);
    let (caller, ours) = UnixStream::pair()?;
    let why = Why::default();
    let shared = Arc::new(Shared {
        session: Mutex::new(session),
        tcp_out: Mutex::new(tcp.try_clone()?),
        why: Arc::clone(&why.0),
    });
    let (inbound, outbound) = (Arc::clone(&shared), shared);
    let (plain_out, plain_in) = (ours.try_clone()?, ours);
    std::thread::Builder::new().name("tls-in".into()).spawn(move || inbound.carry_in(tcp, plain_out))?;
    std::thread::Builder::new().name("tls-out".into()).spawn(move || outbound.carry_out(plain_in))?;
    Ok(Tunnel { stream: caller, why })
}

/// The caller's end of a tunnel, and why the session ended when TLS ended it.
#[derive(Debug)]
pub struct Tunnel {
    pub stream: UnixStream,
    pub why: Why,
}

/// Why a tunnel's session ended, when it was TLS's doing (an alert from the server, a
/// record that does not decrypt): what the caller's end, which only sees its socket
/// close, can say instead of "closed".
#[derive(Debug, Clone, Default)]
pub struct Why(Arc<Mutex<Option<String>>>);

impl Why {
    pub fn get(&self) -> Option<String> {
        locked(&self.0).clone()
    }
}

fn other(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

struct Shared {
    session: Mutex<ClientConnection>,
    /// The TCP socket's sending side, taken before the session's lock is let go.
    tcp_out: Mutex<TcpStream>,
    why: Arc<Mutex<Option<String>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock is a carrier thread that panicked: the session is dropped after it
    // anyway, so the state is still good enough to close with.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Encrypted records the session has to send, written in order; the session's guard is
    /// released once the socket's is held.
    fn send_records(&self, mut session: MutexGuard<'_, ClientConnection>) -> io::Result<()> {
        if !session.wants_write() {
            return Ok(());
        }
        let mut records = Vec::new();
        while session.wants_write() {
            session.write_tls(&mut records)?;
        }
        let mut tcp = locked(&self.tcp_out);
        drop(session);
        tcp.write_all(&records)
    }

    /// Server to caller, until either side ends.
    fn carry_in(&self, mut tcp: TcpStream, mut plain: UnixStream) {
        let mut buf = vec![0u8; CHUNK];
        let mut clear = Vec::new();
        while let Some(n) = read_some(&mut tcp, &mut buf) {
            let mut session = locked(&self.session);
            let mut rest = &buf[..n];
            let (mut failed, mut closed) = (false, false);
            clear.clear();
            // A record at a time, its plaintext taken out before the next: the session
            // buffers only so much.
            while !rest.is_empty() && !failed && !closed {
                let step = session.read_tls(&mut rest).map_err(|e| e.to_string());
                if let Err(e) = step.and_then(|_| session.process_new_packets().map_err(|e| e.to_string())) {
                    *locked(&self.why) = Some(format!("TLS: {e}"));
                    failed = true;
                }
                closed = read_plain(&mut session, &mut clear);
            }
            // On a failure, the alert that says why (if the session made one) goes out.
            let sent = self.send_records(session);
            if sent.is_err() || plain.write_all(&clear).is_err() || failed || closed {
                break;
            }
        }
        let _ = plain.shutdown(Shutdown::Write);
        let _ = tcp.shutdown(Shutdown::Read);
    }

    /// Caller to server, until the caller closes its end.
    fn carry_out(&self, mut plain: UnixStream) {
        let mut buf = vec![0u8; CHUNK];
        while let Some(n) = read_some(&mut plain, &mut buf) {
            let mut session = locked(&self.session);
            if session.writer().write_all(&buf[..n]).is_err() || self.send_records(session).is_err() {
                break;
            }
        }
        // The caller is done writing: the server is told, and what it still sends is read
        // (the caller's end of the pair may only be half closed).
        let mut session = locked(&self.session);
        session.send_close_notify();
        let _ = self.send_records(session);
        let _ = locked(&self.tcp_out).shutdown(Shutdown::Write);
    }
}

/// The next bytes of a blocking read; None at the end or on an error.
fn read_some(from: &mut impl Read, buf: &mut [u8]) -> Option<usize> {
    loop {
        match from.read(buf) {
            Ok(0) => return None,
            Ok(n) => return Some(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
}

/// Everything the session has decrypted, into `out`; true when the server closed the session.
fn read_plain(session: &mut ClientConnection, out: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 << 10];
    loop {
        match session.reader().read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{client_config, read_certs, read_key, ClientSide};
    use ferrokv_testkit::certs::Certs;
    use std::net::TcpListener;

    /// A TLS server on a thread that sends back everything it reads, then closes.
    fn echo_server(certs: &Certs) -> (u16, std::thread::JoinHandle<u64>) {
        let config = rustls::ServerConfig::builder_with_provider(crate::provider())
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                Ok(b.with_no_client_auth().with_single_cert(
                    read_certs(&certs.file("server.crt")).map_err(rustls::Error::General)?,
                    read_key(&certs.file("server.key")).map_err(rustls::Error::General)?,
                ))
            })
            .expect("server config")
            .expect("server cert");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let handle = std::thread::spawn(move || {
            let (sock, _) = listener.accept().expect("accept");
            let conn = rustls::ServerConnection::new(Arc::new(config)).expect("session");
            let mut tls = rustls::StreamOwned::new(conn, sock);
            let mut buf = vec![0u8; 100_000];
            let mut echoed = 0u64;
            loop {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        tls.write_all(&buf[..n]).expect("echo");
                        echoed += n as u64;
                    }
                }
            }
            tls.conn.send_close_notify();
            let _ = tls.flush();
            echoed
        });
        (port, handle)
    }

    #[test]
    fn carries_both_ways_at_once_and_closes() {
        let certs = Certs::make();
        let (port, server) = echo_server(&certs);
        let side = ClientSide { ca_file: certs.file("ca.crt"), ..ClientSide::default() };
        let config = client_config(&side).expect("client config");
        let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let name = crate::server_name("127.0.0.1").expect("name");
        let mut plain = tunnel(tcp, name, config).expect("handshake").stream;
        // Far more than the sockets buffer: the writer and the reader must run together.
        let data: Vec<u8> = (0..16_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut writer = plain.try_clone().expect("clone");
        let sent = data.clone();
        let w = std::thread::spawn(move || {
            writer.write_all(&sent).expect("write");
            writer.shutdown(Shutdown::Write).expect("shutdown");
        });
        let mut back = Vec::new();
        plain.read_to_end(&mut back).expect("read back");
        w.join().expect("writer");
        assert_eq!(back.len(), data.len());
        assert!(back == data, "the bytes came back changed");
        assert_eq!(server.join().expect("server"), data.len() as u64);
    }

    #[test]
    fn a_certificate_the_ca_did_not_sign_fails_the_handshake() {
        let certs = Certs::make();
        let (port, _server) = echo_server(&certs);
        // The client certificate is no CA of the server's.
        let side = ClientSide { ca_file: certs.file("client.crt"), ..ClientSide::default() };
        let config = client_config(&side).expect("client config");
        let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let err = tunnel(tcp, crate::server_name("127.0.0.1").expect("name"), config).map(|_| ()).expect_err("refused");
        assert!(err.to_string().contains("invalid peer certificate"), "{err}");
    }
}
