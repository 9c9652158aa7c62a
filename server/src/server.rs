//! The server's state: the engine, the configuration, the clients and each subsystem's
//! own state (replication, pub/sub, blocked clients, scripts, eviction, ACL, saves). One
//! thread owns it and runs the event loop (event_loop.rs, Redis's model); commands reach
//! it through dispatch.rs. Background saves and AOF rewrites run on their own threads
//! from a copy of the keyspace; the loop collects them on its timer.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use ferrokv::keyspace::Clock;
use ferrokv::Engine;
use mio::Poll;

use crate::client::Client;
use crate::config::ServerConfig;
use crate::stats::ServerStats;

/// The connected clients by id (the one running a command is taken out meanwhile).
pub type ClientMap = HashMap<u64, Box<Client>, foldhash::fast::FixedState>;

pub struct Server {
    pub engine: Engine,
    pub cfg: ServerConfig,
    pub(crate) poll: Poll,
    pub(crate) listeners: crate::net::Listeners,
    /// Boxed: a client is taken out of the map for its turn and put back, and moving a
    /// pointer is cheaper than moving the struct.
    pub clients: ClientMap,
    pub(crate) next_id: u64,
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
    /// What the allocator held when the server was set up, before any data (INFO's
    /// used_memory_startup).
    pub startup_memory: u64,
    /// SLOWLOG's entries.
    pub slowlog: crate::slowlog::SlowLog,
    /// The reply of the command that just ran is an error INFO errorstats already counted
    /// (a script's error raised by a command it called).
    pub error_counted: bool,
    /// Watched keys: (database, key) → ids of the watching clients.
    pub watched: HashMap<(usize, Vec<u8>), Vec<u64>>,
    /// Saves and rewrites: the running jobs and their history.
    pub jobs: crate::persistence::SaveJobs,
    pub active_expire: bool,
    /// SHUTDOWN succeeded: leave the loop.
    pub exit: bool,
    /// A shutdown waiting for replicas to catch up.
    pub(crate) shutdown: Option<crate::shutdown::ShutdownWait>,
    pub started: Instant,
    pub started_unix: i64,
    pub(crate) signals: crate::signals::Signals,
    /// DEBUG PAUSE-CRON: the timer does not run (nor a shutdown a signal asked for).
    pub(crate) cron_paused: bool,
    /// How the timer resizes clients' reply buffers (DEBUG REPLYBUFFER).
    pub(crate) reply_buffers: crate::reply_buffer::Policy,
    /// MIGRATE's connections to targets.
    pub(crate) migrate: crate::net::MigrateSockets,
    /// The start's load, while it runs (clients get `-LOADING`).
    pub(crate) loading: Option<crate::loading::Loading>,
    pub(crate) last_cron: Instant,
    pub run_id: String,
    pub pubsub: crate::pubsub::PubSub,
    /// CLIENT PAUSE: what is paused, and the clients waiting.
    pub(crate) pause: crate::pause::Pause,
    /// LATENCY: the monitor's events and the per-command histograms.
    pub(crate) latency: crate::latency::Monitor,
    pub(crate) histograms: crate::latency::Histograms,
    /// CLIENT TRACKING: who read what, BCAST prefixes.
    pub(crate) tracking: crate::tracking::Tracking,
    pub monitors: crate::monitor::Monitors,
    pub blocking: crate::blocking::Blocking,
    /// Clients given new output or unblocked by someone else's command: they get a turn.
    pub woken: HashSet<u64>,
    /// Lua scripting: the interpreter and the script cache.
    pub scripts: crate::script::Scripts,
    /// maxmemory: the eviction pool and state (server/src/maxmemory/).
    pub eviction: crate::maxmemory::Eviction,
    /// ACL users and the ACL log (server/src/acl/).
    pub acl: crate::acl::Acl,
    /// The time the engine reads (Redis's cached time): set before each top-level command
    /// and at every loop wake-up, so a command reads the clock once, not on each lookup.
    pub(crate) time: Clock,
    /// A clock reading taken when the client's input was read or the last command ended,
    /// still fresh for the next command of the same batch; cleared when the batch ends.
    pub(crate) fresh: Option<Instant>,
    /// Wall time from monotonic readings, so a command reads one clock, not two.
    pub(crate) wall: WallAnchor,
    /// The top-level command's start in unix microseconds (Redis's cached ustime, which
    /// TIME answers from 7.2 on: the same within a script or a transaction).
    pub(crate) command_us: i64,
    /// Nesting of [`Server::call`]: EXEC's and scripts' commands share their caller's time.
    pub(crate) call_depth: u32,
    /// Inside a round served while a script is busy (or a load runs): the master's
    /// stream waits in its query buffer meanwhile, as Redis leaves it.
    pub(crate) busy_round: bool,
}

/// Unix time in microseconds (the wall clock, as Redis's ustime).
pub(crate) fn unix_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// A monotonic instant paired with the wall clock read at the same moment: the wall
/// time of a later instant is derived from it. Re-read on every cron tick, so a change
/// of the system clock is followed within one tick.
pub(crate) struct WallAnchor {
    at: Instant,
    unix_us: i64,
}

impl WallAnchor {
    pub(crate) fn now() -> WallAnchor {
        WallAnchor { at: Instant::now(), unix_us: unix_us() }
    }

    pub(crate) fn unix_us(&self, t: Instant) -> i64 {
        self.unix_us + t.saturating_duration_since(self.at).as_micros() as i64
    }

    pub(crate) fn unix_ms(&self, t: Instant) -> i64 {
        let since = t.saturating_duration_since(self.at).as_micros() as i64;
        (self.unix_us + since) / 1000
    }
}

impl Server {
    /// The port of the first plain listener (none with `port 0`).
    pub fn local_port(&self) -> Option<u16> {
        self.listeners.local_port()
    }

    pub(crate) fn next_client_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    // ------------------------------------------------------------ commands

    /// Read the clock into the engine's time (outside a command).
    pub fn refresh_time(&mut self) {
        if self.call_depth == 0 {
            self.time.set_ms(self.wall.unix_ms(Instant::now()));
        }
    }

    // ------------------------------------------------------------ WATCH

    /// Whether `key` is logically expired now (still stored, TTL passed).
    /// Whether `key` of `db` exists with a TTL.
    pub fn has_ttl(&self, db: usize, key: &[u8]) -> bool {
        self.engine.keyspace().dbs.get(db).and_then(|d| d.get(key)).is_some_and(|s| s.has_ttl())
    }

    pub fn key_is_expired(&self, db: usize, key: &[u8]) -> bool {
        let now = self.engine.now_ms();
        self.engine
            .keyspace()
            .dbs
            .get(db)
            .and_then(|d| d.get_with_expire(key))
            .and_then(|(_, t)| t)
            .is_some_and(|t| now > t)
    }

    // ------------------------------------------------------------ timer
}
