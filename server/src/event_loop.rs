//! The event loop: accepting connections, reading and parsing queries, writing replies,
//! the timer (cron), and closing clients. One thread runs it (Redis's model).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::keyspace::Clock;
use ferrokv::{Engine, Reply};
use mio::{Events, Interest, Poll, Token};

use crate::client::{Client, ReadOutcome};
use crate::cmd;
use crate::config::ServerConfig;
use crate::log::{log, warn};
use crate::net::{Conn, Peer};
use crate::resp::{Limits, Parsed};
use crate::server::{unix_us, Server, WallAnchor};
use crate::stats::ServerStats;

impl Server {
    /// Load the data directory and bind the listeners.
    pub fn new(mut cfg: ServerConfig) -> Result<Server, String> {
        cmd::set_version(cfg.engine.version, cmd::table::COMMANDS);
        cmd::set_renames(&cfg.renames)?;
        log_startup(&cfg);
        if cfg.engine.version.behaves_as() >= ServerVersion::Redis72 && cfg.engine.limits.set_max_listpack_entries == 0
        {
            // Redis 7.2 keeps small sets of strings in a listpack (set-max-listpack-entries 128).
            cfg.engine.limits.set_max_listpack_entries = ferrokv::value::Limits::default().set_max_listpack_entries;
        }
        // Bound before the load, as Redis does: clients wait in the backlog meanwhile.
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let listeners = crate::net::Listeners::open(poll.registry(), &cfg)?;
        if listeners.is_empty() {
            warn("Configured to not listen anywhere, exiting.");
            return Err("Configured to not listen anywhere, exiting.".into());
        }
        crate::pidfile::write(&cfg.get("pidfile").unwrap_or_default());
        let time = Clock::virtual_at(unix_us() / 1000);
        // Empty until load_dataset installs the loaded one.
        let engine = Engine::with_clock(cfg.engine.clone(), time.clone());
        let signals = crate::signals::Signals::install(cfg.engine.dir.clone())?;
        let now_unix = Clock::System.now_ms() / 1000;
        let mut rng = fastrand::Rng::new();
        let run_id: String = (0..40).map(|_| char::from_digit(rng.u32(0..16), 16).unwrap_or('0')).collect();
        let mut server = Server {
            error_counted: false,
            engine,
            cfg,
            poll,
            listeners,
            clients: HashMap::default(),
            next_id: 1,
            link: None,
            pending: VecDeque::new(),
            deferred_writes: Vec::new(),
            replicas: Default::default(),
            stats: ServerStats::default(),
            startup_memory: crate::alloc::used_memory(),
            slowlog: Default::default(),
            watched: HashMap::new(),
            jobs: crate::persistence::SaveJobs::new(now_unix),
            active_expire: true,
            exit: false,
            shutdown: None,
            started: Instant::now(),
            started_unix: now_unix,
            signals,
            cron_paused: false,
            reply_buffers: Default::default(),
            migrate: Default::default(),
            loading: None,
            last_cron: Instant::now(),
            run_id,
            pubsub: Default::default(),
            monitors: Default::default(),
            tracking: Default::default(),
            latency: Default::default(),
            pause: Default::default(),
            histograms: Default::default(),
            blocking: Default::default(),
            woken: HashSet::new(),
            scripts: crate::script::Scripts::new()?,
            eviction: Default::default(),
            acl: Default::default(),
            time,
            fresh: None,
            wall: WallAnchor::now(),
            command_us: 0,
            call_depth: 0,
            busy_round: false,
        };
        cmd::config::follow_cached(&mut server);
        crate::acl::command::load_at_startup(&mut server)?;
        server.load_dataset()?;
        crate::script::functions::install(&mut server)?;
        if let Some((host, port)) = server.cfg.replicaof.clone() {
            server.follow_master(host, port);
        }
        server.resume_history();
        Ok(server)
    }

    /// Run until SHUTDOWN or a signal; Ok when the final save (if any) succeeded.
    pub fn run(&mut self) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        self.sync_event_tracking();
        loop {
            self.expire_blocked();
            self.end_pause_when_due();
            self.tracking_broadcast();
            self.queue_woken();
            let tick = Duration::from_millis(1000 / u64::from(self.cfg.engine.hz.max(1)));
            let mut timeout = if !self.pending.is_empty() {
                Duration::ZERO
            } else if let Some(t) = self.snapshot_poll_timeout() {
                t.min(tick.saturating_sub(self.last_cron.elapsed()))
            } else if self.cron_paused {
                tick
            } else {
                tick.saturating_sub(self.last_cron.elapsed())
            };
            if let Some(t) = self.blocking.next_deadline() {
                timeout = timeout.min(t.saturating_duration_since(Instant::now()));
            }
            if let Some(t) = self.pause.deadline() {
                timeout = timeout.min(t.saturating_duration_since(Instant::now()));
            }
            if self.eviction.pending {
                timeout = Duration::ZERO;
            }
            if self.serve_flush_waits() {
                // A blocking FLUSHALL waits for the lazyfree thread: look again soon.
                timeout = timeout.min(Duration::from_millis(1));
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e.to_string());
                }
            }
            self.refresh_time();
            let turn = Instant::now();
            for ev in events.iter() {
                let t = ev.token();
                match self.listeners.owner(t) {
                    Some(i) => self.accept(i),
                    None => self.serve(t.0 as u64),
                }
            }
            for _ in 0..self.pending.len() {
                if let Some(id) = self.pending.pop_front() {
                    self.serve(id);
                }
            }
            self.feed_replicas();
            self.write_deferred();
            self.step_snapshot();
            self.pump_full_sync();
            // A full resync's chunks just queued go out now, not after the next poll.
            self.write_deferred();
            self.eviction_cron();
            if self.last_cron.elapsed() >= tick && !self.cron_paused {
                self.last_cron = Instant::now();
                self.cron();
                self.ping_replicas();
                self.backlog_cron();
                self.replication_cron();
                self.full_sync_cron();
                self.feed_replicas();
                self.write_deferred();
                if self.shutdown_cron() {
                    return Ok(());
                }
            }
            self.stats.eventloop_cycles += 1;
            self.stats.eventloop_us += turn.elapsed().as_micros() as u64;
            if self.exit {
                return Ok(());
            }
        }
    }

    pub(crate) fn accept(&mut self, i: usize) {
        loop {
            match self.listeners.accept(i) {
                Ok(Some((conn, addr))) => {
                    self.stats.connections_received += 1;
                    self.add_client(conn, addr);
                }
                Ok(None) => return,
                Err(e) => {
                    log(&format!("Accepting client connection: {e}"));
                    return;
                }
            }
        }
    }

    pub(crate) fn add_client(&mut self, mut sock: Conn, addr: Peer) {
        if self.clients.len() as u64 >= self.cfg.maxclients {
            self.stats.rejected_connections += 1;
            // Best effort, as Redis: the socket is new, the write almost always fits (over
            // TLS it goes once the handshake is done, or not at all).
            let _ = std::io::Write::write(&mut sock, b"-ERR max number of clients reached\r\n");
            let _ = std::io::Write::flush(&mut sock);
            return;
        }
        if self.cfg.protected_mode && self.acl.default_user().is_some_and(|u| u.nopass) && !addr.is_local() {
            self.stats.rejected_connections += 1;
            let _ = std::io::Write::write(&mut sock, PROTECTED_MODE_ERROR.as_bytes());
            let _ = std::io::Write::flush(&mut sock);
            return;
        }
        sock.set_keepalive(self.cfg.get("tcp-keepalive").and_then(|v| v.parse().ok()).unwrap_or(0));
        let id = self.next_client_id();
        if self.poll.registry().register(&mut sock, Token(id as usize), Interest::READABLE).is_err() {
            return;
        }
        let c = Client::new(id, sock, Some(addr), self.acl.default_is_open());
        self.clients.insert(id, Box::new(c));
        // Data may already be waiting.
        self.pending.push_back(id);
    }

    /// Give client `id` a turn: parse and run what it sent, write replies, read more.
    pub(crate) fn serve(&mut self, id: u64) {
        let Some(mut c) = self.clients.remove(&id) else { return };
        let alive = self.serve_client(&mut c) && (c.write_deferred || self.want_writable(&mut c));
        if alive {
            self.clients.insert(id, c);
        } else {
            self.drop_client(c);
        }
    }

    pub(crate) fn serve_client(&mut self, c: &mut Client) -> bool {
        // When the input being parsed was read: the first command's start time.
        let mut read_at = None;
        for _ in 0..ROUNDS_PER_TURN {
            if c.close_asap {
                return false;
            }
            self.process_input(c, read_at.take());
            if c.close_asap {
                // Over an output buffer limit: closed without writing the rest.
                return false;
            }
            if c.drained && !c.close_after_reply && c.pending_out() > 0 {
                // All it sent is answered: write after the other ready clients ran.
                c.drained = false;
                c.defer_write(&mut self.deferred_writes);
                return true;
            }
            if !self.flush_client(c) {
                return false;
            }
            // With the socket full, the writable event resumes the writing; input is still
            // read and run, as Redis does: a client that sends everything before it reads
            // would otherwise wait for us while we wait for it. A client to close gets its
            // last replies first.
            if c.pending_out() > 0 && c.close_after_reply {
                return true;
            }
            if c.close_after_reply {
                return false;
            }
            if c.drained {
                // Everything read was answered and the socket was empty: wait for an event
                // rather than pay a read that would only say so.
                c.drained = false;
                return true;
            }
            let mut n = 0;
            match c.read_some(&mut n) {
                ReadOutcome::Data => {
                    if c.master {
                        self.stats.net_repl_input_bytes += n as u64;
                    } else {
                        self.stats.net_input_bytes += n as u64;
                    }
                    // Not our master's link: its stream may carry a command of any size
                    // (Redis exempts its master client too).
                    if !c.master && (c.query.len() - c.qpos) as u64 > self.cfg.client_query_buffer_limit {
                        self.stats.query_buffer_limit_disconnections += 1;
                        let head: String = c.query[c.qpos..].iter().take(64).map(|&b| b as char).collect();
                        log(&format!(
                            "Closing client that reached max query buffer length: id={} (qbuf initial bytes: {head:?})",
                            c.id
                        ));
                        return false;
                    }
                    // Once per read, not per command: the clock is not free.
                    let now = Instant::now();
                    c.last_interaction = now;
                    read_at = Some(now);
                }
                ReadOutcome::WouldBlock => return true,
                ReadOutcome::Closed => return false,
            }
        }
        self.pending.push_back(c.id);
        true
    }

    /// Write what the socket takes of `c`'s output; false when the connection failed.
    pub(crate) fn flush_client(&mut self, c: &mut Client) -> bool {
        let mut written = 0;
        let mut ok = c.flush(&mut written).is_ok();
        // A replica's stream follows its own output, a chunk at a time while the socket
        // takes it.
        while ok && c.replica && self.stream_to_replica(c) {
            ok = c.flush(&mut written).is_ok();
        }
        let ok = ok && !c.close_asap;
        if c.replica {
            self.stats.net_repl_output_bytes += written as u64;
        } else {
            self.stats.net_output_bytes += written as u64;
        }
        ok
    }

    /// Write the replies deferred in this loop round.
    pub(crate) fn write_deferred(&mut self) {
        for id in std::mem::take(&mut self.deferred_writes) {
            let Some(mut c) = self.clients.remove(&id) else { continue };
            c.write_deferred = false;
            if self.flush_client(&mut c) && !c.close_after_reply && self.want_writable(&mut c) {
                self.clients.insert(id, c);
            } else {
                self.drop_client(c);
            }
        }
    }

    /// Ask for writable events only while output waits (a socket always writable would
    /// wake the loop on every ACK). False when the registration fails.
    pub(crate) fn want_writable(&mut self, c: &mut Client) -> bool {
        let want = c.pending_out() > 0 || c.sock.has_backlog();
        if want == c.wants_write {
            return true;
        }
        let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
        c.wants_write = want;
        self.poll.registry().reregister(&mut c.sock, Token(c.id as usize), interest).is_ok()
    }

    /// Run every complete command in the query buffer (`read_at`: when it was read).
    pub(crate) fn process_input(&mut self, c: &mut Client, read_at: Option<Instant>) {
        self.fresh = read_at;
        self.process_queries(c);
        self.fresh = None;
    }

    pub(crate) fn process_queries(&mut self, c: &mut Client) {
        loop {
            if c.close_after_reply || c.close_asap || c.blocked.is_some() {
                return;
            }
            if c.master && self.busy_round {
                // Its commands run once the script is done: a turn then.
                if !self.pending.contains(&c.id) {
                    self.pending.push_back(c.id);
                }
                return;
            }
            if c.postponed.is_some() && !self.resume_postponed(c) {
                return;
            }
            let lim =
                Limits { proto_max_bulk_len: self.cfg.proto_max_bulk_len, unauthenticated: self.acl_auth_required(c) };
            let mut pos = c.qpos;
            let parsed = c.parser.parse(&c.query, &mut pos, lim);
            let consumed = pos - c.qpos;
            c.qpos = pos;
            match parsed {
                Parsed::Incomplete => {
                    if c.master && consumed > 0 {
                        // The parser keeps a command's first part: its bytes count once
                        // the command has run.
                        let part = c.query.get(c.qpos - consumed..c.qpos).unwrap_or_default();
                        self.master_processed(part, true);
                    }
                    return;
                }
                Parsed::Error(e) => {
                    c.reply(&Reply::error(e));
                    c.close_after_reply = true;
                    // Nothing after a protocol error is read.
                    c.query.clear();
                    c.qpos = 0;
                }
                Parsed::Command(argv) => {
                    if !argv.is_empty() {
                        let before = c.out.len();
                        c.reply_skip = std::mem::take(&mut c.reply_skip_next);
                        let mut argv = argv;
                        if c.master {
                            // Its master's stream sees every key as it is (the master
                            // sends the DELs of what expires).
                            let mode = self.engine.mode();
                            self.engine.set_mode(ferrokv::command::ExpireMode::Loading);
                            self.dispatch(c, &mut argv);
                            self.engine.set_mode(mode);
                            if let Some(e) = c.unsent_error.take() {
                                self.master_command_failed(c, &e);
                            }
                        } else {
                            self.dispatch(c, &mut argv);
                            if std::mem::take(&mut c.replied_as_replica) {
                                self.replica_replied(c);
                            }
                        }
                        c.parser.recycle(argv);
                        c.reply_skip = false;
                        if self.exit {
                            // SHUTDOWN closes the connection without a reply.
                            c.out.truncate(before);
                            return;
                        }
                        self.after_command(c);
                    }
                    if c.master {
                        let ran = c.query.get(c.qpos.saturating_sub(consumed)..c.qpos).unwrap_or_default();
                        self.master_processed(ran, c.multi.is_some());
                    }
                }
            }
        }
    }

    /// Clients others woke (messages, unblocked) get a turn in this loop round.
    pub(crate) fn queue_woken(&mut self) {
        // At most one entry per client here; a duplicate turn in `pending` is harmless.
        self.pending.extend(self.woken.drain());
    }

    /// While a script runs past busy-reply-threshold, or the start's load runs: one
    /// non-blocking round of the loop, so other clients are answered (BUSY, or SCRIPT KILL
    /// and SHUTDOWN NOSAVE; LOADING). A script's own client is out of the client table
    /// meanwhile and is skipped.
    pub fn serve_while_busy(&mut self) {
        let mut events = Events::with_capacity(256);
        if self.poll.poll(&mut events, Some(Duration::ZERO)).is_err() {
            return;
        }
        let was = std::mem::replace(&mut self.busy_round, true);
        let tokens: Vec<Token> = events.iter().map(|e| e.token()).collect();
        for t in tokens {
            match self.listeners.owner(t) {
                Some(i) => self.accept(i),
                None => self.serve(t.0 as u64),
            }
        }
        // Events the loop fetched before the script started are in its own batch, not
        // here, and readiness is edge-triggered: give every listener and every client a
        // turn (an idle one costs one accept or read that would block). A connection that
        // arrived with the script's own command would otherwise wait in the backlog until
        // the script ends, which SCRIPT KILL from that connection was to bring about.
        for i in 0..self.listeners.count() {
            self.accept(i);
        }
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            self.serve(id);
        }
        self.write_deferred();
        self.busy_round = was;
    }

    pub(crate) fn drop_client(&mut self, mut c: Box<Client>) {
        self.forget_client(&mut c);
        self.monitors.remove(c.id);
        self.tracking_off(&mut c);
        self.pause.forget(c.id);
        self.forget_replica(&c);
        self.unwatch_all(&mut c);
        let _ = self.poll.registry().deregister(&mut c.sock);
        let big = c.query.capacity().max(c.out.capacity()) >= crate::alloc::RELEASE_AT;
        drop(c);
        if big {
            crate::alloc::release_free_memory();
        }
    }

    /// Close another client (CLIENT KILL): after its pending output if `graceful`.
    pub fn kill_client(&mut self, id: u64) -> bool {
        match self.clients.remove(&id) {
            Some(c) => {
                self.drop_client(c);
                true
            }
            None => false,
        }
    }

    pub(crate) fn cron(&mut self) {
        self.wall = WallAnchor::now();
        if self.tracking.is_active() {
            self.tracking_limit(None);
        }
        // A replica's keys expire when its master's DELs come (but those its own clients
        // gave a TTL); none expire during a pause.
        if self.active_expire {
            self.expire_local_ttls();
        }
        // Redis samples its instantaneous metrics every 100 ms.
        let now_ms = self.wall.unix_ms(Instant::now()).max(0) as u64;
        if now_ms.saturating_sub(self.stats.instantaneous.last_ms()) >= 100 {
            let values = self.stats.rate_counters();
            let loop_us = self.stats.eventloop_us;
            self.stats.instantaneous.sample(now_ms, values, loop_us);
        }
        if self.active_expire && self.link.is_none() && !self.pause.is_on(Instant::now()) {
            let started = Instant::now();
            let r = self.engine.active_expire_cycle();
            self.stats.expire_cycle(r.sampled, r.expired, r.out_of_time, started.elapsed().as_micros() as u64);
            let now = self.wall.unix_ms(Instant::now()) / 1000;
            self.latency.note("expire-cycle", started.elapsed().as_millis() as u64, now);
            self.deliver_events(None);
            // Keys the cycle deleted touch the clients watching them, and a stream deleted
            // here unblocks its XREADGROUP clients.
            self.touch_modified_here();
        }
        if self.blocking.is_active() {
            self.serve_ready_keys();
        }
        self.engine.cron();
        // Give back the room of databases under 10 % full (Redis resizes its dicts in
        // serverCron, not on every loop turn).
        for db in &mut self.engine.keyspace_mut().dbs {
            db.shrink_if_sparse();
        }
        self.log_aof_events();
        self.close_idle_clients();
        self.migrate.close_idle();
        let now = Instant::now();
        let mut over_limit = Vec::new();
        for c in self.clients.values_mut() {
            c.trim_query_buffer(now);
            c.resize_reply_buffer(now, self.reply_buffers, &mut self.stats);
            // A soft output limit runs out with no new output too (Redis's clientsCron).
            // (Replicas' limits count the stream they are owed: backlog_cron's.)
            if !c.replica && c.obuf_soft_since.is_some() && crate::obuf::enforce(&self.cfg.obuf_limits, c) {
                over_limit.push(c.id);
            }
        }
        for id in over_limit {
            self.kill_client(id);
        }
        self.collect_background_jobs();
        self.start_scheduled_jobs();
        self.check_save_points();
    }

    pub(crate) fn close_idle_clients(&mut self) {
        if self.cfg.timeout == 0 {
            return;
        }
        let limit = Duration::from_secs(self.cfg.timeout);
        let idle: Vec<u64> = self
            .clients
            .values()
            .filter(|c| {
                !c.subs.active() && c.blocked.is_none() && c.postponed.is_none() && c.last_interaction.elapsed() > limit
            })
            .map(|c| c.id)
            .collect();
        for id in idle {
            self.kill_client(id);
        }
    }
}

/// Read/parse/write rounds for one client before the others get a turn.
pub(super) const ROUNDS_PER_TURN: usize = 16;

pub(super) const PROTECTED_MODE_ERROR: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// The lines Redis logs before it loads the data. Tools that start a server (Redis's own test
/// suite among them) wait for ` PID: <pid>` (the banner `always-show-logo` asks for) followed by
/// `Server initialized`.
pub(super) fn log_startup(cfg: &ServerConfig) {
    let pid = std::process::id();
    warn("oO0OoO0OoO0Oo ferrokv is starting oO0OoO0OoO0Oo");
    warn(&format!(
        "ferrokv-server version={}, Redis {} compatible, bits=64, pid={pid}, just started",
        env!("CARGO_PKG_VERSION"),
        crate::version::release()
    ));
    warn("Configuration loaded");
    if cfg.get("always-show-logo").as_deref() == Some("yes") {
        log(&format!("ferrokv-server {}  Port: {}  PID: {pid}", env!("CARGO_PKG_VERSION"), cfg.port));
    } else {
        log(&format!("Running mode=standalone, port={}.", cfg.port));
    }
    warn("Server initialized");
}

impl Server {
    /// The lines Redis logs once the data is loaded: one per kind of listener since Redis
    /// 7.2, `Ready to accept connections` and the unix socket's path before.
    pub fn log_ready(&self) {
        let unix = self.listeners.unix_path();
        if self.cfg.engine.version.behaves_as() >= ServerVersion::Redis72 {
            if self.cfg.port > 0 {
                log("Ready to accept connections tcp");
            }
            if self.cfg.tls_port() > 0 {
                log("Ready to accept connections tls");
            }
            if unix.is_some() {
                log("Ready to accept connections unix");
            }
        } else {
            if self.cfg.port > 0 || self.cfg.tls_port() > 0 {
                log("Ready to accept connections");
            }
            if let Some(path) = unix {
                log(&format!("The server is now ready to accept connections at {path}"));
            }
        }
    }

    /// At shutdown: the pid file and the unix socket's file go, as Redis removes them.
    pub(crate) fn remove_runtime_files(&mut self) {
        crate::pidfile::remove(&self.cfg.get("pidfile").unwrap_or_default());
        self.listeners.remove_unix_socket(self.poll.registry());
    }
}
