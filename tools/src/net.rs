//! Reaching a running server (restore, split --by-node, aoftool capture): its URL, the
//! credentials it asks for, and TLS (a `rediss://` URL or `--tls`, as redis-cli).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferrokv_tls::{rustls::ClientConfig, ClientSide, Verify, Why};

/// TLS options, redis-cli's where their names are free.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// Connect with TLS (as a rediss:// URL does).
    #[arg(long)]
    pub tls: bool,
    /// The server name sent in the handshake (SNI) when it is not the URL's host.
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
    /// CA certificates (PEM) the server's certificate must chain to; default: the
    /// system's (SSL_CERT_FILE, else the distribution's bundle).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// A directory of CA certificates (PEM files), as --cacert.
    #[arg(long, value_name = "DIR")]
    pub cacertdir: Option<PathBuf>,
    /// A client certificate (PEM), for a server with tls-auth-clients.
    #[arg(long, value_name = "FILE", requires = "cert_key")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM, not encrypted): redis-cli's --key.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub cert_key: Option<PathBuf>,
    /// Accept any server certificate (redis-cli's --insecure).
    #[arg(long)]
    pub insecure: bool,
}

impl TlsArgs {
    /// Whether any TLS option was given (then a redis:// URL is refused as ambiguous).
    fn any(&self) -> bool {
        self.sni.is_some()
            || self.cacert.is_some()
            || self.cacertdir.is_some()
            || self.cert.is_some()
            || self.cert_key.is_some()
            || self.insecure
    }

    fn context(&self) -> Result<Tls, String> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        let config = ferrokv_tls::client_config(&ClientSide {
            ca_file: path(&self.cacert),
            ca_dir: path(&self.cacertdir),
            cert_file: path(&self.cert),
            key_file: path(&self.cert_key),
            protocols: String::new(),
            verify: if self.insecure { Verify::Nothing } else { Verify::Chain },
            system_roots: true,
        })?;
        Ok(Tls { config, sni: self.sni.clone() })
    }
}

/// A TLS client context and the name to present.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
    sni: Option<String>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("sni", &self.sni).finish_non_exhaustive()
    }
}

/// What a connection needs beyond the address: credentials for AUTH, and TLS.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub user: Option<String>,
    pub password: Option<String>,
    pub tls: Option<Tls>,
}

/// `[redis[s]://][[user]:password@]host[:port]`: the address and how to get in. `rediss://`
/// or `--tls` connect with TLS; TLS options without either are refused, not ignored.
pub fn parse_url(url: &str, tls: &TlsArgs) -> Result<(String, Access), String> {
    let (rest, secure) = if let Some(r) = url.strip_prefix("redis://") {
        (r, tls.tls)
    } else if let Some(r) = url.strip_prefix("rediss://") {
        (r, true)
    } else if url.contains("://") {
        return Err(format!("{url}: expected redis://[user:password@]host:port (or rediss:// for TLS)"));
    } else {
        (url, tls.tls)
    };
    if !secure && tls.any() {
        return Err(format!("{url}: TLS options were given: use rediss:// or --tls"));
    }
    let rest = rest.trim_end_matches('/');
    let (mut access, hostport) = match rest.rsplit_once('@') {
        Some((a, h)) => {
            let (user, pass) = match a.split_once(':') {
                Some((u, p)) => (Some(u.to_string()).filter(|u| !u.is_empty()), p.to_string()),
                None => (None, a.to_string()),
            };
            (Access { user: user.map(|u| percent_decode(&u)), password: Some(percent_decode(&pass)), tls: None }, h)
        }
        None => (Access::default(), rest),
    };
    if hostport.contains('/') {
        return Err(format!("{url}: a database in the URL is not supported; use --db"));
    }
    let addr = if hostport.ends_with(']') || !hostport.contains(':') {
        format!("{hostport}:6379")
    } else {
        hostport.to_string()
    };
    if addr.starts_with(':') {
        return Err(format!("{url}: no host"));
    }
    if secure {
        access.tls = Some(tls.context()?);
    }
    Ok((addr, access))
}

/// `%XX` escapes in the URL's credentials.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A connection to a server: a TCP socket, or a TLS session seen through a local socket
/// (`ferrokv_tls::tunnel`, with why TLS ended it), either of which can be cloned for a
/// reader and a writer.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Tls(UnixStream, Why),
}

/// Connect to `addr` (TCP, then the TLS handshake when `access` has TLS); no AUTH.
pub fn connect(addr: &str, access: &Access, timeout: Duration) -> io::Result<Conn> {
    use std::net::ToSocketAddrs;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr}: no address"));
    for a in addr.to_socket_addrs()? {
        let sock = match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => s,
            Err(e) => {
                last = e;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let Some(tls) = &access.tls else { return Ok(Conn::Plain(sock)) };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let name = ferrokv_tls::server_name(tls.sni.as_deref().unwrap_or(host))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // The handshake must not wait forever on a server that does not speak TLS.
        sock.set_read_timeout(Some(timeout))?;
        let t = ferrokv_tls::tunnel(sock, name, Arc::clone(&tls.config))
            .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
        return Ok(Conn::Tls(t.stream, t.why));
    }
    Err(last)
}

impl Conn {
    pub fn try_clone(&self) -> io::Result<Conn> {
        Ok(match self {
            Conn::Plain(s) => Conn::Plain(s.try_clone()?),
            Conn::Tls(s, why) => Conn::Tls(s.try_clone()?, why.clone()),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.set_read_timeout(t),
            Conn::Tls(s, _) => s.set_read_timeout(t),
        }
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.shutdown(how),
            Conn::Tls(s, _) => s.shutdown(how),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            // The end of the session, said as TLS's reason when it has one.
            Conn::Tls(s, why) => match (s.read(buf), why.get()) {
                (Ok(0), Some(why)) if !buf.is_empty() => Err(io::Error::new(io::ErrorKind::ConnectionAborted, why)),
                (r, _) => r,
            },
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s, why) => s.write(buf).map_err(|e| match why.get() {
                Some(why) => io::Error::new(io::ErrorKind::ConnectionAborted, why),
                None => e,
            }),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let plain = TlsArgs::default();
        let url = |u: &str| parse_url(u, &plain);
        assert_eq!(url("redis://127.0.0.1:7000").unwrap().0, "127.0.0.1:7000");
        assert_eq!(url("localhost").unwrap().0, "localhost:6379");
        assert_eq!(url("10.0.0.5:7000").unwrap().0, "10.0.0.5:7000");
        assert_eq!(url("redis://[::1]:7000/").unwrap().0, "[::1]:7000");
        assert_eq!(url("redis://[::1]").unwrap().0, "[::1]:6379");
        let (addr, access) = url("redis://app:p%40ss@h:1").unwrap();
        assert_eq!(addr, "h:1");
        assert_eq!(access.user.as_deref(), Some("app"));
        assert_eq!(access.password.as_deref(), Some("p@ss"));
        let (_, access) = url("redis://:secret@h:1").unwrap();
        assert_eq!((access.user, access.password.as_deref()), (None, Some("secret")));
        assert!(url("redis://h:1").unwrap().1.tls.is_none());
        assert!(url("http://h:1").is_err());
        assert!(url("redis://h:1/3").is_err());
    }

    #[test]
    fn tls_is_asked_for_by_the_scheme_or_the_flag() {
        let insecure = TlsArgs { insecure: true, ..TlsArgs::default() };
        assert!(parse_url("rediss://h:1", &insecure).unwrap().1.tls.is_some());
        assert!(parse_url("h:1", &TlsArgs { tls: true, ..insecure.clone() }).unwrap().1.tls.is_some());
        let err = parse_url("redis://h:1", &insecure).unwrap_err();
        assert!(err.contains("use rediss:// or --tls"), "{err}");
        let missing = TlsArgs { cacert: Some("/nonexistent/ca.crt".into()), ..TlsArgs::default() };
        let err = parse_url("rediss://h:1", &missing).unwrap_err();
        assert!(err.contains("/nonexistent/ca.crt"), "{err}");
    }
}
