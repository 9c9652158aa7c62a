//! The replica side: REPLICAOF, ROLE, the handshake thread and the master's stream.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, TryRecvError};
use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::keyspace::Keyspace;
use ferrokv::persist::load::{load_rdb_from, load_rdb_watched, LoadWatch};
use ferrokv::persist::replication::ReplicationFeed;
use ferrokv::persist::PersistError;
use ferrokv::source::Source;
use ferrokv::Reply;
use mio::{Interest, Token};

use super::backlog::Backlog;
use super::master::write_ack;
use super::state::{LinkState, MasterLink, SyncKind, SyncPhase, Synced};
use crate::client::Client;
use crate::log::log;
use crate::server::Server;

impl Server {
    /// From the cron: connect, collect a finished handshake, acknowledge the offset.
    pub fn replication_cron(&mut self) {
        self.failover_cron();
        let my_port = self.local_port().unwrap_or(0);
        let Some(link) = &mut self.link else { return };
        let synced = match &link.state {
            LinkState::Connect { retry_at } if Instant::now() >= *retry_at => {
                log(&format!("Connecting to MASTER {}:{}", link.host, link.port));
                let (tx, rx) = channel();
                let phase = SyncPhase::default();
                let load = match self.cfg.get("repl-diskless-load").as_deref() {
                    Some("swapdb") => DisklessLoad::Swapdb,
                    Some("on-empty-db") if self.engine.keyspace().is_empty() => DisklessLoad::OnEmptyDb,
                    _ => DisklessLoad::Disabled,
                };
                let job = Handshake {
                    phase: phase.clone(),
                    load,
                    followed: self.replicas.history.replid().to_string(),
                    failover: self.replicas.failover.as_ref().is_some_and(|f| f.in_progress),
                    psync: link.can_continue.then(|| (self.replicas.history.replid().to_string(), link.offset + 1)),
                    host: link.host.clone(),
                    port: link.port,
                    my_port,
                    user: self.cfg.get("masteruser").filter(|u| !u.is_empty()),
                    pass: self.cfg.get("masterauth").filter(|p| !p.is_empty()),
                    timeout: Duration::from_secs(
                        self.cfg.get("repl-timeout").and_then(|t| t.parse().ok()).unwrap_or(60),
                    ),
                    rdb: sync_temp_file(&self.engine.config().dir),
                    databases: self.engine.config().databases,
                    limits: self.engine.config().limits,
                    key_delay_us: self.engine.config().key_load_delay_us,
                    source: self.cfg.get("bind-source-addr").and_then(|a| a.parse().ok()),
                    tls: (self.cfg.get("tls-replication").as_deref() == Some("yes"))
                        .then(|| crate::net::TlsSettings::of(&self.cfg).client_config()),
                };
                link.state = LinkState::Sync(rx, phase);
                std::thread::spawn(move || {
                    let _ = tx.send(job.run());
                });
                return;
            }
            LinkState::Connect { .. } => return,
            LinkState::Sync(rx, phase) => match rx.try_recv() {
                Ok(Ok(synced)) => synced,
                Ok(Err(e)) => {
                    if e.starts_with("Timeout ") {
                        crate::log::warn(&e);
                    } else {
                        log(&format!("Synchronization with MASTER {}:{} failed: {e}", link.host, link.port));
                    }
                    let _ = std::fs::remove_file(sync_temp_file(&self.engine.config().dir));
                    link.state = LinkState::Connect { retry_at: Instant::now() + Duration::from_secs(1) };
                    if self.replicas.failover.as_ref().is_some_and(|f| f.in_progress) {
                        self.abort_failover("Failover target rejected psync request");
                    }
                    return;
                }
                Err(TryRecvError::Disconnected) => {
                    link.state = LinkState::Connect { retry_at: Instant::now() + Duration::from_secs(1) };
                    return;
                }
                Err(TryRecvError::Empty) => {
                    let secs = self.cfg.get("repl-timeout").and_then(|t| t.parse().ok()).unwrap_or(60);
                    phase.timed_out_after(Duration::from_secs(secs));
                    if phase.get() == SyncPhase::LOADING_FILE {
                        // As Redis before it loads a downloaded snapshot: the old data
                        // goes now (clients get -LOADING), not after the new is in memory.
                        phase.set(SyncPhase::LOADING_FILE_FLUSHED);
                        log("MASTER <-> REPLICA sync: Flushing old data");
                        let empty = Keyspace::new(self.engine.config().databases);
                        if let Err(e) = self.replace_dataset(empty) {
                            crate::log::warn(&e);
                        }
                    }
                    return;
                }
            },
            LinkState::Up { id } => {
                let id = *id;
                if link.last_ack.elapsed() >= Duration::from_secs(1) {
                    link.last_ack = Instant::now();
                    let offset = link.offset;
                    if let Some(c) = self.clients.get_mut(&id) {
                        write_ack(&mut c.out, offset);
                        c.defer_write(&mut self.deferred_writes);
                    }
                }
                return;
            }
        };
        let installed = match synced.how {
            SyncKind::Full { replid, offset, dataset, rdb, stream_db } => self
                .install_snapshot(*dataset, rdb.as_deref(), replid, offset, stream_db)
                .map_err(|e| format!("Failed trying to load the MASTER synchronization DB from disk: {e}")),
            SyncKind::Continue { replid } => {
                self.continue_stream(replid);
                Ok(())
            }
        };
        let installed = installed.and_then(|()| {
            let db = self.link.as_ref().map_or(0, |l| l.db);
            self.serve_master(synced.sock, synced.tls, synced.rest, db)
        });
        self.failover_done();
        match installed {
            Ok(()) => log("MASTER <-> REPLICA sync: Finished with success"),
            Err(e) => {
                log(&e);
                if let Some(link) = &mut self.link {
                    link.state = LinkState::Connect { retry_at: Instant::now() + Duration::from_secs(1) };
                }
            }
        }
    }

    /// A full resync: the master's snapshot, loaded by the handshake thread, becomes the
    /// dataset (and the file it was downloaded to, if any, the dump file), and the
    /// history is the master's from `offset`. Our own replicas must resync.
    fn install_snapshot(
        &mut self,
        ks: Keyspace,
        rdb: Option<&Path>,
        replid: String,
        offset: u64,
        stream_db: usize,
    ) -> Result<(), String> {
        self.disconnect_replicas();
        if let Some(rdb) = rdb {
            let dump = self.engine.config().dir.join(&self.engine.config().dbfilename);
            std::fs::rename(rdb, &dump).map_err(|e| format!("{}: {e}", dump.display()))?;
        }
        self.replace_dataset(ks)?;
        self.touch_every_watcher();
        self.tracking_flushed(None);
        if self.cfg.engine.appendonly {
            // The AOF must now say what the master's snapshot holds.
            self.jobs.rewrite_scheduled = true;
        }
        let size = self.backlog_size();
        let history = &mut self.replicas.history;
        history.replid = replid;
        history.clear_second();
        history.backlog = Some(Backlog::new(size, offset));
        if let Some(link) = &mut self.link {
            link.offset = offset;
            link.db = stream_db;
            link.can_continue = true;
            link.local_ttls.clear();
        }
        Ok(())
    }

    /// A partial resync: the stream goes on from our offset. When the master names
    /// another ID, ours becomes the previous one and our replicas must reconnect to
    /// learn it.
    fn continue_stream(&mut self, replid: Option<String>) {
        log("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
        let offset = self.link.as_ref().map_or(0, |l| l.offset);
        let size = self.backlog_size();
        self.replicas.history.keep_backlog(size, offset);
        if let Some(id) = replid.filter(|id| *id != self.replicas.history.replid) {
            log(&format!("Master replication ID changed to {id}"));
            self.replicas.history.shift(id, offset);
            self.disconnect_replicas();
        }
        log("Successful partial resynchronization with master.");
    }

    /// Serve the master's connection as a client whose commands run unanswered, in
    /// the database its stream has selected.
    fn serve_master(
        &mut self,
        sock: std::net::TcpStream,
        tls: Option<Box<rustls::ClientConnection>>,
        rest: Vec<u8>,
        db: usize,
    ) -> Result<(), String> {
        sock.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = sock.peer_addr().ok().map(crate::net::Peer::Tcp);
        let sock = mio::net::TcpStream::from_std(sock);
        let mut conn = match tls {
            Some(tls) => crate::net::Conn::tls_client(sock, *tls),
            None => crate::net::Conn::Plain(sock),
        };
        let id = self.next_client_id();
        self.poll.registry().register(&mut conn, Token(id as usize), Interest::READABLE).map_err(|e| e.to_string())?;
        let mut c = Client::new(id, conn, addr, true);
        c.master = true;
        c.reply_off = true;
        c.query = rest;
        c.session.db = db;
        self.clients.insert(id, Box::new(c));
        self.pending.push_back(id);
        if let Some(link) = &mut self.link {
            link.state = LinkState::Up { id };
            link.last_io = Instant::now();
            link.unapplied.clear();
        }
        Ok(())
    }

    /// The master's client read `bytes` of the stream: part of a command, or a command
    /// it ran. Unless `unfinished` (a partial command, or inside a MULTI) the stream is
    /// applied up to here: the offset moves, and the bytes go on, unchanged, to the
    /// backlog and our replicas.
    pub fn master_processed(&mut self, bytes: &[u8], unfinished: bool) {
        let Some(link) = &mut self.link else { return };
        link.last_io = Instant::now();
        if unfinished {
            link.unapplied.extend_from_slice(bytes);
            return;
        }
        link.offset += (link.unapplied.len() + bytes.len()) as u64;
        let held = std::mem::take(&mut link.unapplied);
        self.send_to_replicas(&held);
        self.send_to_replicas(bytes);
    }

    /// A command of the master's stream answered an error (the data may now differ from
    /// the master's): Redis's warning, the end of the backlog, and a crash when
    /// propagation-error-behavior says so on a read-only replica.
    pub(crate) fn master_command_failed(&mut self, c: &Client, error: &str) {
        let error: String = error.chars().take(4096).collect();
        crate::log::warn(&format!(
            "== CRITICAL == This replica is sending an error to its master: '{error}' after processing the command '{}'",
            c.last_cmd
        ));
        if let Some(tail) = self.replicas.history.backlog.as_ref().and_then(|b| b.tail(256)) {
            crate::log::warn(&format!("Latest backlog is: '{}'", ferrokv::format::rdb::escape_key(&tail)));
        }
        self.stats.unexpected_error_replies += 1;
        let read_only = self.cfg.get("replica-read-only").as_deref() == Some("yes");
        let behavior = self.cfg.get("propagation-error-behavior").unwrap_or_default();
        if read_only && behavior.starts_with("panic") {
            crate::log::warn(&format!(
                "This replica panicked sending an error to its master after processing the command '{}'",
                c.last_cmd
            ));
            std::process::abort();
        }
    }

    /// Close every replica's link (they reconnect, and resync as our history allows).
    pub(super) fn disconnect_replicas(&mut self) {
        let ids: Vec<u64> = self.replicas.attached.iter().map(|r| r.id).collect();
        for id in ids {
            self.kill_client(id);
        }
    }
}

/// REPLICAOF host port | NO ONE (and SLAVEOF).
pub fn replicaof(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if s.replicas.failover.is_some() {
        return Reply::err("ERR REPLICAOF not allowed while failing over.");
    }
    if eq_ic(&a[1], "no") && eq_ic(&a[2], "one") {
        if s.become_master() {
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
    s.follow_master(host, port);
    log(&format!("REPLICAOF {}:{port} enabled (user request from client)", String::from_utf8_lossy(&a[1])));
    Reply::ok()
}

impl Server {
    /// Become a replica of `host:port` (REPLICAOF, or `replicaof` in the configuration):
    /// the timer connects.
    /// Our data follows the stream it followed so far: the handshake asks the new master
    /// to continue it (a master turned replica offers its own history).
    pub(crate) fn follow_master(&mut self, host: String, port: u16) {
        let (offset, can_continue, db) = match self.link.take() {
            Some(old) => {
                old.abandon();
                let mut db = old.db;
                let mut was_up = false;
                if let LinkState::Up { id } = old.state {
                    if let Some(c) = self.clients.get(&id) {
                        db = c.session.db;
                    }
                    was_up = true;
                    self.kill_client(id);
                }
                (old.offset, old.can_continue || was_up, db)
            }
            None => {
                self.feed_replicas();
                let offset = self.repl_offset();
                let size = self.backlog_size();
                self.replicas.history.keep_backlog(size, offset);
                // A replica's stream is its master's, never its own commands'.
                self.engine.persistence_mut().replication = None;
                (offset, true, 0)
            }
        };
        self.unblock_for_role_change();
        self.cfg.replicaof = Some((host.clone(), port));
        crate::log::set_replica(true);
        let now = Instant::now();
        self.link = Some(MasterLink {
            host,
            port,
            state: LinkState::Connect { retry_at: now },
            offset,
            can_continue,
            db,
            unapplied: Vec::new(),
            local_ttls: Default::default(),
            last_io: now,
            last_ack: now,
        });
        self.refresh_expire_mode();
    }

    /// A server about to follow a master ends its blocked clients' commands with an
    /// error and closes them after it (their command is part-way, and the master's stream
    /// must be the only writer), as Redis does; a client waiting for a pause to end
    /// stays, its command runs (or is refused) from the start.
    fn unblock_for_role_change(&mut self) {
        let blocked: Vec<(u64, String)> =
            self.clients.values().filter(|c| c.blocked.is_some()).map(|c| (c.id, c.last_cmd.to_string())).collect();
        // Redis 7.2 on counts it a failed call of the blocked command.
        let counted = self.engine.config().version.behaves_as() >= ServerVersion::Redis72;
        for (id, cmd) in blocked {
            let why = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";
            if self.end_wait(id, Some(Reply::err(why))) && counted {
                self.count_failed_call(&cmd);
            }
            if let Some(c) = self.clients.get_mut(&id) {
                c.close_after_reply = true;
            }
        }
    }

    /// Keys the command of one of our own clients wrote: those with a TTL now are ours
    /// to expire.
    pub(crate) fn note_local_ttls<K: AsRef<[u8]>>(&mut self, modified: &[(usize, K)]) {
        if self.link.is_none() {
            return;
        }
        let with_ttl: Vec<(usize, Vec<u8>)> = modified
            .iter()
            .filter(|(db, key)| self.has_ttl(*db, key.as_ref()))
            .map(|(db, key)| (*db, key.as_ref().to_vec()))
            .collect();
        if let Some(link) = &mut self.link {
            link.local_ttls.extend(with_ttl);
        }
    }

    /// From the cron: the keys our own clients gave a TTL expire here (deleted, the DEL
    /// in our AOF); those gone or without a TTL now are forgotten.
    pub(crate) fn expire_local_ttls(&mut self) {
        let Some(link) = &mut self.link else { return };
        if link.local_ttls.is_empty() {
            return;
        }
        let keys = std::mem::take(&mut link.local_ttls);
        let mut kept = std::collections::HashSet::new();
        let mode = self.engine.mode();
        self.engine.set_mode(ferrokv::command::ExpireMode::Master);
        for (db, key) in keys {
            if self.has_ttl(db, &key) && !self.engine.expire_if_needed(db, &key) {
                kept.insert((db, key));
            }
        }
        self.engine.set_mode(mode);
        self.touch_modified_here();
        if let Some(link) = &mut self.link {
            link.local_ttls.extend(kept);
        }
    }

    /// After the start's load (Redis's loadDataFromDisk): an RDB that names the stream
    /// its data followed lets a replica ask to continue it, and a master's former
    /// replicas continue from it (its ID becomes our previous one); the keys the load
    /// skipped as expired reach them as DELs.
    pub(crate) fn resume_history(&mut self) {
        let load = &mut self.engine.persistence_mut().rdb_load;
        let (repl, expired) = (load.repl.take(), std::mem::take(&mut load.expired_keys));
        let repl = repl.filter(|_| !self.cfg.engine.appendonly);
        let size = self.backlog_size();
        if let Some(link) = &mut self.link {
            match repl {
                Some(r) => {
                    self.replicas.history.replid = r.replid;
                    self.replicas.history.backlog = Some(Backlog::new(size, r.offset));
                    link.offset = r.offset;
                    link.db = r.stream_db;
                }
                None => link.can_continue = false,
            }
            return;
        }
        let Some(r) = repl else { return };
        let history = &mut self.replicas.history;
        history.replid = r.replid;
        history.shift(super::new_replid(), r.offset);
        history.backlog = Some(Backlog::new(size, r.offset));
        history.alone_since = Some(Instant::now());
        let mut feed = ReplicationFeed::starting_at(r.offset);
        let del: &[u8] = if self.cfg.engine.lazyfree_lazy_expire { b"UNLINK" } else { b"DEL" };
        for (db, key) in expired {
            feed.unit(&[(db, vec![del.to_vec(), key])]);
        }
        self.engine.persistence_mut().replication = Some(feed);
        self.feed_replicas();
    }

    /// Stop following a master (REPLICAOF NO ONE, a FAILOVER request, an aborted
    /// failover); false when this server was a master already.
    pub(crate) fn become_master(&mut self) -> bool {
        let Some(link) = self.link.take() else { return false };
        link.abandon();
        if let LinkState::Up { id } = link.state {
            self.kill_client(id);
        }
        self.promote(link.offset);
        crate::log::set_replica(false);
        // CONFIG GET and CONFIG REWRITE report the master followed now.
        self.cfg.replicaof = None;
        self.refresh_expire_mode();
        true
    }

    /// A replica becomes a master at `offset`: its history goes on under a new ID, the
    /// old one valid up to here, so its replicas (told by a reconnection) and its former
    /// master can continue from it.
    fn promote(&mut self, offset: u64) {
        self.replicas.history.shift(super::new_replid(), offset);
        let size = self.backlog_size();
        self.replicas.history.keep_backlog(size, offset);
        self.engine.persistence_mut().replication = Some(ReplicationFeed::starting_at(offset));
        self.disconnect_replicas();
    }
}

/// ROLE: master with its replicas, or replica with its master's state.
pub fn role(s: &mut Server, _: &mut Client, _: &[Vec<u8>]) -> Reply {
    let b = |t: &str| Reply::Bulk(t.as_bytes().to_vec());
    match &s.link {
        Some(link) => {
            let state = match link.state {
                LinkState::Connect { .. } => "connect",
                LinkState::Sync(_, ref phase) => match phase.get() {
                    SyncPhase::CONNECTING => "connecting",
                    SyncPhase::HANDSHAKE => "handshake",
                    _ => "sync",
                },
                LinkState::Up { .. } => "connected",
            };
            let offset = if link.is_up() { link.offset as i64 } else { -1 };
            Reply::Array(vec![b("slave"), b(&link.host), Reply::Int(link.port.into()), b(state), Reply::Int(offset)])
        }
        None => {
            let offset = s.repl_offset();
            let replicas = s
                .replicas
                .attached
                .iter()
                .filter(|r| r.online())
                .map(|r| Reply::Array(vec![b(&r.addr), b(&r.port.to_string()), b(&r.ack.to_string())]))
                .collect();
            Reply::Array(vec![b("master"), Reply::Int(offset as i64), Reply::Array(replicas)])
        }
    }
}

/// repl-diskless-load, as it applies to a sync: whether the snapshot is loaded from the
/// socket as it comes, and what clients see meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DisklessLoad {
    Disabled,
    Swapdb,
    /// on-empty-db, when there were no keys.
    OnEmptyDb,
}

/// The replica's side of the handshake, run on its own thread with blocking I/O.
struct Handshake {
    phase: SyncPhase,
    /// How the snapshot is loaded, which decides what clients see meanwhile.
    load: DisklessLoad,
    /// The replication ID our data follows: a full resync under the same ID is loaded
    /// asynchronously (with swapdb).
    followed: String,
    /// A FAILOVER hands over to this master: PSYNC says so.
    failover: bool,
    /// The stream to ask to continue, and from which offset.
    psync: Option<(String, u64)>,
    host: String,
    port: u16,
    my_port: u16,
    user: Option<String>,
    pass: Option<String>,
    timeout: Duration,
    /// Where the snapshot is downloaded when it is not loaded from the socket.
    rdb: PathBuf,
    /// What the snapshot is loaded with: the databases, the encodings' limits,
    /// key-load-delay.
    databases: usize,
    limits: ferrokv::value::Limits,
    key_delay_us: i32,
    /// `bind-source-addr`: the local address the link connects from.
    source: Option<std::net::IpAddr>,
    /// `tls-replication yes`: the context to connect with (or why there is none).
    tls: Option<Result<std::sync::Arc<rustls::ClientConfig>, String>>,
}

impl Handshake {
    fn run(self) -> Result<Synced, String> {
        self.phase.note_io();
        let synced = self.sync();
        self.phase.release();
        match synced {
            // The timer closed the connection for silence: say so as Redis does.
            Err(_) if self.phase.timed_out() => Err(match self.phase.get() {
                SyncPhase::CONNECTING | SyncPhase::HANDSHAKE => TIMEOUT_CONNECTING.to_string(),
                _ => bulk_timeout(TIMEOUT_CONNECTING.to_string()),
            }),
            other => other,
        }
    }

    fn sync(&self) -> Result<Synced, String> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("the master's address does not resolve")?;
        let sock = connect_from(self.source, addr, self.timeout).map_err(link_error)?;
        sock.set_read_timeout(Some(self.timeout)).map_err(|e| e.to_string())?;
        sock.set_write_timeout(Some(self.timeout)).map_err(|e| e.to_string())?;
        let _ = sock.set_nodelay(true);
        self.phase.hold(&sock);
        self.phase.set(SyncPhase::HANDSHAKE);
        let stream = match &self.tls {
            None => LinkStream::Plain(sock),
            Some(config) => {
                let config = config.clone().map_err(|e| format!("TLS: {e}"))?;
                let name = crate::net::server_name(&self.host)?;
                let tls = rustls::ClientConnection::new(config, name).map_err(|e| format!("TLS: {e}"))?;
                LinkStream::Tls(Box::new(rustls::StreamOwned::new(tls, sock)))
            }
        };
        let link = Link { stream, phase: self.phase.clone() };
        let mut r = BufReader::with_capacity(64 << 10, link);
        let ask = |args: &[&str], r: &mut BufReader<Link>| -> Result<String, String> {
            let mut out = Vec::new();
            ferrokv::persist::feed::put_multibulk(&mut out, args);
            r.get_mut().write_all(&out).map_err(link_error)?;
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
        ask(&["REPLCONF", "capa", "eof", "capa", "psync2"], &mut r)?;
        let reply = match &self.psync {
            Some((replid, from)) => {
                log(&format!("Trying a partial resynchronization (request {replid}:{from})."));
                let from = from.to_string();
                let mut psync = vec!["PSYNC", replid, &from];
                if self.failover {
                    psync.push("FAILOVER");
                }
                ask(&psync, &mut r)?
            }
            None => {
                log("Partial resynchronization not possible (no cached master)");
                ask(&["PSYNC", "?", "-1"], &mut r)?
            }
        };
        if let Some(id) = reply.strip_prefix("+CONTINUE") {
            let replid = Some(id.trim()).filter(|id| !id.is_empty()).map(str::to_string);
            return synced(r, Vec::new(), SyncKind::Continue { replid });
        }
        let mut words = reply.split(' ');
        if words.next() != Some("+FULLRESYNC") {
            if reply.starts_with("-NOMASTERLINK") || reply.starts_with("-LOADING") {
                return Err(format!("Master is currently unable to PSYNC but should be in the future: {reply}"));
            }
            return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
        }
        let replid = words.next().unwrap_or_default().to_string();
        let offset: u64 = words.next().and_then(|o| o.parse().ok()).ok_or("no offset in +FULLRESYNC")?;
        log(&format!("Full resync from master: {replid}:{offset}"));
        self.phase.set(match self.load {
            DisklessLoad::Disabled => SyncPhase::TRANSFER,
            DisklessLoad::Swapdb if replid == self.followed => SyncPhase::TRANSFER_ASYNC,
            DisklessLoad::Swapdb | DisklessLoad::OnEmptyDb => SyncPhase::TRANSFER_LOADING,
        });
        let bulk = read_line(&mut r).map_err(bulk_timeout)?;
        let mut unwatched = |_| {};
        let mut watch = LoadWatch { key_delay_us: self.key_delay_us, ..LoadWatch::quiet(&mut unwatched) };
        let mut dataset = Box::new(Keyspace::new(self.databases));
        let (rdb, after) = if self.load == DisklessLoad::Disabled {
            self.download(&mut r, &bulk)?;
            self.phase.set(SyncPhase::LOADING_FILE);
            log("MASTER <-> REPLICA sync: Loading DB in memory");
            let src = Source::open(&self.rdb).map_err(|e| format!("{}: {e}", self.rdb.display()))?;
            load_rdb_watched(&mut dataset, &src, &self.rdb, &self.limits, &mut watch).map_err(|e| {
                log(&format!("Failed trying to load the MASTER synchronization DB from disk: {e}"));
                e.to_string()
            })?;
            (Some(self.rdb.clone()), Vec::new())
        } else {
            // Loaded as the bytes come, as Redis's diskless load.
            log("MASTER <-> REPLICA sync: Loading DB in memory");
            let loaded = self.load_from_socket(&mut r, &bulk, &mut dataset, &mut watch);
            if let Err(e) = &loaded {
                log(&format!("Internal error in RDB reading from the master's socket: {e}"));
                log("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
            }
            (None, loaded?)
        };
        let stream_db = watch.repl_fields.stream_db();
        let how = SyncKind::Full { replid, offset, dataset, rdb, stream_db };
        synced(r, after, how)
    }

    /// The snapshot, `$<len>` bytes or `$EOF:<mark>`-ended, into the temp file.
    fn download(&self, r: &mut BufReader<Link>, bulk: &str) -> Result<(), String> {
        let mut file = std::fs::File::create(&self.rdb).map_err(|e| format!("{}: {e}", self.rdb.display()))?;
        if let Some(mark) = bulk.strip_prefix("$EOF:") {
            log("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk");
            copy_until_mark(r, mark.as_bytes(), &mut file)?;
        } else {
            let len = bulk_len(bulk)?;
            log(&format!("MASTER <-> REPLICA sync: receiving {len} bytes from master to disk"));
            let copied = std::io::copy(&mut (&mut *r).take(len), &mut file).map_err(|e| bulk_timeout(link_error(e)))?;
            if copied != len {
                return Err(format!("the master closed the connection after {copied} of {len} bytes"));
            }
        }
        file.sync_all().map_err(|e| e.to_string())
    }

    /// The snapshot read from the socket into `dataset` as it comes. Returns the stream
    /// bytes read past its end (and past the EOF mark).
    fn load_from_socket(
        &self,
        r: &mut BufReader<Link>,
        bulk: &str,
        dataset: &mut Keyspace,
        watch: &mut LoadWatch<'_>,
    ) -> Result<Vec<u8>, String> {
        let name = Path::new("the master's socket");
        let failed = |e: PersistError| match e {
            PersistError::Io { source, .. } => bulk_timeout(link_error(source)),
            e => e.to_string(),
        };
        if let Some(mark) = bulk.strip_prefix("$EOF:") {
            log("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to parser");
            let mark = mark.as_bytes();
            if mark.len() != 40 {
                return Err(format!("Bad protocol from MASTER: an EOF mark of {} bytes", mark.len()));
            }
            let mut reader = load_rdb_from(dataset, &mut *r, name, &self.limits, watch).map_err(failed)?;
            // The mark follows the RDB's last byte.
            let mut after = reader.unread().to_vec();
            while after.len() < mark.len() {
                let mut more = [0u8; 64];
                let n = reader.source_mut().read(&mut more).map_err(|e| bulk_timeout(link_error(e)))?;
                if n == 0 {
                    return Err("the master closed the connection before the end of the RDB".into());
                }
                after.extend_from_slice(&more[..n]);
            }
            if &after[..mark.len()] != mark {
                return Err("Replication stream EOF marker is broken".into());
            }
            return Ok(after.split_off(mark.len()));
        }
        let len = bulk_len(bulk)?;
        log(&format!("MASTER <-> REPLICA sync: receiving {len} bytes from master to parser"));
        let mut body = (&mut *r).take(len);
        let reader = load_rdb_from(dataset, &mut body, name, &self.limits, watch).map_err(failed)?;
        if !reader.unread().is_empty() || body.limit() != 0 {
            return Err(format!("the master's RDB ends before the {len} bytes it announced"));
        }
        Ok(Vec::new())
    }
}

/// The length of a `$<len>` bulk.
fn bulk_len(bulk: &str) -> Result<u64, String> {
    bulk.strip_prefix('$')
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| format!("Bad protocol from MASTER, the first byte is not '$': {bulk}"))
}

/// The handshake's outcome: the connection back from its blocking reader, with the
/// stream bytes already read.
/// `read` is what was read past the snapshot besides what `r` holds.
fn synced(r: BufReader<Link>, mut read: Vec<u8>, how: SyncKind) -> Result<Synced, String> {
    read.extend_from_slice(r.buffer());
    let rest = read;
    let (sock, tls) = match r.into_inner().stream {
        LinkStream::Plain(sock) => (sock, None),
        LinkStream::Tls(stream) => {
            let (tls, sock) = stream.into_parts();
            (sock, Some(Box::new(tls)))
        }
    };
    sock.set_read_timeout(None).map_err(|e| e.to_string())?;
    sock.set_write_timeout(None).map_err(|e| e.to_string())?;
    Ok(Synced { sock, tls, rest, how })
}

/// A replica's link to its master while it syncs: blocking, over TCP or TLS; each read
/// is noted in the phase (the main thread's timer compares it with repl-timeout).
struct Link {
    stream: LinkStream,
    phase: SyncPhase,
}

enum LinkStream {
    Plain(std::net::TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>>),
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match &mut self.stream {
            LinkStream::Plain(s) => s.read(buf),
            LinkStream::Tls(s) => s.read(buf),
        }?;
        self.phase.note_io();
        Ok(n)
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.stream {
            LinkStream::Plain(s) => s.write(buf),
            LinkStream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.stream {
            LinkStream::Plain(s) => s.flush(),
            LinkStream::Tls(s) => s.flush(),
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

/// What an I/O error of the link is, in Redis's words when the master stopped answering
/// within repl-timeout.
fn link_error(e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => TIMEOUT_CONNECTING.to_string(),
        _ => e.to_string(),
    }
}

const TIMEOUT_CONNECTING: &str = "Timeout connecting to the MASTER...";

/// A timeout while the snapshot comes, as Redis says it.
fn bulk_timeout(e: String) -> String {
    if e == TIMEOUT_CONNECTING {
        "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value.".into()
    } else {
        e
    }
}

/// An RDB sent as `$EOF:<mark>`: every byte before the mark goes to `file`; what follows
/// the mark is the stream and stays in `r`.
fn copy_until_mark(r: &mut BufReader<Link>, mark: &[u8], file: &mut std::fs::File) -> Result<(), String> {
    if mark.len() != 40 {
        return Err(format!("Bad protocol from MASTER: an EOF mark of {} bytes", mark.len()));
    }
    let finder = memchr::memmem::Finder::new(mark);
    let write = |file: &mut std::fs::File, b: &[u8]| file.write_all(b).map_err(|e| e.to_string());
    // The last bytes read, which may be the start of the mark.
    let mut window: Vec<u8> = Vec::new();
    loop {
        let buf = r.fill_buf().map_err(|e| bulk_timeout(link_error(e)))?;
        if buf.is_empty() {
            return Err("the master closed the connection before the end of the RDB".into());
        }
        let n = buf.len();
        window.extend_from_slice(buf);
        if let Some(p) = finder.find(&window) {
            write(file, &window[..p])?;
            // The window held at most 39 bytes before this read, so the mark ends in it.
            r.consume(n - (window.len() - (p + mark.len())));
            return Ok(());
        }
        r.consume(n);
        let cut = window.len() - window.len().min(mark.len() - 1);
        write(file, &window[..cut])?;
        window.drain(..cut);
    }
}

/// One reply line, newlines the master sends as keepalives skipped.
fn read_line(r: &mut BufReader<Link>) -> Result<String, String> {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).map_err(link_error)? == 0 {
            return Err("the master closed the connection".into());
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if !line.is_empty() {
            return Ok(line.to_string());
        }
    }
}
