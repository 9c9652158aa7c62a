//! The server: one thread owns the engine and every connection, and runs a mio event
//! loop (Redis's model). Background saves and AOF rewrites run on their own threads
//! from a copy of the keyspace; the loop collects them on its timer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::command::Argv;
use ferrokv::keyspace::{Clock, SnapshotWalker};
use ferrokv::persist::{PersistError, RewrittenBase};
use ferrokv::{Engine, Reply};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::client::{Client, ReadOutcome};
use crate::cmd::{self, Found};
use crate::config::ServerConfig;
use crate::resp::{Limits, Parsed};

/// Stop parsing a client's input while this much output waits (write backpressure).
const OUT_SOFT_LIMIT: usize = 1 << 20;
/// Read/parse/write rounds for one client before the others get a turn.
const ROUNDS_PER_TURN: usize = 16;

/// Counters INFO reports, beyond the engine's.
#[derive(Debug, Default, Clone)]
pub struct ServerStats {
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub commands_processed: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub error_replies: u64,
    /// Per command: calls, microseconds, rejected calls, failed calls.
    pub commands: CommandStats,
    /// Error replies per error code (INFO errorstats).
    pub errors: HashMap<String, u64>,
    /// Keys evicted for maxmemory, and the milliseconds memory was over it (INFO stats).
    pub evicted_keys: u64,
    pub total_eviction_exceeded_ms: u64,
}

impl ServerStats {
    /// Count an error reply under its code, as Redis does: the text up to its first
    /// space (looked for in the first 32 bytes), else ERR.
    pub fn count_error(&mut self, text: &str) {
        let head = &text.as_bytes()[..text.len().min(32)];
        let code = match head.iter().position(|&b| b == b' ') {
            Some(sp) => &text[..sp],
            None => "ERR",
        };
        *self.errors.entry(code.to_string()).or_default() += 1;
    }
}

/// Per-command counters, updated on every command: keyed by the address of the command's
/// static name and its length (integers to hash, not the text). The same name at two addresses
/// is merged when listed.
#[derive(Debug, Default, Clone)]
pub struct CommandStats(HashMap<(usize, usize), (&'static str, CommandStat), foldhash::fast::FixedState>);

impl CommandStats {
    pub fn entry(&mut self, name: &'static str) -> CommandStatEntry<'_> {
        CommandStatEntry(self, name)
    }

    /// Every command's counters, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, CommandStat)> {
        let mut by_name = std::collections::BTreeMap::<&'static str, CommandStat>::new();
        for (name, st) in self.0.values() {
            let t = by_name.entry(name).or_default();
            t.calls += st.calls;
            t.usec += st.usec;
            t.rejected += st.rejected;
            t.failed += st.failed;
        }
        by_name.into_iter()
    }
}

/// A command's counters, created on first use (as a map entry).
pub struct CommandStatEntry<'a>(&'a mut CommandStats, &'static str);

impl<'a> CommandStatEntry<'a> {
    pub fn or_default(self) -> &'a mut CommandStat {
        let name = self.1;
        &mut self.0 .0.entry((name.as_ptr() as usize, name.len())).or_insert((name, CommandStat::default())).1
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// What SHUTDOWN (or a signal) asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownMode {
    /// Save if save points are configured.
    Default,
    Save,
    NoSave,
}

pub struct Server {
    pub engine: Engine,
    pub cfg: ServerConfig,
    pub(crate) poll: Poll,
    listeners: Vec<TcpListener>,
    /// Boxed: a client is taken out of the map for its turn and put back, and moving a
    /// pointer is cheaper than moving the struct.
    pub clients: HashMap<u64, Box<Client>, foldhash::fast::FixedState>,
    next_id: u64,
    /// Our master, when this server is a replica (REPLICAOF).
    pub link: Option<crate::replication::MasterLink>,
    /// Clients with work left after their turn.
    pub(crate) pending: VecDeque<u64>,
    /// Clients whose replies are written once this round's events are handled (Redis's
    /// write in beforeSleep): a client woken by a reply then finds many at once.
    pub(crate) deferred_writes: Vec<u64>,
    /// Clients attached as replicas.
    pub replicas: crate::replication::Replicas,
    pub stats: ServerStats,
    /// The reply of the command that just ran is an error INFO errorstats already counted
    /// (a script's error raised by a command it called).
    pub error_counted: bool,
    /// Watched keys: (database, key) → ids of the watching clients.
    pub watched: HashMap<(usize, Vec<u8>), Vec<u64>>,
    pub bgsave: Option<JoinHandle<Result<(), PersistError>>>,
    pub bgrewrite: Option<JoinHandle<Result<RewrittenBase, PersistError>>>,
    /// Unix seconds of the last successful save.
    pub last_save: i64,
    pub last_bgsave_ok: bool,
    /// Unix seconds of the last BGSAVE attempt (a failed one is retried after a delay).
    pub last_bgsave_try: i64,
    pub last_rewrite_ok: bool,
    /// When the AOF's write failure was last logged.
    pub aof_log: crate::persistence::AofLog,
    /// The dirty count when the running BGSAVE started (subtracted when it succeeds).
    bgsave_dirty: u64,
    pub active_expire: bool,
    /// SHUTDOWN succeeded: leave the loop.
    pub exit: bool,
    pub bgsave_scheduled: bool,
    pub rewrite_scheduled: bool,
    pub rdb_saves: u64,
    pub aof_rewrites: u64,
    pub started: Instant,
    pub started_unix: i64,
    signal: Arc<AtomicBool>,
    last_cron: Instant,
    pub run_id: String,
    pub pubsub: crate::pubsub::PubSub,
    pub blocking: crate::blocking::Blocking,
    /// Clients given new output or unblocked by someone else's command: they get a turn.
    pub woken: HashSet<u64>,
    /// The running BGSAVE's or BGREWRITEAOF's key copier (server/src/background.rs).
    pub snapshot: Option<SnapshotWalker>,
    /// Microseconds the loop spent starting the last snapshot (Redis's fork time).
    pub latest_fork_usec: u64,
    pub total_forks: u64,
    /// Lua scripting: the interpreter and the script cache.
    pub scripts: crate::script::Scripts,
    /// maxmemory: the eviction pool and state (server/src/maxmemory.rs).
    pub eviction: crate::maxmemory::Eviction,
    /// ACL users and the ACL log (server/src/acl/).
    pub acl: crate::acl::Acl,
    /// The time the engine reads (Redis's cached time): set before each top-level command
    /// and at every loop wake-up, so a command reads the clock once, not on each lookup.
    time: Clock,
    /// A clock reading taken when the client's input was read or the last command ended,
    /// still fresh for the next command of the same batch; cleared when the batch ends.
    fresh: Option<Instant>,
    /// Wall time from monotonic readings, so a command reads one clock, not two.
    wall: WallAnchor,
    /// Nesting of [`Server::call`]: EXEC's and scripts' commands share their caller's time.
    call_depth: u32,
}

/// Unix time in microseconds (the wall clock, as Redis's ustime).
fn unix_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// A monotonic instant paired with the wall clock read at the same moment: the wall
/// time of a later instant is derived from it. Re-read on every cron tick, so a change
/// of the system clock is followed within one tick.
struct WallAnchor {
    at: Instant,
    unix_us: i64,
}

impl WallAnchor {
    fn now() -> WallAnchor {
        WallAnchor { at: Instant::now(), unix_us: unix_us() }
    }

    fn unix_ms(&self, t: Instant) -> i64 {
        let since = t.saturating_duration_since(self.at).as_micros() as i64;
        (self.unix_us + since) / 1000
    }
}

fn listener_token(i: usize) -> Token {
    Token(usize::MAX - i)
}

impl Server {
    /// Load the data directory and bind the listeners.
    pub fn new(mut cfg: ServerConfig) -> Result<Server, String> {
        cmd::set_version(cfg.engine.version);
        log_startup(&cfg);
        if cfg.engine.version >= ServerVersion::Redis72 && cfg.engine.limits.set_max_listpack_entries == 0 {
            // Redis 7.2 keeps small sets of strings in a listpack (set-max-listpack-entries 128).
            cfg.engine.limits.set_max_listpack_entries = ferrokv::value::Limits::default().set_max_listpack_entries;
        }
        let mut engine = Engine::open(cfg.engine.clone(), Clock::System).map_err(|e| format!("Loading failed: {e}"))?;
        for w in std::mem::take(&mut engine.persist.warnings) {
            log(&w);
        }
        let time = Clock::virtual_at(unix_us() / 1000);
        engine.clock = time.clone();
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let mut listeners = Vec::new();
        for (i, addr) in cfg.bind.iter().enumerate() {
            let host = addr.trim_start_matches('-');
            let host = if host == "*" { "0.0.0.0" } else { host };
            let sock: SocketAddr = format!("{host}:{}", cfg.port)
                .parse()
                .or_else(|_| format!("[{host}]:{}", cfg.port).parse())
                .map_err(|e| format!("bad bind address {addr}: {e}"))?;
            let mut l = TcpListener::bind(sock)
                .map_err(|e| format!("Could not create server TCP listening socket {sock}: {e}"))?;
            poll.registry().register(&mut l, listener_token(i), Interest::READABLE).map_err(|e| e.to_string())?;
            listeners.push(l);
        }
        let signal = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(sig, Arc::clone(&signal)).map_err(|e| e.to_string())?;
        }
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
            watched: HashMap::new(),
            bgsave: None,
            bgrewrite: None,
            last_save: now_unix,
            last_bgsave_ok: true,
            last_bgsave_try: 0,
            last_rewrite_ok: true,
            aof_log: Default::default(),
            bgsave_dirty: 0,
            active_expire: true,
            exit: false,
            bgsave_scheduled: false,
            rewrite_scheduled: false,
            rdb_saves: 0,
            aof_rewrites: 0,
            started: Instant::now(),
            started_unix: now_unix,
            signal,
            last_cron: Instant::now(),
            run_id,
            pubsub: Default::default(),
            blocking: Default::default(),
            woken: HashSet::new(),
            snapshot: None,
            latest_fork_usec: 0,
            total_forks: 0,
            scripts: crate::script::Scripts::new()?,
            eviction: Default::default(),
            acl: Default::default(),
            time,
            fresh: None,
            wall: WallAnchor::now(),
            call_depth: 0,
        };
        crate::acl::command::load_at_startup(&mut server)?;
        crate::script::functions::install(&mut server)?;
        Ok(server)
    }

    /// The port actually bound (the configured one, or the system's pick for port 0).
    pub fn local_port(&self) -> Option<u16> {
        self.listeners.first().and_then(|l| l.local_addr().ok()).map(|a| a.port())
    }

    /// Run until SHUTDOWN or a signal; Ok when the final save (if any) succeeded.
    pub fn run(&mut self) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        self.sync_event_tracking();
        loop {
            self.expire_blocked();
            self.queue_woken();
            let tick = Duration::from_millis(1000 / u64::from(self.cfg.engine.hz.max(1)));
            let mut timeout = if !self.pending.is_empty() {
                Duration::ZERO
            } else if let Some(t) = self.snapshot_poll_timeout() {
                t.min(tick.saturating_sub(self.last_cron.elapsed()))
            } else {
                tick.saturating_sub(self.last_cron.elapsed())
            };
            if let Some(t) = self.blocking.next_deadline() {
                timeout = timeout.min(t.saturating_duration_since(Instant::now()));
            }
            if self.eviction.pending {
                timeout = Duration::ZERO;
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e.to_string());
                }
            }
            self.refresh_time();
            for ev in events.iter() {
                let t = ev.token();
                if t.0 > usize::MAX - self.listeners.len() {
                    self.accept(usize::MAX - t.0);
                } else {
                    self.serve(t.0 as u64);
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
            self.eviction_cron();
            if self.last_cron.elapsed() >= tick {
                self.last_cron = Instant::now();
                self.cron();
                self.ping_replicas();
                self.replication_cron();
                self.feed_replicas();
                self.write_deferred();
            }
            if self.exit {
                return Ok(());
            }
            if self.signal.swap(false, Ordering::Relaxed) {
                log("Received SIGTERM scheduling shutdown...");
                match self.prepare_shutdown(ShutdownMode::Default, false) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        log(&e);
                        log("Errors trying to shut down the server. Check the logs for more information.");
                    }
                }
            }
        }
    }

    fn accept(&mut self, i: usize) {
        loop {
            let Some(l) = self.listeners.get(i) else { return };
            let (sock, addr) = match l.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    log(&format!("Accepting client connection: {e}"));
                    return;
                }
            };
            self.stats.connections_received += 1;
            self.add_client(sock, addr);
        }
    }

    fn add_client(&mut self, mut sock: TcpStream, addr: SocketAddr) {
        let _ = sock.set_nodelay(true);
        if self.clients.len() as u64 >= self.cfg.maxclients {
            self.stats.rejected_connections += 1;
            // Best effort, as Redis: the socket is new, the write almost always fits.
            let _ = std::io::Write::write(&mut sock, b"-ERR max number of clients reached\r\n");
            return;
        }
        if self.cfg.protected_mode && self.acl.default_user().is_some_and(|u| u.nopass) && !addr.ip().is_loopback() {
            self.stats.rejected_connections += 1;
            let _ = std::io::Write::write(&mut sock, PROTECTED_MODE_ERROR.as_bytes());
            return;
        }
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
    fn serve(&mut self, id: u64) {
        let Some(mut c) = self.clients.remove(&id) else { return };
        let alive = self.serve_client(&mut c) && (c.write_deferred || self.want_writable(&mut c));
        if alive {
            self.clients.insert(id, c);
        } else {
            self.drop_client(c);
        }
    }

    fn serve_client(&mut self, c: &mut Client) -> bool {
        // When the input being parsed was read: the first command's start time.
        let mut read_at = None;
        for _ in 0..ROUNDS_PER_TURN {
            if c.close_asap {
                return false;
            }
            let stopped_early = self.process_input(c, read_at.take());
            if c.close_asap {
                // Over an output buffer limit: closed without writing the rest.
                return false;
            }
            if c.drained && !stopped_early && !c.close_after_reply && c.pending_out() > 0 {
                // All it sent is answered: write after the other ready clients ran.
                c.drained = false;
                if !c.write_deferred {
                    c.write_deferred = true;
                    self.deferred_writes.push(c.id);
                }
                return true;
            }
            if !self.flush_client(c) {
                return false;
            }
            if c.pending_out() > 0 {
                // The socket is full: the writable event brings us back.
                return true;
            }
            if c.close_after_reply {
                return false;
            }
            if stopped_early {
                continue;
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
                    self.stats.net_input_bytes += n as u64;
                    if (c.query.len() - c.qpos) as u64 > self.cfg.client_query_buffer_limit {
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
    fn flush_client(&mut self, c: &mut Client) -> bool {
        let mut written = 0;
        let ok = c.flush(&mut written).is_ok();
        self.stats.net_output_bytes += written as u64;
        ok
    }

    /// Write the replies deferred in this loop round.
    fn write_deferred(&mut self) {
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
    fn want_writable(&mut self, c: &mut Client) -> bool {
        let want = c.pending_out() > 0;
        if want == c.wants_write {
            return true;
        }
        let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
        c.wants_write = want;
        self.poll.registry().reregister(&mut c.sock, Token(c.id as usize), interest).is_ok()
    }

    /// Run every complete command in the query buffer, stopping while too much output
    /// waits. True when it stopped with input left to parse (write backpressure).
    fn process_input(&mut self, c: &mut Client, read_at: Option<Instant>) -> bool {
        self.fresh = read_at;
        let stopped_early = self.process_queries(c);
        self.fresh = None;
        stopped_early
    }

    fn process_queries(&mut self, c: &mut Client) -> bool {
        loop {
            if c.close_after_reply || c.close_asap || c.blocked.is_some() {
                return false;
            }
            if c.pending_out() >= OUT_SOFT_LIMIT {
                return true;
            }
            let lim =
                Limits { proto_max_bulk_len: self.cfg.proto_max_bulk_len, unauthenticated: self.acl_auth_required(c) };
            let mut pos = c.qpos;
            let parsed = c.parser.parse(&c.query, &mut pos, lim);
            let consumed = pos - c.qpos;
            c.qpos = pos;
            match parsed {
                Parsed::Incomplete => return false,
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
                        self.dispatch(c, &mut argv);
                        c.parser.recycle(argv);
                        c.reply_skip = false;
                        if self.exit {
                            // SHUTDOWN closes the connection without a reply.
                            c.out.truncate(before);
                            return false;
                        }
                        self.after_command(c);
                    }
                    if c.master {
                        self.master_processed(consumed);
                    }
                }
            }
        }
    }

    /// Clients others woke (messages, unblocked) get a turn in this loop round.
    fn queue_woken(&mut self) {
        // At most one entry per client here; a duplicate turn in `pending` is harmless.
        self.pending.extend(self.woken.drain());
    }

    /// While a script runs past busy-reply-threshold: one non-blocking round of the
    /// loop, so other clients are answered (BUSY, or SCRIPT KILL and SHUTDOWN NOSAVE).
    /// The script's own client is out of the client table meanwhile and is skipped.
    pub fn serve_while_busy(&mut self) {
        let mut events = Events::with_capacity(256);
        if self.poll.poll(&mut events, Some(Duration::ZERO)).is_err() {
            return;
        }
        let tokens: Vec<Token> = events.iter().map(|e| e.token()).collect();
        for t in tokens {
            if t.0 > usize::MAX - self.listeners.len() {
                self.accept(usize::MAX - t.0);
            } else {
                self.serve(t.0 as u64);
            }
        }
        // Events the loop fetched before the script started are in its own batch, not
        // here: give every client a turn (an idle one costs one read that would block).
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            self.serve(id);
        }
        self.write_deferred();
    }

    fn drop_client(&mut self, mut c: Box<Client>) {
        self.forget_client(&mut c);
        self.forget_replica(&c);
        self.unwatch_all(&mut c);
        let _ = self.poll.registry().deregister(&mut c.sock);
        let big = c.query.capacity().max(c.out.capacity()) >= crate::alloc::RELEASE_AT;
        drop(c);
        if big {
            crate::alloc::release_free_memory();
        }
    }

    pub(crate) fn next_client_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
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

    // ------------------------------------------------------------ commands

    /// Run one command from `c` as Redis's processCommand does: lookup, arity, auth,
    /// MULTI queueing, then the command itself.
    /// `argv` is taken (left empty) only when MULTI queues it.
    pub fn dispatch(&mut self, c: &mut Client, argv: &mut Argv) {
        self.stats.commands_processed += 1;
        let Some(found) = cmd::lookup(&argv[0]) else {
            self.reject(c, ferrokv::command::unknown_command(argv), None);
            return;
        };
        c.last_cmd = match (found, argv.get(1)) {
            // Container commands show their subcommand, as Redis 7.0 (`client|list`).
            (Found::Server(cmd), Some(sub)) if matches!(cmd.name, "client" | "config" | "command" | "debug") => {
                format!("{}|{}", cmd.name, String::from_utf8_lossy(sub).to_ascii_lowercase()).into()
            }
            _ => found.name().into(),
        };
        if !found.arity_ok(argv.len()) {
            let e = Reply::error(format!("ERR wrong number of arguments for '{}' command", found.name()));
            self.reject(c, e, Some(found.name()));
            return;
        }
        if let Some(e) = crate::acl::enforce::subcommand_refusal(found, argv) {
            self.reject(c, e, Some(found.name()));
            return;
        }
        if self.acl_auth_required(c) && found.flags() & ferrokv::command::flags::NO_AUTH == 0 {
            self.reject(c, Reply::err("NOAUTH Authentication required."), Some(found.name()));
            return;
        }
        if c.multi.is_some() && found.flags() & ferrokv::command::flags::NO_MULTI != 0 {
            self.reject(c, Reply::err("ERR Command not allowed inside a transaction"), Some(found.name()));
            return;
        }
        if let Some(e) = self.acl_refusal(c, found, argv) {
            self.reject(c, e, Some(found.name()));
            return;
        }
        if let Some(e) = crate::admission::refusal(self, c, found, argv) {
            self.reject(c, e, Some(found.name()));
            return;
        }
        if let Some(e) = crate::cmd::pubsub::refused_in_subscribed_mode(c, found, argv) {
            self.reject(c, e, Some(found.name()));
            return;
        }
        if let Some(busy) = crate::script::busy_refusal(self, argv) {
            let busy = if found.name() == "exec" && c.multi.is_some() {
                c.reset_multi();
                self.unwatch_all(c);
                crate::script::exec_abort(&busy)
            } else {
                busy
            };
            self.reject(c, busy, Some(found.name()));
            return;
        }
        if c.multi.is_some() && !matches!(found.name(), "exec" | "discard" | "multi" | "watch" | "quit" | "reset") {
            if let Some(q) = c.multi.as_mut() {
                q.push(std::mem::take(argv));
            }
            c.reply(&Reply::simple("QUEUED"));
            return;
        }
        let mark = c.out.len();
        let mut reply = self.call(c, found, argv);
        if let Some(e) = self.engine.take_unacknowledged() {
            // Under appendfsync always what the command propagated is not on disk: it is
            // not acknowledged (Redis exits there; writes are refused until the AOF works).
            c.out.truncate(mark);
            c.raw_reply = false;
            reply = Reply::error(e);
        }
        self.count_reply(&reply);
        if !std::mem::take(&mut c.raw_reply) {
            c.reply(&reply);
        }
    }

    /// Read the clock into the engine's time (outside a command).
    pub fn refresh_time(&mut self) {
        if self.call_depth == 0 {
            self.time.set_ms(self.wall.unix_ms(Instant::now()));
        }
    }

    /// Run a command (directly or from EXEC) and account for it.
    pub fn call(&mut self, c: &mut Client, found: Found, argv: &[Vec<u8>]) -> Reply {
        // One clock reading per command: a top-level command's start is the engine's time
        // (the end of the previous command of the batch when there was one).
        let top = self.call_depth == 0;
        let start = match self.fresh.take() {
            Some(t) if top => t,
            _ => Instant::now(),
        };
        if top {
            self.time.set_ms(self.wall.unix_ms(start));
        }
        self.call_depth += 1;
        let reply = match found {
            Found::Server(cmd) => (cmd.run)(self, c, argv),
            // XREAD / XREADGROUP, which may block.
            Found::Engine(spec) if spec.flags & ferrokv::command::flags::BLOCKING != 0 => {
                crate::cmd::xread::xread(self, c, argv)
            }
            Found::Engine(spec) => {
                let r = if c.in_exec {
                    // Inside EXEC: one propagation unit, flushed by EXEC.
                    self.engine.call_spec(&mut c.session, spec, argv)
                } else {
                    self.engine.execute_spec(&mut c.session, spec, argv)
                };
                self.touch_modified(c);
                self.deliver_events(Some(c));
                if found.name() == "flushall" && !r.is_error() {
                    self.after_flushall();
                }
                r
            }
        };
        self.call_depth -= 1;
        let end = Instant::now();
        if top {
            self.fresh = Some(end);
        }
        let st = self.stats.commands.entry(found.name()).or_default();
        st.calls += 1;
        st.usec += end.saturating_duration_since(start).as_micros() as u64;
        if reply.is_error() {
            st.failed += 1;
        }
        reply
    }

    fn count_reply(&mut self, r: &Reply) {
        if std::mem::take(&mut self.error_counted) {
            return;
        }
        if let Reply::Error(text) = r {
            self.stats.error_replies += 1;
            self.stats.count_error(text);
        }
    }

    /// Refuse a command before it runs; inside MULTI this aborts the transaction.
    fn reject(&mut self, c: &mut Client, e: Reply, name: Option<&'static str>) {
        // A refused EXEC discards the transaction, as Redis's execCommandAbort.
        let e = match &e {
            Reply::Error(text) if name == Some("exec") && !text.starts_with("EXECABORT") => {
                c.reset_multi();
                self.unwatch_all(c);
                crate::script::exec_abort(&e)
            }
            _ => e,
        };
        if c.multi.is_some() {
            c.multi_error = true;
        }
        if let Some(n) = name {
            self.stats.commands.entry(n).or_default().rejected += 1;
        }
        self.stats.error_replies += 1;
        if let Reply::Error(text) = &e {
            self.stats.count_error(text);
        }
        c.reply(&e);
    }

    // ------------------------------------------------------------ WATCH

    /// Flag the clients watching keys the last commands changed.
    pub fn touch_modified(&mut self, current: &mut Client) {
        self.touch_swapped(current);
        if !self.engine.fx.ready.is_empty() {
            let ready = std::mem::take(&mut self.engine.fx.ready);
            self.blocking.note_modified(&ready);
        }
        if self.engine.fx.modified.is_empty() {
            return;
        }
        let modified = std::mem::take(&mut self.engine.fx.modified);
        self.blocking.note_modified(&modified);
        for (db, key) in modified {
            if let Some(ids) = self.watched.get(&(db, key.to_vec())) {
                for id in ids {
                    if *id == current.id {
                        current.watch_dirty = true;
                    } else if let Some(other) = self.clients.get_mut(id) {
                        other.watch_dirty = true;
                    }
                }
            }
        }
    }

    /// After SWAPDB, flag the clients watching a key of either database that exists in
    /// one of them (it appeared, vanished or changed), as Redis does.
    fn touch_swapped(&mut self, current: &mut Client) {
        if self.engine.fx.swapped_dbs.is_empty() {
            return;
        }
        let swapped = std::mem::take(&mut self.engine.fx.swapped_dbs);
        let exists = |s: &Server, db: usize, key: &[u8]| s.engine.ks.dbs.get(db).is_some_and(|d| d.get(key).is_some());
        let mut touched = Vec::new();
        for (x, y) in swapped {
            for ((db, key), ids) in &self.watched {
                if (*db == x || *db == y) && (exists(self, x, key) || exists(self, y, key)) {
                    touched.extend(ids.iter().copied());
                }
            }
        }
        for id in touched {
            if id == current.id {
                current.watch_dirty = true;
            } else if let Some(other) = self.clients.get_mut(&id) {
                other.watch_dirty = true;
            }
        }
    }

    /// Flag every client watching a key: the whole dataset was replaced.
    pub fn touch_every_watcher(&mut self) {
        let ids: Vec<u64> = self.watched.values().flatten().copied().collect();
        for id in ids {
            if let Some(c) = self.clients.get_mut(&id) {
                c.watch_dirty = true;
            }
        }
    }

    /// Flag every client watching a key of `db` (or of every database) that exists.
    pub fn touch_all_watched(&mut self, current: &mut Client) {
        let ids: Vec<u64> = self.watched.values().flatten().copied().collect();
        for id in ids {
            if id == current.id {
                current.watch_dirty = true;
            } else if let Some(other) = self.clients.get_mut(&id) {
                other.watch_dirty = true;
            }
        }
    }

    pub fn watch_key(&mut self, c: &mut Client, key: &[u8]) {
        let db = c.session.db;
        if c.watched.iter().any(|(d, k, _)| *d == db && k == key) {
            return;
        }
        let expired = self.key_is_expired(db, key);
        c.watched.push((db, key.to_vec(), expired));
        self.watched.entry((db, key.to_vec())).or_default().push(c.id);
        self.engine.fx.track_modified = true;
    }

    pub fn unwatch_all(&mut self, c: &mut Client) {
        for (db, key, _) in c.watched.drain(..) {
            let k = (db, key);
            if let Some(ids) = self.watched.get_mut(&k) {
                ids.retain(|&i| i != c.id);
                if ids.is_empty() {
                    self.watched.remove(&k);
                }
            }
        }
        c.watch_dirty = false;
        self.engine.fx.track_modified = !self.watched.is_empty() || self.blocking.is_active();
    }

    /// Whether `key` is logically expired now (still stored, TTL passed).
    pub fn key_is_expired(&self, db: usize, key: &[u8]) -> bool {
        let now = self.engine.clock.now_ms();
        self.engine.ks.dbs.get(db).and_then(|d| d.get(key)).and_then(|s| s.expire_ms()).is_some_and(|t| now > t)
    }

    // ------------------------------------------------------------ timer

    fn cron(&mut self) {
        self.wall = WallAnchor::now();
        // A replica's keys expire when its master's DELs come.
        if self.active_expire && self.link.is_none() {
            self.engine.active_expire_cycle();
            self.deliver_events(None);
            // Keys the cycle deleted touch the clients watching them.
            if !self.engine.fx.modified.is_empty() {
                let modified = std::mem::take(&mut self.engine.fx.modified);
                // A stream deleted here unblocks its XREADGROUP clients.
                self.blocking.note_modified(&modified);
                for (db, key) in modified {
                    if let Some(ids) = self.watched.get(&(db, key.to_vec())) {
                        for id in ids.clone() {
                            if let Some(c) = self.clients.get_mut(&id) {
                                c.watch_dirty = true;
                            }
                        }
                    }
                }
            }
        }
        if self.blocking.is_active() {
            self.serve_ready_keys();
        }
        self.engine.cron();
        // Give back the room of databases under 10 % full (Redis resizes its dicts in
        // serverCron, not on every loop turn).
        for db in &mut self.engine.ks.dbs {
            db.shrink_if_sparse();
        }
        self.log_aof_events();
        self.close_idle_clients();
        self.collect_background_jobs();
        self.start_scheduled_jobs();
        self.check_save_points();
    }

    fn close_idle_clients(&mut self) {
        if self.cfg.timeout == 0 {
            return;
        }
        let limit = Duration::from_secs(self.cfg.timeout);
        let idle: Vec<u64> = self
            .clients
            .values()
            .filter(|c| !c.subs.active() && c.blocked.is_none() && c.last_interaction.elapsed() > limit)
            .map(|c| c.id)
            .collect();
        for id in idle {
            self.kill_client(id);
        }
    }

    fn check_save_points(&mut self) {
        if self.bgsave.is_some() || self.bgrewrite.is_some() {
            return;
        }
        let now = Clock::System.now_ms() / 1000;
        let dirty = self.engine.stats.dirty;
        // After a failure, the save points try again only after a delay.
        let may_retry = self.last_bgsave_ok || now - self.last_bgsave_try > crate::persistence::BGSAVE_RETRY_DELAY_SECS;
        let due = may_retry
            && self.cfg.engine.save.iter().any(|&(secs, changes)| {
                dirty >= changes && now - self.last_save >= secs as i64 && (changes > 0 || dirty > 0)
            });
        if due {
            log(&format!("{dirty} changes since the last save. Saving..."));
            self.start_bgsave();
        }
    }

    /// Start a BGSAVE: a thread writes the keys the loop copies a few at a time
    /// (server/src/background.rs).
    pub fn start_bgsave(&mut self) {
        let cfg = ferrokv::persist::snapshot::config_for(&self.engine.cfg, &self.engine.ks);
        let now = self.engine.clock.now_ms();
        let rx = match self.engine.ks.begin_snapshot() {
            Ok((walker, rx)) => {
                self.snapshot_started(walker);
                rx
            }
            // Cannot happen while jobs are one at a time; fall back to a copy.
            Err(_) => self.engine.ks.snapshot_now(),
        };
        self.bgsave_dirty = self.engine.stats.dirty;
        self.last_bgsave_try = Clock::System.now_ms() / 1000;
        self.bgsave = Some(std::thread::spawn(move || {
            let src = ferrokv::persist::snapshot::Source::Stream { rx, key_delay_us: cfg.rdb_key_save_delay };
            ferrokv::persist::snapshot::save_from(src, &cfg, now)
        }));
    }

    /// Start a BGREWRITEAOF on a thread.
    pub fn start_bgrewrite(&mut self) -> Result<(), PersistError> {
        let (job, walker) = self.engine.start_rewrite_live()?;
        self.snapshot_started(walker);
        self.bgrewrite = Some(std::thread::spawn(move || job.run()));
        Ok(())
    }

    /// Collect finished background jobs. With `wait`, block until they finish.
    pub fn collect_background_jobs_wait(&mut self, wait: bool) {
        if wait {
            // The writer waits for the keys the loop has not copied yet.
            self.settle_snapshot();
        }
        if self.bgsave.as_ref().is_some_and(|h| wait || h.is_finished()) {
            if let Some(h) = self.bgsave.take() {
                let r = h.join().unwrap_or_else(|_| Err(PersistError::State("BGSAVE thread panicked".into())));
                match r {
                    Ok(()) => {
                        self.engine.stats.dirty = self.engine.stats.dirty.saturating_sub(self.bgsave_dirty);
                        self.last_save = Clock::System.now_ms() / 1000;
                        self.last_bgsave_ok = true;
                        self.rdb_saves += 1;
                        log("Background saving terminated with success");
                    }
                    Err(e) => {
                        self.last_bgsave_ok = false;
                        log(&format!("Write error saving DB on disk: {e}"));
                        log("Background saving error");
                    }
                }
            }
        }
        if self.bgrewrite.as_ref().is_some_and(|h| wait || h.is_finished()) {
            if let Some(h) = self.bgrewrite.take() {
                let built =
                    h.join().unwrap_or_else(|_| Err(PersistError::State("BGREWRITEAOF thread panicked".into())));
                match self.engine.finish_rewrite(built) {
                    Ok(()) => {
                        self.last_rewrite_ok = true;
                        self.aof_rewrites += 1;
                        log("Background AOF rewrite finished successfully");
                    }
                    Err(e) => {
                        self.last_rewrite_ok = false;
                        log(&format!("Background AOF rewrite failed: {e}"));
                    }
                }
            }
        }
    }

    fn start_scheduled_jobs(&mut self) {
        if self.bgsave.is_some() || self.bgrewrite.is_some() {
            return;
        }
        if self.rewrite_scheduled {
            self.rewrite_scheduled = false;
            if let Err(e) = self.start_bgrewrite() {
                log(&format!("Can't rewrite append only file in background: {e}"));
            }
        } else if self.bgsave_scheduled {
            self.bgsave_scheduled = false;
            self.start_bgsave();
        }
    }

    fn collect_background_jobs(&mut self) {
        self.collect_background_jobs_wait(false);
    }

    /// SAVE, on this thread.
    pub fn save_now(&mut self) -> Result<(), PersistError> {
        self.engine.save()?;
        self.last_save = Clock::System.now_ms() / 1000;
        self.last_bgsave_ok = true;
        self.rdb_saves += 1;
        Ok(())
    }

    /// Finish background work, save as asked, close the AOF. An error (the final save,
    /// or buffered AOF writes that cannot be written) keeps the server running, unless
    /// `force` says to exit anyway.
    pub fn prepare_shutdown(&mut self, mode: ShutdownMode, force: bool) -> Result<(), String> {
        log("User requested shutdown...");
        self.collect_background_jobs_wait(true);
        let save = match mode {
            ShutdownMode::Save => true,
            ShutdownMode::NoSave => false,
            ShutdownMode::Default => !self.cfg.engine.save.is_empty(),
        };
        if self.engine.persist.aof.as_ref().is_some_and(|a| a.is_open()) {
            log("Calling fsync() on the AOF file.");
        }
        // The AOF first: acknowledged writes still buffered after a write error must reach
        // the disk (Redis exits without them).
        if let Err(e) = self.engine.settle_aof() {
            if !force {
                return Err(format!("Error writing the AOF, can't exit: {e}"));
            }
            log(&format!("Error writing the AOF: {e}. Exit anyway."));
        }
        if save {
            log("Saving the final RDB snapshot before exiting.");
            match self.save_now() {
                Ok(()) => log("DB saved on disk"),
                Err(e) if force => log(&format!("Error trying to save the DB: {e}. Exit anyway.")),
                Err(e) => return Err(format!("Error trying to save the DB, can't exit: {e}")),
            }
        }
        if let Err(e) = self.engine.close() {
            if !force {
                return Err(format!("Error closing the AOF, can't exit: {e}"));
            }
            log(&format!("Error closing the AOF: {e}. Exit anyway."));
        }
        // Replies (SHUTDOWN's error, if any) are not written once we exit.
        log("Redis is now ready to exit, bye bye...");
        Ok(())
    }
}

const PROTECTED_MODE_ERROR: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// The lines Redis logs before it loads the data. Tools that start a server (Redis's own test
/// suite among them) wait for ` PID: <pid>` (the banner `always-show-logo` asks for) followed by
/// `Server initialized`.
fn log_startup(cfg: &ServerConfig) {
    let pid = std::process::id();
    log(&format!(
        "ferrokv-server {} starting, Redis {} compatible, pid={pid}",
        env!("CARGO_PKG_VERSION"),
        cmd::release()
    ));
    if cfg.get("always-show-logo").as_deref() == Some("yes") {
        log(&format!("ferrokv-server {}  Port: {}  PID: {pid}", env!("CARGO_PKG_VERSION"), cfg.port));
    } else {
        log(&format!("Running mode=standalone, port={}.", cfg.port));
    }
    log("Server initialized");
}

/// A log line on stdout, Redis-style: `pid:M date * message`.
pub fn log(msg: &str) {
    println!("{}:M {} * {}", std::process::id(), Clock::System.now_ms(), msg);
}
