//! Replication, Redis's full-resync path in both directions.
//!
//! As a master: a client that sends SYNC or PSYNC gets a full resync (a snapshot of the
//! dataset as an RDB bulk, built at once rather than from a fork) and then every
//! propagated command, as Redis streams them; its REPLCONF ACKs are what WAIT counts.
//! As a replica (REPLICAOF host port): a thread does the handshake and downloads the
//! master's snapshot into the dump file; the main loop loads it and runs the stream the
//! master sends on, unanswered, acknowledging the offset every second.
//! Partial resync (the backlog) is not here yet: a broken link means a full resync.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::persist::replication::ReplicationFeed;
use ferrokv::Reply;
use mio::{Interest, Token};

use crate::blocking::Op;
use crate::client::Client;
use crate::server::{log, Server};

/// The clients attached as replicas, and what each acknowledged.
#[derive(Debug, Default)]
pub struct Replicas {
    attached: Vec<Attached>,
    /// When the stream last carried a PING (every repl-ping-replica-period seconds).
    last_ping: Option<Instant>,
    /// A WAIT asked for acknowledgements: the next round sends REPLCONF GETACK.
    want_acks: bool,
}

#[derive(Debug)]
struct Attached {
    id: u64,
    addr: String,
    port: u16,
    ack: u64,
    /// The offset its AOF fsynced (REPLCONF ACK ... FACK, Redis 7.2+).
    fack: u64,
}

impl Replicas {
    pub fn len(&self) -> usize {
        self.attached.len()
    }

    pub fn is_empty(&self) -> bool {
        self.attached.is_empty()
    }

    /// Replicas that acknowledged the stream up to `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.attached.iter().filter(|r| r.ack >= offset).count()
    }

    /// Replicas whose AOF fsynced the stream up to `offset`.
    pub fn fsynced(&self, offset: u64) -> usize {
        self.attached.iter().filter(|r| r.fack >= offset).count()
    }

    /// INFO replication's `slaveN:` lines.
    pub fn info_lines(&self) -> Vec<(String, String)> {
        self.attached
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (format!("slave{i}"), format!("ip={},port={},state=online,offset={},lag=0", r.addr, r.port, r.ack))
            })
            .collect()
    }
}

/// This server's master, when it is a replica.
#[derive(Debug)]
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    state: LinkState,
    /// The stream offset processed (Redis's slave_repl_offset and master_repl_offset).
    pub offset: u64,
    pub replid: String,
    last_io: Instant,
    last_ack: Instant,
}

#[derive(Debug)]
enum LinkState {
    /// To connect at the next cron (after `retry_at`).
    Connect { retry_at: Instant },
    /// The handshake and the snapshot download run on a thread.
    Sync(Receiver<Result<Synced, String>>),
    /// Streaming: the master's connection is client `id`.
    Up { id: u64 },
}

/// What the handshake thread hands over: the connection after the snapshot, the bytes
/// of the stream already read, and where the snapshot was written.
#[derive(Debug)]
struct Synced {
    sock: std::net::TcpStream,
    rest: Vec<u8>,
    replid: String,
    offset: u64,
    rdb: PathBuf,
}

impl MasterLink {
    pub fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Up { .. })
    }

    pub fn is_syncing(&self) -> bool {
        matches!(self.state, LinkState::Sync(_))
    }

    pub fn last_io_secs(&self) -> u64 {
        self.last_io.elapsed().as_secs()
    }
}

// ------------------------------------------------------------------ master side

/// SYNC / PSYNC replid offset: a full resync. PSYNC is answered `+FULLRESYNC replid offset`
/// first; then the snapshot as `$len` and the bytes (no CRLF after them), then the stream.
pub fn sync(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if c.replica {
        // Redis ignores SYNC from a client that is already a replica.
        c.raw_reply = true;
        return Reply::ok();
    }
    if s.link.as_ref().is_some_and(|l| !l.is_up()) {
        return Reply::err("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    let now = s.engine.clock.now_ms();
    let rdb = match ferrokv::persist::snapshot::write_rdb(Vec::new(), &s.engine.ks, &s.engine.cfg, now, false) {
        Ok(b) => b,
        Err(e) => return Reply::error(format!("ERR cannot build the snapshot for the replica: {e}")),
    };
    let start = s.link.as_ref().map_or(0, |l| l.offset);
    let feed = s.engine.persist.replication.get_or_insert_with(|| ReplicationFeed::starting_at(start));
    // What was fed before this point is in the snapshot.
    feed.take();
    feed.restart_select();
    let offset = feed.offset();
    if eq_ic(&a[0], "psync") {
        c.out.extend_from_slice(format!("+FULLRESYNC {} {offset}\r\n", s.run_id).as_bytes());
    }
    c.out.extend_from_slice(format!("${}\r\n", rdb.len()).as_bytes());
    c.out.extend_from_slice(&rdb);
    c.raw_reply = true;
    // A master does not answer its replica's commands (REPLCONF ACK).
    c.reply_off = true;
    c.replica = true;
    let addr = c.addr.map(|a| a.ip().to_string()).unwrap_or_default();
    s.replicas.attached.push(Attached { id: c.id, addr: addr.clone(), port: c.replica_port, ack: 0, fack: 0 });
    log(&format!(
        "Replica {addr}:{} asks for synchronization; full resync with {} bytes of snapshot",
        c.replica_port,
        rdb.len()
    ));
    Reply::ok()
}

/// REPLCONF option value ...: what a replica says about itself (listening-port, capa),
/// its acknowledgements (ACK offset), and a master's request for one (GETACK).
pub fn replconf(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len().is_multiple_of(2) {
        return Reply::err("ERR syntax error");
    }
    let opt = a[1].to_ascii_lowercase();
    match opt.as_slice() {
        b"ack" if c.replica => {
            c.raw_reply = true;
            let ack = parse_i64(&a[2]).unwrap_or(0).max(0) as u64;
            let fack = (a.len() >= 5 && eq_ic(&a[3], "fack")).then(|| parse_i64(&a[4]).unwrap_or(0).max(0) as u64);
            if let Some(r) = s.replicas.attached.iter_mut().find(|r| r.id == c.id) {
                r.ack = r.ack.max(ack);
                if let Some(f) = fack {
                    r.fack = r.fack.max(f);
                }
            }
            s.serve_waits();
            Reply::ok()
        }
        b"getack" if c.master => {
            c.raw_reply = true;
            if let Some(link) = &s.link {
                write_ack(&mut c.out, link.offset);
            }
            Reply::ok()
        }
        b"listening-port" => {
            match parse_i64(&a[2]).filter(|p| (0..=65535).contains(p)) {
                Some(p) => c.replica_port = p as u16,
                None => {
                    return Reply::error(format!(
                        "ERR Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&a[1])
                    ))
                }
            }
            Reply::ok()
        }
        _ if c.replica || c.master => {
            c.raw_reply = true;
            Reply::ok()
        }
        _ => Reply::ok(),
    }
}

fn write_ack(out: &mut Vec<u8>, offset: u64) {
    let off = offset.to_string();
    ferrokv::persist::feed::put_multibulk(out, &[b"REPLCONF".as_slice(), b"ACK", off.as_bytes()]);
}

/// WAIT numreplicas timeout: how many replicas acknowledged every write made before it,
/// blocking until `numreplicas` did or the timeout (milliseconds, 0 for none) passed.
pub fn wait(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if s.link.is_some() {
        return Reply::err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.");
    }
    let Some(wanted) = parse_i64(&a[1]) else {
        return Reply::not_integer();
    };
    let timeout = match parse_i64(&a[2]) {
        None => return Reply::err("ERR timeout is not an integer or out of range"),
        Some(t) if t < 0 => return Reply::err("ERR timeout is negative"),
        Some(t) => t as u64,
    };
    // Everything propagated so far, this client's writes among it.
    s.feed_replicas();
    let offset = s.engine.persist.replication.as_ref().map_or(0, |f| f.offset());
    let acked = s.replicas.acked(offset);
    if acked as i64 >= wanted || c.in_exec || c.deny_blocking {
        return Reply::Int(acked as i64);
    }
    s.replicas.want_acks = true;
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout));
    s.park(c, Op::Wait { offset, replicas: wanted.max(0) as usize }, Vec::new(), deadline);
    Reply::Nil
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2): `[local, replicas]`, how many AOFs
/// fsynced every write made before it: ours at once (the fsync happens here), the
/// replicas' as their acknowledgements say, waiting up to the timeout for `numreplicas`.
pub fn waitaof(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if s.link.is_some() {
        return Reply::err("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    let (Some(local), Some(wanted)) = (parse_i64(&a[1]), parse_i64(&a[2])) else {
        return Reply::not_integer();
    };
    let timeout = match parse_i64(&a[3]) {
        None => return Reply::err("ERR timeout is not an integer or out of range"),
        Some(t) if t < 0 => return Reply::err("ERR timeout is negative"),
        Some(t) => t as u64,
    };
    let aof_on = s.engine.persist.aof.as_ref().is_some_and(|f| f.is_open());
    if local > 0 && !aof_on {
        return Reply::err("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
    }
    let now = s.engine.clock.now_ms();
    let synced = aof_on && s.engine.persist.aof.as_mut().is_some_and(|f| f.fsync(now));
    s.feed_replicas();
    let offset = s.engine.persist.replication.as_ref().map_or(0, |f| f.offset());
    let fsynced = s.replicas.fsynced(offset);
    let done = (local <= 0 || synced) && fsynced as i64 >= wanted;
    if done || c.in_exec || c.deny_blocking || (local > 0 && !synced) {
        return waitaof_reply(synced, fsynced);
    }
    s.replicas.want_acks = true;
    let deadline = (timeout > 0).then(|| Instant::now() + Duration::from_millis(timeout));
    s.park(c, Op::WaitAof { offset, local: synced, replicas: wanted.max(0) as usize }, Vec::new(), deadline);
    Reply::Nil
}

pub fn waitaof_reply(local: bool, replicas: usize) -> Reply {
    Reply::Array(vec![Reply::Int(i64::from(local)), Reply::Int(replicas as i64)])
}

impl Server {
    /// Hand the commands propagated since the last call to every replica.
    pub fn feed_replicas(&mut self) {
        let Some(feed) = self.engine.persist.replication.as_mut() else { return };
        if std::mem::take(&mut self.replicas.want_acks) {
            feed.getack();
        }
        let bytes = feed.take();
        if bytes.is_empty() {
            return;
        }
        for r in &self.replicas.attached {
            let Some(c) = self.clients.get_mut(&r.id) else { continue };
            c.out.extend_from_slice(&bytes);
            if !c.write_deferred {
                c.write_deferred = true;
                self.deferred_writes.push(r.id);
            }
        }
    }

    /// From the cron: a PING in the stream every repl-ping-replica-period seconds, so
    /// replicas see the master alive while no write comes.
    pub fn ping_replicas(&mut self) {
        if self.replicas.is_empty() {
            return;
        }
        let period = self.cfg.get("repl-ping-replica-period").and_then(|p| p.parse().ok()).unwrap_or(10u64);
        let last = *self.replicas.last_ping.get_or_insert_with(Instant::now);
        if last.elapsed().as_secs() >= period {
            self.replicas.last_ping = Some(Instant::now());
            if let Some(feed) = self.engine.persist.replication.as_mut() {
                feed.ping();
            }
        }
    }

    /// Answer the WAITs whose replicas acknowledged enough.
    fn serve_waits(&mut self) {
        let done: Vec<(u64, Reply)> = self
            .clients
            .values()
            .filter_map(|c| match c.blocked.as_ref().map(|b| &b.op) {
                Some(Op::Wait { offset, replicas }) => {
                    let n = self.replicas.acked(*offset);
                    (n >= *replicas).then_some((c.id, Reply::Int(n as i64)))
                }
                Some(Op::WaitAof { offset, local, replicas }) => {
                    let n = self.replicas.fsynced(*offset);
                    (n >= *replicas).then(|| (c.id, waitaof_reply(*local, n)))
                }
                _ => None,
            })
            .collect();
        for (id, reply) in done {
            self.end_wait(id, Some(reply));
        }
    }

    /// A connection is gone: a replica stops being fed (with none left the stream
    /// stops); our master's means a new full resync.
    pub fn forget_replica(&mut self, c: &Client) {
        if c.master {
            if let Some(link) = &mut self.link {
                if matches!(link.state, LinkState::Up { id } if id == c.id) {
                    log("Connection with master lost.");
                    link.state = LinkState::Connect { retry_at: Instant::now() };
                }
            }
        }
        if !c.replica {
            return;
        }
        self.replicas.attached.retain(|r| r.id != c.id);
        if self.replicas.is_empty() && self.link.is_none() {
            self.engine.persist.replication = None;
        }
        log(&format!("Connection with replica {} lost.", c.addr.map(|a| a.to_string()).unwrap_or_default()));
    }

    // -------------------------------------------------------------- replica side

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
                    rdb: sync_temp_file(&self.engine.cfg.dir),
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
                    let _ = std::fs::remove_file(sync_temp_file(&self.engine.cfg.dir));
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
        let dump = self.engine.cfg.dir.join(&self.engine.cfg.dbfilename);
        std::fs::rename(&synced.rdb, &dump).map_err(|e| format!("{}: {e}", dump.display()))?;
        log("MASTER <-> REPLICA sync: Loading DB in memory");
        let ks = self.read_dump_file()?;
        self.replace_dataset(ks)?;
        self.touch_every_watcher();
        if self.cfg.engine.appendonly {
            // The AOF must now say what the master's snapshot holds.
            self.rewrite_scheduled = true;
        }
        synced.sock.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = synced.sock.peer_addr().ok();
        let mut sock = mio::net::TcpStream::from_std(synced.sock);
        let id = self.next_client_id();
        self.poll.registry().register(&mut sock, Token(id as usize), Interest::READABLE).map_err(|e| e.to_string())?;
        let mut c = Client::new(id, sock, addr, true);
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
    if let Some(LinkState::Up { id }) = s.link.take().map(|l| l.state) {
        s.kill_client(id);
    }
    let now = Instant::now();
    s.link = Some(MasterLink {
        host: host.clone(),
        port,
        state: LinkState::Connect { retry_at: now },
        offset: 0,
        replid: String::new(),
        last_io: now,
        last_ack: now,
    });
    log(&format!("REPLICAOF {host}:{port} enabled (user request from client)"));
    Reply::ok()
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
            let offset = s.engine.persist.replication.as_ref().map_or(0, |f| f.offset());
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
}

impl Handshake {
    fn run(self) -> Result<Synced, String> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("the master's address does not resolve")?;
        let sock = std::net::TcpStream::connect_timeout(&addr, self.timeout).map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(self.timeout)).map_err(|e| e.to_string())?;
        let _ = sock.set_nodelay(true);
        let mut w = sock.try_clone().map_err(|e| e.to_string())?;
        let mut r = BufReader::new(sock);
        let mut ask = |args: &[&str], r: &mut BufReader<std::net::TcpStream>| -> Result<String, String> {
            let mut out = Vec::new();
            ferrokv::persist::feed::put_multibulk(&mut out, args);
            w.write_all(&out).map_err(|e| e.to_string())?;
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
        let sock = r.into_inner();
        sock.set_read_timeout(None).map_err(|e| e.to_string())?;
        Ok(Synced { sock, rest, replid, offset, rdb: self.rdb })
    }
}

/// Where the master's snapshot is downloaded before it becomes the dump file.
fn sync_temp_file(dir: &std::path::Path) -> PathBuf {
    dir.join(format!("temp-{}-sync.rdb", std::process::id()))
}

/// One reply line, newlines the master sends as keepalives skipped.
fn read_line(r: &mut BufReader<std::net::TcpStream>) -> Result<String, String> {
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
