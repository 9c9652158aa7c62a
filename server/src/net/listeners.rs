//! The listening sockets: `port` (plain) and `tls-port` on every `bind` address, the unix
//! socket at `unixsocket`, and the TLS context new TLS connections get. CONFIG SET of port,
//! tls-port, bind and tls-* changes them here, as Redis does, keeping the old ones when the
//! new ones cannot be had (the unix socket is fixed at start).

use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::sync::Arc;

use mio::net::{TcpListener, TcpStream, UnixListener};
use mio::{Interest, Registry, Token};

use super::conn::Conn;
use super::tls::{is_context_param, TlsSettings};
use super::Peer;
use crate::config::ServerConfig;
use crate::log::log;

struct Listener {
    sock: Sock,
    tls: bool,
}

enum Sock {
    Tcp(TcpListener),
    /// The unix socket and its path.
    Unix(UnixListener, Arc<str>),
}

impl mio::event::Source for Sock {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Sock::Tcp(l) => l.register(registry, token, interests),
            Sock::Unix(l, _) => l.register(registry, token, interests),
        }
    }

    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Sock::Tcp(l) => l.reregister(registry, token, interests),
            Sock::Unix(l, _) => l.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Sock::Tcp(l) => l.deregister(registry),
            Sock::Unix(l, _) => l.deregister(registry),
        }
    }
}

pub struct Listeners {
    /// Listener `i` has token `usize::MAX - i` (client tokens count up from 1).
    open: Vec<Listener>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// Why a change of configuration was refused: the parameter to name and Redis's text.
pub struct Refused {
    pub param: &'static str,
    pub why: &'static str,
}

impl Listeners {
    /// Bind what `cfg` asks for at startup. Err: the message to exit with.
    pub fn open(registry: &Registry, cfg: &ServerConfig) -> Result<Listeners, String> {
        let tls = if cfg.tls_port() > 0 {
            match TlsSettings::of(cfg).configure() {
                Ok(t) => Some(t),
                Err(e) => {
                    log(&e);
                    return Err("Failed to configure TLS. Check logs for more info.".into());
                }
            }
        } else {
            None
        };
        let mut l = Listeners { open: Vec::new(), tls };
        let mut socks = bind_all(&cfg.bind, cfg.port, false, backlog(cfg))?;
        socks.extend(bind_all(&cfg.bind, cfg.tls_port(), true, backlog(cfg))?);
        if let Some(path) = cfg.get("unixsocket").filter(|p| !p.is_empty()) {
            let perm = cfg.get("unixsocketperm").and_then(|p| crate::config::parse_octal(&p)).unwrap_or(0);
            let sock = listen_unix(&path, perm as u32).map_err(|e| {
                let why = format!("Failed opening Unix socket: {}", crate::log::strerror(&e));
                crate::log::warn(&why);
                why
            })?;
            socks.push(Listener { sock: Sock::Unix(sock, Arc::from(path.as_str())), tls: false });
        }
        l.install(registry, socks).map_err(|e| e.to_string())?;
        Ok(l)
    }

    /// The unix socket's path, if the server listens on one.
    pub fn unix_path(&self) -> Option<&str> {
        self.open.iter().find_map(|l| match &l.sock {
            Sock::Unix(_, path) => Some(&**path),
            Sock::Tcp(_) => None,
        })
    }

    /// Close the unix socket and remove its file (at shutdown, as Redis).
    pub fn remove_unix_socket(&mut self, registry: &Registry) {
        let taken = self.take(registry, |l| matches!(l.sock, Sock::Unix(..)));
        for l in taken {
            if let Sock::Unix(_, path) = l.sock {
                log("Removing the unix socket file.");
                if let Err(e) = std::fs::remove_file(&*path) {
                    crate::log::warn(&format!("Error removing the unix socket file: {}", crate::log::strerror(&e)));
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// How many sockets listen (indexes for [`Listeners::accept`]).
    pub fn count(&self) -> usize {
        self.open.len()
    }

    /// The listener index of an event's token, if it is a listener's.
    pub fn owner(&self, t: Token) -> Option<usize> {
        let i = usize::MAX - t.0;
        (i < self.open.len()).then_some(i)
    }

    /// The next connection waiting on listener `i`: Ok(None) when there is none.
    pub fn accept(&self, i: usize) -> io::Result<Option<(Conn, Peer)>> {
        let Some(l) = self.open.get(i) else { return Ok(None) };
        loop {
            let accepted = match &l.sock {
                Sock::Tcp(sock) => sock.accept().and_then(|(sock, addr)| {
                    let _ = sock.set_nodelay(true);
                    Ok((self.wrap(sock, l.tls)?, Peer::Tcp(addr)))
                }),
                Sock::Unix(sock, path) => {
                    sock.accept().map(|(sock, _)| (Conn::Unix(sock, path.clone()), Peer::Unix(path.clone())))
                }
            };
            match accepted {
                Ok(got) => return Ok(Some(got)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn wrap(&self, sock: TcpStream, tls: bool) -> io::Result<Conn> {
        match (&self.tls, tls) {
            (Some(config), true) => Conn::tls(sock, Arc::clone(config)),
            _ => Ok(Conn::Plain(sock)),
        }
    }

    /// The first plain listener's port (INFO tcp_port).
    pub fn local_port(&self) -> Option<u16> {
        self.open.iter().find_map(|l| match &l.sock {
            Sock::Tcp(sock) if !l.tls => sock.local_addr().ok().map(|a| a.port()),
            _ => None,
        })
    }

    /// Follow a CONFIG SET from `old` to `new`. On Err nothing changed.
    pub fn reconfigure(
        &mut self,
        registry: &Registry,
        old: &ServerConfig,
        new: &ServerConfig,
        changed: &[&'static str],
    ) -> Result<(), Refused> {
        let tls_param = changed.iter().copied().find(|n| is_context_param(n));
        let tls_port_changed = new.tls_port() != old.tls_port();
        let mut tls = self.tls.clone();
        if let Some(param) = tls_param.filter(|_| new.tls_port() > 0) {
            tls = Some(configure(new).map_err(|()| Refused { param, why: TLS_REFUSED })?);
        } else if tls_port_changed && new.tls_port() > 0 && tls.is_none() {
            tls = Some(configure(new).map_err(|()| Refused { param: "tls-port", why: TLS_REFUSED })?);
        }
        let bind_changed = new.bind != old.bind;
        let plain = bind_changed || new.port != old.port;
        let secure = bind_changed || tls_port_changed;
        if plain || secure {
            let which = |l: &Listener| matches!(l.sock, Sock::Tcp(_)) && ((l.tls && secure) || (!l.tls && plain));
            let bind = |cfg: &ServerConfig| -> Result<Vec<Listener>, String> {
                let mut socks = if plain { bind_all(&cfg.bind, cfg.port, false, backlog(cfg))? } else { Vec::new() };
                if secure {
                    socks.extend(bind_all(&cfg.bind, cfg.tls_port(), true, backlog(cfg))?);
                }
                Ok(socks)
            };
            if bind_changed {
                // Redis closes the old sockets first (the same port may be wanted on another
                // address) and opens them again when the new ones cannot be had.
                drop(self.take(registry, which));
                match bind(new).and_then(|s| self.install(registry, s).map_err(|e| e.to_string())) {
                    Ok(()) => {}
                    Err(e) => {
                        log(&e);
                        drop(self.take(registry, which));
                        match bind(old) {
                            Ok(s) => {
                                let _ = self.install(registry, s);
                            }
                            Err(e) => log(&format!("Failed to restore the old listening sockets: {e}")),
                        }
                        return Err(Refused { param: "bind", why: "Failed to bind to specified addresses." });
                    }
                }
            } else {
                // Another port: the new sockets first, the old ones closed once they exist.
                let param = if new.port != old.port { "port" } else { "tls-port" };
                let socks = bind(new).map_err(|e| {
                    log(&e);
                    Refused { param, why: LISTEN_REFUSED }
                })?;
                drop(self.take(registry, which));
                if let Err(e) = self.install(registry, socks) {
                    log(&format!("Registering the listening sockets: {e}"));
                    return Err(Refused { param, why: LISTEN_REFUSED });
                }
            }
        }
        self.tls = tls;
        Ok(())
    }

    /// Remove (and deregister) the listeners `which` selects, returning them.
    fn take(&mut self, registry: &Registry, which: impl Fn(&Listener) -> bool) -> Vec<Listener> {
        for l in &mut self.open {
            let _ = registry.deregister(&mut l.sock);
        }
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.open).into_iter().partition(which);
        self.open = kept;
        // Tokens follow positions: register what stays under its new position.
        let stay = std::mem::take(&mut self.open);
        let _ = self.install(registry, stay);
        taken
    }

    fn install(&mut self, registry: &Registry, socks: Vec<Listener>) -> io::Result<()> {
        for mut l in socks {
            registry.register(&mut l.sock, Token(usize::MAX - self.open.len()), Interest::READABLE)?;
            self.open.push(l);
        }
        Ok(())
    }
}

const TLS_REFUSED: &str = "Unable to update TLS configuration. Check server logs.";
const LISTEN_REFUSED: &str = "Unable to listen on this port. Check server logs.";

fn configure(cfg: &ServerConfig) -> Result<Arc<rustls::ServerConfig>, ()> {
    TlsSettings::of(cfg).configure().map_err(|e| log(&e))
}

/// Linux's errno for an address family the machine does not support (no IPv6).
const EAFNOSUPPORT: i32 = 97;

/// A listening socket at `sock` with a queue of `backlog` (tcp-backlog); an IPv6 one
/// takes IPv6 only (as Redis sets IPV6_V6ONLY), so `*` and `::*` can both listen on one port.
fn listen_on(sock: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let s = socket2::Socket::new(socket2::Domain::for_address(sock), socket2::Type::STREAM, None)?;
    if sock.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&sock.into())?;
    s.listen(backlog)?;
    Ok(TcpListener::from_std(s.into()))
}

/// tcp-backlog, as the configuration says.
fn backlog(cfg: &ServerConfig) -> i32 {
    cfg.get("tcp-backlog").and_then(|v| v.parse().ok()).unwrap_or(511)
}

/// The unix socket at `path`, a file left there before replaced (as Redis unlinks it),
/// its permissions set to `perm` when not 0.
fn listen_unix(path: &str, perm: u32) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let sock = UnixListener::bind(path)?;
    if perm != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(sock)
}

/// Listening sockets on `port` at every address of `bind` (none for port 0, as Redis). An
/// address written `-addr` may be missing from the machine.
fn bind_all(bind: &[String], port: u16, tls: bool, backlog: i32) -> Result<Vec<Listener>, String> {
    if port == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for addr in bind {
        let optional = addr.starts_with('-');
        let host = addr.trim_start_matches('-');
        // `*` and `::*` are every IPv4 and every IPv6 address.
        let host = match host {
            "*" => "0.0.0.0",
            "::*" => "::",
            h => h,
        };
        let sock: SocketAddr = format!("{host}:{port}")
            .parse()
            .or_else(|_| format!("[{host}]:{port}").parse())
            .map_err(|e| format!("Could not create server TCP listening socket {addr}:{port}: {e}"))?;
        match listen_on(sock, backlog) {
            Ok(l) => out.push(Listener { sock: Sock::Tcp(l), tls }),
            // An optional address the machine lacks (or IPv6 it does not have).
            Err(e) if optional && matches!(e.kind(), ErrorKind::AddrNotAvailable | ErrorKind::Unsupported) => {}
            Err(e) if optional && e.raw_os_error() == Some(EAFNOSUPPORT) => {}
            Err(e) => return Err(format!("Could not create server TCP listening socket {sock}: {e}")),
        }
    }
    Ok(out)
}
