//! The replica side: REPLICAOF, ROLE, the handshake thread and the master's stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::mpsc::{channel, TryRecvError};
use std::time::{Duration, Instant};

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;
use mio::{Interest, Token};

use super::master::write_ack;
use super::state::{LinkState, MasterLink, Synced};
use crate::client::Client;
use crate::log::log;
use crate::server::Server;

impl Server {
    /// From the cron: connect, collect a finished handshake, acknowledge the offset.
    pub fn replication_cron(&mut self) {
        let my_port = self.local_port().unwrap_or(0);
        let Some(link) = &mut self.link else { return };
        let synced = match &link.state {
            LinkState::Connect { retry_at } if Instant::now() >= *retry_at => {
                log(&format!("Connecting to MASTER {}:{}", link.host, link.port));
                let (tx, rx) = channel();
                let job = Handshake {
                    host: link.host.clone(),
                    port: link.port,
                    my_port,
                    user: self.cfg.get("masteruser").filter(|u| !u.is_empty()),
                    pass: self.cfg.get("masterauth").filter(|p| !p.is_empty()),
                    timeout: Duration::from_secs(
                        self.cfg.get("repl-timeout").and_then(|t| t.parse().ok()).unwrap_or(60),
                    ),
                    rdb: sync_temp_file(&self.engine.config().dir),
                    source: self.cfg.get("bind-source-addr").and_then(|a| a.parse().ok()),
                    tls: (self.cfg.get("tls-replication").as_deref() == Some("yes"))
                        .then(|| crate::net::TlsSettings::of(&self.cfg).client_config()),
                };
                link.state = LinkState::Sync(rx);
                std::thread::spawn(move || {
                    let _ = tx.send(job.run());
                });
                return;
            }
            LinkState::Connect { .. } => return,
            LinkState::Sync(rx) => match rx.try_recv() {
                Ok(Ok(synced)) => synced,
                Ok(Err(e)) => {
                    log(&format!("Synchronization with MASTER {}:{} failed: {e}", link.host, link.port));
                    let _ = std::fs::remove_file(sync_temp_file(&self.engine.config().dir));
                    link.state = LinkState::Connect { retry_at: Instant::now() + Duration::from_secs(1) };
                    return;
                }
                Err(TryRecvError::Disconnected) => {
                    link.state = LinkState::Connect { retry_at: Instant::now() + Duration::from_secs(1) };
                    return;
                }
                Err(TryRecvError::Empty) => return,
            },
            LinkState::Up { id } => {
                let id = *id;
                if link.last_ack.elapsed() >= Duration::from_secs(1) {
                    link.last_ack = Instant::now();
                    let offset = link.offset;
                    if let Some(c) = self.clients.get_mut(&id) {
                        write_ack(&mut c.out, offset);
                        if !c.write_deferred {
                            c.write_deferred = true;
                            self.deferred_writes.push(id);
                        }
                    }
                }
                return;
            }
        };
        if let Err(e) = self.install_sync(synced) {
            log(&format!("Failed trying to load the MASTER synchronization DB from disk: {e}"));
            if let Some(link) = &mut self.link {
                link.state = LinkState::Connect { retry_at: Instant::now() + Duration::from_secs(1) };
            }
        }
    }

    /// The snapshot is downloaded: make it the dump file, load it, and serve the
    /// master's connection as a client whose commands run unanswered.
    fn install_sync(&mut self, synced: Synced) -> Result<(), String> {
        let dump = self.engine.config().dir.join(&self.engine.config().dbfilename);
        std::fs::rename(&synced.rdb, &dump).map_err(|e| format!("{}: {e}", dump.display()))?;
        log("MASTER <-> REPLICA sync: Loading DB in memory");
        let ks = self.read_dump_file()?;
        self.replace_dataset(ks)?;
        self.touch_every_watcher();
        self.tracking_flushed(None);
        if self.cfg.engine.appendonly {
            // The AOF must now say what the master's snapshot holds.
            self.jobs.rewrite_scheduled = true;
        }
        synced.sock.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = synced.sock.peer_addr().ok().map(crate::net::Peer::Tcp);
        let sock = mio::net::TcpStream::from_std(synced.sock);
        let mut conn = match synced.tls {
            Some(tls) => crate::net::Conn::tls_client(sock, *tls),
            None => crate::net::Conn::Plain(sock),
        };
        let id = self.next_client_id();
        self.poll.registry().register(&mut conn, Token(id as usize), Interest::READABLE).map_err(|e| e.to_string())?;
        let mut c = Client::new(id, conn, addr, true);
        c.master = true;
        c.reply_off = true;
        c.query = synced.rest;
        self.clients.insert(id, Box::new(c));
        self.pending.push_back(id);
        if let Some(link) = &mut self.link {
            link.state = LinkState::Up { id };
            link.offset = synced.offset;
            link.replid = synced.replid;
            link.last_io = Instant::now();
        }
        log("MASTER <-> REPLICA sync: Finished with success");
        Ok(())
    }

    /// The master's client consumed `n` bytes of the stream.
    pub fn master_processed(&mut self, n: usize) {
        if let Some(link) = &mut self.link {
            link.offset += n as u64;
            link.last_io = Instant::now();
        }
    }
}

/// REPLICAOF host port | NO ONE (and SLAVEOF).
pub fn replicaof(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if eq_ic(&a[1], "no") && eq_ic(&a[2], "one") {
        if let Some(link) = s.link.take() {
            if let LinkState::Up { id } = link.state {
                s.kill_client(id);
            }
            log("MASTER MODE enabled (user request from client)");
        }
        crate::log::set_replica(false);
        // CONFIG GET and CONFIG REWRITE report the master followed now.
        s.cfg.replicaof = None;
        return Reply::ok();
    }
    if c.replica {
        return Reply::err("ERR Command is not valid when client is a replica.");
    }
    let port = match parse_i64(&a[2]) {
        Some(p) if (0..=65535).contains(&p) => p as u16,
        _ => return Reply::err("ERR Invalid master port"),
    };
    let host = String::from_utf8_lossy(&a[1]).into_owned();
    if let Some(link) = &s.link {
        if link.host.eq_ignore_ascii_case(&host) && link.port == port {
            return Reply::simple("OK Already connected to specified master");
        }
    }
    s.follow_master(host, port);
    log(&format!("REPLICAOF {}:{port} enabled (user request from client)", String::from_utf8_lossy(&a[1])));
    Reply::ok()
}

impl Server {
    /// Become a replica of `host:port` (REPLICAOF, or `replicaof` in the configuration):
    /// the timer connects.
    pub(crate) fn follow_master(&mut self, host: String, port: u16) {
        if let Some(LinkState::Up { id }) = self.link.take().map(|l| l.state) {
            self.kill_client(id);
        }
        self.cfg.replicaof = Some((host.clone(), port));
        crate::log::set_replica(true);
        let now = Instant::now();
        self.link = Some(MasterLink {
            host,
            port,
            state: LinkState::Connect { retry_at: now },
            offset: 0,
            replid: String::new(),
            last_io: now,
            last_ack: now,
        });
    }
}

/// ROLE: master with its replicas, or replica with its master's state.
pub fn role(s: &mut Server, _: &mut Client, _: &[Vec<u8>]) -> Reply {
    let b = |t: &str| Reply::Bulk(t.as_bytes().to_vec());
    match &s.link {
        Some(link) => {
            let state = match link.state {
                LinkState::Connect { .. } => "connect",
                LinkState::Sync(_) => "sync",
                LinkState::Up { .. } => "connected",
            };
            let offset = if link.is_up() { link.offset as i64 } else { -1 };
            Reply::Array(vec![b("slave"), b(&link.host), Reply::Int(link.port.into()), b(state), Reply::Int(offset)])
        }
        None => {
            let offset = s.engine.persistence().replication.as_ref().map_or(0, |f| f.offset());
            let replicas = s
                .replicas
                .attached
                .iter()
                .map(|r| Reply::Array(vec![b(&r.addr), b(&r.port.to_string()), b(&r.ack.to_string())]))
                .collect();
            Reply::Array(vec![b("master"), Reply::Int(offset as i64), Reply::Array(replicas)])
        }
    }
}

/// The replica's side of the handshake, run on its own thread with blocking I/O.
struct Handshake {
    host: String,
    port: u16,
    my_port: u16,
    user: Option<String>,
    pass: Option<String>,
    timeout: Duration,
    rdb: PathBuf,
    /// `bind-source-addr`: the local address the link connects from.
    source: Option<std::net::IpAddr>,
    /// `tls-replication yes`: the context to connect with (or why there is none).
    tls: Option<Result<std::sync::Arc<rustls::ClientConfig>, String>>,
}

impl Handshake {
    fn run(self) -> Result<Synced, String> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("the master's address does not resolve")?;
        let sock = connect_from(self.source, addr, self.timeout).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(self.timeout)).map_err(|e| e.to_string())?;
        sock.set_write_timeout(Some(self.timeout)).map_err(|e| e.to_string())?;
        let _ = sock.set_nodelay(true);
        let link = match &self.tls {
            None => Link::Plain(sock),
            Some(config) => {
                let config = config.clone().map_err(|e| format!("TLS: {e}"))?;
                let name = crate::net::server_name(&self.host)?;
                let tls = rustls::ClientConnection::new(config, name).map_err(|e| format!("TLS: {e}"))?;
                Link::Tls(Box::new(rustls::StreamOwned::new(tls, sock)))
            }
        };
        let mut r = BufReader::new(link);
        let ask = |args: &[&str], r: &mut BufReader<Link>| -> Result<String, String> {
            let mut out = Vec::new();
            ferrokv::persist::feed::put_multibulk(&mut out, args);
            r.get_mut().write_all(&out).map_err(|e| e.to_string())?;
            read_line(r)
        };
        if let Some(pass) = &self.pass {
            let reply = match &self.user {
                Some(u) => ask(&["AUTH", u, pass], &mut r)?,
                None => ask(&["AUTH", pass], &mut r)?,
            };
            if reply.starts_with('-') {
                return Err(format!("Unable to AUTH to MASTER: {reply}"));
            }
        }
        let pong = ask(&["PING"], &mut r)?;
        if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
            return Err(format!("Error reply to PING from master: '{pong}'"));
        }
        log("Master replied to PING, replication can continue...");
        ask(&["REPLCONF", "listening-port", &self.my_port.to_string()], &mut r)?;
        ask(&["REPLCONF", "capa", "psync2"], &mut r)?;
        let full = ask(&["PSYNC", "?", "-1"], &mut r)?;
        let mut words = full.split(' ');
        if words.next() != Some("+FULLRESYNC") {
            return Err(format!("Unexpected reply to PSYNC from master: {full}"));
        }
        let replid = words.next().unwrap_or_default().to_string();
        let offset: u64 = words.next().and_then(|o| o.parse().ok()).ok_or("no offset in +FULLRESYNC")?;
        log(&format!("Full resync from master: {replid}:{offset}"));
        let bulk = read_line(&mut r)?;
        let len: u64 = bulk
            .strip_prefix('$')
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| format!("Bad protocol from MASTER, the first byte is not '$': {bulk}"))?;
        log(&format!("MASTER <-> REPLICA sync: receiving {len} bytes from master to disk"));
        let mut file = std::fs::File::create(&self.rdb).map_err(|e| format!("{}: {e}", self.rdb.display()))?;
        let copied = std::io::copy(&mut (&mut r).take(len), &mut file).map_err(|e| e.to_string())?;
        if copied != len {
            return Err(format!("the master closed the connection after {copied} of {len} bytes"));
        }
        file.sync_all().map_err(|e| e.to_string())?;
        let rest = r.buffer().to_vec();
        let (sock, tls) = match r.into_inner() {
            Link::Plain(sock) => (sock, None),
            Link::Tls(stream) => {
                let (tls, sock) = stream.into_parts();
                (sock, Some(Box::new(tls)))
            }
        };
        sock.set_read_timeout(None).map_err(|e| e.to_string())?;
        sock.set_write_timeout(None).map_err(|e| e.to_string())?;
        Ok(Synced { sock, tls, rest, replid, offset, rdb: self.rdb })
    }
}

/// A replica's link to its master while it syncs: blocking, over TCP or TLS.
enum Link {
    Plain(std::net::TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>>),
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(s) => s.read(buf),
            Link::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(s) => s.write(buf),
            Link::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Link::Plain(s) => s.flush(),
            Link::Tls(s) => s.flush(),
        }
    }
}

/// A TCP connection to `to`, from `source` when given (bind-source-addr).
fn connect_from(
    source: Option<std::net::IpAddr>,
    to: std::net::SocketAddr,
    timeout: Duration,
) -> std::io::Result<std::net::TcpStream> {
    let Some(ip) = source else { return std::net::TcpStream::connect_timeout(&to, timeout) };
    let sock = socket2::Socket::new(socket2::Domain::for_address(to), socket2::Type::STREAM, None)?;
    sock.bind(&std::net::SocketAddr::new(ip, 0).into())?;
    sock.connect_timeout(&to.into(), timeout)?;
    Ok(sock.into())
}

/// Where the master's snapshot is downloaded before it becomes the dump file.
fn sync_temp_file(dir: &std::path::Path) -> PathBuf {
    dir.join(format!("temp-{}-sync.rdb", std::process::id()))
}

/// One reply line, newlines the master sends as keepalives skipped.
fn read_line(r: &mut BufReader<Link>) -> Result<String, String> {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("the master closed the connection".into());
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if !line.is_empty() {
            return Ok(line.to_string());
        }
    }
}
